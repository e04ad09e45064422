//go:build linux

// The request fuzzer: a property test of the real server binary.
//
// TestRequestFuzzer builds ./cmd/llmserve, starts it as a child process
// (the embedded stories260K model, loopback, a free port) and sends it a few
// thousand generated requests from several goroutines at once: valid
// requests to every route, mutated field by field with extremes and wrong
// types (huge and tiny numbers, 1e999, "NaN", invalid UTF-8, lone
// surrogates, 100 KB strings, 10,000-deep nesting, duplicate keys, ...),
// bodies that are not JSON, wrong methods and wrong Content-Types, chunked
// bodies, and clients that hang up before or during the answer. It drives
// the binary rather than the in-process constructors on purpose: it tests
// what a user runs, and it survives rewrites of the packages inside.
//
// Every response must satisfy:
//
//  1. the server process is alive (checked after every batch of requests;
//     after a crash the batch's suspects are replayed one at a time on a
//     restarted server to find the request that kills it alone);
//  2. the status is 2xx or 4xx: never 5xx, never a dropped connection or a
//     request that takes longer than 30 s;
//  3. a 4xx on a /v1 route carries an OpenAI error object
//     {"error":{"message","type","param","code"}} with a non-empty message;
//  4. a 2xx body is JSON of the route's object type ("text_completion",
//     "chat.completion", "list", "model") with consistent choices and usage;
//     a 2xx stream is "data: <json>" events ending in "data: [DONE]", where
//     an error event may only come last before [DONE];
//  5. a body that encoding/json does not accept is never answered 2xx;
//  6. every /v1 answer is valid UTF-8.
//
// A request whose client hangs up on purpose is only checked for 5xx.
//
// After the run the server must have nothing running or waiting
// (vllm:num_requests_running and _waiting back to 0), and greedy
// "Once upon a time" must still give stories260k.ReferenceGreedy's text.
// The test then logs the requests sent per route, a status histogram and up
// to 20 distinct failures, each with the request body (truncated; whole
// with -fuzz.out), what was mutated, and whether it fails again when
// replayed alone. Any failure fails the test.
//
// Knobs (a flag after the package, or the environment variable):
//
//	-fuzz.seed N       LLMSERVE_FUZZ_SEED      PCG seed (default 1; "random" picks one)
//	-fuzz.duration D   LLMSERVE_FUZZ_DURATION  time spent sending requests (default 50s, 15s with -short)
//	-fuzz.requests N   LLMSERVE_FUZZ_REQUESTS  most requests (default 5000; no cap when only a duration is given)
//	-fuzz.workers N    LLMSERVE_FUZZ_WORKERS   concurrent requests (default 6)
//	-fuzz.out DIR      LLMSERVE_FUZZ_OUT       write each failing request body to DIR
//	-fuzz.v            LLMSERVE_FUZZ_VERBOSE   log every request (truncated)
//	-fuzz.bin PATH     LLMSERVE_FUZZ_BIN       run this llmserve binary instead of building one
//
// The request sequence depends only on the seed, so a failure reproduces
// with the seed the failing run prints. The server's own LLMSERVE_*
// variables are removed from its environment, so that the run depends on
// the seed alone, and it runs with --threads 1, as the in-process tests
// do, so that a machine shared with other test binaries slows it less.
//
// FuzzServerRequest is a native Go fuzz target over the same server and
// properties: the fuzzer's bytes are the body of POST /v1/completions
// (route even) or /v1/chat/completions (route odd). Without -fuzz it runs its
// seeds and testdata/fuzz/FuzzServerRequest (regression inputs) like a
// test. With -fuzz, coverage guidance sees only this process, not the
// server, so it is a mutational black-box fuzzer; the coverage-guided
// parser targets are in api/openai. Each execution is an HTTP request, so
// minimizing every new input for the default minute would take most of
// the time: the target below caps it. A make target for both:
//
//	## fuzz: the request fuzzer on the real binary for FUZZ_TIME (default 10m).
//	FUZZ_TIME ?= 10m
//	fuzz: deps
//		LLMSERVE_FUZZ_DURATION=$(FUZZ_TIME) $(if $(FUZZ_SEED),LLMSERVE_FUZZ_SEED=$(FUZZ_SEED)) \
//		  $(GO) test -count=1 -timeout 0 -run '^TestRequestFuzzer$$' -v ./tests/
//		$(GO) test -run '^$$' -fuzz '^FuzzServerRequest$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime 10s -parallel 1 ./tests/

package tests

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmserve/llmserve/models/stories260k"
)

var (
	fuzzSeedFlag     = flag.String("fuzz.seed", "", "request fuzzer: PCG seed (\"random\" picks one; env LLMSERVE_FUZZ_SEED)")
	fuzzDurationFlag = flag.Duration("fuzz.duration", 0, "request fuzzer: time spent sending requests (env LLMSERVE_FUZZ_DURATION)")
	fuzzRequestsFlag = flag.Int("fuzz.requests", 0, "request fuzzer: most requests (env LLMSERVE_FUZZ_REQUESTS)")
	fuzzWorkersFlag  = flag.Int("fuzz.workers", 0, "request fuzzer: concurrent requests (env LLMSERVE_FUZZ_WORKERS)")
	fuzzOutFlag      = flag.String("fuzz.out", "", "request fuzzer: directory for failing request bodies (env LLMSERVE_FUZZ_OUT)")
	fuzzVerboseFlag  = flag.Bool("fuzz.v", false, "request fuzzer: log every request (env LLMSERVE_FUZZ_VERBOSE)")
	fuzzBinFlag      = flag.String("fuzz.bin", "", "request fuzzer: server binary to run instead of building ./cmd/llmserve (env LLMSERVE_FUZZ_BIN)")
)

const (
	fuzzDefaultSeed     = 1
	fuzzDefaultDuration = 50 * time.Second
	fuzzShortDuration   = 15 * time.Second
	fuzzDefaultRequests = 5000
	fuzzDefaultWorkers  = 6
	fuzzBatch           = 48               // requests between two liveness checks
	fuzzTimeout         = 30 * time.Second // per request; longer is a hang
	fuzzMaxFailures     = 20               // distinct failures kept
	fuzzMaxRestarts     = 25
	fuzzModelName       = "stories260K"
	fuzzVocab           = 512 // stories260K's vocabulary
)

// fuzzConfig is the run's configuration, from flags, then the environment.
type fuzzConfig struct {
	seed     uint64
	duration time.Duration
	requests int
	workers  int
	outDir   string
	verbose  bool
}

func fuzzConfigure(t *testing.T) fuzzConfig {
	t.Helper()
	c := fuzzConfig{seed: fuzzDefaultSeed, duration: fuzzDefaultDuration, requests: fuzzDefaultRequests, workers: fuzzDefaultWorkers}
	if testing.Short() {
		c.duration = fuzzShortDuration
	}
	str := func(flagVal, env string) string {
		if flagVal != "" {
			return flagVal
		}
		return os.Getenv(env)
	}
	if s := str(*fuzzSeedFlag, "LLMSERVE_FUZZ_SEED"); s == "random" {
		c.seed = rand.Uint64()
	} else if s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("fuzz seed %q: %v", s, err)
		}
		c.seed = v
	}
	durSet := false
	if *fuzzDurationFlag > 0 {
		c.duration, durSet = *fuzzDurationFlag, true
	} else if s := os.Getenv("LLMSERVE_FUZZ_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("LLMSERVE_FUZZ_DURATION=%q: %v", s, err)
		}
		c.duration, durSet = d, true
	}
	reqSet := false
	if *fuzzRequestsFlag > 0 {
		c.requests, reqSet = *fuzzRequestsFlag, true
	} else if s := os.Getenv("LLMSERVE_FUZZ_REQUESTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LLMSERVE_FUZZ_REQUESTS=%q: %v", s, err)
		}
		c.requests, reqSet = n, true
	}
	if durSet && !reqSet {
		c.requests = int(^uint(0) >> 1)
	}
	if *fuzzWorkersFlag > 0 {
		c.workers = *fuzzWorkersFlag
	} else if s := os.Getenv("LLMSERVE_FUZZ_WORKERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LLMSERVE_FUZZ_WORKERS=%q: want a positive number", s)
		}
		c.workers = n
	}
	c.outDir = str(*fuzzOutFlag, "LLMSERVE_FUZZ_OUT")
	c.verbose = *fuzzVerboseFlag || os.Getenv("LLMSERVE_FUZZ_VERBOSE") != ""
	return c
}

func TestRequestFuzzer(t *testing.T) {
	cfg := fuzzConfigure(t)
	srv := startFuzzServer(t, buildFuzzServer(t), t.TempDir())
	client := newFuzzClient(cfg.workers)
	t.Cleanup(client.close)

	run := &fuzzRun{
		t: t, cfg: cfg, srv: srv, client: client,
		bySig: map[string]*fuzzFailure{}, routes: map[string]*fuzzRouteStats{}, statuses: map[string]int{}, params: map[string]int{},
	}
	if cfg.outDir != "" {
		if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("request fuzzer: seed %d, %s or %d requests, %d workers (reproduce: LLMSERVE_FUZZ_SEED=%d go test -run TestRequestFuzzer ./tests/)",
		cfg.seed, cfg.duration, cfg.requests, cfg.workers, cfg.seed)

	gen := newFuzzGen(cfg.seed)
	start := time.Now()
	for run.sent < cfg.requests && time.Since(start) < cfg.duration && run.restarts <= fuzzMaxRestarts {
		n := min(fuzzBatch, cfg.requests-run.sent)
		batch := make([]*fuzzReq, n)
		for i := range batch {
			batch[i] = gen.next()
		}
		run.batch(batch)
	}
	elapsed := time.Since(start)
	if run.restarts > fuzzMaxRestarts {
		run.fail("too many crashes", "run", fmt.Sprintf("the server crashed %d times; stopped early", run.crashes), nil, "")
	}

	if srv.exited(0) {
		t.Log("the server is gone: not checking it after the run")
	} else {
		run.checkIdle()
		run.checkReference()
		run.replayFailures()
	}
	run.report(elapsed)
	if err := srv.stop(); err != nil {
		t.Error(err)
	}
}

// FuzzServerRequest sends the fuzzer's bytes as the body of POST
// /v1/completions (route even) or /v1/chat/completions (route odd) to the
// child server and checks the same properties as TestRequestFuzzer.
func FuzzServerRequest(f *testing.F) {
	for _, s := range fuzzNativeSeeds {
		f.Add(s.route, []byte(s.body))
	}
	// With -fuzz, worker processes run this function too, and are killed
	// rather than cleaned up: they take the binary and the model cache of
	// the coordinator (through the environment it starts them with)
	// instead of building into temporary directories that would be left
	// behind.
	bin := buildFuzzServer(f)
	cacheDir := os.Getenv("LLMSERVE_FUZZ_CACHE")
	if cacheDir == "" {
		cacheDir = f.TempDir()
	}
	f.Setenv("LLMSERVE_FUZZ_BIN", bin)
	f.Setenv("LLMSERVE_FUZZ_CACHE", cacheDir)
	srv := startFuzzServer(f, bin, cacheDir)
	client := newFuzzClient(1)
	f.Cleanup(client.close)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		req := &fuzzReq{method: http.MethodPost, path: "/v1/completions", ctype: "application/json", body: body}
		if route%2 == 1 {
			req.path = "/v1/chat/completions"
		}
		req.route = "POST " + req.path
		if srv.exited(0) {
			crash := srv.crashSummary()
			if err := srv.restart(); err != nil {
				t.Fatalf("server died (%s) and did not restart: %v", crash, err)
			}
			t.Fatalf("server died after answering an earlier input: %s", crash)
		}
		res := client.do(srv.url, req)
		// A crash shows first as a dropped connection; give the process
		// time to exit before calling it one.
		grace := time.Duration(0)
		if res.err != nil {
			grace = 3 * time.Second
		}
		if srv.exited(grace) {
			crash := srv.crashSummary()
			if err := srv.restart(); err != nil {
				t.Fatalf("server crashed (%s) and did not restart: %v", crash, err)
			}
			client.hc.CloseIdleConnections()
			t.Fatalf("server crashed: %s\nrequest: %s", crash, req)
		}
		if kind, detail := checkFuzzResponse(req, res); kind != "" {
			t.Fatalf("%s: %s\nrequest: %s", kind, detail, req)
		}
	})
}

// fuzzNativeSeeds start FuzzServerRequest; known bugs are in
// testdata/fuzz/FuzzServerRequest.
var fuzzNativeSeeds = []struct {
	route uint8
	body  string
}{
	{0, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":4}`},
	{0, `{"model":"stories260K","prompt":["a","b"],"n":2,"max_tokens":3,"echo":true,"logprobs":2,"stream":true,"stream_options":{"include_usage":true}}`},
	{0, `{"model":"stories260K","prompt":[[1,403],[407]],"max_tokens":2,"stop":["a"],"stop_token_ids":[13],"logit_bias":{"13":-100},"seed":7,"temperature":0.8,"top_k":5,"top_p":0.9,"min_p":0.1}`},
	{1, `{"model":"stories260K","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":3,"logprobs":true,"top_logprobs":2}`},
	{1, `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"n":2}`},
	{0, `{"model":"stories260K","prompt":"a","max_tokens":3,"temperature":1e999}`},
	{1, `{"model":"stories260K","messages":[{"role":"user","content":"\ud800\udfff"}],"max_tokens":2}`},
	{0, `{"model":"stories260K","prompt":`},
}

// ---------------------------------------------------------------------------
// The child process.

// buildFuzzServer builds cmd/llmserve into a temporary directory (unless
// -fuzz.bin names a binary). Under the Makefile's environment the packages
// are cached and this is a link.
func buildFuzzServer(tb testing.TB) string {
	tb.Helper()
	if bin := cmp.Or(*fuzzBinFlag, os.Getenv("LLMSERVE_FUZZ_BIN")); bin != "" {
		return bin
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		tb.Fatal("go env GOMOD: not inside the module")
	}
	bin := filepath.Join(tb.TempDir(), "llmserve")
	build := exec.Command("go", "build", "-o", bin, "./cmd/llmserve")
	build.Dir = filepath.Dir(gomod)
	t0 := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/llmserve: %v\n%s", err, out)
	}
	tb.Logf("built %s in %s", bin, time.Since(t0).Round(time.Millisecond))
	return bin
}

// fuzzServer is the llmserve child process; restart replaces it.
type fuzzServer struct {
	bin, cacheDir string
	url           string
	cmd           *exec.Cmd
	done          chan struct{} // closed once cmd has exited and been reaped
	waitErr       error         // cmd.Wait's result; read after done
	out           *fuzzTail     // the child's stdout and stderr
	starts        int
}

func startFuzzServer(tb testing.TB, bin, cacheDir string) *fuzzServer {
	tb.Helper()
	s := &fuzzServer{bin: bin, cacheDir: cacheDir}
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

func (s *fuzzServer) start() error {
	var err error
	for range 3 { // the free port may be taken before the child binds it
		if err = s.startOnce(); err == nil {
			return nil
		}
	}
	return err
}

func (s *fuzzServer) startOnce() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	s.out = &fuzzTail{max: 256 << 10}
	cmd := exec.Command(s.bin, "serve", "--host", "127.0.0.1", "--http-port", strconv.Itoa(port),
		"--grpc-port", "0", "--log-level", "warn", "--cache-dir", s.cacheDir,
		// One ggml thread, as the in-process tests use: under make test
		// other test binaries share the cores, and spinning threads that
		// outnumber the free cores slow every step a hundredfold.
		"--threads", "1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LLMSERVE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.WaitDelay = 5 * time.Second
	// The child dies with the test binary, even when -timeout kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.cmd, s.done, s.waitErr = cmd, make(chan struct{}), nil
	s.starts++
	done := s.done
	go func() {
		s.waitErr = cmd.Wait()
		close(done)
	}()
	s.url = "http://127.0.0.1:" + strconv.Itoa(port)
	if err := s.waitReady(60 * time.Second); err != nil {
		s.kill()
		return fmt.Errorf("server did not become ready: %w\n%s", err, s.out.String())
	}
	return nil
}

// waitReady polls GET /health until it answers 200.
func (s *fuzzServer) waitReady(limit time.Duration) error {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := hc.Get(s.url + "/health"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited: %s", s.exitStatus())
		case <-deadline.C:
			return fmt.Errorf("no 200 from /health within %s", limit)
		case <-tick.C:
		}
	}
}

// exited reports whether the child has exited, waiting up to grace.
func (s *fuzzServer) exited(grace time.Duration) bool {
	select {
	case <-s.done:
		return true
	default:
	}
	if grace <= 0 {
		return false
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-s.done:
		return true
	case <-timer.C:
		return false
	}
}

// exitStatus says how the exited child ended ("signal: aborted").
func (s *fuzzServer) exitStatus() string {
	if s.waitErr == nil {
		return "exit status 0"
	}
	return s.waitErr.Error()
}

// crashLine matches the line of a dying process's output that says why.
var crashLine = regexp.MustCompile(`GGML_ASSERT|GGML_ABORT|panic:|fatal error:|SIGSEGV|SIGABRT|terminate called|Assertion|runtime error|what\(\)`)

// crashStart finds where the output of a dying process begins: the first
// line that looks like a cause after the server's last own log line
// ("time=…"; what a crash prints bypasses the logger), or -1.
func crashStart(lines []string) int {
	from := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "time=") {
			from = i
			break
		}
	}
	for _, lo := range []int{from, 0} {
		for i := lo; i < len(lines); i++ {
			if crashLine.MatchString(lines[i]) {
				return i
			}
		}
	}
	return -1
}

func (s *fuzzServer) outputLines() []string {
	return strings.Split(strings.TrimRight(s.out.String(), "\n"), "\n")
}

// crashSummary says how the exited child died: its exit status and the
// line of its output that looks like the cause.
func (s *fuzzServer) crashSummary() string {
	lines := s.outputLines()
	if i := crashStart(lines); i >= 0 {
		return s.exitStatus() + ": " + fuzzClip(strings.TrimSpace(lines[i]), 200)
	}
	return s.exitStatus()
}

// outputTail is n lines of the child's output: from where a crash begins,
// or else the last ones.
func (s *fuzzServer) outputTail(n int) string {
	lines := s.outputLines()
	start := crashStart(lines)
	if start < 0 {
		start = max(0, len(lines)-n)
	}
	return strings.Join(lines[start:min(len(lines), start+n)], "\n")
}

func (s *fuzzServer) restart() error {
	s.kill()
	return s.start()
}

// kill ends the child at once and reaps it.
func (s *fuzzServer) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
}

// stop asks the child to shut down (SIGTERM) and kills it if it does not
// within 15 s; it is an error if it had to be killed or is still there.
func (s *fuzzServer) stop() error {
	if s.cmd == nil || s.exited(0) {
		return nil
	}
	var err error
	s.cmd.Process.Signal(syscall.SIGTERM)
	if !s.exited(15 * time.Second) {
		err = errors.New("server did not exit within 15 s of SIGTERM; killed it")
		s.kill()
	}
	if s.cmd.ProcessState == nil {
		err = errors.Join(err, fmt.Errorf("server process %d was not reaped", s.cmd.Process.Pid))
	} else if e := syscall.Kill(s.cmd.Process.Pid, 0); e == nil {
		// The pid is reaped; something alive with it now is not ours
		// unless the kernel reused it, which it does not this soon.
		err = errors.Join(err, fmt.Errorf("process %d still exists after the server exited", s.cmd.Process.Pid))
	}
	return err
}

// fuzzTail keeps the last max bytes written to it.
type fuzzTail struct {
	mu  sync.Mutex
	max int
	buf []byte // guarded by mu
}

func (b *fuzzTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *fuzzTail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// ---------------------------------------------------------------------------
// Requests and responses.

// fuzzReq is one generated request.
type fuzzReq struct {
	id      int
	method  string
	path    string
	route   string // method and route pattern, for the counts
	ctype   string // Content-Type; "" sends none
	body    []byte
	notes   []string // what was generated or mutated
	timeout time.Duration
	chunked bool // send the body with Transfer-Encoding: chunked
	// The client goes away after reading hangUp bytes of the answer, or
	// hangUpAfter after sending, whichever is set.
	hangUp      int
	hangUpAfter time.Duration
}

// String shows the request as a curl command with the body clipped.
func (r *fuzzReq) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", r.id, r.method, r.path)
	if r.body != nil && r.ctype != "application/json" {
		fmt.Fprintf(&b, " Content-Type=%q", r.ctype)
	}
	if len(r.notes) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(r.notes, "; "))
	}
	if r.body != nil {
		fmt.Fprintf(&b, "\n    body (%d B): %s", len(r.body), fuzzClipBody(r.body))
	}
	return b.String()
}

// fuzzClipBody quotes a body, keeping its start and end when it is long.
func fuzzClipBody(body []byte) string {
	const head, tail = 600, 150
	if len(body) <= head+tail+40 {
		return strconv.Quote(string(body))
	}
	return strconv.Quote(string(body[:head])) + fmt.Sprintf(" …(%d B)… ", len(body)-head-tail) + strconv.Quote(string(body[len(body)-tail:]))
}

func fuzzClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

type fuzzResult struct {
	status int
	header http.Header
	body   []byte
	err    error
	dur    time.Duration
	hungUp bool // the client went away on purpose (fuzzReq.hangUp)
}

type fuzzClient struct {
	hc *http.Client
}

func newFuzzClient(workers int) *fuzzClient {
	tr := &http.Transport{
		MaxIdleConnsPerHost: workers,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	// Redirects are answers to check, not to follow.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &fuzzClient{hc: &http.Client{Transport: tr, CheckRedirect: noRedirect}}
}

func (c *fuzzClient) close() { c.hc.CloseIdleConnections() }

func (c *fuzzClient) do(base string, req *fuzzReq) *fuzzResult {
	timeout := req.timeout
	if timeout == 0 {
		timeout = fuzzTimeout
	}
	limit, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx := limit
	if req.hangUpAfter > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(limit, req.hangUpAfter)
		defer cancel()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
		if req.chunked {
			body = struct{ io.Reader }{body} // no length: sent chunked
		}
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, base+req.path, body)
	if err != nil {
		return &fuzzResult{err: fmt.Errorf("the fuzzer made a bad request: %w", err)}
	}
	if req.ctype != "" {
		hr.Header.Set("Content-Type", req.ctype)
	}
	t0 := time.Now()
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil && limit.Err() == nil {
			return &fuzzResult{hungUp: true, dur: time.Since(t0)}
		}
		return &fuzzResult{err: err, dur: time.Since(t0)}
	}
	defer resp.Body.Close()
	if req.hangUp > 0 {
		b := make([]byte, req.hangUp)
		n, _ := io.ReadFull(resp.Body, b)
		return &fuzzResult{status: resp.StatusCode, header: resp.Header, body: b[:n], hungUp: true, dur: time.Since(t0)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 512<<20))
	if ctx.Err() != nil && limit.Err() == nil {
		return &fuzzResult{status: resp.StatusCode, header: resp.Header, body: b, hungUp: true, dur: time.Since(t0)}
	}
	if err != nil {
		err = fmt.Errorf("reading the body after status %d: %w", resp.StatusCode, err)
	}
	return &fuzzResult{status: resp.StatusCode, header: resp.Header, body: b, err: err, dur: time.Since(t0)}
}

// checkFuzzResponse applies properties 2 to 5 to one response. It returns
// the kind of failure and what was wrong, or "" when the response is fine.
func checkFuzzResponse(req *fuzzReq, res *fuzzResult) (kind, detail string) {
	if res.hungUp {
		if res.status >= 500 {
			return fmt.Sprintf("status %d", res.status), "before the client hung up"
		}
		return "", ""
	}
	if res.err != nil {
		if errors.Is(res.err, context.DeadlineExceeded) {
			return "hang", fmt.Sprintf("no complete answer within %s: %v", res.dur.Round(time.Second), res.err)
		}
		return "no response", res.err.Error()
	}
	snippet := fuzzClip(strings.ReplaceAll(string(res.body), "\n", `\n`), 400)
	switch {
	case res.status >= 500:
		return fmt.Sprintf("status %d", res.status), snippet
	case res.status < 200 || (res.status >= 300 && res.status < 400):
		return fmt.Sprintf("status %d", res.status), snippet
	}
	v1 := strings.HasPrefix(req.path, "/v1/")
	// JSON is UTF-8 (RFC 8259); strict clients (Python's json.loads on
	// bytes) reject anything else, though encoding/json lets it pass.
	if v1 && !utf8.Valid(res.body) {
		i := 0
		for i < len(res.body) {
			r, n := utf8.DecodeRune(res.body[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return "invalid UTF-8", fmt.Sprintf("status %d, body not UTF-8 at byte %d: …%q…", res.status, i, res.body[max(0, i-60):min(len(res.body), i+20)])
	}
	if res.status >= 400 {
		if v1 {
			if msg := checkErrorObject(res.body); msg != "" {
				return "bad error body", fmt.Sprintf("status %d: %s: %s", res.status, msg, snippet)
			}
		}
		return "", ""
	}
	generate := req.method == http.MethodPost && (req.path == "/v1/completions" || req.path == "/v1/chat/completions")
	if generate && !json.Valid(req.body) {
		return "accepted invalid JSON", fmt.Sprintf("status %d for a body encoding/json rejects: %s", res.status, snippet)
	}
	if strings.HasPrefix(res.header.Get("Content-Type"), "text/event-stream") {
		if msg := checkSSE(req.path, res.body); msg != "" {
			return "bad stream", msg
		}
		return "", ""
	}
	if msg := checkOKBody(req, res.body); msg != "" {
		return "bad body", fmt.Sprintf("status %d: %s: %s", res.status, msg, snippet)
	}
	return "", ""
}

// checkErrorObject checks {"error":{"message","type","param","code"}}.
func checkErrorObject(body []byte) string {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "not a JSON object: " + err.Error()
	}
	raw, ok := top["error"]
	if !ok {
		return `no "error" key`
	}
	return checkErrorFields(raw)
}

func checkErrorFields(raw json.RawMessage) string {
	var e map[string]json.RawMessage
	if err := json.Unmarshal(raw, &e); err != nil || e == nil {
		return `"error" is not an object`
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			return fmt.Sprintf("error object has no %q", k)
		}
	}
	var msg, typ string
	if json.Unmarshal(e["message"], &msg) != nil || msg == "" {
		return "error.message is not a non-empty string"
	}
	if json.Unmarshal(e["type"], &typ) != nil || typ == "" {
		return "error.type is not a non-empty string"
	}
	var param *string
	if json.Unmarshal(e["param"], &param) != nil {
		return "error.param is neither a string nor null"
	}
	return ""
}

// checkOKBody checks a 2xx JSON body against its route's schema.
func checkOKBody(req *fuzzReq, body []byte) string {
	var obj map[string]json.RawMessage
	switch {
	case req.path == "/health" || req.path == "/metrics":
		return ""
	case json.Unmarshal(body, &obj) != nil || obj == nil:
		return "not a JSON object"
	}
	var object string
	json.Unmarshal(obj["object"], &object)
	want := ""
	switch {
	case req.path == "/v1/completions":
		want = "text_completion"
	case req.path == "/v1/chat/completions":
		want = "chat.completion"
	case req.path == "/v1/models":
		want = "list"
	case strings.HasPrefix(req.path, "/v1/models/"):
		want = "model"
	}
	if want != "" && object != want {
		return fmt.Sprintf("object %q, want %q", object, want)
	}
	if want != "text_completion" && want != "chat.completion" {
		return ""
	}
	var resp struct {
		Choices []struct {
			Index        *int    `json:"index"`
			Text         *string `json:"text"`
			FinishReason *string `json:"finish_reason"`
			Message      *struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return "does not decode: " + err.Error()
	}
	if len(resp.Choices) == 0 {
		return "no choices"
	}
	seen := map[int]bool{}
	for i, c := range resp.Choices {
		switch {
		case c.Index == nil:
			return fmt.Sprintf("choices[%d] has no index", i)
		case seen[*c.Index]:
			return fmt.Sprintf("choice index %d twice", *c.Index)
		case c.FinishReason == nil || *c.FinishReason == "":
			return fmt.Sprintf("choices[%d] has no finish_reason", i)
		case want == "text_completion" && c.Text == nil:
			return fmt.Sprintf("choices[%d] has no text", i)
		case want == "chat.completion" && (c.Message == nil || c.Message.Role != "assistant"):
			return fmt.Sprintf("choices[%d] has no assistant message", i)
		}
		seen[*c.Index] = true
	}
	if u := resp.Usage; u == nil {
		return "no usage"
	} else if u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		return fmt.Sprintf("usage total_tokens %d != prompt %d + completion %d", u.TotalTokens, u.PromptTokens, u.CompletionTokens)
	}
	return ""
}

// checkSSE checks a streamed answer: "data: <json>\n\n" events, an error
// event at most as the last before "data: [DONE]".
func checkSSE(path string, body []byte) string {
	const done = "data: [DONE]"
	text := string(body)
	if !strings.HasSuffix(text, done+"\n\n") {
		return fmt.Sprintf("does not end with %q: …%q", done, text[max(0, len(text)-200):])
	}
	events := strings.Split(strings.TrimSuffix(text, "\n\n"), "\n\n")
	want := "text_completion"
	if path == "/v1/chat/completions" {
		want = "chat.completion.chunk"
	}
	for i, ev := range events[:len(events)-1] {
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			return fmt.Sprintf("event %d is not one data line: %q", i, fuzzClip(ev, 200))
		}
		if payload == "[DONE]" {
			return fmt.Sprintf("[DONE] at event %d of %d", i, len(events))
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(payload), &obj); err != nil || obj == nil {
			return fmt.Sprintf("event %d is not a JSON object: %q", i, fuzzClip(payload, 200))
		}
		if raw, isErr := obj["error"]; isErr {
			if i != len(events)-2 {
				return fmt.Sprintf("error event %d is not the last before [DONE] (%d events): %s", i, len(events), fuzzClip(payload, 200))
			}
			if msg := checkErrorFields(raw); msg != "" {
				return fmt.Sprintf("error event: %s: %s", msg, fuzzClip(payload, 200))
			}
			continue
		}
		var object string
		json.Unmarshal(obj["object"], &object)
		if object != want {
			return fmt.Sprintf("event %d has object %q, want %q: %s", i, object, want, fuzzClip(payload, 200))
		}
		var choices []json.RawMessage
		if err := json.Unmarshal(obj["choices"], &choices); err != nil {
			return fmt.Sprintf("event %d has no choices array: %s", i, fuzzClip(payload, 200))
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// The run.

type fuzzFailure struct {
	kind, route, detail string
	req                 *fuzzReq
	serverLog           string
	count               int
	replay              string // the result of sending req again, alone
}

type fuzzRouteStats struct {
	sent, ok, client, server, noResponse, hungUp, streams int
}

type fuzzRun struct {
	t      *testing.T
	cfg    fuzzConfig
	srv    *fuzzServer
	client *fuzzClient

	sent, crashes, restarts int
	failures                []*fuzzFailure
	bySig                   map[string]*fuzzFailure
	unrecorded              int // failures beyond fuzzMaxFailures distinct ones
	routes                  map[string]*fuzzRouteStats
	statuses                map[string]int
	slowest                 []fuzzTimed    // the slowest answers, slowest first
	params                  map[string]int // error.param of the 4xx answers
	hangNote                string         // hangDiagnosis for the batch being recorded
}

type fuzzTimed struct {
	dur    time.Duration
	status int
	req    *fuzzReq
}

// batch sends the requests concurrently, then checks that the server
// lived through them. If it died, the requests that got no answer are
// replayed one at a time on a restarted server to find the one that kills
// it alone.
func (r *fuzzRun) batch(batch []*fuzzReq) {
	results := make([]*fuzzResult, len(batch))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(r.cfg.workers, len(batch)) {
		wg.Go(func() {
			for i := range work {
				results[i] = r.client.do(r.srv.url, batch[i])
			}
		})
	}
	for i := range batch {
		if r.cfg.verbose {
			r.t.Logf("send %s", batch[i])
		}
		work <- i
	}
	close(work)
	wg.Wait()
	r.sent += len(batch)

	var suspects []int // requests without a whole answer
	hung, dropped := -1, false
	for i, res := range results {
		if res.err != nil || res.hungUp {
			suspects = append(suspects, i)
		}
		if res.err != nil {
			dropped = true
			if hung < 0 && errors.Is(res.err, context.DeadlineExceeded) {
				hung = i
			}
		}
	}
	// A crash shows first as dropped connections; give the process time
	// to exit before looking.
	grace := time.Duration(0)
	if dropped {
		grace = 3 * time.Second
	}
	if !r.srv.exited(grace) {
		r.hangNote = ""
		if hung >= 0 {
			r.hangNote = r.hangDiagnosis()
		}
		for i, res := range results {
			r.record(batch[i], res)
		}
		if hung >= 0 && !r.healthy() {
			r.fail("unresponsive", "run", "/health does not answer after requests hung; restarting the server", batch[hung], r.srv.outputTail(20))
			r.restart()
		}
		return
	}

	// The server died during the batch.
	r.crashes++
	crash, tail := r.srv.crashSummary(), r.srv.outputTail(25)
	if len(suspects) == 0 {
		suspects = make([]int, len(batch))
		for i := range suspects {
			suspects[i] = i
		}
	}
	isSuspect := map[int]bool{}
	for _, i := range suspects {
		isSuspect[i] = true
	}
	for i, res := range results {
		if !isSuspect[i] {
			r.record(batch[i], res)
		}
	}
	if !r.restart() {
		return
	}
	found := false
	for _, i := range suspects {
		req := batch[i]
		res := r.client.do(r.srv.url, req)
		grace := 300 * time.Millisecond
		if res.err != nil {
			grace = 3 * time.Second
		}
		if r.srv.exited(grace) {
			found = true
			r.count(req, res)
			r.fail("crash", req.route, r.srv.crashSummary(), req, r.srv.outputTail(25))
			if !r.restart() {
				return
			}
			continue
		}
		r.record(req, res)
	}
	if !found {
		var b strings.Builder
		fmt.Fprintf(&b, "%s; no request of the batch crashes it alone; the %d without an answer were:", crash, len(suspects))
		for _, i := range suspects[:min(len(suspects), 8)] {
			fmt.Fprintf(&b, "\n  %s", batch[i])
		}
		r.fail("crash (not reproduced alone)", "run", b.String(), batch[suspects[0]], tail)
	}
}

// restart starts a new server after a crash or hang; false (and a test
// error) when it cannot.
func (r *fuzzRun) restart() bool {
	r.restarts++
	r.client.hc.CloseIdleConnections()
	if err := r.srv.restart(); err != nil {
		r.t.Errorf("restarting the server: %v", err)
		r.restarts = fuzzMaxRestarts + 1
		return false
	}
	return true
}

func (r *fuzzRun) healthy() bool {
	res := r.client.do(r.srv.url, &fuzzReq{method: http.MethodGet, path: "/health", timeout: 5 * time.Second})
	return res.err == nil && res.status == http.StatusOK
}

// count adds a response to the statistics.
func (r *fuzzRun) count(req *fuzzReq, res *fuzzResult) {
	st := r.routes[req.route]
	if st == nil {
		st = &fuzzRouteStats{}
		r.routes[req.route] = st
	}
	st.sent++
	if res.hungUp {
		st.hungUp++
		r.statuses["client hung up"]++
		return
	}
	if res.err == nil {
		r.slowest = append(r.slowest, fuzzTimed{res.dur, res.status, req})
		slices.SortFunc(r.slowest, func(a, b fuzzTimed) int { return int(b.dur - a.dur) })
		r.slowest = r.slowest[:min(len(r.slowest), 5)]
	}
	switch {
	case res.err != nil:
		st.noResponse++
		r.statuses["no response"]++
		return
	case res.status >= 500:
		st.server++
	case res.status >= 400:
		st.client++
		var e struct {
			Error struct {
				Param *string `json:"param"`
			} `json:"error"`
		}
		if json.Unmarshal(res.body, &e) == nil && e.Error.Param != nil {
			r.params[fuzzDigits.ReplaceAllString(*e.Error.Param, "#")]++
		} else {
			r.params["(none)"]++
		}
	case res.status >= 200 && res.status < 300:
		st.ok++
		if strings.HasPrefix(res.header.Get("Content-Type"), "text/event-stream") {
			st.streams++
		}
	}
	r.statuses[strconv.Itoa(res.status)]++
}

// record counts a response and checks it.
func (r *fuzzRun) record(req *fuzzReq, res *fuzzResult) {
	r.count(req, res)
	if kind, detail := checkFuzzResponse(req, res); kind != "" {
		if kind == "hang" {
			detail += r.hangNote
		}
		r.fail(kind, req.route, detail, req, "")
	}
}

var fuzzDigits = regexp.MustCompile(`[0-9]+`)

// fail records a failure, once per kind, route and message shape.
func (r *fuzzRun) fail(kind, route, detail string, req *fuzzReq, serverLog string) {
	sig := kind + "|" + route + "|" + fuzzClip(fuzzDigits.ReplaceAllString(detail, "#"), 100)
	if f := r.bySig[sig]; f != nil {
		f.count++
		return
	}
	if len(r.failures) >= fuzzMaxFailures {
		r.unrecorded++
		return
	}
	f := &fuzzFailure{kind: kind, route: route, detail: detail, req: req, serverLog: serverLog, count: 1}
	r.bySig[sig] = f
	r.failures = append(r.failures, f)
	if r.cfg.outDir != "" && req != nil && req.body != nil {
		name := filepath.Join(r.cfg.outDir, fmt.Sprintf("failure-%02d.body", len(r.failures)))
		if err := os.WriteFile(name, req.body, 0o644); err != nil {
			r.t.Errorf("writing %s: %v", name, err)
		}
	}
}

// fuzzGauges are the scheduler's gauges checkIdle and the hang reports
// read from /metrics.
var fuzzGauges = []string{"vllm:num_requests_running", "vllm:num_requests_waiting"}

// gauges reads fuzzGauges' lines from /metrics (nil if it has none).
func (r *fuzzRun) gauges() (map[string]float64, error) {
	res := r.client.do(r.srv.url, &fuzzReq{method: http.MethodGet, path: "/metrics", timeout: 5 * time.Second})
	if res.err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", res.err)
	}
	if res.status != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", res.status)
	}
	var out map[string]float64
	for _, line := range strings.Split(string(res.body), "\n") {
		for _, name := range fuzzGauges {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
				continue
			}
			fields := strings.Fields(line)
			if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
				if out == nil {
					out = map[string]float64{}
				}
				out[name] += v
			}
		}
	}
	return out, nil
}

// hangDiagnosis says what the server and the machine were doing when a
// request hung, to tell a stalled scheduler from a machine that is busy
// with other work.
func (r *fuzzRun) hangDiagnosis() string {
	var b strings.Builder
	if g, err := r.gauges(); err != nil {
		fmt.Fprintf(&b, "; then %v", err)
	} else {
		for _, name := range fuzzGauges {
			fmt.Fprintf(&b, "; then %s %g", name, g[name])
		}
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&b, "; load average %s on %d CPUs", strings.Join(strings.Fields(string(load))[:3], " "), runtime.NumCPU())
	}
	return b.String()
}

// checkIdle checks that every request has left the scheduler.
func (r *fuzzRun) checkIdle() {
	busy := ""
	// The poll ends (idle or not) on a failed scrape or without gauges.
	idle := poll(r.t, 10*time.Second, 100*time.Millisecond, func() bool {
		g, err := r.gauges()
		if err != nil {
			r.fail("metrics", "GET /metrics", "after the run: "+err.Error(), nil, "")
			return true
		}
		if g == nil {
			r.t.Logf("no %s in /metrics; not checking that the server is idle", strings.Join(fuzzGauges, ", "))
			return true
		}
		busy = ""
		for _, name := range fuzzGauges {
			if g[name] != 0 {
				busy += fmt.Sprintf(" %s %g", name, g[name])
			}
		}
		return busy == ""
	})
	if !idle {
		r.fail("not idle", "GET /metrics", "10 s after the last request:"+busy, nil, "")
	}
}

// checkReference checks that greedy decoding still gives llama.cpp's text.
func (r *fuzzRun) checkReference() {
	ref := stories260k.ReferenceGreedy()
	body, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": ref.Prompt, "max_tokens": len(ref.GeneratedTokens), "temperature": 0})
	req := &fuzzReq{id: -1, method: http.MethodPost, path: "/v1/completions", route: "POST /v1/completions", ctype: "application/json", body: body, notes: []string{"reference greedy request"}}
	res := r.client.do(r.srv.url, req)
	if res.err != nil || res.status != http.StatusOK {
		r.fail("reference", req.route, fmt.Sprintf("after the run: %v, status %d: %s", res.err, res.status, fuzzClip(string(res.body), 300)), req, "")
		return
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(res.body, &out); err != nil || len(out.Choices) != 1 {
		r.fail("reference", req.route, fmt.Sprintf("after the run: bad body: %s", fuzzClip(string(res.body), 300)), req, "")
		return
	}
	if got := out.Choices[0].Text; got != ref.GeneratedText {
		r.fail("reference", req.route, fmt.Sprintf("after the run (server started %d times) greedy text differs from llama.cpp's:\n got  %q\n want %q", r.srv.starts, got, ref.GeneratedText), req, "")
	}
}

// replayFailures sends each failing request again, alone, and notes the
// outcome (crashes were replayed alone already).
func (r *fuzzRun) replayFailures() {
	start := time.Now()
	for _, f := range r.failures {
		if f.req == nil || strings.HasPrefix(f.kind, "crash") || f.kind == "reference" {
			continue
		}
		if time.Since(start) > time.Minute {
			f.replay = "not replayed: replays took a minute already"
			continue
		}
		res := r.client.do(r.srv.url, f.req)
		if r.srv.exited(300 * time.Millisecond) {
			f.replay = "alone it crashed the server: " + r.srv.crashSummary()
			r.crashes++
			if !r.restart() {
				return
			}
			continue
		}
		if kind, detail := checkFuzzResponse(f.req, res); kind != "" {
			f.replay = fmt.Sprintf("fails alone too (%s: %s)", kind, fuzzClip(detail, 120))
		} else {
			f.replay = fmt.Sprintf("passes alone (status %d): depends on load", res.status)
		}
	}
}

func (r *fuzzRun) report(elapsed time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "request fuzzer, seed %d: %d requests in %s (%.0f/s), server started %d times, %d crashes\n",
		r.cfg.seed, r.sent, elapsed.Round(time.Millisecond), float64(r.sent)/elapsed.Seconds(), r.srv.starts, r.crashes)
	routes := make([]string, 0, len(r.routes))
	for k := range r.routes {
		routes = append(routes, k)
	}
	sort.Strings(routes)
	fmt.Fprintf(&b, "  %-34s %6s %6s %6s %6s %6s %6s %8s\n", "route", "sent", "2xx", "4xx", "5xx", "none", "hungup", "streams")
	for _, k := range routes {
		s := r.routes[k]
		fmt.Fprintf(&b, "  %-34s %6d %6d %6d %6d %6d %6d %8d\n", k, s.sent, s.ok, s.client, s.server, s.noResponse, s.hungUp, s.streams)
	}
	codes := make([]string, 0, len(r.statuses))
	for k := range r.statuses {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	b.WriteString("  statuses:")
	for _, k := range codes {
		fmt.Fprintf(&b, " %s×%d", k, r.statuses[k])
	}
	params := make([]string, 0, len(r.params))
	for k := range r.params {
		params = append(params, k)
	}
	sort.Slice(params, func(i, j int) bool { return r.params[params[i]] > r.params[params[j]] })
	b.WriteString("\n  4xx by error.param:")
	for _, k := range params[:min(len(params), 20)] {
		fmt.Fprintf(&b, " %q×%d", fuzzClip(k, 40), r.params[k])
	}
	b.WriteString("\n  slowest answers:")
	for _, s := range r.slowest {
		fmt.Fprintf(&b, "\n    %s status %d: %s", s.dur.Round(time.Millisecond), s.status, fuzzClip(s.req.String(), 300))
	}
	r.t.Log(b.String())

	if len(r.failures) == 0 {
		return
	}
	b.Reset()
	fmt.Fprintf(&b, "%d distinct failures (seed %d; reproduce: LLMSERVE_FUZZ_SEED=%d go test -count=1 -run TestRequestFuzzer -v ./tests/)", len(r.failures), r.cfg.seed, r.cfg.seed)
	if r.unrecorded > 0 {
		fmt.Fprintf(&b, ", and %d more beyond the first %d", r.unrecorded, fuzzMaxFailures)
	}
	for i, f := range r.failures {
		fmt.Fprintf(&b, "\n\n%d. %s on %s (×%d): %s", i+1, f.kind, f.route, f.count, f.detail)
		if f.req != nil {
			fmt.Fprintf(&b, "\n   request %s", f.req)
		}
		if f.replay != "" {
			fmt.Fprintf(&b, "\n   replayed alone: %s", f.replay)
		}
		if f.serverLog != "" {
			fmt.Fprintf(&b, "\n   server output:\n      %s", strings.ReplaceAll(f.serverLog, "\n", "\n      "))
		}
	}
	if r.cfg.outDir != "" {
		fmt.Fprintf(&b, "\n\nbodies in %s (curl -sS --data-binary @FILE -H 'Content-Type: application/json' http://127.0.0.1:8080/v1/...)", r.cfg.outDir)
	}
	r.t.Error(b.String())
}

// ---------------------------------------------------------------------------
// The generator: valid requests, mutated.

type fuzzGen struct {
	r *rand.Rand
	n int // requests generated
}

func newFuzzGen(seed uint64) *fuzzGen {
	return &fuzzGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *fuzzGen) intn(n int) int           { return g.r.IntN(n) }
func (g *fuzzGen) chance(p float64) bool    { return g.r.Float64() < p }
func fuzzPick[T any](g *fuzzGen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

var (
	fuzzCommonFields = []string{"model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed",
		"stop", "stop_token_ids", "n", "presence_penalty", "frequency_penalty", "repetition_penalty",
		"logit_bias", "stream", "stream_options", "ignore_eos", "min_tokens", "cache_salt", "priority",
		"user", "return_tokens_as_token_ids"}
	fuzzChatFields       = slices.Concat(fuzzCommonFields, []string{"messages", "max_completion_tokens", "logprobs", "top_logprobs"})
	fuzzCompletionFields = slices.Concat(fuzzCommonFields, []string{"prompt", "logprobs", "echo"})
	// Fields of the other route, OpenAI fields the server does not know,
	// and odd keys.
	fuzzOtherFields = []string{"messages", "prompt", "echo", "top_logprobs", "max_completion_tokens", "suffix",
		"best_of", "tools", "tool_choice", "functions", "response_format", "guided_json", "foo", "", "\u0000", "\u00ff"}

	// Raw JSON numbers: zero, signs, the float32 and float64 edges,
	// subnormals, the int32 and int64 edges, and overflow.
	fuzzNumbers = []string{"0", "-0", "0.0", "-1", "1", "2", "0.5", "-0.5", "1e-45", "1e-40", "1.2e-38",
		"1e-38", "1e-5", "9.99e-6", "1e39", "-1e39", "1e308", "-1e308", "4.9e-324", "3.4028235e38", "3.5e38",
		"2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295", "4294967296",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "18446744073709551616",
		"1e999", "-1e999", "1E2", "100", "101", "-100", "-101", "20", "21", "64", "65", "128", "511", "512",
		"513", "100000", "1.0000001", "0.1e1"}
	// Not JSON at all where a number goes.
	fuzzBadNumbers = []string{"NaN", "Infinity", "-Infinity", "01", "+1", ".5", "1.", "0x10", "1e", "--1", "nan", "inf"}
	// Token ids around stories260K's vocabulary.
	fuzzTokens = []string{"0", "1", "2", "3", "13", "100", "261", "378", "403", "407", "511", "512", "513",
		"-1", "2147483647", "2147483648", "1e39", "1.5", "-0", "9223372036854775807"}
)

// next makes the next request.
func (g *fuzzGen) next() *fuzzReq {
	g.n++
	var req *fuzzReq
	switch g.n {
	case 8:
		req = g.huge(1<<20, "1 MB prompt")
	case 16:
		req = g.huge(17<<20, "17 MiB body, over the 16 MiB limit")
	default:
		switch k := g.intn(100); {
		case k < 42:
			req = g.generate(false)
		case k < 84:
			req = g.generate(true)
		case k < 92:
			req = g.get()
		default:
			req = g.junk()
		}
	}
	req.id = g.n
	return req
}

// huge is a completion request whose prompt is size bytes of text.
func (g *fuzzGen) huge(size int, note string) *fuzzReq {
	const unit = "Once upon a time there was a little girl. "
	prompt := strings.Repeat(unit, size/len(unit)+1)[:size]
	body := fmt.Appendf(nil, `{"model":"stories260K","prompt":%s,"max_tokens":4}`, fuzzString(prompt))
	return &fuzzReq{method: http.MethodPost, path: "/v1/completions", route: "POST /v1/completions",
		ctype: "application/json", body: body, notes: []string{note}, timeout: 2 * time.Minute}
}

// generate makes a chat or completion request: valid fields, then some
// mutated, then sometimes the body or headers broken.
func (g *fuzzGen) generate(chat bool) *fuzzReq {
	req := &fuzzReq{method: http.MethodPost, path: "/v1/completions", ctype: "application/json"}
	fields := fuzzCompletionFields
	if chat {
		req.path, fields = "/v1/chat/completions", fuzzChatFields
	}
	req.route = "POST " + req.path

	var obj fuzzObject
	if g.chance(0.95) { // "model" is required: without it, a 400
		obj = obj.set("model", fuzzString(fuzzModelName))
	}
	if chat {
		if g.chance(0.7) {
			obj = obj.set("messages", []byte(`[{"role":"user","content":`+string(fuzzString(g.shortText()))+`}]`))
		} else {
			obj = obj.set("messages", g.messages())
		}
	} else {
		if g.chance(0.7) {
			obj = obj.set("prompt", fuzzString(g.shortText()))
		} else {
			obj = obj.set("prompt", g.prompt())
		}
	}
	if g.chance(0.9) {
		key := "max_tokens"
		if chat && g.chance(0.3) {
			key = "max_completion_tokens"
		}
		obj = obj.set(key, strconv.AppendInt(nil, int64(1+g.intn(16)), 10))
	}
	// Valid values for a random subset of the other fields.
	for _, f := range fields {
		if f != "messages" && f != "prompt" && g.chance(0.12) {
			obj = obj.set(f, g.validValue(f, chat))
			if f == "stream_options" {
				obj = obj.set("stream", []byte("true"))
			}
		}
	}
	// Mutations: each sets a field to an extreme or an edge value,
	// deletes it, or adds it twice.
	for range fuzzPick(g, 0, 0, 0, 1, 1, 1, 2, 2, 3, 5) {
		var note string
		obj, note = g.mutate(obj, fields, chat)
		req.notes = append(req.notes, note)
	}
	// Some clients go away mid-answer; the server must free what they held.
	if g.chance(0.04) {
		obj = obj.del("max_completion_tokens").set("max_tokens", []byte("256")).set("ignore_eos", []byte("true"))
		if g.chance(0.7) {
			obj = obj.set("stream", []byte("true"))
		}
		if g.chance(0.5) {
			req.hangUp = fuzzPick(g, 1, 200, 2000)
			req.notes = append(req.notes, fmt.Sprintf("client hangs up after %d B", req.hangUp))
		} else {
			req.hangUpAfter = fuzzPick(g, time.Millisecond, 10*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond)
			req.notes = append(req.notes, fmt.Sprintf("client hangs up after %s", req.hangUpAfter))
		}
	}
	obj, note, heavy := obj.limitCost(g)
	if note != "" {
		req.notes = append(req.notes, note)
	}
	if heavy {
		req.timeout = 2 * time.Minute
	}
	req.body = obj.encode()

	if g.chance(0.08) {
		var note string
		req.body, note = g.breakBody(req.body)
		req.notes = append(req.notes, note)
	}
	if g.chance(0.06) {
		req.ctype = fuzzPick(g, "", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-16",
			"multipart/form-data; boundary=x", "application/xml", "*/*", "application/json; charset=utf-8", "application/jsonx")
		req.notes = append(req.notes, fmt.Sprintf("Content-Type %q", req.ctype))
	}
	if g.chance(0.03) {
		req.chunked = true
		req.notes = append(req.notes, "chunked")
	}
	if g.chance(0.02) {
		req.method = fuzzPick(g, http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch)
		req.route = req.method + " " + req.path
		if req.method == http.MethodGet {
			req.body = nil
		}
	}
	return req
}

// get is a request to one of the GET routes.
func (g *fuzzGen) get() *fuzzReq {
	req := &fuzzReq{method: http.MethodGet}
	switch g.intn(8) {
	case 0, 1:
		req.path, req.route = "/v1/models", "GET /v1/models"
	case 2, 3:
		id := fuzzPick(g, fuzzModelName, fuzzModelName, "nope", "STORIES260K", "stories260K.gguf", "..", "a/b",
			"\x00", "\xff\xfe", "\U0001f999", "%", " ", strings.Repeat("x", 10000), "stories260K/..")
		req.path, req.route = "/v1/models/"+url.PathEscape(id), "GET /v1/models/{id}"
		req.notes = []string{fmt.Sprintf("id %q", fuzzClip(id, 40))}
	case 4:
		req.path = "/health"
	case 5:
		req.path = fuzzPick(g, "/v2/health/live", "/v2/health/ready")
	case 6:
		req.path = "/metrics"
	default:
		req.path = fuzzPick(g, "/v1/nope", "/v1/", "/v1/completions/", "/v1//models", "/v1/chat/completions?x=%ff", "/v1/models?limit=-1")
		req.route = "GET (unknown and odd paths)"
	}
	if req.route == "" {
		req.route = "GET " + req.path
	}
	if g.chance(0.1) {
		req.method = fuzzPick(g, http.MethodPost, http.MethodDelete)
		req.route = req.method + " " + strings.TrimPrefix(req.route, "GET ")
		req.body = []byte(`{}`)
		req.ctype = "application/json"
	}
	return req
}

// junk is a POST whose body is not a request at all.
func (g *fuzzGen) junk() *fuzzReq {
	req := &fuzzReq{method: http.MethodPost, path: fuzzPick(g, "/v1/completions", "/v1/chat/completions"), ctype: "application/json"}
	req.route = "POST " + req.path
	switch g.intn(4) {
	case 0:
		req.body = []byte(fuzzPick(g, "", " ", "hello", "null", "true", "0", "-1", "1e999", `"x"`, "[]", "[{}]", "{}",
			"{", "}", "[", `{"`, `{"model":"stories260K","prompt"`, `{"model":"stories260K","prompt":`, `{"model":"stories260K","prompt":"a"`, `{"model":"stories260K","prompt":"a",}`, `{,}`, `{"a" "b"}`,
			"<xml/>", "prompt=a&max_tokens=3", "\x00", "\xff\xfe{}", "\xef\xbb\xbf{}", `{"model":"stories260K","prompt":"a"}{"prompt":"b"}`,
			`{"model":"stories260K","prompt":"a"} x`, `{"model":"stories260K","prompt":"a"}]`, `{'prompt': 'a'}`, `{prompt: "a"}`, `{"model":"stories260K","prompt":"\x"}`, `{"model":"stories260K","prompt":"\u12"}`))
		req.notes = []string{"not a request"}
	case 1:
		depth := fuzzPick(g, 100, 10000, 10001, 100000)
		open, close := "[", "]"
		if g.chance(0.5) {
			open, close = `{"a":`, "}"
		}
		req.body = []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
		req.notes = []string{fmt.Sprintf("body nested %d deep", depth)}
	case 2:
		req.body = make([]byte, 1+g.intn(4096))
		for i := range req.body {
			req.body[i] = byte(g.r.Uint32())
		}
		req.notes = []string{"random bytes"}
	default:
		req.body = []byte(`[` + fuzzPick(g, `{"model":"stories260K","prompt":"a","max_tokens":2}`, `{"model":"stories260K","messages":[{"role":"user","content":"a"}]}`) + `]`)
		req.notes = []string{"request wrapped in an array"}
	}
	return req
}

// breakBody breaks a request body's JSON.
func (g *fuzzGen) breakBody(body []byte) ([]byte, string) {
	switch g.intn(7) {
	case 0:
		n := g.intn(len(body))
		return body[:n], fmt.Sprintf("truncated to %d B", n)
	case 1:
		i := g.intn(len(body) + 1)
		c := fuzzPick(g, byte(0xff), 0, '{', '"', '\\', ',', ']', '\n')
		return slices.Insert(slices.Clone(body), i, c), fmt.Sprintf("byte %#x inserted at %d", c, i)
	case 2:
		s := fuzzPick(g, " x", "}", "{}", "\n\n", ",", `{"model":"stories260K","prompt":"b"}`)
		return append(body, s...), fmt.Sprintf("%q appended", s)
	case 3:
		return append([]byte("\xef\xbb\xbf"), body...), "UTF-8 BOM prepended"
	case 4:
		return append(append([]byte("["), body...), ']'), "wrapped in an array"
	case 5:
		i := g.intn(len(body))
		b := slices.Clone(body)
		b[i] ^= byte(1 << g.intn(8))
		return b, fmt.Sprintf("bit flipped at %d", i)
	default:
		return []byte(strings.ReplaceAll(string(body), `"`, `'`)), "single quotes"
	}
}

// mutate changes one field of obj.
func (g *fuzzGen) mutate(obj fuzzObject, fields []string, chat bool) (fuzzObject, string) {
	f := fuzzPick(g, fields...)
	if g.chance(0.12) {
		f = fuzzPick(g, fuzzOtherFields...)
	}
	var v []byte
	switch k := g.intn(20); {
	case k < 9:
		v = g.extreme(0)
	case k < 14:
		v = g.fieldValue(f, chat)
	case k == 14:
		return obj.del(f), "del " + f
	case k == 15:
		v = g.extreme(0)
		return append(obj, fuzzKV{key: f, val: v}), fmt.Sprintf("dup %s=%s", f, fuzzNote(v))
	case k == 16:
		// encoding/json matches keys without regard to case.
		v = g.fieldValue(f, chat)
		key := strings.ToUpper(f)
		return obj.set(key, v), fmt.Sprintf("%s=%s", key, fuzzNote(v))
	case k == 17:
		v = []byte("null")
	default:
		v = g.nested(f, chat)
	}
	return obj.set(f, v), fmt.Sprintf("%s=%s", f, fuzzNote(v))
}

func fuzzNote(v []byte) string {
	if len(v) > 48 {
		return fmt.Sprintf("%q…(%d B)", v[:40], len(v))
	}
	return string(v)
}

// validValue is a value the API documents as valid for field f, edges
// included.
func (g *fuzzGen) validValue(f string, chat bool) []byte {
	num := func(xs ...string) []byte { return []byte(fuzzPick(g, xs...)) }
	switch f {
	case "model":
		return fuzzString(fuzzModelName)
	case "max_tokens", "max_completion_tokens":
		return strconv.AppendInt(nil, int64(1+g.intn(16)), 10)
	case "min_tokens":
		return num("0", "1", "2", "4")
	case "temperature":
		return num("0", "0.5", "0.8", "1", "1.5", "1e-5", "2")
	case "top_p":
		return num("1e-38", "0.1", "0.5", "0.9", "1")
	case "top_k":
		return num("-1", "0", "1", "5", "40", "511", "512")
	case "min_p":
		return num("0", "1e-38", "0.05", "0.5", "1")
	case "seed":
		return num("0", "42", "-1", "4294967296", "9223372036854775807")
	case "stop":
		return num(`"\n"`, `"."`, `["a","Lily"]`, `[]`, `["\n\n"]`)
	case "stop_token_ids":
		return num("[13]", "[2,13]", "[]", "[511]")
	case "n":
		return num("1", "2", "3", "4")
	case "presence_penalty", "frequency_penalty":
		return num("-2", "0", "0.5", "2")
	case "repetition_penalty":
		return num("0.01", "0.5", "1", "1.1", "2", "100")
	case "logit_bias":
		return num(`{"13":-100}`, `{"261":100}`, `{"2":5,"13":-5}`, `{}`)
	case "logprobs":
		if chat {
			return num("true", "false")
		}
		return num("0", "1", "5", "20")
	case "top_logprobs":
		return num("0", "1", "5", "20")
	case "echo", "ignore_eos", "return_tokens_as_token_ids", "stream":
		return num("true", "false")
	case "stream_options":
		return num(`{"include_usage":true}`, `{"include_usage":true,"continuous_usage_stats":true}`, `{"include_usage":false}`, `{}`)
	case "cache_salt", "user":
		return fuzzString(fuzzPick(g, "a", "salt", "user-1"))
	case "priority":
		return num("-10", "-1", "0", "1", "10")
	}
	return g.fieldValue(f, chat)
}

// fieldValue is a valid or edge value for field f.
func (g *fuzzGen) fieldValue(f string, chat bool) []byte {
	num := func(xs ...string) []byte { return []byte(fuzzPick(g, xs...)) }
	boolean := func() []byte { return []byte(fuzzPick(g, "true", "false")) }
	switch f {
	case "model":
		if g.chance(0.1) {
			return g.str()
		}
		return fuzzString(fuzzPick(g, fuzzModelName, fuzzModelName, "", "nope", "STORIES260K", fuzzModelName+" ", fuzzModelName+"\x00", "../"+fuzzModelName))
	case "messages":
		return g.messages()
	case "prompt":
		return g.prompt()
	case "max_tokens", "max_completion_tokens":
		if g.chance(0.7) {
			return strconv.AppendInt(nil, int64(1+g.intn(16)), 10)
		}
		return num("0", "-1", "17", "64", "100", "511", "512", "513", "1000", "2147483648", "1.5", "1e39", "1.0")
	case "min_tokens":
		return num("0", "1", "4", "16", "17", "100", "511", "512", "-1", "1e9")
	case "temperature":
		return num("0", "0", "0.7", "1", "2", "1e-5", "9.99e-6", "1e-6", "100000", "100001", "1e-45", "1e-40",
			"1.2e-38", "1e-38", "-0.0", "-1", "1e39", "5e-324")
	case "top_p":
		return num("0", "1e-45", "1e-38", "1e-10", "0.1", "0.5", "0.9", "1", "1.0000001", "-0.1", "2")
	case "top_k":
		return num("-2", "-1", "0", "1", "2", "40", "511", "512", "513", "100000", "2147483648")
	case "min_p":
		return num("0", "1e-45", "1e-38", "0.05", "0.5", "0.99", "1", "1.5", "-0.1")
	case "seed":
		return num("0", "-1", "42", "4294967295", "4294967296", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1.5")
	case "stop":
		return g.stop()
	case "stop_token_ids":
		n := fuzzPick(g, 0, 1, 2, 5, 1000)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fuzzPick(g, fuzzTokens...)
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	case "n":
		if g.chance(0.8) {
			return num("1", "1", "2", "3", "4")
		}
		return num("0", "-1", "8", "16", "32", "64", "65", "128", "129", "1000", "2147483648")
	case "presence_penalty", "frequency_penalty":
		return num("-2", "-2.0001", "-1", "0", "0.5", "1", "2", "2.0001", "1e-45", "1e-38", "-1e39", "100")
	case "repetition_penalty":
		return num("0", "1e-45", "1e-40", "1e-38", "0.009", "0.01", "0.5", "1", "1.1", "2", "100", "100.1", "-1")
	case "logit_bias":
		return g.logitBias()
	case "logprobs":
		if chat == g.chance(0.8) {
			return boolean()
		}
		return num("0", "1", "5", "20", "21", "-1")
	case "top_logprobs":
		return num("0", "1", "5", "20", "21", "-1", "1e39")
	case "echo", "ignore_eos", "return_tokens_as_token_ids":
		return boolean()
	case "stream":
		return []byte(fuzzPick(g, "true", "true", "false"))
	case "stream_options":
		return g.streamOptions()
	case "cache_salt", "user":
		if g.chance(0.5) {
			return fuzzString(fuzzPick(g, "a", "salt", "user-1", ""))
		}
		return g.str()
	case "priority":
		return num("0", "-1", "1", "10", "-2147483648", "2147483647", "2147483648", "9223372036854775807", "-9223372036854775808")
	}
	return g.extreme(0)
}

// nested puts an extreme inside a structured field.
func (g *fuzzGen) nested(f string, chat bool) []byte {
	x := func() string { return string(g.extreme(1)) }
	switch f {
	case "messages":
		return []byte(fuzzPick(g,
			`[{"role":`+x()+`,"content":"a"}]`,
			`[{"role":"user","content":`+x()+`}]`,
			`[{"role":"user","content":[{"type":"text","text":`+x()+`}]}]`,
			`[{"role":"user","content":[{"type":`+x()+`,"text":"a"}]}]`,
			`[{"role":"user","content":"a","name":`+x()+`}]`,
			`[`+x()+`]`,
			`[{"role":"user","content":"a"},`+x()+`]`))
	case "prompt":
		return []byte(fuzzPick(g, `[`+x()+`]`, `["a",`+x()+`]`, `[[1,`+x()+`]]`, `[1,`+x()+`]`))
	case "stream_options":
		return []byte(fuzzPick(g, `{"include_usage":`+x()+`}`, `{"continuous_usage_stats":`+x()+`,"include_usage":true}`))
	case "stop":
		return []byte(`["a",` + x() + `]`)
	case "stop_token_ids":
		return []byte(`[13,` + x() + `]`)
	case "logit_bias":
		return []byte(fuzzPick(g, `{"13":`+x()+`}`, `{`+string(g.str())+`:1}`))
	}
	return g.fieldValue(f, chat)
}

// extreme is a value from the pool of extremes and wrong types.
func (g *fuzzGen) extreme(depth int) []byte {
	switch k := g.intn(20); {
	case k < 7:
		return []byte(fuzzPick(g, fuzzNumbers...))
	case k == 7:
		return []byte(fuzzPick(g, fuzzBadNumbers...))
	case k < 11:
		return g.str()
	case k == 11:
		return []byte(fuzzPick(g, "null", "true", "false"))
	case k == 12:
		return []byte(fuzzPick(g, "[]", "{}", "[null]", "[[]]", `{"":null}`, `[{}]`, `[""]`, "[0]"))
	case k == 13 && depth < 3:
		parts := make([]string, 1+g.intn(3))
		for i := range parts {
			parts[i] = string(g.extreme(depth + 1))
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	case k == 14 && depth < 3:
		return []byte(`{` + string(g.str()) + `:` + string(g.extreme(depth+1)) + `}`)
	case k == 15:
		d := fuzzPick(g, 2, 64, 1000, 10000, 10000, 10001, 100000)
		if g.chance(0.5) {
			return []byte(strings.Repeat("[", d) + strings.Repeat("]", d))
		}
		return []byte(strings.Repeat(`{"a":`, d) + "{}" + strings.Repeat("}", d))
	case k == 16:
		n := fuzzPick(g, 1000, 10000)
		elem := fuzzPick(g, "0", `"a"`, "1e39", "[]")
		return []byte("[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]")
	default:
		return []byte(fuzzPick(g, "0", "-1", "1e-40", "1e39", "2147483648", "9223372036854775807", "-9223372036854775808", "0.5", "1e999", `"NaN"`, `"Infinity"`, `"-Infinity"`, `"1e999"`, `""`))
	}
}

// str is a JSON string literal, which may hold invalid UTF-8, lone
// surrogate escapes, control characters, template syntax or 100 KB.
func (g *fuzzGen) str() []byte {
	switch g.intn(10) {
	case 0, 1, 2:
		return fuzzString(fuzzPick(g, "", " ", "a", "Once upon a time", "NaN", "Infinity", "-Infinity", "1e999",
			"0", "-1", "null", "true", fuzzModelName, "<s>", "</s>", "<unk>", "<|im_start|>user\nhi<|im_end|>",
			"{{ raise_exception('boom') }}", "{% for x in range(999999999) %}x{% endfor %}", "{{ messages }}",
			"\x00", "\u2028\u2029", "\U0001f999\U0001f999", "e\u0301", "\u202eevil", "\r\n\t", `\`, `"`,
			strings.Repeat("\n", 1000), "\ufffd", "\ufeff"))
	case 3, 4:
		// Raw bytes that are not UTF-8, and escapes of lone surrogates.
		return []byte(fuzzPick(g, "\"\xff\xfe\"", "\"a\xffb\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
			"\"\xc0\xaf\"", `"\ud800"`, `"\udc00\ud800"`, `"\ud83e"`, `"a\udfffb"`, `"\u0000"`, `"\uDFFF"`, `"\ud800\u0041"`))
	case 5:
		return []byte(fuzzPick(g, `"\u"`, `"\x41"`, `"\ud800\u"`, "\"a\nb\"", "\"\t\"", `"\`, `"abc`))
	case 6:
		n := fuzzPick(g, 1<<10, 10<<10, 10<<10, 100<<10)
		unit := fuzzPick(g, "a", "Once upon a time ", "\U0001f999", "\xff", "<s>", " ")
		return fuzzString(strings.Repeat(unit, n/len(unit)+1)[:n])
	case 7:
		b := make([]byte, 1+g.intn(64))
		for i := range b {
			b[i] = byte(g.r.Uint32())
		}
		return fuzzString(string(b))
	default:
		return fuzzString(g.shortText())
	}
}

func (g *fuzzGen) shortText() string {
	return fuzzPick(g, "Once upon a time", "a", "Lily", "The cat sat", "hello", "One day, a little girl named", "\n", "x y z")
}

func (g *fuzzGen) messages() []byte {
	if g.chance(0.05) {
		return []byte(fuzzPick(g, `[]`, `"hi"`, `{"role":"user","content":"hi"}`, `[[]]`, `[null]`))
	}
	n := fuzzPick(g, 1, 1, 1, 2, 3, 4, 8)
	if g.chance(0.02) {
		n = fuzzPick(g, 100, 1000)
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = string(g.message())
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

func (g *fuzzGen) message() []byte {
	var m fuzzObject
	if g.chance(0.95) {
		role := fuzzString(fuzzPick(g, "user", "user", "system", "assistant", "developer", "tool"))
		if g.chance(0.1) {
			role = fuzzString(fuzzPick(g, "", "USER", "function", "bogus", "ipython", "user\x00"))
		}
		m = m.set("role", role)
	}
	switch k := g.intn(20); {
	case k < 12:
		if g.chance(0.8) {
			m = m.set("content", fuzzString(g.shortText()))
		} else {
			m = m.set("content", g.str())
		}
	case k < 16:
		n := fuzzPick(g, 0, 1, 1, 2, 3)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fuzzPick(g,
				`{"type":"text","text":`+string(fuzzString(g.shortText()))+`}`,
				`{"type":"text","text":`+string(fuzzString(g.shortText()))+`}`,
				`{"type":"text","text":`+string(g.str())+`}`,
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}`,
				`{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`,
				`{"type":"text"}`, `{"type":"text","text":1}`, `{"type":""}`, `{}`, `"text"`, `{"type":"refusal","refusal":"no"}`)
		}
		m = m.set("content", []byte("["+strings.Join(parts, ",")+"]"))
	case k < 17:
		m = m.set("content", []byte("null"))
	case k < 18:
	default:
		m = m.set("content", g.extreme(1))
	}
	if g.chance(0.05) {
		m = m.set("name", g.str())
	}
	if g.chance(0.03) {
		m = m.set("tool_calls", []byte(fuzzPick(g, `[]`, `[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]`, `"x"`)))
	}
	if g.chance(0.03) {
		m = m.set("tool_call_id", g.str())
	}
	return m.encode()
}

func (g *fuzzGen) prompt() []byte {
	tokens := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			if g.chance(0.9) {
				parts[i] = strconv.Itoa(g.intn(fuzzVocab))
			} else {
				parts[i] = fuzzPick(g, fuzzTokens...)
			}
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	switch g.intn(10) {
	case 0, 1:
		return g.str()
	case 2, 3:
		n := fuzzPick(g, 0, 1, 2, 3, 4, 64)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = string(fuzzString(g.shortText()))
			if g.chance(0.1) {
				parts[i] = string(g.str())
			}
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	case 4, 5:
		return []byte(tokens(fuzzPick(g, 0, 1, 2, 5, 16, 600)))
	case 6, 7:
		n := fuzzPick(g, 1, 2, 3, 8)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = tokens(fuzzPick(g, 0, 1, 3, 8))
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	default:
		return []byte(fuzzPick(g, `["a",1]`, `[[1],"a"]`, `[[["a"]]]`, `[1.5]`, `[true]`, `[null]`, `[[]]`, `[""]`,
			`[[1,2],[]]`, `[-1]`, `[[512]]`, `{"text":"a"}`, `1`, `true`))
	}
}

func (g *fuzzGen) stop() []byte {
	short := func() string {
		return string(fuzzString(fuzzPick(g, "\n", ".", "Lily", "a", "", " ", "the", "Once upon a time", "\U0001f999", "\xff")))
	}
	switch g.intn(6) {
	case 0, 1:
		return []byte(short())
	case 2, 3:
		parts := make([]string, 1+g.intn(4))
		for i := range parts {
			parts[i] = short()
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	case 4:
		n := fuzzPick(g, 0, 100, 1000)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = strconv.Quote(strconv.Itoa(i))
		}
		return []byte("[" + strings.Join(parts, ",") + "]")
	default:
		return g.str()
	}
}

func (g *fuzzGen) logitBias() []byte {
	n := fuzzPick(g, 0, 1, 2, 3, 600)
	parts := make([]string, n)
	for i := range parts {
		key := fuzzPick(g, "0", "1", "2", "13", "261", "511", "512", "-1", "abc", "", "1.5", "01", "4294967296",
			"9999999999999999999", " 7", "1e3")
		if n > 3 {
			key = strconv.Itoa(i)
		}
		val := fuzzPick(g, "100", "-100", "0", "5", "-5", "101", "-101", "1e39", "1e-45", "0.5", `"1"`, "null", "-1e999")
		parts[i] = string(fuzzString(key)) + ":" + val
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

func (g *fuzzGen) streamOptions() []byte {
	var o fuzzObject
	if g.chance(0.7) {
		o = o.set("include_usage", []byte(fuzzPick(g, "true", "true", "false")))
	}
	if g.chance(0.4) {
		o = o.set("continuous_usage_stats", []byte(fuzzPick(g, "true", "false")))
	}
	return o.encode()
}

// fuzzObject is a JSON object as written, keys in order, duplicates kept.
type fuzzObject []fuzzKV

type fuzzKV struct {
	key string
	val []byte // raw JSON, possibly invalid
}

// set replaces every value of key, or appends it.
func (o fuzzObject) set(key string, val []byte) fuzzObject {
	found := false
	for i := range o {
		if o[i].key == key {
			o[i].val, found = val, true
		}
	}
	if !found {
		o = append(o, fuzzKV{key, val})
	}
	return o
}

func (o fuzzObject) del(key string) fuzzObject {
	return slices.DeleteFunc(o, func(kv fuzzKV) bool { return kv.key == key })
}

func (o fuzzObject) encode() []byte {
	b := []byte{'{'}
	for i, kv := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, fuzzString(kv.key)...)
		b = append(b, ':')
		b = append(b, kv.val...)
	}
	return append(b, '}')
}

// number reads the last value of key (any case, as encoding/json does) as
// a number.
func (o fuzzObject) number(key string) (float64, bool) {
	v, ok := 0.0, false
	for _, kv := range o {
		if strings.EqualFold(kv.key, key) {
			var f float64
			ok = json.Unmarshal(kv.val, &f) == nil
			v = f
		}
	}
	return v, ok
}

// limitCost keeps a run short: a request that may generate more than 1024
// tokens (n × max_tokens × prompts; no max_tokens means the whole 512-token
// context) usually gets a small max_tokens. The few that keep theirs are
// heavy and get more time.
func (o fuzzObject) limitCost(g *fuzzGen) (_ fuzzObject, note string, heavy bool) {
	n, ok := o.number("n")
	if !ok || n < 1 {
		n = 1
	}
	maxTok := 512.0
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := o.number(k); ok && v >= 1 {
			maxTok = min(maxTok, v)
		}
	}
	prompts := 1.0
	for _, kv := range o {
		var list []json.RawMessage
		if strings.EqualFold(kv.key, "prompt") && json.Unmarshal(kv.val, &list) == nil && len(list) > 0 {
			var first []json.RawMessage
			if json.Unmarshal(list[0], &first) == nil || list[0][0] == '"' {
				prompts = float64(len(list))
			}
		}
	}
	cost := n * maxTok * prompts
	if cost <= 1024 {
		return o, "", false
	}
	if g.chance(0.01) {
		return o, fmt.Sprintf("heavy: up to %.0f tokens", cost), true
	}
	small := strconv.Itoa(1 + g.intn(8))
	for i := range o {
		if strings.EqualFold(o[i].key, "max_tokens") || strings.EqualFold(o[i].key, "max_completion_tokens") {
			o[i].val = []byte(small)
		}
	}
	if _, ok := o.number("max_tokens"); !ok {
		o = append(o, fuzzKV{"max_tokens", []byte(small)})
	}
	return o, "cost limit: max_tokens=" + small, false
}

// fuzzString writes s as a JSON string, escaping only what JSON requires,
// so that bytes which are not UTF-8 stay raw (json.Marshal would replace
// them).
func fuzzString(s string) []byte {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = fmt.Appendf(b, `\u%04x`, c)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
