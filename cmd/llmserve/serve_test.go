package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// `llmserve serve` with KServe's arguments serves the embedded model over
// HTTP and gRPC health, and shuts down cleanly.
func TestServeCommand(t *testing.T) {
	httpPort, grpcPort := freePort(t), freePort(t)
	t.Setenv("LLMSERVE_MAX_NUM_SEQS", "8")
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--host", "127.0.0.1", "--http_port", strconv.Itoa(httpPort), "--grpc_port", strconv.Itoa(grpcPort),
		"--model_name", "tiny", "--cache-dir", t.TempDir(), "--log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not healthy: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 || models.Data[0].ID != "tiny" {
		t.Fatalf("models = %+v", models)
	}

	resp, err = http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"tiny","prompt":"Once upon a time","max_tokens":5,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":", there was a little"`) {
		t.Fatalf("completion: %d %s", resp.StatusCode, body)
	}

	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`vllm:num_requests_running{model_name="tiny"} 0`, "vllm:generation_tokens_total", "llmserve_http_requests_total", "go_goroutines"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	conn.Close()
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("grpc health: %v %v", hc, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

func TestApplyEnv(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	a := fs.Int("max-num-seqs", 64, "")
	b := fs.String("log-level", "info", "")
	if err := fs.Parse([]string{"--log-level", "debug"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LLMSERVE_MAX_NUM_SEQS", "8")
	t.Setenv("LLMSERVE_LOG_LEVEL", "error")
	if err := applyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if *a != 8 || *b != "debug" {
		t.Fatalf("max-num-seqs %d, log-level %q: env must fill unset flags only", *a, *b)
	}
	t.Setenv("LLMSERVE_MAX_NUM_SEQS", "many")
	fs2 := pflag.NewFlagSet("y", pflag.ContinueOnError)
	fs2.Int("max-num-seqs", 64, "")
	if err := applyEnv(fs2); err == nil || !strings.Contains(err.Error(), "LLMSERVE_MAX_NUM_SEQS") {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	cases := map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "1GB": 1e9, "1000": 1000, "1.5 KiB": 1536}
	for in, want := range cases {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1GiB", "GiB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) succeeded", bad)
		}
	}
}

func TestModelSpecs(t *testing.T) {
	dir := t.TempDir()
	f := &serveFlags{models: []string{"a=/x/a.gguf", "/y/b.gguf"}}
	specs, err := modelSpecs(f)
	if err != nil || len(specs) != 2 || specs[0] != [2]string{"a", "/x/a.gguf"} || specs[1] != [2]string{"", "/y/b.gguf"} {
		t.Fatalf("specs = %v, %v", specs, err)
	}
	if _, err := modelSpecs(&serveFlags{modelDir: dir}); err == nil {
		t.Fatal("--model-dir without a .gguf file accepted")
	}
	if _, err := modelSpecs(&serveFlags{models: []string{"a=/x", "b=/y"}, modelName: "n"}); err == nil {
		t.Fatal("--model-name with two models accepted")
	}
	specs, err = modelSpecs(&serveFlags{modelName: "tiny"})
	if err != nil || specs[0] != [2]string{"tiny", ""} {
		t.Fatalf("default = %v, %v", specs, err)
	}
}
