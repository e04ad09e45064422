package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/proto/workerpb"
)

// The binary, built once for the P/D tests.
var (
	pdBinOnce sync.Once
	pdBin     string
	pdBinErr  string
)

func pdBinary(t *testing.T) string {
	t.Helper()
	pdBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "llmserve-pd-")
		if err != nil {
			pdBinErr = err.Error()
			return
		}
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			pdBinErr = err.Error()
			return
		}
		pdBin = dir + "/llmserve"
		build := exec.Command("go", "build", "-o", pdBin, "./cmd/llmserve")
		build.Dir = strings.TrimSuffix(strings.TrimSpace(string(out)), "/go.mod")
		if out, err := build.CombinedOutput(); err != nil {
			pdBinErr = fmt.Sprintf("go build: %v\n%s", err, out)
		}
	})
	if pdBinErr != "" {
		t.Fatal(pdBinErr)
	}
	return pdBin
}

// pdProc is a `llmserve serve` child process with HTTP and gRPC on
// loopback.
type pdProc struct {
	url      string
	grpcAddr string
	cmd      *exec.Cmd
	done     chan struct{}
	out      *fuzzTail
	conn     *grpc.ClientConn
	worker   workerpb.WorkerClient
}

// freeTCPPort returns a port for a child process to listen on. A port from
// Listen(":0") is in the kernel's ephemeral range, which the many outbound
// connections of these tests draw from too: between closing the probe and
// the child's bind, one of them can take it (the child then exits with
// "address already in use"). So ports come from below the ephemeral range
// (32768 on Linux by default), each handed out once per test binary, and
// are checked free.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	for range 2000 {
		port := 20000 + int(nextPort.Add(1)%12000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	t.Fatal("no free TCP port in 20000-31999")
	return 0
}

// nextPort starts at a point of its own per process, so test binaries
// running at once mostly draw different ports.
var nextPort = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(int64(os.Getpid()%100) * 120)
	return &n
}()

func startServeProc(t *testing.T, extra ...string) *pdProc {
	t.Helper()
	return startProc(t, "serve", extra...)
}

// startProc starts `llmserve <command>` with serve's flags on free ports.
func startProc(t *testing.T, command string, extra ...string) *pdProc {
	t.Helper()
	bin := pdBinary(t)
	httpPort, grpcPort := freeTCPPort(t), freeTCPPort(t)
	p := &pdProc{
		url: "http://127.0.0.1:" + strconv.Itoa(httpPort), grpcAddr: "127.0.0.1:" + strconv.Itoa(grpcPort),
		out: &fuzzTail{max: 256 << 10}, done: make(chan struct{}),
	}
	args := append([]string{command, "--host", "127.0.0.1", "--http-port", strconv.Itoa(httpPort), "--grpc-port", strconv.Itoa(grpcPort),
		"--log-level", "warn", "--cache-dir", modelDir, "--threads", "1", "--max-num-seqs", "4"}, extra...)
	p.cmd = exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LLMSERVE_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.WaitDelay = 5 * time.Second
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if p.conn != nil {
			p.conn.Close()
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	healthy := poll(t, 60*time.Second, 50*time.Millisecond, func() bool {
		resp, err := http.Get(p.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-p.done:
			t.Fatalf("serve exited:\n%s", p.out.String())
		default:
		}
		return false
	})
	if !healthy {
		t.Fatalf("serve not healthy:\n%s", p.out.String())
	}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.conn, p.worker = conn, workerpb.NewWorkerClient(conn)
	return p
}

func (p *pdProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// post sends a JSON body and returns the status and the body.
func (p *pdProc) post(t *testing.T, path string, body map[string]any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(p.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// metric reads a counter from /metrics (summed over the lines matching
// name and, when not empty, label).
func (p *pdProc) metric(t *testing.T, name, label string) float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil || (label != "" && !strings.Contains(m[1], label)) {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

// text is the generated text of a completion or chat answer, streamed
// (SSE) or not.
func answerText(t *testing.T, body []byte) string {
	t.Helper()
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("data:")) {
		var sb strings.Builder
		for line := range strings.Lines(string(body)) {
			line = strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			if line == "" || line == "[DONE]" {
				continue
			}
			sb.WriteString(answerText(t, []byte(line)))
		}
		return sb.String()
	}
	var r struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	s := ""
	for _, c := range r.Choices {
		s += c.Text + c.Message.Content + c.Delta.Content
	}
	return s
}

// toyProxy drives a prefill and a decode server as vLLM's toy proxy
// (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py) does: the
// prefill gets the request with kv_transfer_params {do_remote_decode:
// true}, stream false and max_tokens 1 (min_tokens dropped); the decode
// gets the original request plus the kv_transfer_params the prefill
// answered. It returns the decode's answer and those params.
func toyProxy(t *testing.T, prefill, decode *pdProc, path string, req map[string]any) ([]byte, map[string]any) {
	t.Helper()
	pre := map[string]any{}
	for k, v := range req {
		pre[k] = v
	}
	pre["kv_transfer_params"] = map[string]any{
		"do_remote_decode": true, "do_remote_prefill": false,
		"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil,
	}
	pre["stream"] = false
	pre["max_tokens"] = 1
	if _, ok := pre["max_completion_tokens"]; ok {
		pre["max_completion_tokens"] = 1
	}
	delete(pre, "stream_options")
	delete(pre, "min_tokens")
	code, body := prefill.post(t, path, pre)
	if code != http.StatusOK {
		t.Fatalf("prefill: %d %s", code, body)
	}
	var pr struct {
		KVTransferParams map[string]any `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(body, &pr); err != nil {
		t.Fatal(err)
	}
	dec := map[string]any{}
	for k, v := range req {
		dec[k] = v
	}
	if pr.KVTransferParams != nil {
		dec["kv_transfer_params"] = pr.KVTransferParams
	}
	code, body = decode.post(t, path, dec)
	if code != http.StatusOK {
		t.Fatalf("decode: %d %s", code, body)
	}
	return body, pr.KVTransferParams
}

// TestPDToyProxy: two plain serve processes driven as vLLM's toy proxy
// does give the greedy output of one process, token for token; the KV
// bytes moved are the sequence's KV size (positions × bytes per
// position); the pull frees the prefill's KV.
func TestPDToyProxy(t *testing.T) {
	prefill, decode := startServeProc(t), startServeProc(t)
	ref := startServeProc(t)
	ctx := context.Background()
	info, err := prefill.worker.Info(ctx, &workerpb.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prompt := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day"
	cases := []struct {
		name, path string
		req        map[string]any
	}{
		{"completions", "/v1/completions", map[string]any{"model": info.ModelName, "prompt": prompt, "max_tokens": 40, "temperature": 0}},
		{"chat streamed", "/v1/chat/completions", map[string]any{"model": info.ModelName, "max_tokens": 40, "temperature": 0, "stream": true,
			"messages": []map[string]any{{"role": "user", "content": prompt}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := ref.post(t, tc.path, tc.req)
			if code != http.StatusOK {
				t.Fatalf("reference: %d %s", code, body)
			}
			want := answerText(t, body)
			before := decode.metric(t, "llmserve_kv_transfer_bytes_total", `direction="received"`)
			body, params := toyProxy(t, prefill, decode, tc.path, tc.req)
			if got := answerText(t, body); got != want {
				t.Fatalf("P/D answered %q, one process %q", got, want)
			}
			if params["do_remote_prefill"] != true || params["do_remote_decode"] != false || params["remote_host"] != "127.0.0.1" ||
				params["remote_port"] != float64(mustPort(t, prefill.grpcAddr)) || params["remote_engine_id"] == "" || params["remote_block_ids"] == nil {
				t.Fatalf("kv_transfer_params %v", params)
			}
			positions, kvBytes := params["kv_positions"].(float64), params["kv_bytes"].(float64)
			if positions < 10 || kvBytes != positions*float64(info.KvBytesPerPosition) {
				t.Fatalf("%v bytes for %v positions of %d bytes", kvBytes, positions, info.KvBytesPerPosition)
			}
			if got := decode.metric(t, "llmserve_kv_transfer_bytes_total", `direction="received"`) - before; got != kvBytes {
				t.Fatalf("the decode received %v bytes, want %v", got, kvBytes)
			}
			if st, err := prefill.worker.Stats(ctx, &workerpb.StatsRequest{}); err != nil || st.Leases != 0 || st.LeaseBytes != 0 {
				t.Fatalf("the prefill still holds %v (%v)", st, err)
			}
			t.Logf("%s: %v positions, %v KV bytes moved", tc.name, positions, kvBytes)
		})
	}
	if v := decode.metric(t, "llmserve_kv_transfer_recomputed_total", ""); v != 0 {
		t.Fatalf("%v recomputed", v)
	}
}

func mustPort(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// TestPDLeaseAndDeadPeer: a prefill whose KV nobody pulls frees it when
// the lease ends (leases and their bytes back to zero, the expiry
// counted); a decode whose prefill server was killed computes the prompt
// itself and answers what one process answers.
func TestPDLeaseAndDeadPeer(t *testing.T) {
	prefill := startServeProc(t, "--kv-transfer-lease", "2s")
	decode := startServeProc(t)
	ctx := context.Background()
	info, err := prefill.worker.Info(ctx, &workerpb.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]any{"model": info.ModelName, "prompt": "The little dog ran to the big tree in the park and", "max_tokens": 30, "temperature": 0}

	// Unpulled: freed at the end of the lease.
	pre := map[string]any{"kv_transfer_params": map[string]any{"do_remote_decode": true}}
	for k, v := range req {
		pre[k] = v
	}
	pre["max_tokens"] = 1
	if code, body := prefill.post(t, "/v1/completions", pre); code != http.StatusOK || !strings.Contains(string(body), `"kv_transfer_params"`) {
		t.Fatalf("prefill: %d %s", code, body)
	}
	st, err := prefill.worker.Stats(ctx, &workerpb.StatsRequest{})
	if err != nil || st.Leases != 1 || st.LeaseBytes == 0 {
		t.Fatalf("after the prefill: %v %v", st, err)
	}
	if !poll(t, time.Minute, 50*time.Millisecond, func() bool { return prefill.metric(t, "llmserve_kv_leases_expired_total", "") == 1 }) {
		t.Fatal("the unpulled lease did not expire within a minute")
	}
	if st, err = prefill.worker.Stats(ctx, &workerpb.StatsRequest{}); err != nil || st.Leases != 0 || st.LeaseBytes != 0 || st.Running != 0 || st.KvUsage != 0 {
		t.Fatalf("after the lease: %v %v", st, err)
	}

	// Dead peer: the decode recomputes.
	code, body := decode.post(t, "/v1/completions", req)
	if code != http.StatusOK {
		t.Fatalf("reference: %d %s", code, body)
	}
	want := answerText(t, body)
	code, body = prefill.post(t, "/v1/completions", pre)
	if code != http.StatusOK {
		t.Fatalf("prefill: %d %s", code, body)
	}
	var pr struct {
		KVTransferParams map[string]any `json:"kv_transfer_params"`
	}
	json.Unmarshal(body, &pr)
	prefill.kill()
	dec := map[string]any{"kv_transfer_params": pr.KVTransferParams}
	for k, v := range req {
		dec[k] = v
	}
	code, body = decode.post(t, "/v1/completions", dec)
	if code != http.StatusOK {
		t.Fatalf("decode after the prefill died: %d %s", code, body)
	}
	if got := answerText(t, body); got != want {
		t.Fatalf("recomputed %q, want %q", got, want)
	}
	if decode.metric(t, "llmserve_kv_transfer_recomputed_total", "") != 1 || decode.metric(t, "llmserve_kv_transfer_failures_total", "") != 1 {
		t.Fatal("the recompute was not counted")
	}
}

// TestKVTransferParamsBadInput: malformed kv_transfer_params are 400s
// naming the field.
func TestKVTransferParamsBadInput(t *testing.T) {
	p := startServeProc(t)
	cases := []struct {
		params map[string]any
		extra  map[string]any
		param  string
	}{
		{map[string]any{"do_remote_decode": true, "do_remote_prefill": true}, nil, "kv_transfer_params"},
		{map[string]any{"do_remote_decode": true}, map[string]any{"stream": true}, "kv_transfer_params.do_remote_decode"},
		{map[string]any{"do_remote_decode": true}, map[string]any{"n": 2}, "kv_transfer_params.do_remote_decode"},
		{map[string]any{"do_remote_prefill": true}, nil, "kv_transfer_params.remote_host"},
		{map[string]any{"do_remote_prefill": true, "remote_host": "127.0.0.1"}, nil, "kv_transfer_params.remote_port"},
		{map[string]any{"do_remote_prefill": true, "remote_host": "127.0.0.1", "remote_port": 70000}, nil, "kv_transfer_params.remote_port"},
		{map[string]any{"do_remote_prefill": true, "remote_host": "127.0.0.1", "remote_port": 1}, nil, "kv_transfer_params.transfer_id"},
		{map[string]any{"do_remote_decode": true}, map[string]any{"prompt": []string{"a", "b"}}, "kv_transfer_params"},
	}
	for i, tc := range cases {
		req := map[string]any{"model": "stories260K", "prompt": "Once upon", "max_tokens": 3, "kv_transfer_params": tc.params}
		for k, v := range tc.extra {
			req[k] = v
		}
		code, body := p.post(t, "/v1/completions", req)
		var e struct {
			Error struct {
				Param string `json:"param"`
			} `json:"error"`
		}
		json.Unmarshal(body, &e)
		if code != http.StatusBadRequest || e.Error.Param != tc.param {
			t.Errorf("case %d: %d %s, want 400 naming %s", i, code, body, tc.param)
		}
	}
}

// TestWorkerCommand: `llmserve worker` serves the worker service on
// --worker-port with its role, behind the API key; a decode worker
// refuses to prefill for others.
func TestWorkerCommand(t *testing.T) {
	port := freeTCPPort(t)
	w := startProc(t, "worker", "--role", "decode", "--worker-port", strconv.Itoa(port), "--api-key", "k1")
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := workerpb.NewWorkerClient(conn)
	ctx := context.Background()
	if _, err := c.Info(ctx, &workerpb.InfoRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Info without the key: %v", err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer k1")
	info, err := c.Info(ctx, &workerpb.InfoRequest{})
	if err != nil || info.Role != workerpb.Role_ROLE_DECODE || info.ModelName != "stories260K" {
		t.Fatalf("Info: %v %v", info, err)
	}
	if _, err := c.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 1}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Prefill on a decode worker: %v", err)
	}
	// The same service on serve's gRPC port, behind the same key.
	if _, err := w.worker.Stats(context.Background(), &workerpb.StatsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Stats without the key on the gRPC port: %v", err)
	}
	if st, err := w.worker.Stats(ctx, &workerpb.StatsRequest{}); err != nil || st.Role != workerpb.Role_ROLE_DECODE {
		t.Fatalf("Stats: %v %v", st, err)
	}
	// HTTP as serve: health, and generation behind the key.
	req, _ := http.NewRequest(http.MethodGet, w.url+"/v2/health/ready", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ready: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func TestWorkerFlags(t *testing.T) {
	bin := pdBinary(t)
	for _, args := range [][]string{
		{"--role", "leader"},
		{"--worker-port", "0"},
		{"--worker-port", "8080"},
	} {
		out, err := exec.Command(bin, append([]string{"worker", "--cache-dir", modelDir}, args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--"+strings.TrimPrefix(args[0], "--")) {
			t.Errorf("worker %v: %v %s", args, err, out)
		}
	}
}

// TestWorkerProcessesPD: a prefill worker and a decode worker (processes,
// --worker-port, an API key) split a request as a head does: Prefill on
// one, Generate with kv_source on the other, which pulls the KV from the
// first itself; the tokens are the one-process tokens.
func TestWorkerProcessesPD(t *testing.T) {
	pPort, dPort := freeTCPPort(t), freeTCPPort(t)
	startProc(t, "worker", "--role", "prefill", "--worker-port", strconv.Itoa(pPort), "--api-key", "k1")
	startProc(t, "worker", "--role", "decode", "--worker-port", strconv.Itoa(dPort), "--api-key", "k1")
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer k1")
	dial := func(port int) workerpb.WorkerClient {
		conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return workerpb.NewWorkerClient(conn)
	}
	p, d := dial(pPort), dial(dPort)
	run := func(c workerpb.WorkerClient, req *workerpb.Request) ([]int32, *workerpb.Final) {
		s, err := c.Generate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: req}})
		var out []int32
		for {
			msg, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if f := msg.GetFinal(); f != nil {
				return out, f
			}
			out = append(out, msg.GetOutput().GetTokens()...)
		}
	}
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(30 + i*7%200)
	}
	want, _ := run(p, &workerpb.Request{Prompt: prompt, MaxTokens: 20})
	pre, err := p.Prefill(ctx, &workerpb.PrefillRequest{Request: &workerpb.Request{Prompt: prompt, MaxTokens: 20}})
	if err != nil {
		t.Fatal(err)
	}
	got, final := run(d, &workerpb.Request{Prompt: prompt, MaxTokens: 20,
		KvSource: &workerpb.KVSource{Address: "127.0.0.1:" + strconv.Itoa(pPort), TransferId: pre.TransferId}})
	if !slices.Equal(got, want) {
		t.Fatalf("P/D %v, one worker %v", got, want)
	}
	if r := final.KvTransfer; r.Recomputed || r.BytesReceived != pre.KvBytes || pre.Positions != int32(len(prompt)) {
		t.Fatalf("report %v, prefill %v", r, pre)
	}
}

// TestWorkerShutdownWithWatch: a head's open WatchKVEvents stream does not
// hold a worker's shutdown for the whole grace period; the stream ends
// UNAVAILABLE and the worker exits 0.
func TestWorkerShutdownWithWatch(t *testing.T) {
	port := freeTCPPort(t)
	// A grace far longer than the test may wait: exiting within it shows
	// the watch did not hold the graceful stop.
	w := startProc(t, "worker", "--worker-port", strconv.Itoa(port), "--shutdown-timeout", "5m")
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := workerpb.NewWorkerClient(conn).WatchKVEvents(context.Background(), &workerpb.WatchKVEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := s.Recv(); err != nil || ev.Kind != workerpb.KVEventKind_KV_EVENT_KIND_SNAPSHOT_END {
		t.Fatalf("first event %v %v, want the (empty) snapshot's end", ev, err)
	}
	w.cmd.Process.Signal(syscall.SIGTERM)
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the watch ended with %v, want UNAVAILABLE", err)
	}
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		t.Fatal("the worker did not exit: the watch holds its graceful stop")
	}
	if code := w.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, w.out.String())
	}
}
