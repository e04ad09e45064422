package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The llmserve subcommands the manifests run and the flags each accepts.
// serve's are read from its source (cmd/llmserve/serve.go) so that a flag
// renamed there fails here. worker's and head's are the names fixed for
// them (every serve flag plus --role and --worker-port for worker; the
// public-server flags, discovery and migration flags for head); when their
// sources exist (cmd/llmserve/worker.go, head.go), every flag the manifests
// give them must also be named in cmd/llmserve's sources.

var workerOnlyFlags = []string{"role", "worker-port"}

var headFlags = []string{
	// the public server, as serve
	"host", "http-port", "grpc-port", "api-key", "api-key-file",
	"allowed-origins", "allowed-methods", "allowed-headers", "allow-credentials",
	"max-body-bytes", "request-timeout", "shutdown-timeout",
	"log-format", "log-level", "model", "model-name",
	// routing
	"workers", "workers-dns", "worker-port", "max-migrations",
}

// workerRoles are --role's values.
var workerRoles = []string{"both", "prefill", "decode"}

const cmdDir = "../cmd/llmserve"

// serveFlagRE matches serve's flag definitions: fl.StringVar(&f.host, "host", ...).
var serveFlagRE = regexp.MustCompile(`fl\.[A-Za-z0-9]+Var(?:P)?\(&f\.[A-Za-z0-9]+,\s*"([a-z0-9-]+)"`)

type flagSets struct {
	bySub map[string]map[string]bool
	// named: every quoted string in cmd/llmserve's non-test sources, to
	// check worker's and head's flags against once those sources exist.
	named map[string]bool
	// sourced: the subcommands whose own source file exists.
	sourced map[string]bool
}

func loadFlags(t *testing.T) flagSets {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(cmdDir, "serve.go"))
	if err != nil {
		t.Fatalf("serve's flags: %v", err)
	}
	serve := map[string]bool{}
	for _, m := range serveFlagRE.FindAllStringSubmatch(string(src), -1) {
		serve[m[1]] = true
	}
	// Sanity: the pattern still finds serve's flags.
	for _, want := range []string{"host", "http-port", "grpc-port", "model", "model-name", "model-dir", "shutdown-timeout", "n-gpu-layers"} {
		if !serve[want] {
			t.Fatalf("serve.go: flag %q not found by %v (found %d flags); update serveFlagRE", want, serveFlagRE, len(serve))
		}
	}
	worker := map[string]bool{}
	for f := range serve {
		worker[f] = true
	}
	for _, f := range workerOnlyFlags {
		worker[f] = true
	}
	head := map[string]bool{}
	for _, f := range headFlags {
		head[f] = true
	}
	fs := flagSets{
		bySub:   map[string]map[string]bool{"serve": serve, "worker": worker, "head": head},
		named:   map[string]bool{},
		sourced: map[string]bool{},
	}
	files, _ := filepath.Glob(filepath.Join(cmdDir, "*.go"))
	quoted := regexp.MustCompile(`"([a-z0-9-]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
			fs.named[m[1]] = true
		}
		switch filepath.Base(f) {
		case "worker.go":
			fs.sourced["worker"] = true
		case "head.go":
			fs.sourced["head"] = true
		}
	}
	return fs
}

// known says whether sub accepts flag (already normalized: dashes).
func (fs flagSets) known(sub, flag string) bool {
	if !fs.bySub[sub][flag] {
		return false
	}
	if sub != "serve" && fs.sourced[sub] && !fs.bySub["serve"][flag] {
		return fs.named[flag]
	}
	return true
}

func (fs flagSets) list(sub string) string {
	var l []string
	for f := range fs.bySub[sub] {
		l = append(l, f)
	}
	sort.Strings(l)
	return strings.Join(l, " ")
}

func TestServeFlagsFound(t *testing.T) {
	fs := loadFlags(t)
	if n := len(fs.bySub["serve"]); n < 30 {
		t.Errorf("found %d serve flags in serve.go, want 30 or more: %s", n, fs.list("serve"))
	}
}

// TestExportedGauges: the gauges the autoscaling manifests may use are
// exported by llmserve (metrics/).
func TestExportedGauges(t *testing.T) {
	files, _ := filepath.Glob("../metrics/*.go")
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, g := range exportedGauges {
		if !strings.Contains(src.String(), `"`+g+`"`) {
			t.Errorf("%s: not defined in metrics/", g)
		}
	}
}
