package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/api"
	v2grpc "github.com/llmserve/llmserve/api/v2/grpc"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// repoServer is the real stack serving a model repository on loopback,
// over HTTP and gRPC.
type repoServer struct {
	*server
	dir  string
	repo *models.Repository
	grpc pb.GRPCInferenceServiceClient
	// grpcAddr is the gRPC service's address.
	grpcAddr string
}

// writeRepoModel puts stories260K in dir/name/version/model.gguf with the
// settings (nil: no settings file).
func writeRepoModel(t *testing.T, dir, name, version string, settings any) {
	t.Helper()
	src, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeRepoFile(t, dir, name, version, b, settings)
}

func writeRepoFile(t *testing.T, dir, name, version string, gguf []byte, settings any) {
	t.Helper()
	vdir := filepath.Join(dir, name, version)
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, "model.gguf"), gguf, 0o644); err != nil {
		t.Fatal(err)
	}
	if settings != nil {
		b, _ := json.Marshal(settings)
		if err := os.WriteFile(filepath.Join(dir, name, models.SettingsFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// startRepoServer serves the repository in dir (every model loaded at
// start, as `llmserve serve --model-repository` does).
func startRepoServer(t *testing.T, dir string, strict bool) *repoServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	registry := models.NewRegistry()
	t.Cleanup(func() { registry.Close() })
	repo, err := models.NewRepository(models.RepositoryConfig{
		Dir: dir, Strict: strict, Logger: log, Registerer: reg,
		Base: models.GenerativeConfig{CacheDir: modelDir, MaxNumSeqs: 8, InitialSeqs: 2, Threads: 1},
	}, registry)
	if err != nil {
		t.Fatal(err)
	}
	repo.LoadAll(context.Background())
	rec, err := metrics.NewInfer(reg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(api.Options{Registry: registry, Repository: repo, Logger: log, Registerer: reg, Gatherer: reg, Infer: rec})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unary, stream := api.GRPCTracking(registry)
	gs := grpc.NewServer(v2grpc.ServerCodec(), grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	v2grpc.Register(gs, api.V2Backend(registry), v2grpc.Options{Repository: api.V2Repository(repo), Infer: rec})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &repoServer{server: &server{URL: srv.URL, reg: reg, registry: registry}, dir: dir, repo: repo, grpc: pb.NewGRPCInferenceServiceClient(conn), grpcAddr: ln.Addr().String()}
}

func (s *repoServer) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *repoServer) index(t *testing.T) map[string]map[string]string {
	t.Helper()
	var idx []map[string]string
	if code, _ := s.post(t, "/v2/repository/index", map[string]any{}, &idx); code != 200 {
		t.Fatalf("index: %d", code)
	}
	out := map[string]map[string]string{}
	for _, e := range idx {
		out[e["name"]] = e
	}
	return out
}

func (s *repoServer) generate(t *testing.T, model string) (int, string) {
	t.Helper()
	var out map[string]any
	code, _ := s.post(t, "/v2/models/"+model+"/generate", map[string]any{"text_input": "Once upon a time", "parameters": map[string]any{"max_tokens": 4, "temperature": 0}}, &out)
	text, _ := out["text_output"].(string)
	return code, text
}

// TestRepositoryLoadUnloadWhileStreaming loads a model, infers, unloads it
// while a stream runs (the stream completes; new requests get 404 at
// once, over REST, gRPC and the OpenAI routes), and loads it again.
func TestRepositoryLoadUnloadWhileStreaming(t *testing.T) {
	dir := t.TempDir()
	writeRepoModel(t, dir, "tiny", "1", nil)
	writeRepoModel(t, dir, "tiny", "3", map[string]any{"name": "tiny", "max_model_len": 256, "max_num_seqs": 4})
	s := startRepoServer(t, dir, false)

	idx := s.index(t)
	if e := idx["tiny"]; e["state"] != "READY" || e["version"] != "3" {
		t.Fatalf("index after start: %v", idx)
	}
	var meta map[string]any
	if code, _ := s.post(t, "/v2/repository/models/tiny/unload", nil, nil); code != 200 {
		t.Fatalf("unload idle: %d", code)
	}
	if code, _ := s.get(t, "/v2/models/tiny"); code != 404 {
		t.Fatalf("metadata after unload: %d, want 404", code)
	}
	if code, _ := s.post(t, "/v2/repository/models/tiny/load", map[string]any{}, nil); code != 200 {
		t.Fatalf("load: %d", code)
	}
	if code, body := s.get(t, "/v2/models/tiny/versions/3"); code != 200 || !json.Valid([]byte(body)) {
		t.Fatalf("metadata of version 3: %d %s", code, body)
	} else {
		_ = json.Unmarshal([]byte(body), &meta)
	}
	if v := meta["versions"].([]any); v[0] != "3" {
		t.Fatalf("versions %v, want [3]", v)
	}
	if code, text := s.generate(t, "tiny"); code != 200 || text == "" {
		t.Fatalf("generate: %d %q", code, text)
	}

	// A stream that outlives the unload.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, _ := json.Marshal(map[string]any{"text_input": "Once upon a time", "parameters": map[string]any{"max_tokens": 200, "temperature": 0, "ignore_eos": true}})
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/v2/models/tiny/generate_stream", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var events []string
	for sc.Scan() && len(events) == 0 { // the first event: the sequence runs
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	unloaded := make(chan error, 1)
	go func() {
		_, err := s.grpc.RepositoryModelUnload(context.Background(), &pb.RepositoryModelUnloadRequest{ModelName: "tiny"})
		unloaded <- err
	}()
	// New requests find no model while the stream drains (or after).
	waitFor(t, func() bool { _, ok := s.registry.Get("tiny"); return !ok })
	if code, _ := s.generate(t, "tiny"); code != 404 {
		t.Fatalf("generate during unload: %d, want 404", code)
	}
	if code, _ := s.get(t, "/v1/models/tiny"); code != 404 {
		t.Fatalf("GET /v1/models/tiny during unload: %d, want 404", code)
	}
	if _, err := s.grpc.ModelInfer(context.Background(), greedyRequestFor("tiny", "x", 2)); status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC ModelInfer during unload: %v, want NOT_FOUND", err)
	}
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if strings.Contains(d, `"error"`) {
				t.Fatalf("the stream was cut by the unload: %s", d)
			}
			events = append(events, d)
		}
	}
	if len(events) != 200 {
		t.Fatalf("the stream got %d events, want 200 (it must complete)", len(events))
	}
	if err := <-unloaded; err != nil {
		t.Fatalf("RepositoryModelUnload: %v", err)
	}
	if e := s.index(t)["tiny"]; e["state"] != "UNAVAILABLE" || e["reason"] != "unloaded" {
		t.Fatalf("index after unload: %v", e)
	}

	// Load again, over gRPC, and serve.
	if _, err := s.grpc.RepositoryModelLoad(context.Background(), &pb.RepositoryModelLoadRequest{ModelName: "tiny"}); err != nil {
		t.Fatalf("RepositoryModelLoad: %v", err)
	}
	if code, text := s.generate(t, "tiny"); code != 200 || text == "" {
		t.Fatalf("generate after reload: %d %q", code, text)
	}
	gi, err := s.grpc.RepositoryIndex(context.Background(), &pb.RepositoryIndexRequest{Ready: true})
	if err != nil || len(gi.GetModels()) != 1 || gi.GetModels()[0].GetState() != "READY" || gi.GetModels()[0].GetVersion() != "3" {
		t.Fatalf("gRPC RepositoryIndex: %v %v", gi, err)
	}
}

func greedyRequestFor(model, prompt string, maxTokens int64) *pb.ModelInferRequest {
	r := greedyRequest("", prompt, maxTokens)
	r.ModelName = model
	return r
}

// TestRepositoryBrokenModel: corrupt and truncated GGUFs and bad settings
// fail to load with a message in the index and the load answer; the good
// model keeps serving and the server stays ready (not strict) or is not
// ready (strict).
func TestRepositoryBrokenModel(t *testing.T) {
	src, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not a gguf file "), 64)
	corrupt := append([]byte(nil), good...)
	for i := 8; i < 64; i++ { // the tensor and metadata counts
		corrupt[i] = 0xff
	}
	for _, strict := range []bool{false, true} {
		dir := t.TempDir()
		writeRepoModel(t, dir, "good", "1", nil)
		writeRepoFile(t, dir, "truncated", "1", good[:len(good)/2], nil)
		writeRepoFile(t, dir, "garbage", "1", garbage, nil)
		writeRepoFile(t, dir, "corrupt", "1", corrupt, nil)
		writeRepoModel(t, dir, "badsettings", "1", map[string]any{"max_model_len": 64, "colour": "blue"})
		writeRepoModel(t, dir, "toolong", "2", map[string]any{"max_model_len": 1 << 20})
		s := startRepoServer(t, dir, strict)

		idx := s.index(t)
		if idx["good"]["state"] != "READY" {
			t.Fatalf("good: %v", idx["good"])
		}
		for name, want := range map[string]string{
			"truncated": "load model", "garbage": `garbage/1/model.gguf is not a GGUF file`, "corrupt": "load model",
			"badsettings": `unknown field "colour"`, "toolong": "max_model_len",
		} {
			e := idx[name]
			if e["state"] != "UNAVAILABLE" || !strings.Contains(e["reason"], want) {
				t.Errorf("strict=%v %s: %v, want UNAVAILABLE with a reason naming %q", strict, name, e, want)
			}
			var out map[string]string
			code, _ := s.post(t, "/v2/repository/models/"+name+"/load", nil, &out)
			if code != 400 || !strings.Contains(out["error"], want) {
				t.Errorf("strict=%v load %s: %d %v", strict, name, code, out)
			}
		}
		if code, text := s.generate(t, "good"); code != 200 || text == "" {
			t.Fatalf("good after failed loads: %d %q", code, text)
		}
		code, _ := s.get(t, "/v2/health/ready")
		legacy, _ := s.get(t, "/api/health/ready")
		live, _ := s.get(t, "/api/health/live")
		want := 200
		if strict {
			want = 503
		}
		if code != want || legacy != want || live != 200 {
			t.Fatalf("strict=%v: ready %d, legacy ready %d, legacy live %d; want %d, %d, 200", strict, code, legacy, live, want, want)
		}
		if code, _ := s.post(t, "/v2/repository/models/nosuch/load", nil, nil); code != 404 {
			t.Fatalf("load of an unknown model: %d", code)
		}
		if _, err := s.grpc.RepositoryModelLoad(context.Background(), &pb.RepositoryModelLoadRequest{ModelName: "corrupt"}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("gRPC load of the corrupt model: %v", err)
		}
		if _, err := s.grpc.RepositoryModelUnload(context.Background(), &pb.RepositoryModelUnloadRequest{ModelName: "../x"}); status.Code(err) != codes.NotFound {
			t.Fatalf("gRPC unload of ../x: %v", err)
		}
	}
}

// TestRepositoryStrictReadiness: with strict readiness the server becomes
// ready when the last model loads, and stops being ready when one is
// unloaded.
func TestRepositoryStrictReadiness(t *testing.T) {
	dir := t.TempDir()
	writeRepoModel(t, dir, "a", "1", nil)
	s := startRepoServer(t, dir, true)
	if code, _ := s.get(t, "/v2/health/ready"); code != 200 {
		t.Fatalf("ready with every model loaded: %d", code)
	}
	writeRepoModel(t, dir, "b", "1", nil) // a new folder, not loaded yet
	if code, _ := s.get(t, "/v2/health/ready"); code != 503 {
		t.Fatalf("ready with b not loaded: %d", code)
	}
	if e := s.index(t)["b"]; e["state"] != "" {
		t.Fatalf("b before load: %v", e)
	}
	if code, _ := s.post(t, "/v2/repository/models/b/load", nil, nil); code != 200 {
		t.Fatalf("load b: %d", code)
	}
	if code, _ := s.get(t, "/v2/health/ready"); code != 200 {
		t.Fatalf("ready after loading b: %d", code)
	}
	if code, _ := s.post(t, "/v2/repository/models/a/unload", nil, nil); code != 200 {
		t.Fatalf("unload a: %d", code)
	}
	if code, _ := s.get(t, "/v2/health/ready"); code != 503 {
		t.Fatalf("strict ready with a unloaded: %d", code)
	}
}

// waitFor polls cond until it holds, for up to a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !poll(t, time.Minute, 5*time.Millisecond, cond) {
		t.Fatal("condition not met within a minute")
	}
}

// TestRepositoryGrpcurl drives the repository RPCs with grpcurl through
// reflection: index, unload, load, and a corrupt model's load error.
func TestRepositoryGrpcurl(t *testing.T) {
	bin := grpcurlPath(t)
	dir := t.TempDir()
	writeRepoModel(t, dir, "tiny", "2", nil)
	writeRepoFile(t, dir, "corrupt", "1", []byte("GGUF\x03\x00\x00\x00 and nothing else"), nil)
	s := startRepoServer(t, dir, false)
	const svc = "inference.GRPCInferenceService/"
	out, errOut, ok := grpcurl(t, bin, s.grpcAddr, `{}`, svc+"RepositoryIndex")
	if !ok {
		t.Fatalf("RepositoryIndex: %s", errOut)
	}
	var idx struct {
		Models []map[string]string `json:"models"`
	}
	if err := json.Unmarshal([]byte(out), &idx); err != nil || len(idx.Models) != 2 ||
		idx.Models[0]["name"] != "corrupt" || idx.Models[0]["state"] != "UNAVAILABLE" || idx.Models[0]["reason"] == "" ||
		idx.Models[1]["name"] != "tiny" || idx.Models[1]["state"] != "READY" || idx.Models[1]["version"] != "2" {
		t.Fatalf("RepositoryIndex: %s %v", out, err)
	}
	if _, errOut, ok := grpcurl(t, bin, s.grpcAddr, `{"model_name":"tiny"}`, svc+"RepositoryModelUnload"); !ok {
		t.Fatalf("RepositoryModelUnload: %s", errOut)
	}
	if _, errOut, ok := grpcurl(t, bin, s.grpcAddr, `{"name":"tiny"}`, svc+"ModelReady"); ok || !strings.Contains(errOut, "NotFound") {
		t.Fatalf("ModelReady after unload: %s", errOut)
	}
	if _, errOut, ok := grpcurl(t, bin, s.grpcAddr, `{"model_name":"tiny"}`, svc+"RepositoryModelLoad"); !ok {
		t.Fatalf("RepositoryModelLoad: %s", errOut)
	}
	if out, errOut, ok := grpcurl(t, bin, s.grpcAddr, `{"name":"tiny"}`, svc+"ModelReady"); !ok || !strings.Contains(out, `"ready": true`) {
		t.Fatalf("ModelReady after load: %s %s", out, errOut)
	}
	if _, errOut, ok := grpcurl(t, bin, s.grpcAddr, `{"model_name":"corrupt"}`, svc+"RepositoryModelLoad"); ok || !strings.Contains(errOut, "InvalidArgument") || !strings.Contains(errOut, "corrupt") {
		t.Fatalf("RepositoryModelLoad of a corrupt model: %s", errOut)
	}
}
