package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmserve/llmserve/models/stories260k"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
	"github.com/llmserve/llmserve/proto/workerpb"
)

// headWorker is a `llmserve worker` child process and its worker-port
// address.
type headWorker struct {
	*pdProc
	addr string
}

func startWorkerProc(t *testing.T, role string, extra ...string) *headWorker {
	t.Helper()
	port := freeTCPPort(t)
	return startWorkerOn(t, role, port, extra...)
}

func startWorkerOn(t *testing.T, role string, port int, extra ...string) *headWorker {
	t.Helper()
	p := startProc(t, "worker", append([]string{"--role", role, "--worker-port", strconv.Itoa(port)}, extra...)...)
	return &headWorker{pdProc: p, addr: "127.0.0.1:" + strconv.Itoa(port)}
}

func startHeadProc(t *testing.T, workers []*headWorker, extra ...string) *pdProc {
	t.Helper()
	var addrs []string
	for _, w := range workers {
		addrs = append(addrs, w.addr)
	}
	return startProc(t, "head", append([]string{"--workers", strings.Join(addrs, ","), "--worker-check-interval", "200ms"}, extra...)...)
}

var servedModels sync.Map // url -> model id

// servedModel is the id of the model p serves.
func servedModel(t *testing.T, p *pdProc) string {
	t.Helper()
	if v, ok := servedModels.Load(p.url); ok {
		return v.(string)
	}
	resp, err := http.Get(p.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Data) == 0 {
		t.Fatalf("%s/v1/models: %v %v", p.url, err, r)
	}
	servedModels.Store(p.url, r.Data[0].ID)
	return r.Data[0].ID
}

// completion asks p for a greedy completion and returns its text and
// usage.
func completion(t *testing.T, p *pdProc, prompt string, maxTokens int) (string, int) {
	t.Helper()
	code, body := p.post(t, "/v1/completions", map[string]any{
		"model": servedModel(t, p), "prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true,
	})
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", p.url, code, body)
	}
	var r struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return answerText(t, body), r.Usage.PromptTokens
}

var headNames = []string{"Lily", "Tom", "Sue", "Ben", "Max", "Anna", "Sam", "Mia", "Tim", "Lucy", "Jack", "Kate", "Bob", "Zoe", "Dan", "Amy"}

// headPrompts are n prompts that differ in their first words (so in
// their first KV block).
func headPrompts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s and %s went to the park. Once upon a time, there was a big", headNames[i%len(headNames)], headNames[(i*7+3)%len(headNames)])
	}
	return out
}

// concurrently runs fn(i) for i in [0, n) at once.
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// TestHeadTwoWorkers: 16 concurrent greedy requests through a head with
// two workers (completions and chat) answer as one serve process does.
func TestHeadTwoWorkers(t *testing.T) {
	t.Parallel()
	ref := startServeProc(t)
	w1, w2 := startWorkerProc(t, "both"), startWorkerProc(t, "both")
	h := startHeadProc(t, []*headWorker{w1, w2})
	prompts := headPrompts(16)
	got, want := make([]string, 16), make([]string, 16)
	concurrently(16, func(i int) {
		if i%2 == 1 {
			req := map[string]any{"model": servedModel(t, h), "messages": []map[string]any{{"role": "user", "content": prompts[i]}}, "max_tokens": 24, "temperature": 0, "stream": true}
			_, gb := h.post(t, "/v1/chat/completions", req)
			_, wb := ref.post(t, "/v1/chat/completions", req)
			got[i], want[i] = answerText(t, gb), answerText(t, wb)
			return
		}
		got[i], _ = completion(t, h, prompts[i], 24)
		want[i], _ = completion(t, ref, prompts[i], 24)
	})
	for i := range got {
		if got[i] != want[i] || got[i] == "" {
			t.Errorf("request %d: the head answered %q, one serve process %q", i, got[i], want[i])
		}
	}
	for _, w := range []*headWorker{w1, w2} {
		if n := h.metric(t, "llmserve_router_requests_total", `worker="`+w.addr+`"`); n == 0 {
			t.Errorf("worker %s got no request", w.addr)
		}
	}
	// The V2 protocols run over the head too: REST generate and gRPC
	// ModelInfer give the OpenAI route's text.
	want0, _ := completion(t, ref, prompts[0], 16)
	code, body := h.post(t, "/v2/models/stories260K/generate", map[string]any{"text_input": prompts[0], "parameters": map[string]any{"max_tokens": 16, "temperature": 0, "ignore_eos": true}})
	var gen struct {
		TextOutput string `json:"text_output"`
	}
	if err := json.Unmarshal(body, &gen); code != http.StatusOK || err != nil || gen.TextOutput != want0 {
		t.Errorf("V2 generate through the head: %d %s; want %q", code, body, want0)
	}
	// Embeddings, scores and reranks are routed too (the workers' Embed):
	// the same answers as one serve process.
	headEmbedSame(t, h, ref)
	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := greedyRequest("g", prompts[0], 16)
	req.Parameters["ignore_eos"] = boolParam(true)
	resp, err := pb.NewGRPCInferenceServiceClient(conn).ModelInfer(context.Background(), req)
	if err != nil || deltaText(t, resp) != want0 {
		t.Errorf("gRPC ModelInfer through the head: %v %v; want %q", resp, err, want0)
	}
}

// TestHeadPrefillDecode: with a prefill and a decode worker, every
// request is prefilled on one and decoded on the other; outputs equal one
// serve process's, and the KV bytes the decode worker received are the
// prompts' KV size (prompt positions x bytes per position).
func TestHeadPrefillDecode(t *testing.T) {
	t.Parallel()
	ref := startServeProc(t)
	p, d := startWorkerProc(t, "prefill"), startWorkerProc(t, "decode")
	h := startHeadProc(t, []*headWorker{p, d}, "--pd-min-prefill-tokens", "1")
	info, err := d.worker.Info(context.Background(), &workerpb.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prompts := headPrompts(16)
	got, want := make([]string, 16), make([]string, 16)
	promptTokens := make([]int, 16)
	concurrently(16, func(i int) {
		got[i], promptTokens[i] = completion(t, h, prompts[i], 24)
		want[i], _ = completion(t, ref, prompts[i], 24)
	})
	wantBytes := 0.0
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("request %d: P/D answered %q, one serve process %q", i, got[i], want[i])
		}
		wantBytes += float64(promptTokens[i]) * float64(info.KvBytesPerPosition)
	}
	recv := d.metric(t, "llmserve_kv_transfer_bytes_total", `direction="received"`)
	sent := p.metric(t, "llmserve_kv_transfer_bytes_total", `direction="sent"`)
	if recv != wantBytes || sent != wantBytes {
		t.Errorf("KV bytes: decode received %v, prefill sent %v; want %v (16 prompts' positions x %d bytes)", recv, sent, wantBytes, info.KvBytesPerPosition)
	}
	if n := d.metric(t, "llmserve_kv_transfer_recomputed_total", ""); n != 0 {
		t.Errorf("%v transfers were recomputed", n)
	}
	if n := h.metric(t, "llmserve_router_requests_total", `worker="`+p.addr+`"`); n != 16 {
		t.Errorf("the prefill worker got %v requests, want 16", n)
	}
	// With the prefill worker gone, the decode worker computes everything.
	p.kill()
	more := headPrompts(20)[16:]
	for _, prompt := range more {
		got, _ := completion(t, h, prompt, 24)
		want, _ := completion(t, ref, prompt, 24)
		if got != want {
			t.Errorf("without the prefill worker: %q, one serve process %q", got, want)
		}
	}
}

// synthModel writes a heavier model (smollm2-135m's shape, the stories
// vocabulary, random weights) so that streams are still running when a
// worker is killed.
func synthModel(t *testing.T) string {
	t.Helper()
	vocab, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "synth.gguf")
	if b, err := exec.Command(pdBinary(t), "synth", "--shape", "smollm2-135m", "--dtype", "q8_0", "--context", "512", "--vocab", vocab, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("synth: %v\n%s", err, b)
	}
	return out
}

// sseStream is an open streamed completion.
type sseStream struct {
	resp *http.Response
	sc   *bufio.Scanner
	text strings.Builder
	errs []string
}

func openStream(t *testing.T, p *pdProc, prompt string, maxTokens int) *sseStream {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": servedModel(t, p), "prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true, "stream": true})
	resp, err := http.Post(p.url+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Errorf("status %d", resp.StatusCode)
		return nil
	}
	return &sseStream{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next reads events until one carries text (false at the end).
func (s *sseStream) next(t *testing.T) bool {
	for s.sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(s.sc.Text(), "data:"))
		if line == "" || line == "[DONE]" {
			continue
		}
		if strings.Contains(line, `"error"`) {
			s.errs = append(s.errs, line)
			continue
		}
		if txt := answerText(t, []byte(line)); txt != "" {
			s.text.WriteString(txt)
			return true
		}
	}
	return false
}

// TestHeadMigration: SIGKILL a worker while 8 streams run through the
// head: every stream completes with exactly one serve process's text
// (its tokens moved to the other worker, none lost or repeated), and the
// head counts the migrations. The same when the worker is shut down
// (SIGTERM with no grace: it ends its requests with ERROR_CODE_CLOSED).
func TestHeadMigration(t *testing.T) {
	t.Parallel()
	model := synthModel(t)
	const maxTokens = 120
	args := []string{"--model", model, "--max-model-len", "256"}
	ref := startServeProc(t, args...)
	prompts := headPrompts(8)
	want := make([]string, 8)
	for i := range want {
		want[i], _ = completion(t, ref, prompts[i], maxTokens)
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			wargs := append([]string{"--shutdown-timeout", "0s"}, args...)
			w1, w2 := startWorkerProc(t, "both", wargs...), startWorkerProc(t, "both", wargs...)
			h := startHeadProc(t, []*headWorker{w1, w2})
			streams := make([]*sseStream, 8)
			concurrently(8, func(i int) {
				if s := openStream(t, h, prompts[i], maxTokens); s != nil && s.next(t) {
					streams[i] = s
				}
			})
			if t.Failed() {
				t.FailNow()
			}
			// Every stream has its first tokens: stop the worker with the
			// most requests now.
			victim := w1
			if h.metric(t, "llmserve_router_requests_total", `worker="`+w2.addr+`"`) > h.metric(t, "llmserve_router_requests_total", `worker="`+w1.addr+`"`) {
				victim = w2
			}
			if err := victim.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			<-victim.done
			got := make([]string, 8)
			concurrently(8, func(i int) {
				s := streams[i]
				defer s.resp.Body.Close()
				for s.next(t) {
				}
				if len(s.errs) > 0 {
					t.Errorf("stream %d: error events %v", i, s.errs)
				}
				got[i] = s.text.String()
			})
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("stream %d: through the head %q, one serve process %q", i, got[i], want[i])
				}
			}
			if n := h.metric(t, "llmserve_router_migrations_total", ""); n < 1 {
				t.Errorf("llmserve_router_migrations_total = %v, want at least 1", n)
			}
		})
	}
}

// headWait polls cond until it holds (a generous bound, not a timing
// assertion: it fails only when the state never comes).
func headWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(t, 60*time.Second, 50*time.Millisecond, cond) {
		t.Fatalf("never: %s", what)
	}
}

// TestHeadPrefixRouting: 20 requests sharing a long prefix go to the
// worker that cached it (its cache hits count them), while unrelated
// requests spread over both workers.
func TestHeadPrefixRouting(t *testing.T) {
	t.Parallel()
	w1, w2 := startWorkerProc(t, "both"), startWorkerProc(t, "both")
	h := startHeadProc(t, []*headWorker{w1, w2})
	prefix := strings.Repeat("Lily and Tom went to the park to play with a red ball. ", 8)
	completion(t, h, prefix+"Then", 4)
	var holder, other *headWorker
	headWait(t, "the head learns which worker cached the prefix", func() bool {
		b1 := h.metric(t, "llmserve_router_cached_blocks", `worker="`+w1.addr+`"`)
		b2 := h.metric(t, "llmserve_router_cached_blocks", `worker="`+w2.addr+`"`)
		switch {
		case b1 > 0 && b2 == 0:
			holder, other = w1, w2
		case b2 > 0 && b1 == 0:
			holder, other = w2, w1
		}
		return holder != nil
	})
	stats := func(w *headWorker) *workerpb.StatsResponse {
		st, err := w.worker.Stats(context.Background(), &workerpb.StatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	hits0 := stats(holder).PrefixCacheHits
	before := h.metric(t, "llmserve_router_requests_total", `worker="`+holder.addr+`"`)
	for i := range 20 {
		completion(t, h, prefix+headNames[i%len(headNames)]+" said", 4)
	}
	if n := h.metric(t, "llmserve_router_requests_total", `worker="`+holder.addr+`"`) - before; n != 20 {
		t.Errorf("the worker holding the prefix got %v of the 20 requests sharing it", n)
	}
	if n := h.metric(t, "llmserve_router_requests_total", `worker="`+other.addr+`"`); n != 0 {
		t.Errorf("the other worker got %v requests", n)
	}
	if hits := stats(holder).PrefixCacheHits - hits0; hits < 20*64 {
		t.Errorf("the holder's prefix cache hits grew by %d tokens, want at least 20 x 64", hits)
	}
	for _, p := range headPrompts(16) {
		completion(t, h, p, 4)
	}
	if n := h.metric(t, "llmserve_router_requests_total", `worker="`+other.addr+`"`); n == 0 {
		t.Error("unrelated requests all went to the prefix's holder")
	}
}

// TestHeadWorkerDeadAndBack: a killed worker is marked unhealthy and the
// head keeps serving with the other; started again on its address, it is
// healthy again and gets requests.
func TestHeadWorkerDeadAndBack(t *testing.T) {
	t.Parallel()
	port := freeTCPPort(t)
	w1, w2 := startWorkerOn(t, "both", port), startWorkerProc(t, "both")
	h := startHeadProc(t, []*headWorker{w1, w2})
	headWait(t, "two healthy workers", func() bool {
		return h.metric(t, "llmserve_router_workers", `state="healthy"`) == 2
	})
	w1.kill()
	headWait(t, "the killed worker is unhealthy", func() bool {
		return h.metric(t, "llmserve_router_workers", `state="unhealthy"`) == 1
	})
	before := h.metric(t, "llmserve_router_requests_total", `worker="`+w1.addr+`"`)
	for _, p := range headPrompts(4) {
		completion(t, h, p, 4)
	}
	if n := h.metric(t, "llmserve_router_requests_total", `worker="`+w1.addr+`"`); n != before {
		t.Errorf("the dead worker got %v requests", n-before)
	}
	startWorkerOn(t, "both", port)
	headWait(t, "the worker is back", func() bool {
		return h.metric(t, "llmserve_router_workers", `state="healthy"`) == 2
	})
	for _, p := range headPrompts(16) {
		completion(t, h, p, 4)
	}
	if n := h.metric(t, "llmserve_router_requests_total", `worker="`+w1.addr+`"`); n == before {
		t.Error("the worker that came back got no request")
	}
}

// TestHeadFlags: bad discovery and routing flags stop the head at start
// with a message naming what to fix.
func TestHeadFlags(t *testing.T) {
	bin := pdBinary(t)
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{nil, nil, "no workers: give --workers"},
		{[]string{"--workers", "worker-1"}, nil, `--workers: "worker-1" is not host:port`},
		{[]string{"--workers", "a:1", "--workers-dns", "b:2"}, nil, "give one of them"},
		{[]string{"--workers-dns", "llm-workers"}, nil, "--workers-dns"},
		{[]string{"--workers", "a:1", "--max-migrations", "-1"}, nil, "--max-migrations"},
		{[]string{"--workers", "a:1", "--pd-min-prefill-tokens", "-5"}, nil, "--pd-min-prefill-tokens"},
		{[]string{"--workers", "a:1", "--model", "a.gguf", "--model", "b.gguf"}, nil, "at most one model"},
		{nil, []string{"LWS_LEADER_ADDRESS=llm-0.llm", "LWS_GROUP_SIZE=1"}, "LWS_GROUP_SIZE"},
	}
	for _, tt := range tests {
		cmd := exec.Command(bin, append([]string{"head", "--http-port", strconv.Itoa(freeTCPPort(t)), "--grpc-port", "0"}, tt.args...)...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LLMSERVE_") && !strings.HasPrefix(kv, "LWS_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, tt.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("head %v %v: %v %s; want an error saying %q", tt.args, tt.env, err, out, tt.want)
		}
	}
}

// TestHeadNotReady: a head whose workers do not answer is live but not
// ready, and serves no model.
func TestHeadNotReady(t *testing.T) {
	t.Parallel()
	bin := pdBinary(t)
	httpPort := freeTCPPort(t)
	url := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	cmd := exec.Command(bin, "head", "--http-port", strconv.Itoa(httpPort), "--grpc-port", "0", "--workers", "127.0.0.1:"+strconv.Itoa(freeTCPPort(t)), "--log-level", "error")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("the head did not stop cleanly on SIGTERM: %v", err)
		}
	})
	get := func(path string) (int, string) {
		resp, err := http.Get(url + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	headWait(t, "the head listens", func() bool {
		code, _ := get("/v2/health/live")
		return code == http.StatusOK
	})
	if code, body := get("/v2/health/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"ready":false`) {
		t.Errorf("ready: %d %s", code, body)
	}
	if code, _ := get("/health"); code != http.StatusServiceUnavailable {
		t.Errorf("/health: %d", code)
	}
	if code, body := get("/v1/models"); code != http.StatusOK || strings.Contains(body, `"id"`) {
		t.Errorf("models: %d %s", code, body)
	}
}

// TestHeadAPIKey: with --api-key the head asks for the key and sends it
// to workers started with the same key. The head loads its vocabulary
// from its own --model here.
func TestHeadAPIKey(t *testing.T) {
	t.Parallel()
	vocab, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	w := startWorkerProc(t, "both", "--api-key", "s3cret")
	h := startHeadProc(t, []*headWorker{w}, "--api-key", "s3cret", "--model", vocab)
	for _, tt := range []struct {
		key  string
		want int
	}{{"", http.StatusUnauthorized}, {"s3cret", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/completions", strings.NewReader(`{"model":"stories260K","prompt":"Once","max_tokens":4}`))
		if tt.key != "" {
			req.Header.Set("Authorization", "Bearer "+tt.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("key %q: %d %s, want %d", tt.key, resp.StatusCode, b, tt.want)
		}
	}
}

// TestHeadChatTemplate: a worker's --chat-template reaches the head with
// the vocabulary, so chats through the head are rendered as the worker
// (and a serve process with the same template) renders them.
func TestHeadChatTemplate(t *testing.T) {
	t.Parallel()
	tmpl := filepath.Join(t.TempDir(), "t.jinja")
	src := "{% for m in messages %}Once upon a time, {{ m['content'] }} went to the park.{% endfor %}"
	if err := os.WriteFile(tmpl, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := startServeProc(t, "--chat-template", tmpl)
	w := startWorkerProc(t, "both", "--chat-template", tmpl)
	h := startHeadProc(t, []*headWorker{w})
	req := map[string]any{"model": "stories260K", "messages": []map[string]any{{"role": "user", "content": "Lily"}}, "max_tokens": 16, "temperature": 0}
	_, gb := h.post(t, "/v1/chat/completions", req)
	_, wb := ref.post(t, "/v1/chat/completions", req)
	var gu, wu struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(gb, &gu) != nil || json.Unmarshal(wb, &wu) != nil || gu.Usage.PromptTokens != wu.Usage.PromptTokens || answerText(t, gb) != answerText(t, wb) {
		t.Errorf("through the head %s; one serve process with the template %s", gb, wb)
	}
}

// headEmbedSame checks that the head h answers the embedding routes as the
// serve process ref does: the same vectors (cosine >= 0.99999, the usage
// equal), the same scores and the same rerank order.
func headEmbedSame(t *testing.T, h, ref *pdProc) {
	t.Helper()
	model := servedModel(t, ref)
	type embResp struct {
		Data []struct {
			Index     int
			Embedding []float32
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	for _, tc := range []struct {
		name string
		req  map[string]any
	}{
		{"several texts", map[string]any{"input": embedTexts}},
		{"one text, not normalized", map[string]any{"input": embedTexts[0], "normalize": false}},
		{"token ids, truncated", map[string]any{"input": [][]int{{1, 2, 3, 4, 5}, {7, 8}}, "truncate_prompt_tokens": 3}},
	} {
		req := map[string]any{"model": model}
		for k, v := range tc.req {
			req[k] = v
		}
		var got, want embResp
		gc, gb := h.post(t, "/v1/embeddings", req)
		wc, wb := ref.post(t, "/v1/embeddings", req)
		if gc != http.StatusOK || wc != http.StatusOK || json.Unmarshal(gb, &got) != nil || json.Unmarshal(wb, &want) != nil {
			t.Fatalf("%s: head %d %s, serve %d %s", tc.name, gc, gb, wc, wb)
		}
		if len(got.Data) != len(want.Data) || len(got.Data) == 0 || got.Usage != want.Usage {
			t.Fatalf("%s: the head answered %d vectors (usage %+v), serve %d (usage %+v)", tc.name, len(got.Data), got.Usage, len(want.Data), want.Usage)
		}
		for i := range got.Data {
			g, w := got.Data[i].Embedding, want.Data[i].Embedding
			if got.Data[i].Index != i || len(g) != len(w) || cosine(g, w) < 0.99999 || math.Abs(norm(g)-norm(w)) > 1e-4*norm(w) {
				t.Errorf("%s: vector %d differs: cosine %v, norms %v and %v", tc.name, i, cosine(g, w), norm(g), norm(w))
			}
		}
	}
	// Bad input is refused by the head as by serve: the same status and
	// param.
	for _, req := range []map[string]any{
		{"model": model, "input": ""},
		{"model": model, "input": [][]int{{1, 1 << 30}}},
		{"model": model, "input": "a", "dimensions": 8},
	} {
		gc, gb := h.post(t, "/v1/embeddings", req)
		wc, wb := ref.post(t, "/v1/embeddings", req)
		var ge, we errBody
		_, _ = json.Unmarshal(gb, &ge), json.Unmarshal(wb, &we)
		if gc != wc || gc != http.StatusBadRequest || ge.Error.Param != we.Error.Param || ge.Error.Param == "" {
			t.Errorf("bad input %v: the head answered %d %s, serve %d %s", req, gc, gb, wc, wb)
		}
	}
	// /v1/score (cosine of the embeddings) and /rerank: the same numbers.
	for _, c := range []struct {
		path string
		req  map[string]any
	}{
		{"/v1/score", map[string]any{"text_1": embedTexts[0], "text_2": embedTexts[1:4]}},
		{"/score", map[string]any{"text_1": embedTexts[0:2], "text_2": embedTexts[2:4]}},
		{"/rerank", map[string]any{"query": embedTexts[0], "documents": embedTexts, "top_n": 3}},
		{"/v1/rerank", map[string]any{"query": "dog", "documents": embedTexts[1:], "return_documents": false}},
	} {
		c.req["model"] = model
		type result struct {
			Index          int
			Score          float64
			RelevanceScore float64 `json:"relevance_score"`
		}
		var got, want struct {
			Data, Results []result
		}
		gc, gb := h.post(t, c.path, c.req)
		wc, wb := ref.post(t, c.path, c.req)
		if gc != http.StatusOK || wc != http.StatusOK || json.Unmarshal(gb, &got) != nil || json.Unmarshal(wb, &want) != nil {
			t.Fatalf("%s: head %d %s, serve %d %s", c.path, gc, gb, wc, wb)
		}
		g, w := append(got.Data, got.Results...), append(want.Data, want.Results...)
		if len(g) != len(w) || len(g) == 0 {
			t.Fatalf("%s: the head answered %s, serve %s", c.path, gb, wb)
		}
		for i := range g {
			if g[i].Index != w[i].Index || math.Abs(g[i].Score-w[i].Score) > 1e-5 || math.Abs(g[i].RelevanceScore-w[i].RelevanceScore) > 1e-5 {
				t.Errorf("%s result %d: the head %+v, serve %+v", c.path, i, g[i], w[i])
			}
		}
	}
	// KServe V1 :predict embeds (normalized) as /v1/embeddings does.
	var gp, wp struct {
		Predictions [][]float32 `json:"predictions"`
	}
	pred := map[string]any{"instances": []string{"Once upon a time", "a cat"}}
	gc, gb := h.post(t, "/v1/models/"+model+":predict", pred)
	wc, wb := ref.post(t, "/v1/models/"+model+":predict", pred)
	if gc != http.StatusOK || wc != http.StatusOK || json.Unmarshal(gb, &gp) != nil || json.Unmarshal(wb, &wp) != nil || len(gp.Predictions) != 2 || len(wp.Predictions) != 2 {
		t.Fatalf(":predict: head %d %s, serve %d %s", gc, gb, wc, wb)
	}
	for i := range gp.Predictions {
		if c := cosine(gp.Predictions[i], wp.Predictions[i]); c < 0.99999 {
			t.Errorf(":predict %d: cosine %v between the head's and serve's", i, c)
		}
	}
}

// TestHeadEmbedTaskAndNoPooling: workers started with --task embed make
// the head's V2 infer answer embeddings as serve's does; workers started
// with --pooling none make the head refuse the embedding routes with the
// 400 serve gives.
func TestHeadEmbedTaskAndNoPooling(t *testing.T) {
	t.Parallel()
	t.Run("task embed", func(t *testing.T) {
		t.Parallel()
		ref := startServeProc(t, "--task", "embed")
		h := startHeadProc(t, []*headWorker{startWorkerProc(t, "both", "--task", "embed")})
		model := servedModel(t, ref)
		req := map[string]any{"inputs": []any{map[string]any{"name": "text_input", "datatype": "BYTES", "shape": []int{2}, "data": []string{"Once upon a time", "a cat"}}}}
		type inferResp struct {
			Outputs []struct {
				Name  string    `json:"name"`
				Shape []int     `json:"shape"`
				Data  []float32 `json:"data"`
			} `json:"outputs"`
		}
		var got, want inferResp
		gc, gb := h.post(t, "/v2/models/"+model+"/infer", req)
		wc, wb := ref.post(t, "/v2/models/"+model+"/infer", req)
		if gc != http.StatusOK || wc != http.StatusOK || json.Unmarshal(gb, &got) != nil || json.Unmarshal(wb, &want) != nil ||
			len(got.Outputs) != 1 || len(want.Outputs) != 1 || len(got.Outputs[0].Shape) != 2 || !slices.Equal(got.Outputs[0].Shape, want.Outputs[0].Shape) {
			t.Fatalf("V2 infer: head %d %s, serve %d %s", gc, gb, wc, wb)
		}
		dim := got.Outputs[0].Shape[1]
		for i := range 2 {
			g, w := got.Outputs[0].Data[i*dim:(i+1)*dim], want.Outputs[0].Data[i*dim:(i+1)*dim]
			if c := cosine(g, w); c < 0.99999 {
				t.Errorf("V2 infer row %d: cosine %v between the head's and serve's", i, c)
			}
		}
	})
	t.Run("pooling none", func(t *testing.T) {
		t.Parallel()
		ref := startServeProc(t, "--pooling", "none")
		h := startHeadProc(t, []*headWorker{startWorkerProc(t, "both", "--pooling", "none")})
		model := servedModel(t, ref)
		for _, c := range []struct {
			path string
			req  map[string]any
		}{
			{"/v1/embeddings", map[string]any{"model": model, "input": "hi"}},
			{"/v1/score", map[string]any{"model": model, "text_1": "a", "text_2": "b"}},
			{"/rerank", map[string]any{"model": model, "query": "a", "documents": []string{"b"}}},
		} {
			gc, gb := h.post(t, c.path, c.req)
			wc, wb := ref.post(t, c.path, c.req)
			var ge, we errBody
			_, _ = json.Unmarshal(gb, &ge), json.Unmarshal(wb, &we)
			if gc != http.StatusBadRequest || wc != gc || ge.Error.Message != we.Error.Message || ge.Error.Param != we.Error.Param || !strings.Contains(ge.Error.Message, "no pooling") {
				t.Errorf("%s: the head answered %d %s, serve %d %s", c.path, gc, gb, wc, wb)
			}
		}
	})
}

// TestHeadCrossEncoder: a reranker (rank pooling) served by a worker
// scores pairs through the head as serve does: the head formats each pair
// from the worker's vocabulary (its rerank template, or the special
// tokens) as the worker would.
func TestHeadCrossEncoder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, template string
	}{
		{"joined with special tokens", ""},
		{"rerank template", "<s>Query: {query}\nDocument: {document}\nRelevant:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeQwen3(t, []string{"yes", "no"}, tc.template)
			ref := startServeProc(t, "--model", path)
			h := startHeadProc(t, []*headWorker{startWorkerProc(t, "both", "--model", path)})
			model := servedModel(t, ref)
			const query = "Where is the cat?"
			for _, c := range []struct {
				path string
				req  map[string]any
			}{
				{"/v1/score", map[string]any{"text_1": query, "text_2": rerankDocs}},
				{"/score", map[string]any{"text_1": []string{query, "Who went to the park?"}, "text_2": rerankDocs[:2]}},
				{"/rerank", map[string]any{"query": query, "documents": rerankDocs, "top_n": 3}},
			} {
				c.req["model"] = model
				type result struct {
					Index          int
					Score          float64
					RelevanceScore float64 `json:"relevance_score"`
				}
				var got, want struct {
					Data, Results []result
					Usage         struct {
						PromptTokens int `json:"prompt_tokens"`
						TotalTokens  int `json:"total_tokens"`
					}
				}
				gc, gb := h.post(t, c.path, c.req)
				wc, wb := ref.post(t, c.path, c.req)
				if gc != http.StatusOK || wc != http.StatusOK || json.Unmarshal(gb, &got) != nil || json.Unmarshal(wb, &want) != nil {
					t.Fatalf("%s: head %d %s, serve %d %s", c.path, gc, gb, wc, wb)
				}
				g, w := append(got.Data, got.Results...), append(want.Data, want.Results...)
				if len(g) != len(w) || len(g) == 0 || got.Usage != want.Usage {
					t.Fatalf("%s: the head answered %s, serve %s", c.path, gb, wb)
				}
				for i := range g {
					if g[i].Index != w[i].Index || math.Abs(g[i].Score-w[i].Score) > 1e-5 || math.Abs(g[i].RelevanceScore-w[i].RelevanceScore) > 1e-5 {
						t.Errorf("%s result %d: the head %+v, serve %+v", c.path, i, g[i], w[i])
					}
				}
			}
			// A reranker has no embeddings, on the head as on serve.
			req := map[string]any{"model": model, "input": "a cat"}
			gc, gb := h.post(t, "/v1/embeddings", req)
			wc, wb := ref.post(t, "/v1/embeddings", req)
			if gc != http.StatusBadRequest || wc != gc || !strings.Contains(string(gb), "reranker") {
				t.Errorf("embeddings of a reranker: the head answered %d %s, serve %d %s", gc, gb, wc, wb)
			}
		})
	}
}

// TestHeadEmbedWorkerDies: an embedding sent to a worker that died (the
// head's health checks have not noticed: they are an hour apart) is sent
// once more to the other worker; every answer equals serve's.
func TestHeadEmbedWorkerDies(t *testing.T) {
	t.Parallel()
	ref := startServeProc(t)
	w1, w2 := startWorkerProc(t, "both"), startWorkerProc(t, "both")
	h := startHeadProc(t, []*headWorker{w1, w2}, "--worker-check-interval", "1h")
	headWait(t, "two healthy workers", func() bool {
		return h.metric(t, "llmserve_router_workers", `state="healthy"`) == 2
	})
	w1.kill()
	model := servedModel(t, ref)
	for i := range 4 {
		// Equal loads: round robin picks the dead worker within two calls.
		req := map[string]any{"model": model, "input": embedTexts[i:]}
		var got, want struct {
			Data []struct{ Embedding []float32 }
		}
		gc, gb := h.post(t, "/v1/embeddings", req)
		wc, wb := ref.post(t, "/v1/embeddings", req)
		if gc != http.StatusOK || wc != http.StatusOK || json.Unmarshal(gb, &got) != nil || json.Unmarshal(wb, &want) != nil || len(got.Data) != len(want.Data) {
			t.Fatalf("call %d: head %d %s, serve %d %s", i, gc, gb, wc, wb)
		}
		for k := range got.Data {
			if c := cosine(got.Data[k].Embedding, want.Data[k].Embedding); c < 0.99999 {
				t.Errorf("call %d, vector %d: cosine %v", i, k, c)
			}
		}
	}
	if n := h.metric(t, "llmserve_router_requests_total", `worker="`+w1.addr+`"`); n != 1 {
		t.Errorf("the dead worker was tried %v times, want once (then it is marked broken)", n)
	}
	if n := h.metric(t, "llmserve_router_workers", `state="unhealthy"`); n != 1 {
		t.Errorf("%v unhealthy workers after the failed call, want 1", n)
	}
}
