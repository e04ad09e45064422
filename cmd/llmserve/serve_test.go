package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/models/stories260k"
	"github.com/llmserve/llmserve/models/tensor"
	"github.com/llmserve/llmserve/proto/inferencepb"
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
	waitOK(t, base+"/health")

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
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("grpc health: %v %v", hc, err)
	}
	// The V2 inference service is registered beside it.
	mr, err := inferencepb.NewGRPCInferenceServiceClient(conn).ModelReady(context.Background(), &inferencepb.ModelReadyRequest{Name: "tiny"})
	conn.Close()
	if err != nil || !mr.GetReady() {
		t.Fatalf("grpc ModelReady: %v %v", mr, err)
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

// --shutdown-grace is --shutdown-timeout; the environment does not
// override one given on the command line through the other name.
func TestShutdownGraceAlias(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want time.Duration
	}{
		{[]string{"--shutdown-grace", "45s"}, "", 45 * time.Second},
		{[]string{"--shutdown-timeout", "10s"}, "LLMSERVE_SHUTDOWN_GRACE=1m", 10 * time.Second},
		{nil, "LLMSERVE_SHUTDOWN_GRACE=1m", time.Minute},
	} {
		f := &serveFlags{}
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		addServeFlags(fs, f)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if k, v, ok := strings.Cut(tc.env, "="); ok {
			t.Setenv(k, v)
		}
		if err := applyEnv(fs); err != nil {
			t.Fatal(err)
		}
		if f.shutdownTimeout != tc.want {
			t.Errorf("%v %s: %s, want %s", tc.args, tc.env, f.shutdownTimeout, tc.want)
		}
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
		t.Fatal("--model-dir without a model file accepted")
	}
	// KServe mounts a tensor model's storage the same way.
	onnx := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(onnx, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if specs, err := modelSpecs(&serveFlags{modelDir: dir}); err != nil || specs[0][1] != onnx {
		t.Fatalf("--model-dir with an .onnx: %v, %v", specs, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llm.gguf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := modelSpecs(&serveFlags{modelDir: dir}); err == nil || !strings.Contains(err.Error(), "2 model files") {
		t.Fatalf("--model-dir with two model files: %v", err)
	}
	if _, err := modelSpecs(&serveFlags{models: []string{"a=/x", "b=/y"}, modelName: "n"}); err == nil {
		t.Fatal("--model-name with two models accepted")
	}
	specs, err = modelSpecs(&serveFlags{modelName: "tiny"})
	if err != nil || specs[0] != [2]string{"tiny", ""} {
		t.Fatalf("default = %v, %v", specs, err)
	}
}

// Every bad flag stops the server at start-up with a message naming it.
func TestFlagsValidatedAtStartup(t *testing.T) {
	cache := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--max-num-seqs", "-3"}, "--max-num-seqs: -3 is outside 1 to 255"},
		{[]string{"--max-num-seqs", "0"}, "--max-num-seqs"},
		{[]string{"--max-num-seqs", "300"}, "--max-num-seqs"},
		{[]string{"--max-model-len", "-1"}, "--max-model-len"},
		{[]string{"--max-model-len", "100000"}, "--max-model-len: 100000 exceeds the model's trained context length of 512 tokens"},
		{[]string{"--max-num-batched-tokens", "8"}, "--max-num-batched-tokens: 8 is below --max-num-seqs 64"},
		{[]string{"--max-waiting", "0"}, "--max-waiting"},
		{[]string{"--threads", "0"}, "--threads"},
		{[]string{"--poll", "101"}, "--poll"},
		{[]string{"--http-port", "70000"}, "--http-port"},
		{[]string{"--grpc-port", "-1"}, "--grpc-port"},
		{[]string{"--flash-attn", "maybe"}, "--flash-attn: \"maybe\" is not one of auto, on, off"},
		{[]string{"--kv-cache-dtype", "int3"}, "--kv-cache-dtype"},
		{[]string{"--reasoning-parser", "granite"}, "--reasoning-parser: \"granite\" is not one of deepseek_r1, qwen3"},
		{[]string{"--kv-cache-memory", "lots"}, "--kv-cache-memory"},
		{[]string{"--kv-cache-memory", "1KiB"}, "--kv-cache-memory: 1.0 KiB holds 0 tokens of KV"},
		{[]string{"--prefix-cache-memory", "-5"}, "--prefix-cache-memory"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout"},
		{[]string{"--model", "a=/x/a.gguf", "--model", "a=/y/b.gguf"}, `--model: two models are named "a"`},
		{[]string{"--model", "/x/m.gguf", "--model", "/y/m.gguf"}, `--model: two models are named "m"`},
		{[]string{"--model-repository", "/nonexistent/repo"}, "--model-repository: stat /nonexistent/repo"},
		{[]string{"--strict-readiness"}, "--strict-readiness: needs --model-repository"},
		{[]string{"--task", "embed", "--pooling", "none"}, "--task: embed needs embedding pooling (mean, cls or last), but the pooling is none"},
		{[]string{"--task", "classify"}, `--task: "classify" is not one of generate, embed`},
		{[]string{"--max-batch-size", "-1"}, "--max-batch-size: -1 is negative"},
		{[]string{"--max-batch-time", "-0.5"}, "--max-batch-time: -0.5 is outside 0 to 3600 seconds"},
		{[]string{"--parallel-workers", "0"}, "--parallel-workers: 0: at least 1"},
		{[]string{"--tensor-threads", "-1"}, "--tensor-threads: -1 is negative"},
		{[]string{"--metrics-port", "70000"}, "--metrics-port: 70000 is not a TCP port"},
		{[]string{"--metrics-port", "-2"}, "--metrics-port: -2 is not a TCP port"},
		{[]string{"--http-port", "9123", "--metrics-port", "9123"}, "--metrics-port: 9123 is also the HTTP port (--http-port)"},
		{[]string{"--grpc-port", "9124", "--metrics-port", "9124"}, "--metrics-port: 9124 is also the gRPC port (--grpc-port)"},
		{[]string{"--metrics-endpoint", "metrics"}, `--metrics-endpoint: "metrics" is not a URL path`},
		{[]string{"--speculative", "eagle"}, `--speculative: speculative method "eagle" is unknown (want "ngram" or "draft")`},
		{[]string{"--speculative", "ngram", "--num-speculative-tokens", "17"}, "--num-speculative-tokens: num_speculative_tokens 17 is outside [1, 16]"},
		{[]string{"--speculative", "ngram", "--num-speculative-tokens", "0"}, "--num-speculative-tokens: 0: at least 1"},
		{[]string{"--num-speculative-tokens", "4"}, "--num-speculative-tokens needs --speculative ngram or --speculative-model"},
		{[]string{"--speculative", "ngram", "--prompt-lookup-min", "4", "--prompt-lookup-max", "2"}, "--prompt-lookup-max: prompt_lookup_max 2 is outside [prompt_lookup_min 4, 64]"},
		{[]string{"--speculative-config", `{"method":"ngram","num_speculative_tokens":40}`}, "--speculative-config: num_speculative_tokens 40 is outside [1, 16]"},
		{[]string{"--speculative-config", `{"method":"ngram","k":4}`}, `--speculative-config: speculative config "{\"method\":\"ngram\",\"k\":4}": json: unknown field "k"`},
		{[]string{"--speculative", "ngram", "--speculative-config", `{"method":"draft"}`}, `--speculative: "ngram" contradicts --speculative-config's method "draft"`},
		{[]string{"--speculative", "ngram", "--speculative-disable-by-batch-size", "0"}, "--speculative-disable-by-batch-size: 0: at least 1"},
		{[]string{"--speculative-config", `{"method":"ngram","disable_by_batch_size":-2}`}, "--speculative-config: disable_by_batch_size -2 is negative (0: never)"},
		{[]string{"--speculative-model", "/nonexistent/draft.gguf"}, "--speculative-model: draft model /nonexistent/draft.gguf: stat /nonexistent/draft.gguf: no such file or directory"},
		{[]string{"--speculative-config", `{"method":"draft","model":"/nonexistent/d.gguf"}`}, "--speculative-config: draft model /nonexistent/d.gguf: stat /nonexistent/d.gguf: no such file or directory"},
		{[]string{"--speculative", "draft"}, `--speculative: speculative method "draft" needs a draft model (model)`},
		{[]string{"--speculative", "ngram", "--speculative-model", "/models/d.gguf"}, `--speculative-model: speculative model "/models/d.gguf" with method "ngram": a draft model goes with method "draft"`},
		{[]string{"--speculative-model", "/models/d.gguf", "--prompt-lookup-max", "3"}, "--prompt-lookup-max is for --speculative ngram, not a draft model"},
		{[]string{"--speculative-model", "/models/d.gguf", "--num-speculative-tokens", "17"}, "--num-speculative-tokens: num_speculative_tokens 17 is outside [1, 16]"},
		{[]string{"--max-loras", "-1"}, "--max-loras: -1 is negative"},
		{[]string{"--lora", "nopath"}, `--lora: LoRA adapter "nopath": want NAME=PATH`},
		{[]string{"--lora", "x=/nonexistent/x.gguf"}, "--lora x=/nonexistent/x.gguf: llamacpp: bad LoRA adapter /nonexistent/x.gguf"},
		{[]string{"--max-media-per-prompt", "-1"}, "--max-media-per-prompt: -1 is negative"},
		{[]string{"--max-media-bytes", "0"}, "--max-media-bytes: 0: at least 1"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := newRootCommand()
			root.SetArgs(append([]string{"serve", "--cache-dir", cache, "--http-port", strconv.Itoa(freePort(t)), "--grpc-port", "0", "--log-level", "error"}, tc.args...))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve %v: err = %v, want it to contain %q", tc.args, err, tc.want)
			}
		})
	}
}

// On SIGTERM, requests still running after --shutdown-timeout end as a
// client can see them (a streamed answer with an error event and [DONE], a
// plain one with a 503 and an error object), and serve returns an error,
// so the process exits non-zero.
func TestShutdownCutsRequestsVisibly(t *testing.T) {
	httpPort := freePort(t)
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--http-port", strconv.Itoa(httpPort), "--grpc-port", "0", "--cache-dir", t.TempDir(),
		"--log-level", "error", "--shutdown-timeout", "200ms", "--max-num-seqs", "64"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	waitFor(t, func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	// 64 choices of 400 tokens each: seconds of work, far beyond the grace.
	long := `{"model":"stories260K","prompt":"Once upon a time","max_tokens":400,"ignore_eos":true,"n":64`
	streamResp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(long+`,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer streamResp.Body.Close()
	stream := bufio.NewReader(streamResp.Body)
	if line, err := stream.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event: %q %v", line, err)
	}
	type answer struct {
		code int
		body string
	}
	plain := make(chan answer, 1)
	go func() {
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(long+`}`))
		if err != nil {
			plain <- answer{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		plain <- answer{resp.StatusCode, string(b)}
	}()
	waitFor(t, func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// n = 64: the gauge counts sequences, as vLLM v1 counts the child
		// requests of n > 1.
		return strings.Contains(string(b), `vllm:num_requests_waiting{model_name="stories260K"} 64`)
	})

	cancel() // what SIGTERM does through signal.NotifyContext
	var events []string
	for {
		line, err := stream.ReadString('\n')
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			events = append(events, data)
		}
		if err != nil {
			if err != io.EOF {
				t.Errorf("the cut stream ended with %v, not a complete body", err)
			}
			break
		}
	}
	if n := len(events); n < 2 || events[n-1] != "[DONE]" || !strings.Contains(events[n-2], `"error"`) || !strings.Contains(events[n-2], "shutting down") {
		t.Errorf("the cut stream did not end with an error event and [DONE]: %q", events[max(0, len(events)-3):])
	}
	a := <-plain
	if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, `"error"`) || !strings.Contains(a.body, "shutting down") {
		t.Errorf("the cut plain request got %d %q, want a 503 with an error object", a.code, a.body)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "2 request(s) were still running") {
			t.Fatalf("serve returned %v, want an error counting the 2 cut requests", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

// TestShutdownCutsGRPCVisibly: V2 gRPC calls still running after the
// grace period end with UNAVAILABLE (a unary call) or an in-band error (a
// request on a stream), and count as cut.
func TestShutdownCutsGRPCVisibly(t *testing.T) {
	httpPort, grpcPort := freePort(t), freePort(t)
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--http-port", strconv.Itoa(httpPort), "--grpc-port", strconv.Itoa(grpcPort), "--cache-dir", t.TempDir(),
		"--log-level", "error", "--shutdown-timeout", "200ms", "--max-model-len", "512"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	waitFor(t, func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := inferencepb.NewGRPCInferenceServiceClient(conn)
	long := func(id string) *inferencepb.ModelInferRequest {
		return &inferencepb.ModelInferRequest{
			ModelName: "stories260K", Id: id,
			Parameters: map[string]*inferencepb.InferParameter{
				"max_tokens": {ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: 500}},
				"ignore_eos": {ParameterChoice: &inferencepb.InferParameter_BoolParam{BoolParam: true}},
			},
			Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "text_input", Datatype: "BYTES", Shape: []int64{1},
				Contents: &inferencepb.InferTensorContents{BytesContents: [][]byte{[]byte("Once upon a time")}}}},
		}
	}
	st, err := c.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(long("s")); err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	unary := make(chan error, 1)
	go func() {
		_, err := c.ModelInfer(context.Background(), long("u"))
		unary <- err
	}()
	waitFor(t, func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), `vllm:num_requests_running{model_name="stories260K"} 2`)
	})

	cancel()
	var inBand string
	for {
		r, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("the cut stream ended with %v, not an in-band error and the end of the stream", err)
			}
			break
		}
		if r.GetErrorMessage() != "" {
			inBand = r.GetErrorMessage()
		}
	}
	if !strings.Contains(inBand, "shutting down") {
		t.Errorf("the cut stream request's error: %q", inBand)
	}
	if err := <-unary; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("the cut ModelInfer: %v, want UNAVAILABLE", err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "2 request(s) were still running") {
			t.Fatalf("serve returned %v, want an error counting the 2 cut calls", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

// waitFor polls cond until it holds, within a generous deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 60 s")
		}
		// A poll, bounded by the deadline: these tests drive the whole
		// command, which tells its state only over HTTP (health
		// endpoints, /metrics), so there is no event to wait on.
		time.Sleep(10 * time.Millisecond)
	}
}

// waitOK waits until url answers 200 (the server started by the test is
// up).
func waitOK(t *testing.T, url string) {
	t.Helper()
	waitFor(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// TestServeModelRepository: serve --model-repository loads the repository's
// models at start (a broken one fails alone), lists them in the index over
// REST and gRPC, and --strict-readiness keeps the server unready while one
// is not loaded.
func TestServeModelRepository(t *testing.T) {
	cache := t.TempDir()
	src, err := stories260k.File(cache)
	if err != nil {
		t.Fatal(err)
	}
	gguf, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tiny": gguf, "broken": gguf[:1000]} {
		if err := os.MkdirAll(filepath.Join(dir, name, "2"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "2", "model.gguf"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	httpPort, grpcPort := freePort(t), freePort(t)
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--host", "127.0.0.1", "--http-port", strconv.Itoa(httpPort), "--grpc-port", strconv.Itoa(grpcPort),
		"--model-repository", dir, "--strict-readiness", "--max-num-seqs", "4", "--cache-dir", cache, "--log-level", "error", "--llama-log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	waitFor(t, func() bool { // live: it answers, ready or not
		resp, err := http.Get(base + "/api/health/live")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	resp, err := http.Post(base+"/v2/repository/index", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var idx []map[string]string
	json.NewDecoder(resp.Body).Decode(&idx)
	resp.Body.Close()
	if len(idx) != 2 || idx[0]["name"] != "broken" || idx[0]["state"] != "UNAVAILABLE" || idx[0]["reason"] == "" ||
		idx[1]["name"] != "tiny" || idx[1]["state"] != "READY" || idx[1]["version"] != "2" {
		t.Fatalf("index: %v", idx)
	}
	resp, err = http.Get(base + "/api/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("strict readiness with a broken model: %d", resp.StatusCode)
	}
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	gi, err := inferencepb.NewGRPCInferenceServiceClient(conn).RepositoryIndex(context.Background(), &inferencepb.RepositoryIndexRequest{Ready: true})
	conn.Close()
	if err != nil || len(gi.GetModels()) != 1 || gi.GetModels()[0].GetName() != "tiny" {
		t.Fatalf("gRPC RepositoryIndex: %v %v", gi, err)
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

// TestServeTensorModel: `serve --model NAME=x.onnx` serves a tensor model
// with the batching flags, over V2 infer.
func TestServeTensorModel(t *testing.T) {
	m, err := tensor.RandomMLP([]int{4, 8, 3}, 1, true, true)
	if err != nil {
		t.Fatal(err)
	}
	onnx, err := m.ONNX()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clf.onnx")
	if err := os.WriteFile(path, onnx, 0o644); err != nil {
		t.Fatal(err)
	}
	httpPort := freePort(t)
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--host", "127.0.0.1", "--http-port", strconv.Itoa(httpPort), "--grpc-port", "0",
		"--model", "clf=" + path, "--max-batch-size", "8", "--max-batch-time", "0.001", "--parallel-workers", "2", "--log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	waitOK(t, base+"/v2/health/ready")
	resp, err := http.Post(base+"/v2/models/clf/infer", "application/json", strings.NewReader(
		`{"inputs":[{"name":"input","datatype":"FP32","shape":[2,4],"data":[1,2,3,4,5,6,7,8]}],"outputs":[{"name":"label"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Outputs []struct {
			Name  string  `json:"name"`
			Shape []int64 `json:"shape"`
			Data  []int64 `json:"data"`
		} `json:"outputs"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	_, labels := m.Forward([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 2)
	if err != nil || resp.StatusCode != 200 || len(out.Outputs) != 1 || out.Outputs[0].Name != "label" ||
		fmt.Sprint(out.Outputs[0].Data) != fmt.Sprint(labels) {
		t.Fatalf("infer: %d %+v %v, want labels %v", resp.StatusCode, out, err, labels)
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

// serve --speculative-config with --num-speculative-tokens over it serves
// with n-gram speculation, and --speculative-model (the served model as
// its own draft) with a draft model: the greedy answer is the usual one
// and /metrics counts the drafts.
func TestServeSpeculative(t *testing.T) {
	t.Run("ngram", func(t *testing.T) {
		testServeSpeculative(t, "--speculative-config", `{"method":"ngram","num_speculative_tokens":8,"prompt_lookup_min":1,"prompt_lookup_max":3}`,
			"--num-speculative-tokens", "3")
	})
	t.Run("draft model", func(t *testing.T) {
		draft, err := stories260k.File(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		testServeSpeculative(t, "--speculative-model", draft, "--num-speculative-tokens", "3")
	})
}

func testServeSpeculative(t *testing.T, args ...string) {
	httpPort := freePort(t)
	root := newRootCommand()
	root.SetArgs(append([]string{"serve", "--http-port", strconv.Itoa(httpPort), "--grpc-port", "0", "--model-name", "tiny", "--cache-dir", t.TempDir(),
		"--log-level", "error"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	waitOK(t, base+"/health")
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"tiny","prompt":"Once upon a time","max_tokens":40,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":", there was a little girl named Lily. She loved to play outside in the park.`) {
		t.Fatalf("completion: %d %s", resp.StatusCode, body)
	}
	var drafts string
	waitFor(t, func() bool { // a step's counters are recorded after its answer leaves
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(line, `vllm:spec_decode_num_draft_tokens_total{model_name="tiny"} `); ok {
				drafts = strings.TrimSpace(v)
			}
		}
		return drafts != "" && drafts != "0"
	})
	if drafts == "" || drafts == "0" || !strings.Contains(string(body), `vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="tiny",position="2"}`) ||
		strings.Contains(string(body), `position="3"`) {
		t.Fatalf("draft tokens %q; /metrics:\n%s", drafts, body)
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
