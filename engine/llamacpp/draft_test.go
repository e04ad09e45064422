//go:build cgo

package llamacpp

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models/stories260k"
)

// draftPrompts are eight prompts of different lengths, some longer than
// the micro-batch of the tests' contexts (16), so that a draft stream
// catches up in pieces.
func draftPrompts(t *testing.T, m *Model) [][]int32 {
	var ps [][]int32
	for _, s := range []string{
		"", // the reference prompt
		"Lily and Tom went to the park to play with a big red ball",
		"The cat sat",
		"Once upon a time, there was a little girl named Sue. She liked to sing.",
		"One day",
		"The dog was sad because it could not find its bone in the garden",
		"Tim had a toy car",
		"The sun was hot and the birds sang in the tall green trees by the river",
	} {
		if s == "" {
			ps = append(ps, stories260k.ReferenceGreedy().PromptTokens)
			continue
		}
		ps = append(ps, tokenize(t, m, s))
	}
	return ps
}

// draftModels are the draft models the tests use with stories260K: the
// model itself, loaded again (its greedy drafts are the target's greedy
// tokens: nearly all accepted), and a model of random weights with its
// vocabulary (few accepted).
func draftModels(t *testing.T) map[string]*Model {
	return map[string]*Model{"self": loadModel(t), "random": loadQ8(t)}
}

// Greedy decoding with a draft model gives, token for token and bit for
// bit in every logprob, what decoding one token per step gives: for one
// sequence and for eight at once (drafts of different limits, prompts
// caught up in pieces), with a draft model that is right and one that is
// mostly wrong.
func TestDraftModelMatchesGreedy(t *testing.T) {
	m := loadModel(t)
	plain := newContext(t, m, ContextParams{Slots: 8, MicroBatchTokens: 16})
	prompts := draftPrompts(t, m)
	const n = 48
	greedy := engine.DefaultSampling()
	var refs []*specRun
	for i, p := range prompts {
		r := &specRun{seq: engine.SeqID(100 + i), prompt: p, n: n, sampling: greedy}
		specDrive(t, plain, r)
		refs = append(refs, r)
	}
	for name, draft := range draftModels(t) {
		t.Run(name, func(t *testing.T) {
			c := newContext(t, m, ContextParams{Slots: 8, MicroBatchTokens: 16, Draft: draft})
			r := &specRun{seq: 1, slot: 3, prompt: prompts[0], n: n, sampling: greedy, limit: 4}
			specDrive(t, c, r)
			if !slices.Equal(r.out, refs[0].out) || !sameLogprobs(r.lps, refs[0].lps) {
				t.Fatalf("alone\n got %v\nwant %v", r.out, refs[0].out)
			}
			t.Logf("alone: %d of %d draft tokens accepted in %d steps", r.accepted, r.drafted, r.steps)
			checkAcceptance(t, name, r.accepted, r.drafted)

			var runs []*specRun
			for i, p := range prompts {
				runs = append(runs, &specRun{seq: engine.SeqID(10 + i), slot: engine.Slot(7 - i), prompt: p, n: n, sampling: greedy, limit: 1 + i%6})
			}
			specDrive(t, c, runs...)
			accepted, drafted := 0, 0
			for i, r := range runs {
				if !slices.Equal(r.out, refs[i].out) || !sameLogprobs(r.lps, refs[i].lps) {
					t.Errorf("run %d in slot %d (limit %d)\n got %v\nwant %v", i, r.slot, r.limit, r.out, refs[i].out)
				}
				accepted += r.accepted
				drafted += r.drafted
			}
			t.Logf("eight at once: %d of %d draft tokens accepted", accepted, drafted)
			checkAcceptance(t, name, accepted, drafted)
			// Four in slots with gaps between them (llama.cpp splits a
			// draft position's evaluation at every gap).
			runs = nil
			for i, slot := range []engine.Slot{0, 2, 5, 6} {
				runs = append(runs, &specRun{seq: engine.SeqID(30 + i), slot: slot, prompt: prompts[i+4], n: n, sampling: greedy, limit: 3 + i})
			}
			specDrive(t, c, runs...)
			accepted, drafted = 0, 0
			for i, r := range runs {
				if !slices.Equal(r.out, refs[i+4].out) || !sameLogprobs(r.lps, refs[i+4].lps) {
					t.Errorf("run %d in slot %d, beside gaps\n got %v\nwant %v", i, r.slot, r.out, refs[i+4].out)
				}
				accepted += r.accepted
				drafted += r.drafted
			}
			t.Logf("four with gaps: %d of %d draft tokens accepted", accepted, drafted)
			checkAcceptance(t, name, accepted, drafted)
			for _, s := range []engine.Slot{1, 3, 4} {
				if n := c.draft.c.SlotLen(s); n != 0 {
					t.Errorf("the draft's stream %d between drafting ones holds %d positions: a throwaway row stayed", s, n)
				}
			}
			if st := c.Stats(); st.DraftModelTokens == 0 || st.DraftTokens == 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// checkAcceptance checks that the self draft is nearly always right and
// the random one mostly wrong.
func checkAcceptance(t *testing.T, name string, accepted, drafted int) {
	t.Helper()
	switch {
	case drafted == 0:
		t.Fatal("no draft tokens")
	case name == "self" && accepted*10 < drafted*9:
		t.Fatalf("self draft: %d of %d accepted", accepted, drafted)
	case name == "random" && accepted*2 > drafted:
		t.Fatalf("random draft: %d of %d accepted", accepted, drafted)
	}
}

// With a seed, sampling with a draft model draws exactly what it draws
// without.
func TestDraftModelKeepsSeededSampling(t *testing.T) {
	m := loadModel(t)
	plain := newContext(t, m, ContextParams{Slots: 4, MicroBatchTokens: 16})
	prompt := stories260k.ReferenceGreedy().PromptTokens
	samplings := map[string]engine.Sampling{
		"temperature":         {Temperature: 0.8, TopP: 1, RepetitionPenalty: 1, Seed: 42},
		"top-k, top-p, min-p": {Temperature: 1.1, TopK: 40, TopP: 0.9, MinP: 0.02, RepetitionPenalty: 1, Seed: 7},
		"penalties":           {Temperature: 0.7, TopP: 1, RepetitionPenalty: 1.3, FrequencyPenalty: 0.5, PresencePenalty: 0.2, Seed: 3},
	}
	for name, draft := range draftModels(t) {
		c := newContext(t, m, ContextParams{Slots: 4, MicroBatchTokens: 16, Draft: draft})
		accepted, drafted := 0, 0
		for sname, s := range samplings {
			t.Run(name+"/"+sname, func(t *testing.T) {
				want := &specRun{seq: 1, prompt: prompt, n: 40, sampling: s}
				specDrive(t, plain, want)
				r := &specRun{seq: 3, slot: 1, prompt: prompt, n: 40, sampling: s, limit: 5}
				specDrive(t, c, r)
				if !slices.Equal(r.out, want.out) || !sameLogprobs(r.lps, want.lps) {
					t.Fatalf("with a draft model (%d of %d accepted)\n got %v\nwant %v", r.accepted, r.drafted, r.out, want.out)
				}
				if r.drafted == 0 {
					t.Fatal("no draft tokens")
				}
				accepted += r.accepted
				drafted += r.drafted
			})
		}
		// The self draft is greedy and the target samples: some drafts are
		// accepted in part, which settles the draft's stream mid-draft.
		t.Logf("%s draft, sampling: %d of %d draft tokens accepted", name, accepted, drafted)
		if name == "self" && (accepted == 0 || accepted == drafted) {
			t.Errorf("self draft, sampling: %d of %d accepted", accepted, drafted)
		}
	}
}

// draftStep executes one decode step of a sequence and returns its
// sample.
func draftStep(t *testing.T, c *Context, st *engine.Step) engine.Sample {
	t.Helper()
	res, err := c.Execute(context.Background(), st)
	if err != nil || len(res.Failures) > 0 || len(res.Samples) != 1 {
		t.Fatal(err, res.Failures, res.Samples)
	}
	return res.Samples[0]
}

// A sequence preempted and resumed, by a restore of its KV into another
// slot (the draft's stream is computed again from the tokens) or by
// computing everything again, and across a resize, decodes with the
// draft model what it decodes without.
func TestDraftModelAcrossPreemption(t *testing.T) {
	m := loadModel(t)
	plain := newContext(t, m, ContextParams{Slots: 4, MicroBatchTokens: 16})
	prompt := stories260k.ReferenceGreedy().PromptTokens
	greedy := engine.DefaultSampling()
	ref := &specRun{seq: 1, prompt: prompt, n: 60, sampling: greedy}
	specDrive(t, plain, ref)

	for name, draft := range draftModels(t) {
		for _, resume := range []string{"restore", "recompute"} {
			t.Run(name+"/"+resume, func(t *testing.T) {
				c := newContext(t, m, ContextParams{Slots: 4, MicroBatchTokens: 16, Draft: draft})
				seq := engine.SeqID(7)
				slot := engine.Slot(0)
				smp := draftStep(t, c, &engine.Step{Added: []engine.NewSequence{{Seq: seq, Sampling: greedy, History: prompt}},
					Batch: []engine.Chunk{{Seq: seq, Slot: slot, Tokens: prompt, Sample: true}}})
				out, pos := []int32{smp.Token}, int32(len(prompt))
				if ds := c.draft.slots[slot]; ds.seq != seq || ds.n != len(prompt) || c.draft.c.SlotLen(slot) != len(prompt) {
					t.Fatalf("after the prompt the draft's stream holds %d positions (%+v), want the prompt's %d", c.draft.c.SlotLen(slot), ds, len(prompt))
				}
				decode := func(until int) {
					for len(out) < until {
						ch := engine.Chunk{Seq: seq, Slot: slot, Pos: pos, Tokens: out[len(out)-1:], Sample: true, DraftLimit: min(4, ref.n-len(out)-1)}
						smp := draftStep(t, c, &engine.Step{Batch: []engine.Chunk{ch}})
						pos += int32(1 + len(smp.Accepted))
						out = append(append(out, smp.Accepted...), smp.Token)
						if c.SlotLen(slot) != int(pos) {
							t.Fatalf("slot %d holds %d positions, want %d", slot, c.SlotLen(slot), pos)
						}
					}
				}
				decode(20)
				res, err := c.Execute(context.Background(), &engine.Step{
					Exports: []engine.Export{{Tag: 1, Seq: seq, Slot: slot, From: 0, To: int(pos)}},
					Clears:  []engine.Slot{slot},
				})
				if err != nil || res.Exported[0].KV == nil {
					t.Fatal(err, res.Exported)
				}
				slot = 2
				switch resume {
				case "restore":
					if res, err := c.Execute(context.Background(), &engine.Step{Restores: []engine.Restore{{Seq: seq, Slot: slot, KV: []*engine.KV{res.Exported[0].KV}}}}); err != nil || len(res.Failures) > 0 {
						t.Fatal(err, res.Failures)
					}
				case "recompute":
					all := slices.Concat(prompt, out)
					smp := draftStep(t, c, &engine.Step{Batch: []engine.Chunk{{Seq: seq, Slot: slot, Tokens: all[:len(all)-1], Sample: true}}})
					if smp.Token != out[len(out)-1] {
						t.Fatalf("recomputed: drew %d, want %d", smp.Token, out[len(out)-1])
					}
					if c.draft.c.SlotLen(slot) != len(all)-1 {
						t.Fatalf("recomputed: the draft's stream holds %d positions, want %d", c.draft.c.SlotLen(slot), len(all)-1)
					}
				}
				decode(35)
				if err := c.Resize(6); err != nil {
					t.Fatal(err)
				}
				decode(ref.n)
				if !slices.Equal(out[:ref.n], ref.out) {
					t.Fatalf("resumed\n got %v\nwant %v", out, ref.out)
				}
				if err := c.Resize(3); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A draft model whose vocabulary is not the target's is refused.
func TestDraftModelVocabMismatch(t *testing.T) {
	m := loadModel(t)
	shape, err := synth.LookupShape("stories260k")
	if err != nil {
		t.Fatal(err)
	}
	other := loadSynthTokens(t, shape, []string{"<extra>"})
	if err := CheckDraftVocab(m, other); err == nil || !strings.Contains(err.Error(), "513 tokens") {
		t.Fatalf("check: %v", err)
	}
	if c, err := NewContext(m, ContextParams{Slots: 2, SlotTokens: 256, Draft: other}); err == nil {
		c.Close()
		t.Fatal("a context with a draft model of another vocabulary")
	}
	if err := CheckDraftVocab(m, loadQ8(t)); err != nil {
		t.Fatalf("same vocabulary: %v", err)
	}
}

// loadSynthTokens writes and loads a dummy-weight model of shape with
// stories260K's vocabulary and added tokens.
func loadSynthTokens(t *testing.T, shape synth.Shape, added []string) *Model {
	t.Helper()
	dir := t.TempDir()
	vocab, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "added.gguf")
	if _, err := synth.Write(path, synth.Options{Shape: shape, DType: "f32", VocabPath: vocab, Seed: 1, AddedTokens: added}); err != nil {
		t.Fatal(err)
	}
	return loadFile(t, path)
}
