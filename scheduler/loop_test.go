package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type harness struct {
	t    *testing.T
	eng  *fakeEngine
	loop *Loop
	kv   *kvcache.Manager
	stop func()
}

type harnessConfig struct {
	blocks, maxSeqs, budget, maxWaiting, holders, maxLen int
}

func newHarness(t *testing.T, c harnessConfig) *harness {
	t.Helper()
	if c.maxSeqs == 0 {
		c.maxSeqs = 16
	}
	if c.budget == 0 {
		c.budget = 64
	}
	if c.maxWaiting == 0 {
		c.maxWaiting = 256
	}
	if c.blocks == 0 {
		c.blocks = 256
	}
	if c.maxLen == 0 {
		c.maxLen = 256
	}
	holders := c.holders
	if holders == 0 {
		holders = 8
	}
	const bs = 16
	kv, err := kvcache.New(kvcache.Config{BlockSize: bs, NumBlocks: c.blocks, RunSlots: c.maxSeqs, HolderSlots: holders, MaxSeqLen: c.maxLen})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := New(Config{MaxNumSeqs: c.maxSeqs, MaxNumBatchedTokens: c.budget, MaxWaiting: c.maxWaiting, MaxModelLen: c.maxLen}, kv)
	if err != nil {
		t.Fatal(err)
	}
	eng := newFakeEngine(c.blocks * bs)
	loop := NewLoop(sched, eng, LoopConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := loop.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("loop: %v", err)
		}
	})
	h := &harness{t: t, eng: eng, loop: loop, kv: kv, stop: func() { cancel(); wg.Wait() }}
	t.Cleanup(h.stop)
	return h
}

func prompt(seed, n int) []int32 {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(r.IntN(400) + 1)
	}
	return p
}

func newRequest(id string, p []int32, maxTokens int) *Request {
	return &Request{ID: id, Prompt: p, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: maxTokens, PromptLogprobs: -1}
}

type result struct {
	tokens [][]int32
	finish []FinishReason
	errs   []error
	usage  Usage
}

func collect(t *testing.T, st *Stream) result {
	t.Helper()
	r := result{tokens: make([][]int32, st.n), finish: make([]FinishReason, st.n), errs: make([]error, st.n)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		outs, err := st.Recv(ctx)
		if err == io.EOF {
			r.usage = st.Usage()
			return r
		}
		if err != nil {
			t.Fatalf("recv %s: %v", st.ID(), err)
		}
		for _, o := range outs {
			if r.finish[o.Choice] != FinishNone {
				t.Fatalf("output after finish for choice %d", o.Choice)
			}
			r.tokens[o.Choice] = append(r.tokens[o.Choice], o.Tokens...)
			r.finish[o.Choice] = o.Finish
			r.errs[o.Choice] = o.Err
		}
	}
}

func (h *harness) run(r *Request) result {
	h.t.Helper()
	st, err := h.loop.Submit(context.Background(), r)
	if err != nil {
		h.t.Fatal(err)
	}
	return collect(h.t, st)
}

// waitIdle waits until the loop has nothing running or waiting.
func (h *harness) waitIdle() Stats {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.loop.Stats()
		if st.Running == 0 && st.Waiting == 0 && st.Requests == 0 {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("loop not idle: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGenerateToLength(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	res := h.run(newRequest("a", prompt(1, 20), 10))
	if len(res.tokens[0]) != 10 || res.finish[0] != FinishLength {
		t.Fatalf("got %d tokens, finish %q", len(res.tokens[0]), res.finish[0])
	}
	if res.usage != (Usage{PromptTokens: 20, CompletionTokens: 10}) {
		t.Fatalf("usage = %+v", res.usage)
	}
	if st := h.waitIdle(); st.KV.UsedBlocks != 0 {
		t.Fatalf("KV still used: %+v", st.KV)
	}
}

func TestStopTokenAndMinTokens(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	p := prompt(2, 10)
	solo := h.run(newRequest("solo", p, 20)).tokens[0]
	// Stop on the 5th generated token.
	r := newRequest("stop", p, 20)
	r.StopTokens = []int32{solo[4]}
	res := h.run(r)
	if !slices.Equal(res.tokens[0], solo[:5]) || res.finish[0] != FinishStop {
		t.Fatalf("stop: %v %q, want %v", res.tokens[0], res.finish[0], solo[:5])
	}
	// min_tokens bans the stop token before it is allowed.
	r = newRequest("min", p, 20)
	r.StopTokens = []int32{solo[0]}
	r.MinTokens = 3
	res = h.run(r)
	if res.tokens[0][0] == solo[0] {
		t.Fatalf("min_tokens did not hold back the stop token: %v", res.tokens[0])
	}
}

// Many concurrent requests with different prompts and lengths each produce
// exactly what they produce alone, with chunked prefill mixing them.
func TestConcurrentMatchesSolo(t *testing.T) {
	h := newHarness(t, harnessConfig{budget: 48})
	var reqs []*Request
	for i := range 16 {
		reqs = append(reqs, newRequest(fmt.Sprint("r", i), prompt(100+i, 5+i*9), 10+i*3))
	}
	solo := make([][]int32, len(reqs))
	for i, r := range reqs {
		rr := *r
		rr.ID = "solo-" + r.ID
		solo[i] = h.run(&rr).tokens[0]
	}
	got := runConcurrently(t, h, reqs)
	for i := range reqs {
		if !slices.Equal(got[i].tokens[0], solo[i]) {
			t.Errorf("%s concurrent %v, solo %v", reqs[i].ID, got[i].tokens[0], solo[i])
		}
	}
	h.eng.mu.Lock()
	maxBatch := h.eng.maxBatch
	h.eng.mu.Unlock()
	if maxBatch > 48 {
		t.Fatalf("a step decoded %d tokens, budget 48", maxBatch)
	}
}

func runConcurrently(t *testing.T, h *harness, reqs []*Request) []result {
	out := make([]result, len(reqs))
	streams := make([]*Stream, len(reqs))
	for i, r := range reqs {
		st, err := h.loop.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = st
	}
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { out[i] = collect(t, streams[i]) })
	}
	wg.Wait()
	return out
}

// With KV memory too small for every request at once, sequences are
// preempted and recomputed, and still produce their solo output.
func TestPreemptionKeepsOutputs(t *testing.T) {
	h := newHarness(t, harnessConfig{blocks: 12, maxLen: 192, budget: 64})
	var reqs []*Request
	for i := range 8 {
		reqs = append(reqs, newRequest(fmt.Sprint("p", i), prompt(200+i, 30+i*5), 60))
	}
	solo := make([][]int32, len(reqs))
	for i, r := range reqs {
		rr := *r
		rr.ID = "solo-" + r.ID
		solo[i] = h.run(&rr).tokens[0]
	}
	got := runConcurrently(t, h, reqs)
	for i := range reqs {
		if !slices.Equal(got[i].tokens[0], solo[i]) || got[i].finish[0] != FinishLength {
			t.Errorf("%s: got %v (%q), solo %v", reqs[i].ID, got[i].tokens[0], got[i].finish[0], solo[i])
		}
	}
	st := h.waitIdle()
	if st.Preemptions == 0 {
		t.Fatal("no preemption happened; the test does not test preemption")
	}
	if st.KV.UsedBlocks != 0 {
		t.Fatalf("KV used after all finished: %+v", st.KV)
	}
}

// The second of two requests that share a long prefix gets the shared full
// blocks from the cache, and the engine decodes only the rest.
func TestPrefixCacheAcrossRequests(t *testing.T) {
	h := newHarness(t, harnessConfig{budget: 512, maxLen: 1024, blocks: 128})
	shared := prompt(3, 400)
	first := append(slices.Clone(shared), prompt(4, 37)...)
	second := append(slices.Clone(shared), prompt(5, 23)...)
	h.run(newRequest("first", first, 5))
	h.waitIdle()
	before := h.eng.decodedTokens()
	res := h.run(newRequest("second", second, 5))
	decoded := h.eng.decodedTokens() - before
	if res.usage.CachedTokens != 400 {
		t.Fatalf("cached tokens = %d, want 400 (25 full blocks)", res.usage.CachedTokens)
	}
	// 23 prompt tokens, then 4 decode steps of 1 token.
	if want := len(second) - 400 + 4; decoded != want {
		t.Fatalf("decoded %d tokens, want %d", decoded, want)
	}
	// And the output is what it would be without the cache.
	r := newRequest("salted", second, 5)
	r.CacheSalt = "other tenant"
	if cold := h.run(r); !slices.Equal(cold.tokens[0], res.tokens[0]) || cold.usage.CachedTokens != 0 {
		t.Fatalf("cold %v (cached %d), warm %v", cold.tokens[0], cold.usage.CachedTokens, res.tokens[0])
	}
	if st := h.loop.Stats(); st.KV.HitTokens < 400 || st.KV.QueryTokens == 0 {
		t.Fatalf("stats = %+v", st.KV)
	}
}

// A prefix still being generated by a running request is shared too.
func TestPrefixCacheFromRunningRequest(t *testing.T) {
	h := newHarness(t, harnessConfig{budget: 512, maxLen: 1024, blocks: 128})
	shared := prompt(6, 100)
	gate := make(chan struct{})
	var once sync.Once
	st1, err := h.loop.Submit(context.Background(), newRequest("long", shared, 200))
	if err != nil {
		t.Fatal(err)
	}
	// Let the first request prefill, then submit the second.
	outs, err := st1.Recv(context.Background())
	if err != nil || len(outs) == 0 {
		t.Fatal(err)
	}
	once.Do(func() { close(gate) })
	res := h.run(newRequest("short", append(slices.Clone(shared), 9, 9, 9), 3))
	if res.usage.CachedTokens != 96 {
		t.Fatalf("cached %d, want 96", res.usage.CachedTokens)
	}
	st1.Cancel()
	collect(t, st1)
}

func TestCancelFreesWithinOneStep(t *testing.T) {
	h := newHarness(t, harnessConfig{maxLen: 4096, blocks: 512})
	st, err := h.loop.Submit(context.Background(), newRequest("c", prompt(7, 50), 4000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.eng.mu.Lock()
	stepsAtCancel := h.eng.steps
	h.eng.mu.Unlock()
	st.Cancel()
	res := collect(t, st)
	if res.finish[0] != FinishAbort {
		t.Fatalf("finish = %q", res.finish[0])
	}
	stats := h.waitIdle()
	h.eng.mu.Lock()
	steps := h.eng.steps - stepsAtCancel
	h.eng.mu.Unlock()
	// The abort is taken between steps: at most the step in flight and one
	// more (which applies the KV release) run after Cancel.
	if steps > 2 {
		t.Fatalf("%d steps ran after cancel", steps)
	}
	if stats.KV.UsedBlocks != 0 {
		t.Fatalf("KV still used: %+v", stats.KV)
	}
	// The release reached the engine: only cached prefix blocks keep cells.
	if used := h.eng.usedCells(); used != stats.KV.CachedBlocks*16 {
		t.Fatalf("engine holds %d cells, %d cached blocks", used, stats.KV.CachedBlocks)
	}
}

func TestQueueFull(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, harnessConfig{maxSeqs: 1, maxWaiting: 2})
	h.eng.block = func() { <-release }
	var streams []*Stream
	// One runs (blocked in the engine), two wait, the fourth is refused.
	for i := range 3 {
		st, err := h.loop.Submit(context.Background(), newRequest(fmt.Sprint("q", i), prompt(i, 5), 3))
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		streams = append(streams, st)
		if i == 0 {
			// Wait until the first request started so that it left the queue.
			for h.loop.Queued() != 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	_, err := h.loop.Submit(context.Background(), newRequest("q3", prompt(3, 5), 3))
	var qf *QueueFullError
	if !errors.As(err, &qf) || !errors.Is(err, ErrQueueFull) || qf.RetryAfter < time.Second {
		t.Fatalf("err = %v", err)
	}
	close(release)
	for _, st := range streams {
		if res := collect(t, st); res.finish[0] != FinishLength {
			t.Fatalf("finish %q", res.finish[0])
		}
	}
}

func TestDeadline(t *testing.T) {
	h := newHarness(t, harnessConfig{maxLen: 4096, blocks: 512})
	r := newRequest("d", prompt(8, 10), 4000)
	r.Deadline = time.Now().Add(20 * time.Millisecond)
	res := h.run(r)
	if res.finish[0] != FinishAbort || !errors.Is(res.errs[0], ErrDeadline) {
		t.Fatalf("finish %q err %v", res.finish[0], res.errs[0])
	}
}

func TestNChoicesSharePrompt(t *testing.T) {
	h := newHarness(t, harnessConfig{budget: 256, maxLen: 512})
	r := newRequest("n", prompt(9, 100), 8)
	r.N = 4
	before := h.eng.decodedTokens()
	res := h.run(r)
	for i := range 4 {
		if !slices.Equal(res.tokens[i], res.tokens[0]) || res.finish[i] != FinishLength {
			t.Fatalf("choice %d: %v, choice 0: %v", i, res.tokens[i], res.tokens[0])
		}
	}
	// The prompt is computed once (100), the three others compute only the
	// 4 tokens past the 96 cached, then 7 decode steps each.
	if got, want := h.eng.decodedTokens()-before, 100+3*4+4*7; got != want {
		t.Fatalf("decoded %d tokens, want %d", got, want)
	}
	if res.usage.CompletionTokens != 32 || res.usage.PromptTokens != 100 {
		t.Fatalf("usage %+v", res.usage)
	}
}

func TestStopChoice(t *testing.T) {
	h := newHarness(t, harnessConfig{maxLen: 512, blocks: 64})
	r := newRequest("s", prompt(10, 10), 300)
	r.N = 2
	st, err := h.loop.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	st.StopChoice(1)
	res := collect(t, st)
	if res.finish[1] != FinishStop {
		t.Fatalf("choice 1 finish %q", res.finish[1])
	}
	if res.finish[0] != FinishLength || len(res.tokens[0]) != 300 {
		t.Fatalf("choice 0 finish %q after %d tokens", res.finish[0], len(res.tokens[0]))
	}
}

func TestPriorityOrdersWaiting(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, harnessConfig{maxSeqs: 1})
	h.eng.block = func() { <-release }
	first, _ := h.loop.Submit(context.Background(), newRequest("first", prompt(1, 5), 2))
	for h.loop.Queued() != 0 {
		time.Sleep(time.Millisecond)
	}
	low := newRequest("low", prompt(2, 5), 2)
	low.Priority = 5
	high := newRequest("high", prompt(3, 5), 2)
	high.Priority = -5
	stLow, _ := h.loop.Submit(context.Background(), low)
	stHigh, _ := h.loop.Submit(context.Background(), high)
	for h.loop.Stats().Waiting+h.loop.Queued() < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for _, st := range []*Stream{first, stLow, stHigh} {
		collect(t, st)
	}
	// Sequence ids follow submission: first 0, low 1, high 2.
	h.eng.mu.Lock()
	order := slices.Clone(h.eng.added)
	h.eng.mu.Unlock()
	if !slices.Equal(order, []engine.SeqID{0, 2, 1}) {
		t.Fatalf("engine saw sequences in order %v, want [0 2 1] (high before low)", order)
	}
}

func TestCheckRequest(t *testing.T) {
	h := newHarness(t, harnessConfig{maxLen: 64})
	cases := []*Request{
		{ID: "empty", N: 1, MaxTokens: 1},
		{ID: "long", Prompt: prompt(1, 64), N: 1, MaxTokens: 1},
		{ID: "n0", Prompt: prompt(1, 4), N: 0, MaxTokens: 1},
		{ID: "max0", Prompt: prompt(1, 4), N: 1, MaxTokens: 0},
		{ID: "nbig", Prompt: prompt(1, 4), N: 100, MaxTokens: 1},
	}
	for _, r := range cases {
		if _, err := h.loop.Submit(context.Background(), r); err == nil {
			t.Errorf("%s: accepted", r.ID)
		}
	}
	if _, err := h.loop.Submit(context.Background(), cases[1]); !errors.Is(err, ErrTooLong) {
		t.Errorf("long prompt: %v, want ErrTooLong", err)
	}
}

func TestSubmitAfterStop(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	h.stop()
	if _, err := h.loop.Submit(context.Background(), newRequest("late", prompt(1, 5), 2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v", err)
	}
}
