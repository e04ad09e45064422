package scheduler

import (
	"fmt"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
)

// TestLongPrefillLimit: beside a decode, a long prompt computes at most
// the threshold a step, whatever budget the engine core set (none, or one
// over the threshold), or the budget when it is smaller; the decode runs in
// every one of those steps; Pacing reports each step's limit and the long
// tokens, and nothing when no sequence decodes; the last output of each
// request says how many steps its prompt took.
func TestLongPrefillLimit(t *testing.T) {
	s, fake := newCapacityScheduler(t,
		Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 1024, MaxWaiting: 8, MaxModelLen: 4096, LongPrefillTokens: 256},
		kvcache.Config{BlockSize: 16, Slots: 4, SlotTokens: 4096})
	add := func(id string, seed, prompt, maxTokens int) {
		s.Add(&Request{ID: id, Prompt: shortPrompt(seed, prompt), Sampling: engine.DefaultSampling(), N: 1,
			MaxTokens: maxTokens, Arrival: testBase, PromptLogprobs: -1})
	}
	chunks := map[string]int{}
	// step runs one step and returns the long prompt's tokens in it, the
	// number of decodes and the step's Pacing.
	step := func(long engine.SeqID) (int, int, Pacing) {
		t.Helper()
		st := runStep(t, s, fake)
		p := s.Pacing()
		n, decodes := 0, 0
		for _, ch := range st.Batch {
			switch {
			case ch.Seq == long:
				n = len(ch.Tokens)
			case len(ch.Tokens) == 1 && ch.Sample:
				decodes++
			}
		}
		for _, o := range s.Outputs() {
			if o.Last {
				chunks[o.RequestID] = o.PromptChunks
			}
		}
		return n, decodes, p
	}
	seqOf := func(id string) engine.SeqID { return s.requests[id].seqs[0].id }
	const none = engine.SeqID(1 << 30) // no long prompt to look for

	// Alone, nothing to pace for: the whole token budget.
	add("alone", 1, 2000, 1)
	if n, _, p := step(seqOf("alone")); n != 1024 || p != (Pacing{}) {
		t.Fatalf("alone: %d tokens, %+v; want 1024 and no pacing", n, p)
	}
	for s.HasWork() {
		step(none)
	}
	if chunks["alone"] != 2 {
		t.Errorf("the 2000-token prompt alone took %d steps, want 2", chunks["alone"])
	}

	add("d", 2, 8, 200) // decodes from its second step on
	step(none)
	for i, tc := range []struct {
		budget, limit int
		want          []int
	}{
		{0, 256, []int{256, 256, 88}},    // no budget yet: the threshold
		{1000, 256, []int{256, 256, 88}}, // a budget over the threshold
		{100, 100, []int{100, 100, 100, 100, 100, 100}},
	} {
		s.SetLongPrefillBudget(tc.budget)
		id := fmt.Sprint("long", i)
		add(id, 3+i, 600, 1)
		long := seqOf(id)
		var got []int
		for s.Has(id) {
			n, decodes, p := step(long)
			if n == 0 {
				continue
			}
			got = append(got, n)
			if decodes != 1 {
				t.Errorf("budget %d: a step of %d long tokens decoded %d sequences, want 1", tc.budget, n, decodes)
			}
			if p != (Pacing{Limit: tc.limit, Tokens: n}) {
				t.Errorf("budget %d: Pacing %+v for %d long tokens, want limit %d", tc.budget, p, n, tc.limit)
			}
		}
		if !slices.Equal(got, tc.want) || chunks[id] != len(tc.want) {
			t.Errorf("budget %d: chunks %v (%d in its output), want %v", tc.budget, got, chunks[id], tc.want)
		}
	}
	// A long prompt whose last chunk is one token: it goes as a decode
	// does, and counts as a step of the prompt.
	s.SetLongPrefillBudget(0)
	add("odd", 8, 513, 1)
	for s.Has("odd") {
		step(none)
	}
	if chunks["odd"] != 3 {
		t.Errorf("a 513-token prompt in chunks of 256 took %d steps, want 3", chunks["odd"])
	}
	s.SetLongPrefillBudget(100)
	// A short prompt is not long: one step, not paced.
	add("short", 9, 200, 1)
	if _, _, p := step(none); p.Tokens != 0 || p.Limit != 100 {
		t.Errorf("a short prompt beside a decode: %+v, want limit 100 and no long tokens", p)
	}
	if chunks["short"] != 1 {
		t.Errorf("the short prompt took %d steps, want 1", chunks["short"])
	}
}
