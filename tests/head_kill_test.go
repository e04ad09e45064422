package tests

import (
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killStreams opens 8 greedy streams through h, runs during (which kills
// a worker at some moment), and checks that every stream ends with one
// serve process's text or, when no worker could take it in time, with
// the no-worker error: never the shutdown message.
func killStreams(t *testing.T, h *pdProc, prompts, want []string, maxTokens int, during func()) {
	t.Helper()
	streams := make([]*sseStream, len(prompts))
	concurrently(len(prompts), func(i int) {
		if s := openStream(t, h, prompts[i], maxTokens); s != nil {
			s.next(t)
			streams[i] = s
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	during()
	concurrently(len(prompts), func(i int) {
		s := streams[i]
		defer s.resp.Body.Close()
		for s.next(t) {
		}
		for _, e := range s.errs {
			if strings.Contains(e, "shutting down") || !strings.Contains(e, "no_healthy_worker") {
				t.Errorf("stream %d: error event %s; want none, or the no-worker error", i, e)
			}
		}
		if len(s.errs) == 0 && s.text.String() != want[i] {
			t.Errorf("stream %d: through the head %q, one serve process %q", i, s.text.String(), want[i])
		}
	})
	if t.Failed() {
		t.Logf("head log:\n%s", h.out.String())
	}
}

// killReference writes the synthetic model and returns it with one serve
// process's greedy texts for the 8 prompts.
func killReference(t *testing.T, maxTokens int) (string, []string) {
	t.Helper()
	model := synthModel(t)
	ref := startServeProc(t, "--model", model, "--max-model-len", "256")
	var want []string
	for _, p := range headPrompts(8) {
		txt, _ := completion(t, ref, p, maxTokens)
		want = append(want, txt)
	}
	return model, want
}

// TestHeadKillWhileOtherStarts: head + 2 workers, 8 streams on the first
// worker; the second worker starts and the first is SIGKILLed at a random
// moment within 1.5 s of that start (often before the second listens, or
// before the head checked it). Every stream finishes with one serve
// process's text (the migrations wait for the new worker), or ends with
// the no-worker error; never with the shutdown message.
func TestHeadKillWhileOtherStarts(t *testing.T) {
	t.Parallel()
	const maxTokens = 120
	model, want := killReference(t, maxTokens)
	args := []string{"--model", model, "--max-model-len", "256", "--shutdown-timeout", "0s"}
	w1 := startWorkerProc(t, "both", args...)
	port2 := freeTCPPort(t)
	w2addr := "127.0.0.1:" + strconv.Itoa(port2)
	h := startHeadProc(t, []*headWorker{w1, {addr: w2addr}}, "--worker-check-interval", "1s", "--log-level", "info")
	killStreams(t, h, headPrompts(8), want, maxTokens, func() {
		delay := time.Duration(rand.Int64N(int64(1500 * time.Millisecond)))
		killed := make(chan struct{})
		time.AfterFunc(delay, func() { w1.kill(); close(killed) })
		startWorkerOn(t, "both", port2, args...)
		<-killed
		t.Logf("worker 1 killed %v after worker 2 started", delay)
	})
}

// TestHeadWorkerAfterHead: a worker started after the head (the head's
// --workers names it before it listens) is serving requests through the
// head within 3 s of its listening: the probes back off to at most the
// check interval (1 s), and a probe takes up to another second on a machine
// whose cores other tests keep busy (a 1 s bound failed 5 runs of 20 there).
func TestHeadWorkerAfterHead(t *testing.T) {
	t.Parallel()
	port := freeTCPPort(t)
	h := startHeadLater(t, "127.0.0.1:"+strconv.Itoa(port))
	// The scenario is time itself: the worker must come late enough for
	// the head's probes to have backed off (another process's timers, no
	// event to wait on).
	time.Sleep(1500 * time.Millisecond)
	startWorkerOn(t, "both", port) // returns once the worker answers /health: it listens
	ready := poll(t, 3*time.Second, 20*time.Millisecond, func() bool {
		resp, err := http.Get(h.url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ready {
		t.Fatalf("the head was not ready 3 s after the worker listened:\n%s", h.out.String())
	}
	if txt, _ := completion(t, h, "Once upon a time", 8); txt == "" {
		t.Error("no text")
	}
}

// startHeadLater starts a head over workers that may not listen yet: it
// waits only until the head listens.
func startHeadLater(t *testing.T, workers string) *pdProc {
	t.Helper()
	bin := pdBinary(t)
	httpPort := freeTCPPort(t)
	p := &pdProc{url: "http://127.0.0.1:" + strconv.Itoa(httpPort), out: &fuzzTail{max: 256 << 10}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "head", "--host", "127.0.0.1", "--http-port", strconv.Itoa(httpPort), "--grpc-port", "0", "--workers", workers, "--log-level", "info")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LLMSERVE_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	headWait(t, "the head listens", func() bool {
		resp, err := http.Get(p.url + "/v2/health/live")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// TestHeadKillPrefill: with a prefill and a decode worker, the prefill
// worker is SIGKILLed at a random moment while 8 streams are being
// prefilled and their KV pulled: every stream finishes with one serve
// process's text (the decode worker recomputes what it could not pull),
// or ends with the no-worker error; never with the shutdown message.
func TestHeadKillPrefill(t *testing.T) {
	t.Parallel()
	const maxTokens = 120
	model, want := killReference(t, maxTokens)
	args := []string{"--model", model, "--max-model-len", "256", "--shutdown-timeout", "0s"}
	p, d := startWorkerProc(t, "prefill", args...), startWorkerProc(t, "decode", args...)
	h := startHeadProc(t, []*headWorker{p, d}, "--pd-min-prefill-tokens", "1", "--log-level", "info")
	servedModel(t, h)
	delay := time.Duration(rand.Int64N(int64(400 * time.Millisecond)))
	time.AfterFunc(delay, p.kill) // while the streams open: prefills and pulls run
	killStreams(t, h, headPrompts(8), want, maxTokens, func() {})
	t.Logf("prefill worker killed %v after the streams started", delay)
}
