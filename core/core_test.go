package core

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const vocab = 1000

// testCore runs an engine core over fresh fakes made by newFake (nil: a
// healthy fake) until the test ends.
func testCore(t *testing.T, newFake func() *enginetest.Fake, mutate func(*Config)) *EngineCore {
	t.Helper()
	if newFake == nil {
		newFake = func() *enginetest.Fake { return &enginetest.Fake{} }
	}
	cfg := Config{
		Scheduler:     scheduler.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, MaxWaiting: 8, MaxModelLen: 128},
		KV:            kvcache.Config{BlockSize: 4, Slots: 4, SlotTokens: 128, CacheBytes: 1 << 20},
		RestartWindow: time.Hour,
	}
	cfg.NewExecutor = func(slots int) (engine.Executor, error) {
		f := newFake()
		f.Slots, f.SlotTokens, f.Vocab = slots, cfg.KV.SlotTokens, vocab
		return f, nil
	}
	// mutate may wrap the fake executor.
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-c.Started()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

func request(id string, prompt []int32, maxTokens int) *scheduler.Request {
	return &scheduler.Request{
		ID: id, Prompt: prompt, N: 1, MaxTokens: maxTokens, PromptLogprobs: -1,
		Sampling: engine.DefaultSampling(), Arrival: time.Now(),
	}
}

// passed returns once the core finished the iteration it was in when
// passed was called (two round trips through its inbox: a call's function
// runs at the start of an iteration).
func passed(t *testing.T, c *EngineCore) {
	t.Helper()
	for range 2 {
		if err := c.call(context.Background(), func() {}); err != nil {
			t.Fatal(err)
		}
	}
}

// drain reads a stream to the end and returns choice 0's tokens and its
// last output.
func drain(t *testing.T, s *Stream) ([]int32, scheduler.Output) {
	t.Helper()
	var toks []int32
	var last scheduler.Output
	for {
		outs, err := s.Recv(context.Background())
		if errors.Is(err, io.EOF) {
			return toks, last
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			toks = append(toks, o.Tokens...)
			last = o
		}
	}
}

// want is what the fake model generates greedily after prompt.
func want(prompt []int32, n int) []int32 {
	seq := slices.Clone(prompt)
	for range n {
		seq = append(seq, enginetest.Next(seq, vocab))
	}
	return seq[len(prompt):]
}

func TestRequestsRunToTheEnd(t *testing.T) {
	c := testCore(t, nil, nil)
	var reqs []*scheduler.Request
	for i := range 6 {
		reqs = append(reqs, request(string(rune('a'+i)), []int32{1, int32(i + 2), 7, 9, 11}, 10+i))
	}
	streams, err := c.Submit(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		toks, last := drain(t, s)
		if !slices.Equal(toks, want(reqs[i].Prompt, reqs[i].MaxTokens)) || last.Finish != scheduler.FinishLength {
			t.Errorf("request %d: %v (%s), want %v", i, toks, last.Finish, want(reqs[i].Prompt, reqs[i].MaxTokens))
		}
	}
}

// The stats a scrape reads never show a request that its client already
// saw end: they are published before the outputs are delivered.
func TestStatsPublishedBeforeDelivery(t *testing.T) {
	c := testCore(t, nil, nil)
	for i := range 300 {
		streams, err := c.Submit(context.Background(), []*scheduler.Request{request("r", []int32{1, 2, int32(i % 500)}, 1+i%3)})
		if err != nil {
			t.Fatal(err)
		}
		drain(t, streams[0])
		if st := c.Stats(); st.Running != 0 || st.Waiting != 0 || st.Requests != 0 || st.KV.UsedSlots != 0 {
			t.Fatalf("round %d: right after the last output the stats say %+v", i, st)
		}
	}
}

// A batch is submitted all or none, and limits that can never be met are
// told apart from a queue that is full now.
func TestSubmitChecks(t *testing.T) {
	c := testCore(t, nil, nil)
	ctx := context.Background()
	good := request("g", []int32{1, 2, 3}, 4)
	tooLong := request("x", make([]int32, 200), 4)
	_, err := c.Submit(ctx, []*scheduler.Request{good, tooLong})
	var ie *IndexError
	var re *scheduler.RequestError
	if !errors.As(err, &ie) || ie.Index != 1 || !errors.As(err, &re) || !errors.Is(err, scheduler.ErrTooLong) {
		t.Fatalf("a batch with a prompt over the context: %v", err)
	}
	if c.Queued() != 0 {
		t.Fatalf("%d queued after a refused batch", c.Queued())
	}
	wide := request("n", []int32{1, 2}, 4)
	wide.N = 5
	if _, err := c.Submit(ctx, []*scheduler.Request{wide}); !errors.As(err, &re) || re.Field != scheduler.FieldN || !errors.Is(err, scheduler.ErrLimit) {
		t.Fatalf("n above max_num_seqs: %v", err)
	}
	var many []*scheduler.Request
	for range 9 {
		many = append(many, request("m", []int32{1, 2}, 4))
	}
	if _, err := c.Submit(ctx, many); !errors.As(err, &re) || re.Field != scheduler.FieldRequests || errors.Is(err, scheduler.ErrQueueFull) {
		t.Fatalf("a batch larger than the queue: %v", err)
	}
	noArrival := request("z", []int32{1, 2}, 4)
	noArrival.Arrival = time.Time{}
	if _, err := c.Submit(ctx, []*scheduler.Request{noArrival}); err == nil || errors.As(err, &re) {
		t.Fatalf("a request without arrival (a protocol-layer bug): %v", err)
	}
}

func TestQueueFull(t *testing.T) {
	// The running request stops after its first token until the test
	// ends, so it cannot finish and make room before the third arrives.
	release := make(chan struct{})
	fake := func() *enginetest.Fake {
		return &enginetest.Fake{Model: func(history []int32, vocab int) int32 {
			if len(history) > 2 {
				<-release
			}
			return 1 + int32(len(history))%int32(vocab-1)
		}}
	}
	c := testCore(t, fake, func(cfg *Config) {
		cfg.Scheduler.MaxNumSeqs, cfg.Scheduler.MaxWaiting, cfg.KV.Slots = 1, 1, 1
	})
	t.Cleanup(func() { close(release) })
	ctx := context.Background()
	// One runs, one waits: the queue is full.
	long := request("a", []int32{1, 2}, 120)
	streams, err := c.Submit(ctx, []*scheduler.Request{long})
	if err != nil {
		t.Fatal(err)
	}
	defer streams[0].Cancel()
	if _, err := streams[0].Recv(ctx); err != nil { // it started
		t.Fatal(err)
	}
	waiting, err := c.Submit(ctx, []*scheduler.Request{request("b", []int32{1, 2}, 120)})
	if err != nil {
		t.Fatal(err)
	}
	defer waiting[0].Cancel()
	var qf *scheduler.QueueFullError
	if _, err := c.Submit(ctx, []*scheduler.Request{request("c", []int32{1, 2}, 4)}); !errors.As(err, &qf) || qf.RetryAfter < time.Second {
		t.Fatalf("third request: %v", err)
	}
}

// An executor that fails as a whole is replaced: the requests it held end
// with ErrEngine, the core is ready again and serves new requests.
func TestExecutorFailureRestarts(t *testing.T) {
	var mu sync.Mutex
	made := 0
	c := testCore(t, func() *enginetest.Fake {
		mu.Lock()
		defer mu.Unlock()
		made++
		if made == 1 {
			return &enginetest.Fake{FatalAfter: 3}
		}
		return &enginetest.Fake{}
	}, nil)
	streams, err := c.Submit(context.Background(), []*scheduler.Request{request("a", []int32{1, 2, 3}, 50)})
	if err != nil {
		t.Fatal(err)
	}
	_, last := drain(t, streams[0])
	if last.Finish != scheduler.FinishAbort || !errors.Is(last.Err, scheduler.ErrEngine) {
		t.Fatalf("request on the failed executor ended %s %v", last.Finish, last.Err)
	}
	// The request's end is delivered before the new executor is built; a
	// call through the inbox runs after it was.
	if err := c.call(context.Background(), func() {}); err != nil {
		t.Fatal(err)
	}
	if c.Restarts() != 1 || !c.Ready() {
		t.Fatalf("restarts %d, ready %v", c.Restarts(), c.Ready())
	}
	r := request("b", []int32{4, 5, 6}, 7)
	streams, err = c.Submit(context.Background(), []*scheduler.Request{r})
	if err != nil {
		t.Fatal(err)
	}
	if toks, _ := drain(t, streams[0]); !slices.Equal(toks, want(r.Prompt, 7)) {
		t.Fatalf("after the restart: %v", toks)
	}
}

// An executor that keeps failing ends Run with the error; the core is not
// ready and refuses requests.
func TestExecutorFailingForGood(t *testing.T) {
	cfg := Config{
		Scheduler: scheduler.Config{MaxNumSeqs: 2, MaxNumBatchedTokens: 16, MaxWaiting: 8, MaxModelLen: 64},
		KV:        kvcache.Config{BlockSize: 4, Slots: 2, SlotTokens: 64},
		NewExecutor: func(slots int) (engine.Executor, error) {
			return &enginetest.Fake{Slots: slots, SlotTokens: 64, FatalAfter: 1}, nil
		},
		MaxRestarts: 2, RestartWindow: time.Hour,
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	<-c.Started()
	for range 3 {
		streams, err := c.Submit(context.Background(), []*scheduler.Request{request("a", []int32{1, 2}, 5)})
		if err != nil {
			break // the core gave up
		}
		if _, last := drain(t, streams[0]); !errors.Is(last.Err, scheduler.ErrEngine) && !errors.Is(last.Err, scheduler.ErrClosed) {
			t.Fatalf("request ended %v", last.Err)
		}
	}
	if err := <-done; err == nil {
		t.Fatal("Run returned nil after the executor failed three times")
	}
	if c.Ready() || c.Restarts() != 3 {
		t.Fatalf("ready %v, restarts %d", c.Ready(), c.Restarts())
	}
	if _, err := c.Submit(context.Background(), []*scheduler.Request{request("b", []int32{1, 2}, 5)}); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("submit after the core stopped: %v", err)
	}
}

// Stopping the core ends the live requests with ErrClosed, and counts them.
func TestShutdownCutsLiveRequests(t *testing.T) {
	c, err := New(Config{
		Scheduler:   scheduler.Config{MaxNumSeqs: 1, MaxNumBatchedTokens: 16, MaxWaiting: 8, MaxModelLen: 4096},
		KV:          kvcache.Config{BlockSize: 4, Slots: 1, SlotTokens: 4096},
		NewExecutor: func(slots int) (engine.Executor, error) { return &enginetest.Fake{Slots: slots, SlotTokens: 4096}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	streams, err := c.Submit(context.Background(), []*scheduler.Request{request("a", []int32{1, 2}, 4000), request("b", []int32{1, 2}, 4000)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streams[0].Recv(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if _, last := drain(t, s); !errors.Is(last.Err, scheduler.ErrClosed) {
			t.Fatalf("a live request ended %v", last.Err)
		}
	}
	if c.Cut() != 2 {
		t.Fatalf("cut %d, want 2", c.Cut())
	}
}

// A deadline ends a request even when nothing else wakes the core.
func TestDeadline(t *testing.T) {
	c := testCore(t, nil, func(cfg *Config) { cfg.Scheduler.MaxModelLen, cfg.KV.SlotTokens = 100000, 100000 })
	r := request("a", []int32{1, 2}, 99000)
	r.Deadline = time.Now().Add(20 * time.Millisecond)
	streams, err := c.Submit(context.Background(), []*scheduler.Request{r})
	if err != nil {
		t.Fatal(err)
	}
	if _, last := drain(t, streams[0]); !errors.Is(last.Err, scheduler.ErrDeadline) {
		t.Fatalf("ended %v, want the deadline", last.Err)
	}
}

// An executor that can resize starts small, grows when requests wait for a
// slot, and shrinks back after a while without work; the answers do not
// change.
func TestSlotsFollowTheLoad(t *testing.T) {
	var fake *enginetest.Fake
	fc := clock.NewFake(time.Now())
	c := testCore(t, func() *enginetest.Fake { fake = &enginetest.Fake{}; return fake }, func(cfg *Config) {
		cfg.KV.InitialSlots = 1
		cfg.IdleShrink = time.Minute
		cfg.Clock = fc
	})
	if fake.SlotCount() != 1 {
		t.Fatalf("started with %d slots", fake.SlotCount())
	}
	var reqs []*scheduler.Request
	for i := range 4 {
		reqs = append(reqs, request(string(rune('a'+i)), []int32{1, int32(i + 2), 7}, 20))
	}
	streams, err := c.Submit(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		if toks, _ := drain(t, s); !slices.Equal(toks, want(reqs[i].Prompt, 20)) {
			t.Errorf("request %d: %v", i, toks)
		}
	}
	if got := fake.Stats().Resizes; len(got) == 0 || got[0] != 4 {
		t.Fatalf("resizes %v, want a grow to 4 first", got)
	}
	// Idle, the core sleeps until the shrink is due (its only timer);
	// nothing shrinks before.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fc.WaitArmed(ctx, time.Minute); err != nil {
		t.Fatalf("the idle core set no timer for its shrink: %v", err)
	}
	passed(t, c)
	if n := fake.SlotCount(); n != 4 {
		t.Fatalf("%d slots before IdleShrink passed, want 4", n)
	}
	fc.Advance(time.Minute)
	passed(t, c)
	if n := fake.SlotCount(); n != 1 || c.Stats().KV.ActiveSlots != 1 {
		t.Fatalf("after idling: %d slots (stats %d), want 1", n, c.Stats().KV.ActiveSlots)
	}
}

// Receive hands every stream's batches to one goroutine and stops when fn
// says so or ctx ends.
func TestReceive(t *testing.T) {
	streams := []*Stream{NewStream("a", 1, func(int, bool) {}), NewStream("b", 1, func(int, bool) {})}
	streams[1].Push([]scheduler.Output{{Choice: 0, Tokens: []int32{2}}}, scheduler.Usage{})
	streams[0].Push([]scheduler.Output{{Choice: 0, Tokens: []int32{1}, Finish: scheduler.FinishStop}}, scheduler.Usage{})
	streams[1].Push([]scheduler.Output{{Choice: 0, Tokens: []int32{3}, Finish: scheduler.FinishLength}}, scheduler.Usage{})
	got := map[int][]int32{}
	ended := 0
	err := Receive(context.Background(), streams, func(i int, outs []scheduler.Output, err error) (bool, error) {
		if errors.Is(err, io.EOF) {
			ended++
			return ended == 2, nil
		}
		if err != nil {
			return false, err
		}
		for _, o := range outs {
			got[i] = append(got[i], o.Tokens...)
		}
		return false, nil
	})
	if err != nil || !slices.Equal(got[0], []int32{1}) || !slices.Equal(got[1], []int32{2, 3}) {
		t.Fatalf("err %v, got %v", err, got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	open := []*Stream{NewStream("c", 1, func(int, bool) {}), NewStream("d", 1, func(int, bool) {})}
	if err := Receive(ctx, open, func(int, []scheduler.Output, error) (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
