package core

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/scheduler"
)

// gatedExecutor runs the fake engine on a fake clock: each step takes the
// time cost gives it, and starts only when the test hands gate a permit,
// so the test decides how many steps run between its submissions. It
// records what every step computed.
type gatedExecutor struct {
	engine.Executor
	clock *clock.Fake
	cost  func(st *engine.Step, long map[engine.SeqID]bool) time.Duration
	gate  chan struct{}

	mu    sync.Mutex
	steps []stepRecord // guarded by mu
	long  map[engine.SeqID]bool
}

// stepRecord is what one step computed: each sequence's tokens, and which
// sequences decoded (one token, sampled).
type stepRecord struct {
	tokens   map[engine.SeqID]int
	decoding []engine.SeqID
}

func (g *gatedExecutor) Execute(ctx context.Context, step *engine.Step) (engine.StepResult, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return engine.StepResult{}, ctx.Err()
	}
	rec := stepRecord{tokens: map[engine.SeqID]int{}}
	for _, ch := range step.Batch {
		rec.tokens[ch.Seq] = len(ch.Tokens)
		if len(ch.Tokens) == 1 && ch.Sample {
			rec.decoding = append(rec.decoding, ch.Seq)
		}
	}
	g.mu.Lock()
	for _, a := range step.Added {
		if len(a.History) >= 500 {
			g.long[a.Seq] = true
		}
	}
	g.steps = append(g.steps, rec)
	g.mu.Unlock()
	g.clock.Advance(g.cost(step, g.long))
	return g.Executor.Execute(ctx, step)
}

// pacingObserver records what the core reports of pacing: each paced
// step's Pacing, and each finished request's prompt chunks.
type pacingObserver struct {
	mu     sync.Mutex
	paced  []scheduler.Pacing // guarded by mu
	chunks []int              // guarded by mu
}

func (o *pacingObserver) StepDone(s StepInfo) {
	if s.Paced.Limit > 0 && s.Paced.Tokens > 0 {
		o.mu.Lock()
		o.paced = append(o.paced, s.Paced)
		o.mu.Unlock()
	}
}

func (o *pacingObserver) RequestDone(r RequestInfo) {
	o.mu.Lock()
	o.chunks = append(o.chunks, r.PromptChunks)
	o.mu.Unlock()
}

func (*pacingObserver) FirstToken(time.Duration) {}
func (*pacingObserver) EngineRestarted()         {}

// run runs n steps.
func (g *gatedExecutor) run(n int) {
	for range n {
		g.gate <- struct{}{}
	}
}

// finish runs steps until every stream ended, and returns each stream's
// tokens.
func (g *gatedExecutor) finish(t *testing.T, streams []*Stream) [][]int32 {
	t.Helper()
	out := make([][]int32, len(streams))
	errs := make([]error, len(streams))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, s := range streams {
			for {
				outs, err := s.Recv(context.Background())
				if err != nil {
					if !errors.Is(err, io.EOF) {
						errs[i] = err
					}
					break
				}
				for _, o := range outs {
					out[i] = append(out[i], o.Tokens...)
				}
			}
		}
	}()
	for {
		select {
		case g.gate <- struct{}{}:
		case <-done:
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
}

// pacedCore runs an engine core whose executor is a gatedExecutor with
// cost on a fake clock (given the step and the long prompts' sequences),
// with long prompts over threshold, and starts two
// streams that outlast the test: their prefill, then a step that only
// decodes (the pacer's first measurement); the core waits in the next
// step.
func pacedCore(t *testing.T, threshold int, cost func(*engine.Step, map[engine.SeqID]bool) time.Duration) (*EngineCore, *gatedExecutor, *pacingObserver) {
	t.Helper()
	fc := clock.NewFake(time.Now())
	g := &gatedExecutor{clock: fc, gate: make(chan struct{}), long: map[engine.SeqID]bool{}, cost: cost}
	obs := &pacingObserver{}
	c := testCore(t, nil, func(cfg *Config) {
		cfg.Observer = obs
		cfg.Scheduler = scheduler.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 2048, MaxWaiting: 16, MaxModelLen: 4096, LongPrefillTokens: threshold}
		cfg.KV = kvcache.Config{BlockSize: 16, Slots: 8, SlotTokens: 4096, CacheBytes: 1 << 20}
		cfg.Clock = fc
		fake := cfg.NewExecutor
		cfg.NewExecutor = func(slots int) (engine.Executor, error) {
			e, err := fake(slots)
			g.Executor = e
			return g, err
		}
	})
	streams, err := c.Submit(context.Background(), []*scheduler.Request{request("s0", distinct(1, 8), 3000), request("s1", distinct(2, 8), 3000)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range streams {
			s.Cancel()
		}
	})
	g.run(3)
	return c, g, obs
}

// promptTokens counts the tokens of a step's chunks that do not decode.
func promptTokens(st *engine.Step) int {
	n := 0
	for _, ch := range st.Batch {
		if len(ch.Tokens) > 1 || !ch.Sample {
			n += len(ch.Tokens)
		}
	}
	return n
}

// longChunks returns the sizes of the chunks of each long prompt the
// executor saw, in order, and fails the test for a step where one
// computed beside fewer than two decodes or over threshold.
func (g *gatedExecutor) longChunks(t *testing.T, threshold int) [][]int {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	var chunks [][]int
	index := map[engine.SeqID]int{}
	for i, st := range g.steps {
		for seq, n := range st.tokens {
			if !g.long[seq] || n == 1 && slices.Contains(st.decoding, seq) {
				continue
			}
			if _, ok := index[seq]; !ok {
				index[seq] = len(chunks)
				chunks = append(chunks, nil)
			}
			chunks[index[seq]] = append(chunks[index[seq]], n)
			if len(st.decoding) < 2 {
				t.Errorf("step %d computed %d tokens of a long prompt and decoded only %d streams, want both", i, n, len(st.decoding))
			}
			if n > threshold {
				t.Errorf("step %d computed %d tokens of a long prompt beside %d decodes, over the threshold of %d", i, n, len(st.decoding), threshold)
			}
		}
	}
	return chunks
}

// distinct is a prompt of n tokens no other prompt of the test shares.
func distinct(seed, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(1 + (seed*7919+i*31)%(vocab-1))
	}
	return p
}

// TestLongPromptPacedOnABusyMachine: on a machine whose measured step times
// make the pacer's target far larger than the threshold (a decode step of
// the streams stretched to 20 ms by other load, a prompt token 20 µs), and
// after steps of short prompts beside the decodes, a long prompt beside
// decoding streams still computes in chunks of at most
// LongPrefillTokens, every stream decoding in each of those steps, and its
// answer is what it is alone. The observer hears each paced step and the
// steps each prompt took.
func TestLongPromptPacedOnABusyMachine(t *testing.T) {
	const threshold = 256
	c, g, obs := pacedCore(t, threshold, func(st *engine.Step, _ map[engine.SeqID]bool) time.Duration {
		return 20*time.Millisecond + time.Duration(promptTokens(st))*20*time.Microsecond
	})
	ctx := context.Background()
	// Short prompts beside the decodes, 600 tokens a step: they measure a
	// prompt token's cost, and must not let the budget grow.
	for burst := range 6 {
		var shorts []*scheduler.Request
		for i := range 3 {
			id := 3*burst + i
			shorts = append(shorts, request("short"+string(rune('a'+id)), distinct(10+id, 200), 1))
		}
		ss, err := c.Submit(ctx, shorts)
		if err != nil {
			t.Fatal(err)
		}
		got := g.finish(t, ss)
		for i := range shorts {
			if !slices.Equal(got[i], want(shorts[i].Prompt, 1)) {
				t.Fatalf("short %d of burst %d: %v, want %v", i, burst, got[i], want(shorts[i].Prompt, 1))
			}
		}
	}
	// Two long prompts, one after the other: the first starts from the
	// budget of 16 (the short prompts did not grow it) and doubles it after
	// each chunk that used it all, up to the threshold (the times say
	// 1000); the second starts there.
	for i := range 2 {
		long := request("long"+string(rune('0'+i)), distinct(99+i, 600), 4)
		ls, err := c.Submit(ctx, []*scheduler.Request{long})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.finish(t, ls)[0]; !slices.Equal(got, want(long.Prompt, 4)) {
			t.Fatalf("long prompt %d's answer %v, want %v", i, got, want(long.Prompt, 4))
		}
	}
	// The core tells the observer of a request's end after its stream's;
	// a step more (the streams still decode) and it has.
	g.run(1)

	chunks := g.longChunks(t, threshold)
	if want := [][]int{{16, 32, 64, 128, 256, 104}, {256, 256, 88}}; !slices.EqualFunc(chunks, want, slices.Equal) {
		t.Errorf("the long prompts' chunks %v, want %v", chunks, want)
	}

	obs.mu.Lock()
	defer obs.mu.Unlock()
	var wantPaced []scheduler.Pacing
	for i, n := range []int{16, 32, 64, 128, 256, 104, 256, 256, 88} {
		wantPaced = append(wantPaced, scheduler.Pacing{Limit: min(16<<i, threshold), Tokens: n})
	}
	if !slices.Equal(obs.paced, wantPaced) {
		t.Errorf("the observer heard paced steps %v, want %v", obs.paced, wantPaced)
	}
	// 18 short prompts of one step each, then the long ones of 6 and 3.
	if want := append(slices.Repeat([]int{1}, 18), 6, 3); !slices.Equal(obs.chunks, want) {
		t.Errorf("the observer heard prompt chunks %v, want %v", obs.chunks, want)
	}
}

// TestLongPromptBudgetRecovers: on a machine where prompt tokens cost much
// at first (10 ms each beside a 20 ms decode step: the budget falls to 2)
// and little after the long prompt's tenth chunk (20 µs), the budget is
// measured again over steps of fewer than 16 prompt tokens and grows back:
// the 600-token prompt takes far fewer than the 300 steps it would at 2
// tokens, each at most the threshold, every stream decoding beside it.
func TestLongPromptBudgetRecovers(t *testing.T) {
	const threshold = 256
	longSteps := 0 // steps that computed the long prompt; only the core's goroutine (cost) uses it
	c, g, _ := pacedCore(t, threshold, func(st *engine.Step, isLong map[engine.SeqID]bool) time.Duration {
		perToken := 10 * time.Millisecond
		if longSteps >= 10 {
			perToken = 20 * time.Microsecond
		}
		for _, ch := range st.Batch {
			if isLong[ch.Seq] && !ch.Sample {
				longSteps++
				break
			}
		}
		return 20*time.Millisecond + time.Duration(promptTokens(st))*perToken
	})
	long := request("long", distinct(99, 600), 4)
	ls, err := c.Submit(context.Background(), []*scheduler.Request{long})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.finish(t, ls)[0]; !slices.Equal(got, want(long.Prompt, 4)) {
		t.Fatalf("the long prompt's answer %v, want %v", got, want(long.Prompt, 4))
	}
	chunks := g.longChunks(t, threshold)
	if len(chunks) != 1 || len(chunks[0]) > 100 || chunks[0][1] != 2 {
		t.Errorf("the long prompt's chunks %v: want 16, then 2 a step while prompt tokens cost 10 ms, then growing again, in 100 steps at most", chunks)
	}
}
