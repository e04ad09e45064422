package router

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// newWaitRouter is a router over fakes that may be down at the start,
// with checks an hour apart: only the probes after a failure or for a
// waiting request check a worker soon.
func newWaitRouter(t *testing.T, opts Options, fakes map[string]*fakeWorker) *Router {
	t.Helper()
	opts.Dial = func(addr string) (Client, error) { return fakes[addr], nil }
	opts.CheckInterval = time.Hour
	if opts.ProbeMin == 0 {
		opts.ProbeMin = 5 * time.Millisecond
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	var addrs []string
	for a := range fakes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	r.SetWorkers(addrs)
	return r
}

func healthy(r *Router, addr string) bool {
	for _, w := range r.Workers() {
		if w.Addr == addr {
			return w.Healthy
		}
	}
	return false
}

// TestProbeAfterFailure: a worker that is down when added is probed again
// soon (backoff from ProbeMin, doubling), not at the next CheckInterval,
// and is used once it answers.
func TestProbeAfterFailure(t *testing.T) {
	a := newFake(workerpb.Role_ROLE_BOTH)
	a.down.Store(true)
	fc := clock.NewFake(time.Now())
	r := newWaitRouter(t, Options{Clock: fc}, map[string]*fakeWorker{"a:1": a})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms := time.Millisecond
	for i, d := range []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms} {
		// The check failed: the next one is due d later (the checks are
		// an hour apart).
		if err := fc.WaitArmed(ctx, d); err != nil {
			t.Fatalf("failed check %d: no probe %v later: %v", i+1, d, err)
		}
		if healthy(r, "a:1") {
			t.Fatal("a worker that is down is healthy")
		}
		if i == 3 {
			a.down.Store(false)
		}
		fc.Advance(d)
	}
	await(t, r, "a:1 healthy", func() bool { return healthy(r, "a:1") })
	if _, ok := r.choose(poolDecode, []int32{1}, "", nil); !ok {
		t.Fatal("a healthy worker was not picked")
	}
}

// TestSubmitWaitsForWorker: a request that finds no healthy worker waits
// for one (and gets it as soon as it answers a probe); with none it fails
// with scheduler.ErrNoWorker after NoWorkerWait, or sooner at its
// deadline; a cancelled client ends the wait.
func TestSubmitWaitsForWorker(t *testing.T) {
	finish := func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, 7)}, nil
	}
	req := func() *scheduler.Request {
		return &scheduler.Request{ID: "r", Prompt: []int32{1}, N: 1, MaxTokens: 1, PromptLogprobs: -1, Arrival: time.Now()}
	}
	t.Run("a worker comes up", func(t *testing.T) {
		a := newFake(workerpb.Role_ROLE_BOTH)
		a.script = finish
		a.down.Store(true)
		r := newWaitRouter(t, Options{ProbeMin: 50 * time.Millisecond, NoWorkerWait: time.Minute}, map[string]*fakeWorker{"a:1": a})
		m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
		time.AfterFunc(100*time.Millisecond, func() { a.down.Store(false) })
		streams, err := m.Submit(context.Background(), []*scheduler.Request{req()})
		if err != nil {
			t.Fatal(err)
		}
		if toks, _, errs := collect(t, streams[0], 1); !slices.Equal(toks[0], []int32{7}) || errs[0] != nil {
			t.Fatalf("got %v %v", toks[0], errs[0])
		}
	})
	t.Run("none comes", func(t *testing.T) {
		a := newFake(workerpb.Role_ROLE_BOTH)
		a.down.Store(true)
		r := newWaitRouter(t, Options{NoWorkerWait: 100 * time.Millisecond}, map[string]*fakeWorker{"a:1": a})
		m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
		start := time.Now()
		_, err := m.Submit(context.Background(), []*scheduler.Request{req()})
		if !errors.Is(err, scheduler.ErrNoWorker) || errors.Is(err, scheduler.ErrClosed) || time.Since(start) < 100*time.Millisecond {
			t.Fatalf("after %v: %v; want scheduler.ErrNoWorker after 100ms", time.Since(start), err)
		}
		if err := m.WaitReady(context.Background()); !errors.Is(err, scheduler.ErrNoWorker) {
			t.Fatalf("WaitReady: %v", err)
		}
	})
	t.Run("the deadline is sooner", func(t *testing.T) {
		a := newFake(workerpb.Role_ROLE_BOTH)
		a.down.Store(true)
		r := newWaitRouter(t, Options{NoWorkerWait: time.Hour}, map[string]*fakeWorker{"a:1": a})
		m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
		q := req()
		q.Deadline = time.Now().Add(50 * time.Millisecond)
		if _, err := m.Submit(context.Background(), []*scheduler.Request{q}); !errors.Is(err, scheduler.ErrNoWorker) {
			t.Fatalf("%v; want scheduler.ErrNoWorker at the deadline", err)
		}
	})
	t.Run("the client goes away", func(t *testing.T) {
		a := newFake(workerpb.Role_ROLE_BOTH)
		a.down.Store(true)
		r := newWaitRouter(t, Options{NoWorkerWait: time.Hour}, map[string]*fakeWorker{"a:1": a})
		m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := m.Submit(ctx, []*scheduler.Request{req()}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v; want the context's error", err)
		}
	})
	t.Run("the head stops", func(t *testing.T) {
		a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
		a.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
			return []*workerpb.GenerateResponse{out(0, 0, 1)}, errDown
		}
		a.gate = make(chan struct{})
		b.down.Store(true)
		r := newWaitRouter(t, Options{NoWorkerWait: time.Hour}, map[string]*fakeWorker{"a:1": a, "b:1": b})
		m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
		if err := m.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		streams, err := m.Submit(context.Background(), []*scheduler.Request{req()})
		if err != nil {
			t.Fatal(err)
		}
		a.down.Store(true)
		close(a.gate) // a breaks; b is down: the migration waits
		time.AfterFunc(50*time.Millisecond, func() { m.Stop() })
		if _, _, errs := collect(t, streams[0], 1); !errors.Is(errs[0], scheduler.ErrClosed) {
			t.Fatalf("%v; want the shutdown's error", errs[0])
		}
	})
}

// TestMigrationWaitsForWorker: a stream breaks while the only other
// worker is down; the migration waits, probing it, and continues there
// once it answers: no token lost.
func TestMigrationWaitsForWorker(t *testing.T) {
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	a.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, 0, 10, 11)}, errDown
	}
	a.gate = make(chan struct{})
	b.script = func(req *workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		toks := make([]int32, req.MaxTokens)
		for i := range toks {
			toks[i] = 20 + int32(i)
		}
		o := out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, toks...)
		o.GetOutput().CachedTokens = 2
		return []*workerpb.GenerateResponse{o}, nil
	}
	b.down.Store(true)
	r := newWaitRouter(t, Options{ProbeMin: 20 * time.Millisecond, NoWorkerWait: time.Minute}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	if err := m.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	streams, err := m.Submit(context.Background(), []*scheduler.Request{{ID: "r", Prompt: []int32{1, 2, 3}, N: 1, MaxTokens: 4, PromptLogprobs: -1, Arrival: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	a.down.Store(true)
	close(a.gate)
	time.AfterFunc(100*time.Millisecond, func() { b.down.Store(false) })
	toks, fins, errs := collect(t, streams[0], 1)
	if !slices.Equal(toks[0], []int32{10, 11, 20, 21}) || fins[0] != scheduler.FinishLength || errs[0] != nil {
		t.Fatalf("got %v %s %v; want [10 11 20 21] length", toks[0], fins[0], errs[0])
	}
	// The worker's cached_tokens (in its Outputs) reach the usage.
	if u := streams[0].Usage(); u.CachedTokens != 2 {
		t.Errorf("cached tokens %d, want 2", u.CachedTokens)
	}
	if n := testutil.ToFloat64(r.m.migrations); n != 1 {
		t.Errorf("migrations %v", n)
	}
}

// TestRefuseMismatch: a worker whose llama.cpp commit differs from the
// healthy workers', or whose model or reasoning parser differs from the
// one served, answers
// its checks but is refused: never healthy, counted as refused, and its
// Info is in the worker-info metric with the reason.
func TestRefuseMismatch(t *testing.T) {
	a, b, c, d := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	a.llama, b.llama, c.llama, d.llama = "ec98e2002", "0123abcd", "ec98e2002", "ec98e2002"
	c.model = "other"
	a.parser, b.parser, c.parser = "qwen3", "qwen3", "qwen3"
	b.down.Store(true)
	c.down.Store(true)
	d.down.Store(true)
	fakes := map[string]*fakeWorker{"a:1": a, "b:1": b, "c:1": c, "d:1": d}
	r := newWaitRouter(t, Options{}, fakes)
	if err := r.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.down.Store(false)
	c.down.Store(false)
	d.down.Store(false)
	await(t, r, "b, c and d refused", func() bool { return testutil.ToFloat64(r.m.workers.WithLabelValues("refused")) == 3 })
	for _, w := range r.Workers() {
		want := map[string]string{"a:1": "", "b:1": "llama.cpp commit", "c:1": `model "other"`, "d:1": `reasoning parser is ""`}[w.Addr]
		if w.Healthy != (want == "") || (want == "") != (w.Refused == "") || !strings.Contains(w.Refused, want) {
			t.Errorf("%s: healthy %v, refused %q; want it to say %q", w.Addr, w.Healthy, w.Refused, want)
		}
	}
	if n := testutil.ToFloat64(r.m.info.WithLabelValues("a:1", "v1", "", "ec98e2002", "m", "")); n != 1 {
		t.Errorf("a's worker-info metric %v", n)
	}
	for range 4 {
		p, ok := r.choose(poolDecode, []int32{1}, "", nil)
		if !ok || p.addr != "a:1" {
			t.Fatalf("picked %q", p.addr)
		}
		r.release(p.addr)
	}
}
