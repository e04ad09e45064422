package deploy

import (
	"bytes"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// The image layout: the binary in /opt/llmserve/bin, GPU backends in
// /opt/llmserve/lib/ollama, which is <exe>/../lib/ollama, where the binary
// loads them from (engine/llamacpp/backend.go).
const (
	imageBinary = "/opt/llmserve/bin/llmserve"
	imageLibDir = "/opt/llmserve/lib/ollama"
)

type dockerfile struct {
	stages []instructions.Stage
	args   map[string]string // global ARGs' defaults
}

// parseDockerfile parses with BuildKit's own parser and instruction
// reader; BuildKit's lint warnings are errors.
func parseDockerfile(t *testing.T, name string) dockerfile {
	t.Helper()
	b, err := os.ReadFile(path.Join("docker", name))
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s: parser warning: %s", name, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		t.Errorf("%s: lint %s: %s (line %v)", name, rule, msg, loc)
	}})
	stages, meta, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	df := dockerfile{stages: stages, args: map[string]string{}}
	for _, a := range meta {
		for _, kv := range a.Args {
			if kv.Value != nil {
				df.args[kv.Key] = *kv.Value
			}
		}
	}
	return df
}

// expand replaces ${NAME} with the global ARGs' defaults.
func (df dockerfile) expand(s string) string {
	return regexp.MustCompile(`\$\{([A-Z_]+)\}`).ReplaceAllStringFunc(s, func(m string) string {
		return df.args[m[2:len(m)-1]]
	})
}

func commands[T instructions.Command](st instructions.Stage) []T {
	var out []T
	for _, c := range st.Commands {
		if v, ok := c.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func runText(st instructions.Stage) string {
	var b strings.Builder
	for _, r := range commands[*instructions.RunCommand](st) {
		b.WriteString(strings.Join(r.CmdLine, " "))
		b.WriteString("\n")
	}
	return b.String()
}

// makefileVar reads a variable's value from the Makefile.
func makefileVar(t *testing.T, mk, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s*:?=\s*(.+)$`).FindStringSubmatch(mk)
	if m == nil {
		t.Fatalf("Makefile: no %s", name)
	}
	return strings.TrimSpace(m[1])
}

func TestDockerfiles(t *testing.T) {
	mkb, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(mkb)
	// The Debian packages `make deps` installs (debian-deps).
	debianDeps := strings.Fields(makefileVar(t, mk, "DEBIAN_DEPS"))

	for _, tc := range []struct {
		file   string
		stages []string
		bases  map[string]string // stage -> base image pattern
	}{
		{"Dockerfile.cpu", []string{"build", "runtime"}, map[string]string{
			"build":   `^golang:1\.26-bookworm$`,
			"runtime": `^debian:bookworm-slim$`,
		}},
		{"Dockerfile.cuda", []string{"build", "cuda-build", "runtime"}, map[string]string{
			"build":      `^golang:1\.26-bookworm$`,
			"cuda-build": `^nvidia/cuda:[0-9.]+-devel-ubuntu[0-9.]+$`,
			"runtime":    `^nvidia/cuda:[0-9.]+-runtime-ubuntu[0-9.]+$`,
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			df := parseDockerfile(t, tc.file)
			var names []string
			byName := map[string]instructions.Stage{}
			for _, st := range df.stages {
				names = append(names, st.Name)
				byName[st.Name] = st
			}
			if !slices.Equal(names, tc.stages) {
				t.Fatalf("stages %v, want %v", names, tc.stages)
			}
			for name, pat := range tc.bases {
				if base := df.expand(byName[name].BaseName); !regexp.MustCompile(pat).MatchString(base) {
					t.Errorf("stage %s: FROM %s, want %s", name, base, pat)
				}
			}

			// Every COPY --from names an earlier stage.
			for i, st := range df.stages {
				for _, c := range commands[*instructions.CopyCommand](st) {
					if c.From != "" && !slices.Contains(names[:i], c.From) {
						t.Errorf("stage %s: COPY --from=%s: not an earlier stage (%v)", st.Name, c.From, names[:i])
					}
				}
			}

			// The build stage installs the Makefile's Debian packages and
			// builds with the Makefile, so the cgo flags are the same.
			build := runText(byName["build"])
			for _, p := range debianDeps {
				if !regexp.MustCompile(`apt-get install[^\n]*\b` + regexp.QuoteMeta(p) + `\b`).MatchString(build) {
					t.Errorf("build stage: does not apt-get install %s (Makefile debian-deps)", p)
				}
			}
			if !strings.Contains(build, "make build") {
				t.Errorf("build stage: does not run make build")
			}

			// The runtime stage: the binary at imageBinary as entrypoint,
			// a non-root user, the three ports.
			rt := df.stages[len(df.stages)-1]
			eps := commands[*instructions.EntrypointCommand](rt)
			if len(eps) != 1 || eps[0].PrependShell || !slices.Equal(eps[0].CmdLine, []string{imageBinary}) {
				t.Errorf("runtime: ENTRYPOINT %+v, want exec form [%q]", eps, imageBinary)
			}
			copied := map[string]string{} // destination -> "stage:source"
			for _, c := range commands[*instructions.CopyCommand](rt) {
				for _, src := range c.SourcePaths {
					copied[c.DestPath] = c.From + ":" + src
				}
			}
			if got := copied[imageBinary]; got != "build:/src/bin/llmserve" {
				t.Errorf("runtime: %s copied from %q, want the build stage's /src/bin/llmserve", imageBinary, got)
			}
			users := commands[*instructions.UserCommand](rt)
			if len(users) == 0 {
				t.Errorf("runtime: no USER: the server must not run as root")
			} else if u := users[len(users)-1].User; u == "root" || u == "0" || strings.HasPrefix(u, "0:") {
				t.Errorf("runtime: USER %s, want a non-root user", u)
			}
			var ports []string
			for _, e := range commands[*instructions.ExposeCommand](rt) {
				ports = append(ports, e.Ports...)
			}
			slices.Sort(ports)
			if want := []string{"8080", "8081", "8090"}; !slices.Equal(ports, want) {
				t.Errorf("runtime: EXPOSE %v, want %v (http, grpc, worker)", ports, want)
			}
			env := map[string]string{}
			for _, e := range commands[*instructions.EnvCommand](rt) {
				for _, kv := range e.Env {
					env[kv.Key] = kv.Value
				}
			}
			if env["LLMSERVE_HOST"] != "0.0.0.0" {
				t.Errorf("runtime: LLMSERVE_HOST=%q, want 0.0.0.0 (serve listens on 127.0.0.1 by default)", env["LLMSERVE_HOST"])
			}

			if tc.file != "Dockerfile.cuda" {
				return
			}
			// The CUDA backend: built from the ollama module the binary
			// links (the Makefile's version), with the targets make cuda
			// builds, and copied to <exe>/../lib/ollama.
			if v, want := df.args["OLLAMA_VERSION"], makefileVar(t, mk, "OLLAMA_VERSION"); v != want {
				t.Errorf("ARG OLLAMA_VERSION=%s, the Makefile's is %s", v, want)
			}
			cb := runText(byName["cuda-build"])
			for _, want := range []string{"cmake -S /ollama", "--target ggml-base ggml-cuda", "-DCMAKE_CUDA_ARCHITECTURES=", "-DCMAKE_INSTALL_RPATH='$ORIGIN"} {
				if !strings.Contains(cb, want) {
					t.Errorf("cuda-build: no %q in\n%s", want, cb)
				}
				// make doubles the $ of $ORIGIN.
				if mkWant := strings.ReplaceAll(want, "$", "$$"); !strings.Contains(mk, mkWant) && !strings.HasPrefix(want, "cmake -S") {
					t.Errorf("Makefile cuda: no %q: the image and make cuda build differently", want)
				}
			}
			if got := copied[imageLibDir]; got != "cuda-build:/out/lib/ollama" {
				t.Errorf("runtime: %s copied from %q, want cuda-build:/out/lib/ollama", imageLibDir, got)
			}
			if path.Join(path.Dir(imageBinary), "..", "lib", "ollama") != imageLibDir {
				t.Errorf("%s is not <exe>/../lib/ollama for %s", imageLibDir, imageBinary)
			}
			if !strings.Contains(runText(byName["build"]), "github.com/ollama/ollama@${OLLAMA_VERSION}") {
				t.Errorf("build stage: the ollama module's sources are not copied out for cuda-build")
			}
		})
	}
}

// TestMakeCudaTarget: make cuda builds from the ollama module's sources into
// lib/ollama beside bin/ (bin/../lib/ollama) and fails clearly without nvcc.
func TestMakeCudaTarget(t *testing.T) {
	mkb, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(mkb)
	for _, want := range []string{
		"-S $(OLLAMA_DIR)",
		"CUDA_LIB_DIR       := lib/ollama",
		"make cuda: nvcc not found",
		"make cuda: cmake not found",
	} {
		if !strings.Contains(mk, want) {
			t.Errorf("Makefile: no %q", want)
		}
	}
	// make test runs these tests: its prerequisites name test-deploy
	// (whatever else it installs and runs beside them).
	var testDeps []string
	for line := range strings.Lines(mk) {
		if deps, ok := strings.CutPrefix(line, "test:"); ok {
			testDeps = strings.Fields(deps)
		}
	}
	if !slices.Contains(testDeps, "test-deploy") {
		t.Errorf("Makefile: the test target %q does not run test-deploy", testDeps)
	}
	if bin := makefileVar(t, mk, "BIN"); path.Join(path.Dir(bin), "..", "lib", "ollama") != "lib/ollama" {
		t.Errorf("BIN %s: its ../lib/ollama is not lib/ollama", bin)
	}
}
