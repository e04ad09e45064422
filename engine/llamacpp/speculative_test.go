//go:build cgo

package llamacpp

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/models/stories260k"
)

// specRun is one sequence driven by specDrive: its prompt in one chunk,
// then decode steps of its last token with the draft that propose gives
// (nil: none), until it has n tokens. It records every token with its
// logprob and the top alternatives' logprobs, bit for bit.
type specRun struct {
	seq      engine.SeqID
	slot     engine.Slot
	prompt   []int32
	n        int
	sampling engine.Sampling
	// propose returns the draft for the next step, given the output so far.
	propose func(out []int32) []int32
	// limit, when positive, is every decode chunk's DraftLimit (cut to the
	// tokens still wanted): the context's draft model proposes.
	limit int

	out  []int32
	lps  []engine.Logprobs
	pos  int32
	done bool
	// steps counts decode steps; drafted and accepted the draft tokens.
	steps, drafted, accepted int
}

// specDrive runs the sequences together until each has n tokens, checking
// after every step that each slot holds exactly its computed positions.
func specDrive(t *testing.T, c *Context, runs ...*specRun) {
	t.Helper()
	ctx := context.Background()
	for step := 0; ; step++ {
		var st engine.Step
		for _, r := range runs {
			if r.done {
				continue
			}
			if step == 0 {
				s := r.sampling
				s.Logprobs, s.TopLogprobs = true, 5
				st.Added = append(st.Added, engine.NewSequence{Seq: r.seq, Sampling: s, History: r.prompt})
			}
			ch := engine.Chunk{Seq: r.seq, Slot: r.slot, Pos: r.pos, Sample: true}
			if r.pos == 0 {
				ch.Tokens = r.prompt
			} else {
				ch.Tokens = r.out[len(r.out)-1:]
				if r.propose != nil {
					// Never more than the tokens still wanted after this one.
					d := r.propose(r.out)
					ch.Draft = d[:min(len(d), r.n-len(r.out)-1)]
				}
				if r.limit > 0 {
					ch.DraftLimit = min(r.limit, r.n-len(r.out)-1)
				}
				r.steps++
				r.drafted += len(ch.Draft)
			}
			st.Batch = append(st.Batch, ch)
		}
		if len(st.Batch) == 0 {
			break
		}
		res, err := c.Execute(ctx, &st)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) > 0 {
			t.Fatalf("step %d: failures %v", step, res.Failures)
		}
		for _, smp := range res.Samples {
			for i, r := range runs {
				if r.seq != smp.Seq {
					continue
				}
				ch := st.Batch[slices.IndexFunc(st.Batch, func(ch engine.Chunk) bool { return ch.Seq == r.seq })]
				if !slices.Equal(smp.Accepted, ch.Draft[:len(smp.Accepted)]) || len(smp.AcceptedLogprobs) != len(smp.Accepted) {
					t.Fatalf("run %d: accepted %v (%d logprobs) of draft %v", i, smp.Accepted, len(smp.AcceptedLogprobs), ch.Draft)
				}
				if ch.DraftLimit > 0 {
					if len(ch.Draft) > ch.DraftLimit {
						t.Fatalf("run %d: draft %v over the limit %d", i, ch.Draft, ch.DraftLimit)
					}
					r.drafted += len(ch.Draft)
				}
				r.pos += int32(len(ch.Tokens) + len(smp.Accepted))
				r.accepted += len(smp.Accepted)
				r.out = append(r.out, smp.Accepted...)
				r.out = append(r.out, smp.Token)
				r.lps = append(r.lps, smp.AcceptedLogprobs...)
				r.lps = append(r.lps, *smp.Logprobs)
				if got := c.SlotLen(r.slot); got != int(r.pos) {
					t.Fatalf("run %d, step %d: slot %d holds %d positions, want %d (draft %v, accepted %d)", i, step, r.slot, got, r.pos, ch.Draft, len(smp.Accepted))
				}
				if len(r.out) >= r.n {
					r.done = true
				}
			}
		}
	}
	var clear engine.Step
	for _, r := range runs {
		clear.Clears = append(clear.Clears, r.slot)
		clear.Removed = append(clear.Removed, r.seq)
	}
	if _, err := c.Execute(ctx, &clear); err != nil {
		t.Fatal(err)
	}
}

// sameLogprobs reports whether two runs drew the same tokens with bitwise
// the same logprobs, alternatives included.
func sameLogprobs(a, b []engine.Logprobs) bool {
	if len(a) != len(b) {
		return false
	}
	same := func(x, y engine.TokenLogprob) bool {
		return x.Token == y.Token && math.Float32bits(x.Logprob) == math.Float32bits(y.Logprob)
	}
	for i := range a {
		if !same(a[i].Chosen, b[i].Chosen) || len(a[i].Top) != len(b[i].Top) {
			return false
		}
		for j := range a[i].Top {
			if !same(a[i].Top[j], b[i].Top[j]) {
				return false
			}
		}
	}
	return true
}

// Draft proposers over a reference output: right continues it, wrong
// proposes tokens it does not have, partial is right for m tokens then
// wrong.
func rightDraft(ref []int32, k int) func([]int32) []int32 {
	return func(out []int32) []int32 { return ref[len(out):min(len(out)+k, len(ref))] }
}

func partialDraft(ref []int32, k, m, vocab int) func([]int32) []int32 {
	return func(out []int32) []int32 {
		d := slices.Clone(ref[len(out):min(len(out)+k, len(ref))])
		for i := m; i < len(d); i++ {
			d[i] = (d[i] + 1) % int32(vocab)
		}
		return d
	}
}

// varyingDraft changes the draft's length and its right part every step.
func varyingDraft(ref []int32, vocab int) func([]int32) []int32 {
	step := 0
	return func(out []int32) []int32 {
		step++
		k, m := 1+step%5, step%4
		return partialDraft(ref, k, m, vocab)(out)
	}
}

// Greedy decoding with drafts (right, wrong, partly right, of changing
// lengths, beside sequences without drafts and in the same evaluations)
// gives, token for token and bit for bit in every logprob, what decoding
// one token per step gives.
func TestDraftsMatchStepByStep(t *testing.T) {
	t.Run("F32, padded", func(t *testing.T) {
		testDraftsMatchStepByStep(t, newContext(t, loadModel(t), ContextParams{Slots: 8, MicroBatchTokens: 16}))
	})
	t.Run("Q8_0, unpadded", func(t *testing.T) {
		testDraftsMatchStepByStep(t, newContext(t, loadQ8(t), ContextParams{Slots: 8, MicroBatchTokens: 16}))
	})
}

func testDraftsMatchStepByStep(t *testing.T, c *Context) {
	m := c.model
	vocab := m.Info().NVocab
	prompts := [][]int32{
		stories260k.ReferenceGreedy().PromptTokens,
		tokenize(t, m, "Lily and Tom went to the park to play with a big red ball"),
		tokenize(t, m, "The cat sat"),
	}
	const n = 48
	greedy := engine.DefaultSampling()
	var refs []*specRun
	for i, p := range prompts {
		r := &specRun{seq: engine.SeqID(100 + i), slot: 0, prompt: p, n: n, sampling: greedy}
		specDrive(t, c, r)
		refs = append(refs, r)
	}
	ref := refs[0].out
	cases := []struct {
		name     string
		propose  func([]int32) []int32
		accepted func(r *specRun) bool
	}{
		{"right drafts", rightDraft(ref, 4), func(r *specRun) bool { return r.accepted == r.drafted && r.drafted > 0 }},
		{"right drafts longer than the micro-batch", rightDraft(ref, 16), func(r *specRun) bool { return r.accepted == r.drafted && r.drafted > 0 }},
		{"wrong drafts", partialDraft(ref, 4, 0, vocab), func(r *specRun) bool { return r.accepted == 0 && r.drafted > 0 }},
		{"partly right drafts", partialDraft(ref, 5, 2, vocab), func(r *specRun) bool { return r.accepted > 0 && r.accepted < r.drafted }},
		{"drafts of changing lengths", varyingDraft(ref, vocab), func(r *specRun) bool { return r.accepted > 0 && r.accepted < r.drafted }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &specRun{seq: 1, slot: 3, prompt: prompts[0], n: n, sampling: greedy, propose: tc.propose}
			specDrive(t, c, r)
			if !slices.Equal(r.out, ref) || !sameLogprobs(r.lps, refs[0].lps) {
				t.Fatalf("with drafts\n got %v\nwant %v", r.out, ref)
			}
			if !tc.accepted(r) {
				t.Fatalf("%d of %d draft tokens accepted", r.accepted, r.drafted)
			}
			if r.accepted > 0 && r.steps >= n-1 {
				t.Fatalf("%d decode steps for %d tokens with %d accepted", r.steps, n, r.accepted)
			}
		})
	}
	t.Run("beside other sequences", func(t *testing.T) {
		// Same-length drafted chunks in consecutive slots share an
		// evaluation; the others get their own; one sequence never drafts.
		var runs []*specRun
		for i, slot := range []engine.Slot{1, 2, 3, 5, 7, 0} {
			p := i % len(prompts)
			r := &specRun{seq: engine.SeqID(10 + i), slot: slot, prompt: prompts[p], n: n, sampling: greedy}
			switch i {
			case 0, 1, 2:
				r.propose = rightDraft(refs[p].out, 3)
			case 3:
				r.propose = varyingDraft(refs[p].out, vocab)
			case 4:
				r.propose = partialDraft(refs[p].out, 6, 1, vocab)
			}
			runs = append(runs, r)
		}
		specDrive(t, c, runs...)
		for i, r := range runs {
			want := refs[i%len(prompts)]
			if !slices.Equal(r.out, want.out) || !sameLogprobs(r.lps, want.lps) {
				t.Errorf("run %d in slot %d\n got %v\nwant %v", i, r.slot, r.out, want.out)
			}
		}
	})
}

// With a seed, sampling with drafts draws exactly what it draws without:
// the chain draws once per position in the same order, and a draft only
// decides how many positions one step computes. Repetition penalties see
// the accepted tokens in order.
func TestDraftsKeepSeededSampling(t *testing.T) {
	c := newContext(t, loadModel(t), ContextParams{Slots: 4, MicroBatchTokens: 16})
	vocab := c.model.Info().NVocab
	prompt := stories260k.ReferenceGreedy().PromptTokens
	samplings := map[string]engine.Sampling{
		"temperature":         {Temperature: 0.8, TopP: 1, RepetitionPenalty: 1, Seed: 42},
		"top-k, top-p, min-p": {Temperature: 1.1, TopK: 40, TopP: 0.9, MinP: 0.02, RepetitionPenalty: 1, Seed: 7},
		"penalties":           {Temperature: 0.7, TopP: 1, RepetitionPenalty: 1.3, FrequencyPenalty: 0.5, PresencePenalty: 0.2, Seed: 3},
	}
	for name, s := range samplings {
		t.Run(name, func(t *testing.T) {
			want := &specRun{seq: 1, prompt: prompt, n: 40, sampling: s}
			specDrive(t, c, want)
			other := s
			other.Seed++
			if o := (&specRun{seq: 2, prompt: prompt, n: 40, sampling: other}); true {
				specDrive(t, c, o)
				if slices.Equal(o.out, want.out) {
					t.Fatal("another seed draws the same tokens: the test would not see a difference")
				}
			}
			for _, p := range []func([]int32) []int32{rightDraft(want.out, 4), partialDraft(want.out, 4, 0, vocab), varyingDraft(want.out, vocab)} {
				r := &specRun{seq: 3, slot: 1, prompt: prompt, n: 40, sampling: s, propose: p}
				specDrive(t, c, r)
				if !slices.Equal(r.out, want.out) || !sameLogprobs(r.lps, want.lps) {
					t.Fatalf("with drafts (%d of %d accepted)\n got %v\nwant %v", r.accepted, r.drafted, r.out, want.out)
				}
			}
		})
	}
}

// Rejected draft tokens leave nothing behind: the slot holds the accepted
// positions only, its KV is byte for byte the KV of decoding one token
// per step, and it exports, restores and continues like it. The pages the
// rejected rows touched are counted as committed until the slot empties.
func TestDraftRollback(t *testing.T) {
	c := newContext(t, loadModel(t), ContextParams{Slots: 4, MicroBatchTokens: 16})
	vocab := c.model.Info().NVocab
	ctx := context.Background()
	prompt := stories260k.ReferenceGreedy().PromptTokens
	greedy := engine.DefaultSampling()
	ref := &specRun{seq: 1, prompt: prompt, n: 60, sampling: greedy}
	specDrive(t, c, ref)

	// Step by step and with drafts, stop at the same point and export.
	exportAfter := func(propose func([]int32) []int32, slot engine.Slot) (*engine.KV, *specRun) {
		r := &specRun{seq: 5, slot: slot, prompt: prompt, n: 30, sampling: greedy, propose: propose}
		res, err := c.Execute(ctx, &engine.Step{Added: []engine.NewSequence{{Seq: r.seq, Sampling: greedy, History: prompt}},
			Batch: []engine.Chunk{{Seq: r.seq, Slot: slot, Tokens: prompt, Sample: true}}})
		if err != nil || len(res.Failures) > 0 {
			t.Fatal(err, res.Failures)
		}
		r.out, r.pos = []int32{res.Samples[0].Token}, int32(len(prompt))
		for len(r.out) < r.n {
			ch := engine.Chunk{Seq: r.seq, Slot: slot, Pos: r.pos, Tokens: r.out[len(r.out)-1:], Sample: true}
			if propose != nil {
				d := propose(r.out)
				ch.Draft = d[:min(len(d), r.n-len(r.out)-1)]
			}
			res, err := c.Execute(ctx, &engine.Step{Batch: []engine.Chunk{ch}})
			if err != nil || len(res.Failures) > 0 {
				t.Fatal(err, res.Failures)
			}
			smp := res.Samples[0]
			if written := int(ch.Pos) + 1 + len(ch.Draft); c.held[slot] < written {
				t.Fatalf("slot %d: %d positions held after %d were written: the rejected rows' pages are not counted", slot, c.held[slot], written)
			}
			r.pos += int32(1 + len(smp.Accepted))
			r.accepted += len(smp.Accepted)
			r.drafted += len(ch.Draft)
			r.out = append(append(r.out, smp.Accepted...), smp.Token)
		}
		if mem := c.KVMemory(); !mem.Paged || mem.Committed < c.pages.committed(c.slotLens()) {
			t.Fatalf("KV memory %+v", mem)
		}
		res, err = c.Execute(ctx, &engine.Step{
			Exports: []engine.Export{{Tag: 1, Seq: r.seq, Slot: slot, From: 0, To: int(r.pos)}, {Tag: 2, Seq: r.seq, Slot: slot, From: 0, To: int(r.pos) + 1}},
			Clears:  []engine.Slot{slot}, Removed: []engine.SeqID{r.seq},
		})
		if err != nil || res.Exported[0].KV == nil {
			t.Fatal(err, res.Exported)
		}
		if res.Exported[1].KV != nil {
			t.Fatalf("slot %d exported position %d, past the accepted ones", slot, r.pos)
		}
		if c.held[slot] != 0 || c.SlotLen(slot) != 0 {
			t.Fatalf("slot %d after its clear: %d held, %d positions", slot, c.held[slot], c.SlotLen(slot))
		}
		return res.Exported[0].KV, r
	}
	want, plain := exportAfter(nil, 0)
	got, r := exportAfter(partialDraft(ref.out, 6, 2, vocab), 2)
	if !slices.Equal(r.out, plain.out) || r.pos != plain.pos || r.accepted == 0 || r.accepted == r.drafted {
		t.Fatalf("drafted run: %v at %d (%d of %d accepted), want %v at %d", r.out, r.pos, r.accepted, r.drafted, plain.out, plain.pos)
	}
	if got.N != want.N || !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("KV after rejected drafts differs from step-by-step KV (%d and %d positions)", got.N, want.N)
	}
	// Restored into another slot, it continues like the reference.
	if res, err := c.Execute(ctx, &engine.Step{Added: []engine.NewSequence{{Seq: 9, Sampling: greedy, History: prompt}},
		Restores: []engine.Restore{{Seq: 9, Slot: 1, KV: []*engine.KV{got}}}}); err != nil || len(res.Failures) > 0 {
		t.Fatal(err, res.Failures)
	}
	cont := &specRun{seq: 9, slot: 1, prompt: prompt, n: 60, sampling: greedy, out: slices.Clone(r.out), pos: r.pos, propose: rightDraft(ref.out, 5)}
	for len(cont.out) < cont.n {
		ch := engine.Chunk{Seq: 9, Slot: 1, Pos: cont.pos, Tokens: cont.out[len(cont.out)-1:], Sample: true}
		d := cont.propose(cont.out)
		ch.Draft = d[:min(len(d), cont.n-len(cont.out)-1)]
		res, err := c.Execute(ctx, &engine.Step{Batch: []engine.Chunk{ch}})
		if err != nil || len(res.Failures) > 0 {
			t.Fatal(err, res.Failures)
		}
		cont.pos += int32(1 + len(res.Samples[0].Accepted))
		cont.out = append(append(cont.out, res.Samples[0].Accepted...), res.Samples[0].Token)
	}
	if !slices.Equal(cont.out, ref.out) {
		t.Fatalf("continued after restore\n got %v\nwant %v", cont.out, ref.out)
	}
}

// A draft without sampling, or with a token outside the vocabulary, or
// past the slot's capacity, fails its own sequence.
func TestBadDrafts(t *testing.T) {
	c := newContext(t, loadModel(t), ContextParams{Slots: 4, SlotTokens: 256})
	ctx := context.Background()
	s := engine.DefaultSampling()
	var added []engine.NewSequence
	for i := range 4 {
		added = append(added, engine.NewSequence{Seq: engine.SeqID(i), Sampling: s})
	}
	res, err := c.Execute(ctx, &engine.Step{Added: added, Batch: []engine.Chunk{
		{Seq: 0, Slot: 0, Tokens: []int32{1, 2}, Draft: []int32{3}},
		{Seq: 1, Slot: 1, Tokens: []int32{1, 2}, Draft: []int32{3, 9999}, Sample: true},
		{Seq: 2, Slot: 2, Tokens: []int32{1, 2}, Draft: make([]int32, 255), Sample: true},
		{Seq: 3, Slot: 3, Tokens: []int32{1, 2}, Draft: []int32{3, 4}, Sample: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 3 || !errors.Is(res.Failures[0].Err, engine.ErrInvalidBatch) || !errors.Is(res.Failures[1].Err, engine.ErrInvalidBatch) ||
		!errors.Is(res.Failures[2].Err, engine.ErrKVFull) {
		t.Fatalf("failures %v", res.Failures)
	}
	if len(res.Samples) != 1 || res.Samples[0].Seq != 3 || c.SlotLen(3) != 2+len(res.Samples[0].Accepted) {
		t.Fatalf("samples %+v, slot 3 holds %d", res.Samples, c.SlotLen(3))
	}
}

// A grammar sees the drawn tokens in order, draft or not: with drafts a
// grammar-constrained sequence draws what it draws one token per step
// (greedy and seeded), and wrong drafts, even ones the grammar forbids,
// are only rejected.
func TestDraftsWithGrammar(t *testing.T) {
	c := newContext(t, loadModel(t), ContextParams{Slots: 4, MicroBatchTokens: 16})
	vocab := c.model.Info().NVocab
	prompt := stories260k.ReferenceGreedy().PromptTokens
	for name, s := range map[string]engine.Sampling{
		"greedy": {TopP: 1, RepetitionPenalty: 1},
		"seeded": {Temperature: 0.9, TopP: 1, RepetitionPenalty: 1, Seed: 5},
	} {
		t.Run(name, func(t *testing.T) {
			s.Grammar = `root ::= [a-z .]{100,400}`
			want := &specRun{seq: 1, prompt: prompt, n: 24, sampling: s}
			specDrive(t, c, want)
			for _, p := range []func([]int32) []int32{rightDraft(want.out, 4), partialDraft(want.out, 5, 2, vocab), varyingDraft(want.out, vocab)} {
				r := &specRun{seq: 2, slot: 1, prompt: prompt, n: 24, sampling: s, propose: p}
				specDrive(t, c, r)
				if !slices.Equal(r.out, want.out) || !sameLogprobs(r.lps, want.lps) {
					t.Fatalf("with drafts (%d of %d accepted)\n got %v\nwant %v", r.accepted, r.drafted, r.out, want.out)
				}
			}
		})
	}
}
