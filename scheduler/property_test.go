package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
)

// TestSchedulerRandomized drives a Scheduler, its kvcache.Manager and an
// enginetest.Fake with random requests (shared prefixes, salts,
// priorities, n > 1, stop tokens, min_tokens, seeded sampling, prompt
// logprobs, a poison token), aborts and deadlines, and checks every step
// that:
//
//   - running sequences are at most MaxNumSeqs, each holds exactly one
//     slot, no slot is shared, waiting sequences hold none, and the fake's
//     slot holds exactly the sequence's computed tokens;
//   - a step stays within MaxNumBatchedTokens, every chunk continues its
//     sequence's slot, and every running sequence that decodes gets its
//     token;
//   - the fake accepts every step: its only failures are the poison token;
//   - cached bytes stay within the budget and the event outbox within
//     MaxEvents;
//   - outputs are well formed: nothing after a choice's finish, one First
//     and one Last per request, exact usage;
//
// and at the end that every request finished (no livelock), nothing is
// left in the engine, and every choice produced exactly what the fake
// model gives the request alone on a fresh scheduler (a prefix of it when
// the choice was aborted or expired), whether it hit the cache, waited for
// a sibling, or was preempted.
func TestSchedulerRandomized(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newSchedRand(t, seed, false)
			for range 4000 {
				r.op()
			}
			r.drain()
			r.compare()
		})
	}
}

// TestSchedulerRandomizedKVCapacity is TestSchedulerRandomized with a KV
// token capacity of a few blocks (often less than MaxModelLen, and less
// than MaxNumSeqs sequences need), so that admission waits for tokens,
// decodes preempt, and sequences end at the capacity. It also checks,
// every step, that:
//
//   - the tokens reserved stay within the capacity and add up to the
//     running sequences' reservations, and each running sequence reserves
//     at least what it computed, and all its tokens while it prefills (the
//     fake, which fails a chunk beyond the capacity, confirms the engine
//     never runs out);
//   - the step does work whenever a sequence runs, and the head of the
//     queue waits only for a slot, for tokens, or for the token budget (no
//     deadlock, no idle capacity);
//   - a prompt of the capacity or more is refused by CheckRequest, with
//     ErrTooLong naming the prompt and the capacity.
func TestSchedulerRandomizedKVCapacity(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newSchedRand(t, seed, true)
			for range 4000 {
				r.op()
			}
			r.drain()
			r.compare()
		})
	}
}

// TestSchedulerRandomizedSpeculative is TestSchedulerRandomized (with and
// without a KV token capacity) with n-gram speculation on (seeds 0 to 7)
// or a fake draft model (8 to 11, right in part): every choice still
// produces exactly what it produces alone without speculation, and the
// step budget, the KV reservations and every other invariant hold with
// drafts in the steps.
func TestSchedulerRandomizedSpeculative(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newSchedRand(t, seed, seed%2 == 1)
			rng := rand.New(rand.NewPCG(seed, 3))
			minN := 1 + rng.IntN(2)
			r.spec = Speculative{Method: SpecNgram, NumTokens: 1 + rng.IntN(6), PromptLookupMin: minN, PromptLookupMax: minN + rng.IntN(3)}
			if seed >= 8 {
				r.spec = Speculative{Method: SpecDraft, Model: "draft.gguf", NumTokens: r.spec.NumTokens, DisableByBatchSize: int(seed % 3)}
			}
			r.s, r.kv, r.fake = r.newScheduler(true)
			t.Logf("speculative %+v", r.spec)
			for range 4000 {
				r.op()
			}
			r.drain()
			r.compare()
			if st := r.s.Stats().Spec; st.AcceptedTokens == 0 && r.cfg.MaxNumBatchedTokens > r.cfg.MaxNumSeqs {
				t.Fatalf("no draft token accepted: %+v", st)
			}
		})
	}
}

type choiceResult struct {
	tokens []int32
	finish FinishReason
	err    error
	// cut: the choice was aborted or expired by the test, so it may have
	// produced only a prefix of its answer.
	cut bool
	// promptLogprobs counts the prompt logprobs received.
	promptLogprobs int
}

type reqResult struct {
	req       *Request
	choices   []choiceResult
	first     bool
	last      bool
	usage     Usage
	tokensOut int
}

type schedRand struct {
	t     *testing.T
	rng   *rand.Rand
	cfg   Config
	kvCfg kvcache.Config
	fake  *enginetest.Fake
	s     *Scheduler
	kv    *kvcache.Manager
	now   time.Time
	steps int

	// spec, when its Method is set, turns speculation on for the run (the
	// solo runs it is compared with go without it) and gives the fake a
	// model that repeats itself, so that drafts are often right.
	spec     Speculative
	prefixes [][]int32
	results  map[string]*reqResult
	live     []string
	nextReq  int
	started  int
	stats    struct{ preempted, hits, prefills, restored int }
}

func newSchedRand(t *testing.T, seed uint64, capacity bool) *schedRand {
	rng := rand.New(rand.NewPCG(seed, 2))
	cfg := Config{MaxNumSeqs: 1 + rng.IntN(6), MaxWaiting: 64, MaxModelLen: 24 + rng.IntN(24)}
	cfg.MaxNumBatchedTokens = cfg.MaxNumSeqs + rng.IntN(24)
	kvCfg := kvcache.Config{
		BlockSize:  1 + rng.IntN(4),
		Slots:      cfg.MaxNumSeqs + rng.IntN(3),
		SlotTokens: cfg.MaxModelLen + rng.IntN(8),
		MaxEvents:  rng.IntN(8),
	}
	if seed%3 != 2 { // some seeds without a prefix cache
		kvCfg.CacheBytes = int64(rng.IntN(40) * kvCfg.BlockSize * 4)
	}
	if capacity {
		bs := kvCfg.BlockSize
		kvCfg.CapacityTokens = bs * ((2+bs-1)/bs + rng.IntN(2*cfg.MaxModelLen/bs))
		cfg.KVCapacityTokens = kvCfg.CapacityTokens
	}
	r := &schedRand{t: t, rng: rng, cfg: cfg, kvCfg: kvCfg, now: testBase, results: map[string]*reqResult{}}
	r.s, r.kv, r.fake = r.newScheduler(true)
	for range 3 {
		p := make([]int32, 1+rng.IntN(cfg.MaxModelLen/2))
		for i := range p {
			p[i] = 1 + rng.Int32N(15)
		}
		r.prefixes = append(r.prefixes, p)
	}
	t.Logf("config %+v kv %+v", cfg, kvCfg)
	return r
}

// newScheduler returns a fresh scheduler, manager and fake with the
// test's configuration. The fake's vocabulary is small so that stop
// tokens and the poison token come up; 13 is the poison.
func (r *schedRand) newScheduler(spec bool) (*Scheduler, *kvcache.Manager, *enginetest.Fake) {
	kv, err := kvcache.New(r.kvCfg)
	if err != nil {
		r.t.Fatal(err)
	}
	cfg := r.cfg
	if spec {
		cfg.Speculative = r.spec
	}
	s, err := New(cfg, kv)
	if err != nil {
		r.t.Fatal(err)
	}
	f := &enginetest.Fake{Slots: r.kvCfg.Slots, SlotTokens: r.kvCfg.SlotTokens, CapacityTokens: r.kvCfg.CapacityTokens, Vocab: 40, PoisonToken: 13}
	if r.spec.Method != SpecNone {
		// A poisoned draft token fails its sequence a step before the
		// token would have failed it alone, losing that step's tokens.
		f.PoisonToken = 0
		f.Model = periodic(7, 5)
		if r.spec.Method == SpecDraft {
			f.Drafter = modelDrafter(f.Model, f.Vocab, 4)
		}
	}
	return s, kv, f
}

func (r *schedRand) randomRequest() *Request {
	rng := r.rng
	maxLen := r.cfg.MaxSeqLen()
	p := r.prefixes[rng.IntN(len(r.prefixes))]
	prompt := slices.Clone(p[:1+rng.IntN(len(p))])
	for range rng.IntN(8) {
		prompt = append(prompt, 1+rng.Int32N(39))
	}
	if rng.IntN(3) != 0 {
		// Keep the poison rare in prompts.
		for i, tok := range prompt {
			if tok == 13 {
				prompt[i] = 14
			}
		}
	}
	prompt = prompt[:min(len(prompt), maxLen-1)]
	req := &Request{
		ID:             fmt.Sprintf("r%d", r.nextReq),
		Prompt:         prompt,
		Sampling:       engine.DefaultSampling(),
		N:              1 + rng.IntN(min(3, r.cfg.MaxNumSeqs)),
		MaxTokens:      1 + rng.IntN(r.cfg.MaxModelLen-len(prompt)),
		Priority:       rng.IntN(3),
		Arrival:        r.now,
		PromptLogprobs: -1,
	}
	r.nextReq++
	if rng.IntN(3) == 0 {
		req.MinTokens = rng.IntN(req.MaxTokens + 1)
	}
	for range rng.IntN(3) {
		req.StopTokens = append(req.StopTokens, rng.Int32N(40))
	}
	if rng.IntN(4) == 0 {
		req.Sampling.Temperature = 0.7
		req.Sampling.Seed = rng.Uint32()
	}
	if rng.IntN(5) == 0 {
		req.CacheSalt = "s"
	}
	if rng.IntN(8) == 0 {
		req.PromptLogprobs = rng.IntN(2)
	}
	if rng.IntN(3) == 0 {
		req.Thinking = &Thinking{Start: []int32{30}, End: []int32{31, 32}, After: []int32{33},
			StartInside: rng.IntN(2) == 0, Budget: rng.IntN(6) - 1}
	}
	if rng.IntN(10) == 0 {
		req.Deadline = r.now.Add(time.Duration(5+rng.IntN(80)) * time.Second)
	}
	return req
}

func (r *schedRand) op() {
	switch n := r.rng.IntN(100); {
	case n < 30:
		if len(r.live) < 16 {
			r.add(r.randomRequest())
		}
	case n < 31 && r.cfg.KVCapacityTokens > 0 && r.cfg.KVCapacityTokens < r.cfg.MaxModelLen && r.rng.IntN(4) == 0:
		r.refuse()
	case n < 31:
		if len(r.live) == 0 {
			return
		}
		id := r.live[r.rng.IntN(len(r.live))]
		choice := -1
		if r.rng.IntN(2) == 0 {
			choice = r.rng.IntN(r.results[id].req.N)
		}
		r.s.Abort(id, choice, r.rng.IntN(2) == 0, nil)
		r.collect(r.s.Outputs(), true)
	default:
		r.step()
	}
}

// refuse checks that a prompt that fits the context but not the KV
// capacity is refused.
func (r *schedRand) refuse() {
	req := r.randomRequest()
	r.nextReq-- // never added
	c := r.cfg.KVCapacityTokens
	for n := c + r.rng.IntN(r.cfg.MaxModelLen-c); len(req.Prompt) < n; {
		req.Prompt = append(req.Prompt, 1+r.rng.Int32N(39))
	}
	req.MaxTokens = 1
	var re *RequestError
	if err := r.cfg.CheckRequest(req); !errors.As(err, &re) || !errors.Is(err, ErrTooLong) || re.Field != FieldPrompt || re.KVTokens != c || re.Limit != c {
		r.t.Fatalf("a prompt of %d tokens for a KV capacity of %d: %v", len(req.Prompt), c, err)
	}
}

func (r *schedRand) add(req *Request) {
	if err := r.cfg.CheckRequest(req); err != nil {
		r.t.Fatalf("generated a bad request: %v", err)
	}
	r.s.Add(req)
	r.results[req.ID] = &reqResult{req: req, choices: make([]choiceResult, req.N)}
	r.live = append(r.live, req.ID)
}

func (r *schedRand) step() {
	t := r.t
	s := r.s
	r.steps++
	r.now = r.now.Add(time.Second)
	s.Expire(r.now)
	r.collect(s.Outputs(), true)

	// Sequences that decode now must get their token this step (unless
	// preempted).
	decoding := map[*sequence]bool{}
	for _, sq := range s.running {
		if len(sq.tokens)-sq.computed == 1 {
			decoding[sq] = true
		}
	}
	step := s.Schedule()
	r.checkProgress(step)

	if len(s.running) > r.cfg.MaxNumSeqs {
		t.Fatalf("step %d: %d running, max %d", r.steps, len(s.running), r.cfg.MaxNumSeqs)
	}
	if n := step.NumTokens(); n > r.cfg.MaxNumBatchedTokens {
		t.Fatalf("step %d: %d tokens, budget %d", r.steps, n, r.cfg.MaxNumBatchedTokens)
	}
	chunked := map[engine.SeqID]bool{}
	slots := map[engine.Slot]bool{}
	for _, c := range step.Batch {
		sq := s.byID[c.Seq]
		slot, held := r.kv.Slot(c.Seq)
		switch {
		case sq == nil || sq.state != seqRunning:
			t.Fatalf("step %d: a chunk for sequence %d, which is not running", r.steps, c.Seq)
		case !held || slot != c.Slot:
			t.Fatalf("step %d: chunk of %d in slot %d, the manager says %d (%v)", r.steps, c.Seq, c.Slot, slot, held)
		case slots[c.Slot] || chunked[c.Seq]:
			t.Fatalf("step %d: two chunks for slot %d or sequence %d", r.steps, c.Slot, c.Seq)
		case int(c.Pos) != sq.computed || len(c.Tokens) == 0:
			t.Fatalf("step %d: chunk of %d at %d+%d, computed %d", r.steps, c.Seq, c.Pos, len(c.Tokens), sq.computed)
		}
		slots[c.Slot], chunked[c.Seq] = true, true
		if c.Pos > 0 && !sq.admitted {
			t.Fatalf("step %d: not admitted", r.steps)
		}
	}
	for sq := range decoding {
		if sq.state == seqRunning && !chunked[sq.id] {
			t.Fatalf("step %d: running sequence %d decodes but got no token", r.steps, sq.id)
		}
	}
	for _, rs := range step.Restores {
		r.stats.restored += len(rs.KV)
	}
	r.stats.preempted = int(s.preemptions)

	res, err := r.fake.Execute(context.Background(), step)
	if err != nil {
		t.Fatalf("step %d: %v", r.steps, err)
	}
	for _, f := range res.Failures {
		if !errors.Is(f.Err, engine.ErrSampling) {
			t.Fatalf("step %d: the engine refused sequence %d: %v", r.steps, f.Seq, f.Err)
		}
	}
	s.Update(step, res)
	r.collect(s.Outputs(), false)
	r.started += s.TakeStarted()
	r.checkState()
}

// checkProgress checks that a step does work whenever a sequence runs,
// and that the head of the queue waits only for a slot, for KV tokens, or
// for the token budget.
func (r *schedRand) checkProgress(step *engine.Step) {
	s := r.s
	if len(step.Batch) == 0 && len(s.running) > 0 {
		r.t.Fatalf("step %d: %d sequences run and none got a chunk", r.steps, len(s.running))
	}
	head := s.waitingHead()
	if head == nil {
		return
	}
	if s.kv.FreeSlots() > 0 && len(s.running) < r.cfg.MaxNumSeqs && s.kv.FitsTokens(len(head.tokens)) && step.NumTokens() < r.cfg.MaxNumBatchedTokens {
		r.t.Fatalf("step %d: the head of the queue (%d tokens) could start and did not: %d free slots, %d free tokens, %d running, %d tokens in the step",
			r.steps, len(head.tokens), s.kv.FreeSlots(), s.kv.FreeTokens(), len(s.running), step.NumTokens())
	}
}

func (r *schedRand) checkState() {
	t := r.t
	s := r.s
	slots := map[engine.Slot]engine.SeqID{}
	for _, sq := range s.running {
		slot, ok := r.kv.Slot(sq.id)
		if !ok {
			t.Fatalf("step %d: running sequence %d holds no slot", r.steps, sq.id)
		}
		if other, dup := slots[slot]; dup {
			t.Fatalf("step %d: slot %d held by %d and %d", r.steps, slot, sq.id, other)
		}
		slots[slot] = sq.id
		if n := r.fake.SlotLen(slot); n != sq.computed {
			t.Fatalf("step %d: sequence %d computed %d, its slot holds %d", r.steps, sq.id, sq.computed, n)
		}
	}
	for _, sq := range s.waiting {
		if r.kv.Holds(sq.id) {
			t.Fatalf("step %d: waiting sequence %d holds a slot", r.steps, sq.id)
		}
	}
	st := r.kv.Stats()
	if c := r.cfg.KVCapacityTokens; c > 0 {
		reserved := 0
		for _, sq := range s.running {
			n := r.kv.Reserved(sq.id)
			reserved += n
			if n < sq.computed || len(sq.tokens)-sq.computed > 1 && n < len(sq.tokens) {
				t.Fatalf("step %d: sequence %d reserves %d positions, computed %d of %d", r.steps, sq.id, n, sq.computed, len(sq.tokens))
			}
			if len(sq.tokens) >= r.cfg.MaxSeqLen() {
				t.Fatalf("step %d: sequence %d runs with %d tokens, the limit is %d", r.steps, sq.id, len(sq.tokens), r.cfg.MaxSeqLen())
			}
		}
		if reserved != st.ReservedTokens || reserved > c || st.CapacityTokens != c || st.Usage() > 1 {
			t.Fatalf("step %d: running sequences reserve %d; stats %+v", r.steps, reserved, st)
		}
	}
	if st.UsedSlots != len(s.running) {
		t.Fatalf("step %d: %d slots used, %d running", r.steps, st.UsedSlots, len(s.running))
	}
	if st.CachedBytes > r.kvCfg.CacheBytes {
		t.Fatalf("step %d: %d cached bytes, budget %d", r.steps, st.CachedBytes, r.kvCfg.CacheBytes)
	}
	maxEvents := r.kvCfg.MaxEvents
	if maxEvents == 0 {
		maxEvents = kvcache.DefaultMaxEvents
	}
	if st.EventsPending > maxEvents {
		t.Fatalf("step %d: %d events pending, bound %d", r.steps, st.EventsPending, maxEvents)
	}
	if r.rng.IntN(4) == 0 {
		r.kv.DrainEvents()
	}
}

// collect records outputs and checks their form. cut marks finishes that
// came from the test's aborts and deadlines.
func (r *schedRand) collect(outs []RequestOutput, cut bool) {
	t := r.t
	for _, o := range outs {
		rr := r.results[o.RequestID]
		if rr == nil || rr.last {
			t.Fatalf("output for a request that is unknown or over: %+v", o)
		}
		c := &rr.choices[o.Output.Choice]
		if c.finish != FinishNone {
			t.Fatalf("%s/%d: output after its finish: %+v", o.RequestID, o.Output.Choice, o.Output)
		}
		if len(o.Output.Tokens) > 0 && !rr.first != o.First {
			t.Fatalf("%s: First is %v on an output with tokens, first seen %v", o.RequestID, o.First, rr.first)
		}
		if len(o.Output.Tokens) == 0 && o.First {
			t.Fatalf("%s: First on an output without tokens", o.RequestID)
		}
		rr.first = rr.first || o.First
		c.tokens = append(c.tokens, o.Output.Tokens...)
		c.promptLogprobs += len(o.Output.PromptLogprobs)
		rr.tokensOut += len(o.Output.Tokens)
		if o.Output.Finish != FinishNone {
			c.finish, c.err = o.Output.Finish, o.Output.Err
			c.cut = cut
		}
		open := 0
		for _, ch := range rr.choices {
			if ch.finish == FinishNone {
				open++
			}
		}
		if o.Last != (open == 0) {
			t.Fatalf("%s: Last %v with %d choices open", o.RequestID, o.Last, open)
		}
		u := o.Usage
		if u.PromptTokens != len(rr.req.Prompt) || u.CompletionTokens != rr.tokensOut || u.CachedTokens < 0 || u.CachedTokens >= len(rr.req.Prompt) && u.CachedTokens > 0 {
			t.Fatalf("%s: usage %+v, prompt %d, %d tokens out", o.RequestID, u, len(rr.req.Prompt), rr.tokensOut)
		}
		if o.Last {
			rr.last, rr.usage = true, u
			r.live = slices.DeleteFunc(r.live, func(id string) bool { return id == o.RequestID })
			r.stats.hits += u.CachedTokens
			r.stats.prefills += len(rr.req.Prompt)
		}
	}
}

// drain steps until every request ended.
func (r *schedRand) drain() {
	for i := 0; r.s.HasWork(); i++ {
		if i > 20000 {
			r.t.Fatalf("no progress: %d running, %d waiting, live %v", len(r.s.running), len(r.s.waiting), r.live)
		}
		r.step()
	}
	st := r.kv.Stats()
	if len(r.live) > 0 || len(r.s.requests) > 0 || st.UsedSlots != 0 || r.fake.Samplers() != 0 {
		r.t.Fatalf("left behind: live %v, %d requests, %d slots, %d samplers", r.live, len(r.s.requests), st.UsedSlots, r.fake.Samplers())
	}
	if r.started != r.nextReq {
		r.t.Fatalf("%d requests started, %d added", r.started, r.nextReq)
	}
	r.t.Logf("%d requests in %d steps; %d preemptions; %d of %d prompt tokens cached; %d blocks restored",
		r.nextReq, r.steps, r.stats.preempted, r.stats.hits, r.stats.prefills, r.stats.restored)
}

// compare runs every request alone on a fresh scheduler and fake and
// compares each choice's answer.
func (r *schedRand) compare() {
	t := r.t
	ids := make([]string, 0, len(r.results))
	for id := range r.results {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cut := 0
	for _, id := range ids {
		got := r.results[id]
		want := r.solo(got.req)
		for i := range got.choices {
			g, w := got.choices[i], want[i]
			if g.cut {
				cut++
				if len(g.tokens) > len(w.tokens) || !slices.Equal(g.tokens, w.tokens[:len(g.tokens)]) {
					t.Errorf("%s/%d (cut short): %v is not a prefix of %v alone", id, i, g.tokens, w.tokens)
				}
				continue
			}
			if !slices.Equal(g.tokens, w.tokens) || g.finish != w.finish || (g.err == nil) != (w.err == nil) || g.promptLogprobs != w.promptLogprobs {
				t.Errorf("%s/%d: %v %s %v (%d prompt logprobs); alone: %v %s %v (%d)\nrequest %+v", id, i,
					g.tokens, g.finish, g.err, g.promptLogprobs, w.tokens, w.finish, w.err, w.promptLogprobs, *got.req)
			}
			if th := got.req.Thinking; th != nil {
				if _, _, ok := refThinking(th, g.tokens); !ok {
					t.Errorf("%s/%d: %v breaks the thinking budget %+v", id, i, g.tokens, *th)
				}
			}
			if g.err != nil && !errors.Is(g.err, ErrEngine) {
				t.Errorf("%s/%d: %v", id, i, g.err)
			}
		}
		if got.req.PromptLogprobs >= 0 && !got.choices[0].cut && len(got.choices[0].tokens) > 0 && got.choices[0].promptLogprobs != len(got.req.Prompt)-1 {
			t.Errorf("%s: %d prompt logprobs for a prompt of %d", id, got.choices[0].promptLogprobs, len(got.req.Prompt))
		}
	}
	t.Logf("%d requests compared with their solo runs (%d choices cut short)", len(ids), cut)
}

// solo runs one request alone and returns its choices.
func (r *schedRand) solo(req *Request) []choiceResult {
	s, _, fake := r.newScheduler(false)
	cp := *req
	cp.Deadline = time.Time{}
	s.Add(&cp)
	out := make([]choiceResult, req.N)
	for i := 0; s.HasWork(); i++ {
		if i > 1000 {
			r.t.Fatalf("%s alone: no progress", req.ID)
		}
		step := s.Schedule()
		res, err := fake.Execute(context.Background(), step)
		if err != nil {
			r.t.Fatal(err)
		}
		s.Update(step, res)
		for _, o := range s.Outputs() {
			c := &out[o.Output.Choice]
			c.tokens = append(c.tokens, o.Output.Tokens...)
			c.promptLogprobs += len(o.Output.PromptLogprobs)
			if o.Output.Finish != FinishNone {
				c.finish, c.err = o.Output.Finish, o.Output.Err
			}
		}
	}
	return out
}
