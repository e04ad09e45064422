// Package enginetest provides Fake, an engine.Executor that models what
// llmserve relies on in llama.cpp's KV memory and fails the way it does, for
// tests of the packages above the engine (scheduler, kvcache, core).
//
// The fake keeps, per slot, the tokens of positions 0..n-1 and enforces
// the engine contract: a chunk continues its slot exactly, a slot holds at
// most SlotTokens positions and all slots together at most CapacityTokens
// when it is set (ErrKVFull beyond), a restore goes into an empty slot,
// exports copy positions the slot holds. Its "model" draws the
// next token from a hash of the slot's whole token history (and, when the
// temperature is not 0, from the sequence's seeded random stream), so a
// sequence's output depends only on its own tokens, as with the real
// engine: a wrong restore, a lost position or cross-talk between sequences
// changes the output and shows in a test. Draft tokens (Chunk.Draft) are
// verified as the real engine verifies them: drawn position by position,
// accepted while the draws equal them, the rest dropped from the slot;
// Fake.Model replaces the hash model (tests of speculation give it one that
// repeats itself).
//
// Scripted (scripted.go) is the engine double for end-to-end tests: it
// wraps a real executor (llama.cpp's, through
// models.GenerativeConfig.WrapExecutor) and makes the model answer what a
// Script says (a tool call in the model's tool format, say) by forcing
// each token through the real sampler chain, so that the API, the
// frontend's templates, parsers and grammars, the scheduler and the engine
// under test are the production ones. The server binary has no way to
// set it: tests in tests/ load the model themselves.
package enginetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/llmserve/llmserve/engine"
)

// Layout is the KV layout of the fake: four bytes (the token id) per
// position.
var Layout = &engine.KVLayout{Sections: []engine.KVSection{{Groups: 1, Unit: 4}}}

// Fake is a fake engine.Executor. Its exported fields configure it before
// first use; its methods are safe for concurrent use with Execute.
type Fake struct {
	// Slots and SlotTokens size the KV memory.
	Slots, SlotTokens int
	// CapacityTokens, when > 0, bounds the positions all slots hold
	// together, as an engine whose KV pages are committed when a token is
	// written runs out of memory: a restore or chunk beyond it fails with
	// engine.ErrKVFull.
	CapacityTokens int
	// Vocab is the vocabulary size (default 1000).
	Vocab int
	// PoisonToken, when not 0, fails any sequence whose chunk holds it with
	// engine.ErrSampling, as a model producing NaN for it would.
	PoisonToken int32
	// FatalAfter, when > 0, makes the executor fail as a whole (an error
	// from Execute) on that many-th call and every call after it.
	FatalAfter int
	// EmbedTokens and EmbedInputs are the embedding capacity of a step
	// (default 64 tokens, 4 inputs).
	EmbedTokens, EmbedInputs int
	// Model, when not nil, replaces Next as the fake's model: the greedy
	// token after history (tests of speculative decoding give it one that
	// repeats itself, so that prompt lookup finds right drafts).
	Model func(history []int32, vocab int) int32
	// Drafter, when not nil, is the fake's draft model: for a chunk with
	// DraftLimit and no Draft it proposes the draft after history (the
	// slot's tokens and the chunk's), which the fake cuts to DraftLimit
	// and writes into the step's chunk, as an executor with a draft model
	// does. Without it DraftLimit is ignored.
	Drafter func(history []int32, limit int) []int32

	mu       sync.Mutex
	slots    [][]int32
	samplers map[engine.SeqID]*fakeSampler
	calls    int
	closed   bool
	stats    FakeStats
}

// FakeStats count what the fake did.
type FakeStats struct {
	Steps, DecodedTokens, Restored, Exported int
	// Resizes lists the slot counts the fake was resized to, in order.
	Resizes []int
	// MaxBatchSeqs is the most chunks one step decoded.
	MaxBatchSeqs int
	// DraftTokens counts draft tokens decoded (Chunk.Draft, counted in
	// DecodedTokens too), AcceptedTokens those accepted.
	DraftTokens, AcceptedTokens int
	// DraftLimits lists, per step with one, the DraftLimit of its chunks
	// in Batch order (0 for a chunk without).
	DraftLimits [][]int
	// Embedded counts embedded tokens; MaxEmbedInputs is the most inputs
	// one step embedded; MaxStepTokens the most tokens (batch and
	// embeddings) of one step.
	Embedded, MaxEmbedInputs, MaxStepTokens int
}

type fakeSampler struct {
	s   engine.Sampling
	rng *rand.Rand
}

func (f *Fake) init() {
	if f.slots == nil {
		f.slots = make([][]int32, f.Slots)
		f.samplers = make(map[engine.SeqID]*fakeSampler)
		if f.Vocab == 0 {
			f.Vocab = 1000
		}
	}
}

// Execute implements engine.Executor.
func (f *Fake) Execute(ctx context.Context, step *engine.Step) (engine.StepResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	var res engine.StepResult
	f.calls++
	if f.closed {
		return res, engine.ErrClosed
	}
	if f.FatalAfter > 0 && f.calls >= f.FatalAfter {
		return res, fmt.Errorf("enginetest: injected executor failure on call %d", f.calls)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	failed := map[engine.SeqID]bool{}
	fail := func(seq engine.SeqID, err error) {
		if !failed[seq] {
			failed[seq] = true
			res.Failures = append(res.Failures, engine.Failure{Seq: seq, Err: err})
		}
	}
	for _, n := range step.Added {
		if err := n.Sampling.Validate(f.Vocab); err != nil {
			fail(n.Seq, err)
			continue
		}
		f.samplers[n.Seq] = &fakeSampler{s: n.Sampling, rng: rand.New(rand.NewPCG(uint64(n.Sampling.Seed), 7))}
	}
	for _, e := range step.Exports {
		x := engine.Exported{Tag: e.Tag, Seq: e.Seq, From: e.From}
		if f.validSlot(e.Slot) && e.From >= 0 && e.From < e.To && e.To <= len(f.slots[e.Slot]) {
			x.KV = encode(f.slots[e.Slot][e.From:e.To])
			f.stats.Exported += e.To - e.From
		}
		res.Exported = append(res.Exported, x)
	}
	for _, s := range step.Clears {
		if f.validSlot(s) {
			f.slots[s] = nil
		}
	}
	for _, r := range step.Restores {
		if !f.validSlot(r.Slot) || len(f.slots[r.Slot]) != 0 {
			fail(r.Seq, fmt.Errorf("%w: restore into slot %d, which is not empty", engine.ErrInvalidBatch, r.Slot))
			continue
		}
		var toks []int32
		for _, kv := range r.KV {
			if !kv.Layout.Equal(Layout) {
				fail(r.Seq, engine.ErrKVLayout)
				break
			}
			toks = append(toks, decode(kv)...)
		}
		if failed[r.Seq] {
			continue
		}
		if len(toks) > f.SlotTokens || f.CapacityTokens > 0 && f.held()+len(toks) > f.CapacityTokens {
			fail(r.Seq, engine.ErrKVFull)
			continue
		}
		f.slots[r.Slot] = toks
		f.stats.Restored += len(toks)
	}
	if len(step.Batch) > 0 {
		f.stats.Steps++
		f.stats.MaxBatchSeqs = max(f.stats.MaxBatchSeqs, len(step.Batch))
	}
	var limits []int
	for i := range step.Batch {
		limits = append(limits, step.Batch[i].DraftLimit)
	}
	if slices.ContainsFunc(limits, func(n int) bool { return n != 0 }) {
		f.stats.DraftLimits = append(f.stats.DraftLimits, limits)
	}
	seen := map[engine.Slot]bool{}
	for i := range step.Batch {
		if p := &step.Batch[i]; f.Drafter != nil && p.DraftLimit > 0 && len(p.Draft) == 0 && p.Sample && f.validSlot(p.Slot) && !failed[p.Seq] {
			d := f.Drafter(slices.Concat(f.slots[p.Slot], p.Tokens), p.DraftLimit)
			p.Draft = slices.Clone(d[:min(len(d), p.DraftLimit)])
		}
		ch := step.Batch[i]
		if failed[ch.Seq] {
			continue
		}
		if err := f.check(ch, seen); err != nil {
			fail(ch.Seq, err)
			continue
		}
		f.slots[ch.Slot] = append(f.slots[ch.Slot], ch.Tokens...)
		f.stats.DecodedTokens += len(ch.Tokens) + len(ch.Draft)
		if f.PoisonToken != 0 && (slices.Contains(ch.Tokens, f.PoisonToken) || slices.Contains(ch.Draft, f.PoisonToken)) {
			f.slots[ch.Slot] = f.slots[ch.Slot][:ch.Pos]
			fail(ch.Seq, fmt.Errorf("%w: poison token %d", engine.ErrSampling, f.PoisonToken))
			continue
		}
		if ch.Targets != nil {
			pl := engine.PromptLogprobs{Seq: ch.Seq}
			for j, t := range ch.Targets {
				pl.Logprobs = append(pl.Logprobs, engine.Logprobs{Chosen: engine.TokenLogprob{Token: t, Logprob: -float32(j + 1)}})
			}
			res.PromptLogprobs = append(res.PromptLogprobs, pl)
		}
		if ch.Sample {
			// Draw after the last token, then after each draft token while
			// the draws equal the draft, as the real engine does; the slot
			// keeps the accepted draft tokens only.
			smp := engine.Sample{Seq: ch.Seq}
			logprobs := f.samplers[ch.Seq].s.Logprobs
			lp := func(tok int32) *engine.Logprobs {
				if !logprobs {
					return nil
				}
				return &engine.Logprobs{Chosen: engine.TokenLogprob{Token: tok, Logprob: -0.5}}
			}
			for {
				tok := f.next(ch.Seq, f.slots[ch.Slot], ch.Ban, ch.Only)
				if d := len(smp.Accepted); d < len(ch.Draft) && tok == ch.Draft[d] {
					smp.Accepted = append(smp.Accepted, tok)
					if logprobs {
						smp.AcceptedLogprobs = append(smp.AcceptedLogprobs, *lp(tok))
					}
					f.slots[ch.Slot] = append(f.slots[ch.Slot], tok)
					continue
				}
				smp.Token, smp.Logprobs = tok, lp(tok)
				break
			}
			f.stats.DraftTokens += len(ch.Draft)
			f.stats.AcceptedTokens += len(smp.Accepted)
			res.Samples = append(res.Samples, smp)
		}
	}
	for _, id := range step.Removed {
		delete(f.samplers, id)
	}
	stepTokens := step.NumTokens()
	for _, in := range step.Embeds {
		stepTokens += len(in.Tokens)
	}
	f.stats.MaxStepTokens = max(f.stats.MaxStepTokens, stepTokens)
	cap := f.EmbedCapacity()
	if len(step.Embeds) > cap.Inputs {
		return res, fmt.Errorf("enginetest: %d embedding inputs in one step, capacity %d", len(step.Embeds), cap.Inputs)
	}
	total := 0
	for _, in := range step.Embeds {
		total += len(in.Tokens)
		e := engine.Embedding{Tag: in.Tag}
		switch {
		case len(in.Tokens) == 0 || total > cap.Tokens:
			e.Err = fmt.Errorf("%w: %d tokens do not fit the step", engine.ErrInvalidBatch, len(in.Tokens))
		default:
			e.Vector = FakeEmbedding(in.Tokens)
			f.stats.Embedded += len(in.Tokens)
			f.stats.MaxEmbedInputs = max(f.stats.MaxEmbedInputs, len(step.Embeds))
		}
		res.Embeddings = append(res.Embeddings, e)
	}
	return res, nil
}

// EmbedCapacity implements engine.Embedder.
func (f *Fake) EmbedCapacity() engine.EmbedCapacity {
	c := engine.EmbedCapacity{Tokens: f.EmbedTokens, Inputs: f.EmbedInputs}
	if c.Tokens == 0 {
		c.Tokens = 64
	}
	if c.Inputs == 0 {
		c.Inputs = 4
	}
	return c
}

// FakeEmbedding is the fake's embedding of tokens: their count, sum and
// first token, so that a test can tell inputs apart and check order.
func FakeEmbedding(tokens []int32) []float32 {
	var sum float32
	for _, t := range tokens {
		sum += float32(t)
	}
	return []float32{float32(len(tokens)), sum, float32(tokens[0])}
}

// held is the number of positions all slots hold.
func (f *Fake) held() int {
	n := 0
	for _, s := range f.slots {
		n += len(s)
	}
	return n
}

func (f *Fake) validSlot(s engine.Slot) bool { return s >= 0 && int(s) < len(f.slots) }

func (f *Fake) check(ch engine.Chunk, seen map[engine.Slot]bool) error {
	switch {
	case !f.validSlot(ch.Slot):
		return fmt.Errorf("%w: slot %d", engine.ErrInvalidBatch, ch.Slot)
	case seen[ch.Slot]:
		return fmt.Errorf("%w: two chunks for slot %d", engine.ErrInvalidBatch, ch.Slot)
	case len(ch.Tokens) == 0:
		return fmt.Errorf("%w: empty chunk", engine.ErrInvalidBatch)
	case int(ch.Pos) != len(f.slots[ch.Slot]):
		return fmt.Errorf("%w: sequence %d continues at %d, slot %d holds %d", engine.ErrInvalidBatch, ch.Seq, ch.Pos, ch.Slot, len(f.slots[ch.Slot]))
	case len(ch.Draft) > 0 && !ch.Sample:
		return fmt.Errorf("%w: draft tokens without sampling", engine.ErrInvalidBatch)
	case int(ch.Pos)+len(ch.Tokens)+len(ch.Draft) > f.SlotTokens:
		return fmt.Errorf("%w: %d positions", engine.ErrKVFull, int(ch.Pos)+len(ch.Tokens)+len(ch.Draft))
	case f.CapacityTokens > 0 && f.held()+len(ch.Tokens)+len(ch.Draft) > f.CapacityTokens:
		return fmt.Errorf("%w: %d positions in all slots, capacity %d", engine.ErrKVFull, f.held()+len(ch.Tokens)+len(ch.Draft), f.CapacityTokens)
	case (ch.Sample || ch.Targets != nil) && f.samplers[ch.Seq] == nil:
		return fmt.Errorf("%w: sequence %d has no sampler", engine.ErrInvalidBatch, ch.Seq)
	}
	seen[ch.Slot] = true
	for _, t := range slices.Concat(ch.Tokens, ch.Draft) {
		if t < 0 || int(t) >= f.Vocab {
			return fmt.Errorf("%w: token %d", engine.ErrInvalidBatch, t)
		}
	}
	return nil
}

// Next is the fake model: the token after history for a greedy sequence.
func Next(history []int32, vocab int) int32 {
	h := fnv.New64a()
	var b [4]byte
	for _, t := range history {
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		h.Write(b[:])
	}
	return int32(h.Sum64() % uint64(vocab))
}

// next draws the token after history: Next for greedy sampling, else mixed
// with the sequence's seeded stream. Banned tokens are skipped; with only
// (Chunk.Only), the draw picks one of those tokens instead.
func (f *Fake) next(seq engine.SeqID, history []int32, ban, only []int32) int32 {
	s := f.samplers[seq]
	var tok int32
	if f.Model != nil {
		tok = f.Model(history, f.Vocab)
	} else {
		tok = Next(history, f.Vocab)
	}
	if !s.s.Greedy() {
		tok = int32((uint64(tok) + s.rng.Uint64N(uint64(f.Vocab))) % uint64(f.Vocab))
	}
	if len(only) > 0 {
		return only[int(tok)%len(only)]
	}
	for slices.Contains(ban, tok) {
		tok = (tok + 1) % int32(f.Vocab)
	}
	return tok
}

// Resize implements engine.Resizer: the slots keep their tokens; shrinking
// requires the dropped slots to be empty.
func (f *Fake) Resize(n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	if n < 1 {
		return fmt.Errorf("enginetest: resize to %d slots", n)
	}
	for s := n; s < len(f.slots); s++ {
		if len(f.slots[s]) > 0 {
			return fmt.Errorf("enginetest: slot %d is not empty", s)
		}
	}
	if n < len(f.slots) {
		f.slots = f.slots[:n]
	}
	for len(f.slots) < n {
		f.slots = append(f.slots, nil)
	}
	f.Slots = n
	f.stats.Resizes = append(f.stats.Resizes, n)
	return nil
}

// Close implements engine.Executor.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// SlotLen returns how many positions slot holds.
func (f *Fake) SlotLen(s engine.Slot) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	return len(f.slots[s])
}

// Stats returns the counters.
func (f *Fake) Stats() FakeStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	st.Resizes = slices.Clone(st.Resizes)
	return st
}

// Samplers returns the number of live samplers.
func (f *Fake) Samplers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.samplers)
}

func encode(toks []int32) *engine.KV {
	kv := &engine.KV{Layout: Layout, N: len(toks), Data: make([]byte, 0, 4*len(toks))}
	for _, t := range toks {
		kv.Data = binary.LittleEndian.AppendUint32(kv.Data, uint32(t))
	}
	return kv
}

func decode(kv *engine.KV) []int32 {
	toks := make([]int32, kv.N)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(kv.Data[4*i:]))
	}
	return toks
}

// SlotCount is the number of slots the fake has now (Slots is the
// configuration it started with).
func (f *Fake) SlotCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	return len(f.slots)
}
