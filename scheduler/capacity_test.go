package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
)

// newCapacityScheduler is a scheduler, manager and fake that share a KV
// token capacity.
func newCapacityScheduler(t *testing.T, cfg Config, kc kvcache.Config) (*Scheduler, *enginetest.Fake) {
	t.Helper()
	cfg.KVCapacityTokens = kc.CapacityTokens
	kv, err := kvcache.New(kc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	return s, &enginetest.Fake{Slots: kc.Slots, SlotTokens: kc.SlotTokens, CapacityTokens: kc.CapacityTokens, Vocab: 100}
}

func shortPrompt(i, n int) []int32 {
	p := make([]int32, n)
	for j := range p {
		p[j] = int32((i*7+j)%97 + 1)
	}
	return p
}

// TestCapacityRunsShortSequencesTogether: slots of a long context
// (131,072 positions each) no longer bound what runs at once: 32 sequences
// of 128 tokens run together in 4,096 tokens of KV capacity, none
// preempted, and the capacity is all reserved at their longest.
func TestCapacityRunsShortSequencesTogether(t *testing.T) {
	const n, prompt, maxTokens = 32, 100, 28
	s, fake := newCapacityScheduler(t,
		Config{MaxNumSeqs: n, MaxNumBatchedTokens: 4096, MaxWaiting: n, MaxModelLen: 131072},
		kvcache.Config{BlockSize: 16, Slots: n, SlotTokens: 131072, CapacityTokens: n * (prompt + maxTokens)})
	for i := range n {
		s.Add(&Request{ID: fmt.Sprint(i), Prompt: shortPrompt(i, prompt), Sampling: engine.DefaultSampling(), N: 1,
			MaxTokens: maxTokens, Arrival: testBase, PromptLogprobs: -1})
	}
	finished, peak := 0, 0.0
	for steps := 0; s.HasWork(); steps++ {
		if steps > 100 {
			t.Fatal("no progress")
		}
		st := runStep(t, s, fake)
		if len(st.Batch) != n && finished == 0 {
			t.Fatalf("step %d: %d sequences ran, want all %d", steps, len(st.Batch), n)
		}
		peak = max(peak, s.Stats().KV.Usage())
		for _, o := range s.Outputs() {
			if o.Output.Err != nil {
				t.Fatalf("%s: %v", o.RequestID, o.Output.Err)
			}
			if o.Output.Finish != FinishNone {
				if o.Output.Finish != FinishLength {
					t.Fatalf("%s: finish %s", o.RequestID, o.Output.Finish)
				}
				finished++
			}
		}
	}
	st := s.Stats()
	if finished != n || st.Preemptions != 0 || fake.Stats().MaxBatchSeqs != n || st.KV.ReservedTokens != 0 {
		t.Fatalf("%d finished, %d preemptions, max batch %d, %d tokens still reserved", finished, st.Preemptions, fake.Stats().MaxBatchSeqs, st.KV.ReservedTokens)
	}
	// The last decode of each computes position 126: 127 positions, 8
	// blocks of 16, the whole capacity.
	if peak != 1 {
		t.Fatalf("peak KV usage %v, want 1", peak)
	}
}

// TestCapacityRequestChecks: with a KV capacity smaller than the context,
// a prompt must be shorter than the capacity (the message names both
// numbers and the flag to raise), while max_tokens may reach past it: the
// sequence then ends with length at the capacity.
func TestCapacityRequestChecks(t *testing.T) {
	cfg := Config{MaxNumSeqs: 2, MaxNumBatchedTokens: 16, MaxWaiting: 4, MaxModelLen: 128, KVCapacityTokens: 32}
	if got := cfg.MaxSeqLen(); got != 32 {
		t.Fatalf("MaxSeqLen %d, want 32", got)
	}
	r := &Request{ID: "a", Prompt: shortPrompt(0, 32), Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 1, Arrival: testBase, PromptLogprobs: -1}
	err := cfg.CheckRequest(r)
	var re *RequestError
	if !errors.As(err, &re) || !errors.Is(err, ErrTooLong) || re.Field != FieldPrompt || re.Limit != 32 || re.KVTokens != 32 || re.PromptTokens != 32 {
		t.Fatalf("prompt of 32 tokens, capacity 32: %#v", err)
	}
	for _, want := range []string{"32 tokens", "--kv-cache-memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	r.Prompt, r.MaxTokens = shortPrompt(0, 31), 97
	if err := cfg.CheckRequest(r); err != nil {
		t.Fatalf("prompt of 31 tokens and 97 to generate, context 128, capacity 32: %v", err)
	}
	// The context, not the capacity, is what a prompt over both breaks.
	r.Prompt = shortPrompt(0, 128)
	if err := cfg.CheckRequest(r); !errors.As(err, &re) || re.KVTokens != 0 || re.Limit != 128 {
		t.Fatalf("prompt of 128 tokens, context 128: %#v", err)
	}
}

// TestCapacityValidate: the scheduler and the KV manager must agree on
// the capacity, and it must hold a prompt and a token.
func TestCapacityValidate(t *testing.T) {
	kv, err := kvcache.New(kvcache.Config{BlockSize: 4, Slots: 2, SlotTokens: 64, CapacityTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MaxNumSeqs: 2, MaxNumBatchedTokens: 16, MaxWaiting: 4, MaxModelLen: 64}
	if _, err := New(cfg, kv); err == nil || !strings.Contains(err.Error(), "KV capacity") {
		t.Fatalf("capacity 0 over a manager with 32: %v", err)
	}
	cfg.KVCapacityTokens = 32
	if _, err := New(cfg, kv); err != nil {
		t.Fatal(err)
	}
}

// TestCapacitySlotsWanted: more slots are wanted when the head of the
// queue waits for a slot, not when it waits for KV tokens.
func TestCapacitySlotsWanted(t *testing.T) {
	s, fake := newCapacityScheduler(t,
		Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 16, MaxWaiting: 4, MaxModelLen: 64},
		kvcache.Config{BlockSize: 4, Slots: 4, InitialSlots: 1, SlotTokens: 64, CapacityTokens: 16})
	add := func(id string, n int) {
		s.Add(&Request{ID: id, Prompt: shortPrompt(0, n), Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 8, Arrival: testBase, PromptLogprobs: -1})
	}
	add("a", 4)
	runStep(t, s, fake)
	add("b", 12) // needs 3 blocks, 2 are free after a grows
	runStep(t, s, fake)
	if got := s.SlotsWanted(); got != 0 {
		t.Fatalf("head waits for tokens: SlotsWanted %d, want 0", got)
	}
	s.Abort("b", -1, false, nil)
	add("c", 4)
	if got := s.SlotsWanted(); got != 2 {
		t.Fatalf("head waits for a slot: SlotsWanted %d, want 2", got)
	}
}

// TestLongPrefillBudget: while a sequence decodes, a long prompt computes
// at most the long-prefill budget per step, a short prompt is not held
// back, and with nothing decoding the long prompt takes the whole token
// budget.
func TestLongPrefillBudget(t *testing.T) {
	s, fake := newCapacityScheduler(t,
		Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 512, MaxWaiting: 8, MaxModelLen: 4096, LongPrefillTokens: 256},
		kvcache.Config{BlockSize: 16, Slots: 4, SlotTokens: 4096})
	s.SetLongPrefillBudget(32)
	add := func(id string, prompt, maxTokens int) {
		s.Add(&Request{ID: id, Prompt: shortPrompt(len(id), prompt), Sampling: engine.DefaultSampling(), N: 1,
			MaxTokens: maxTokens, Arrival: testBase, PromptLogprobs: -1})
	}
	promptTokens := func(st *engine.Step) (n int) {
		for _, ch := range st.Batch {
			if len(ch.Tokens) > 1 || !ch.Sample {
				n += len(ch.Tokens)
			}
		}
		return n
	}
	// Alone, the long prompt takes whole 512-token chunks.
	add("long-alone", 2000, 1)
	if st := runStep(t, s, fake); promptTokens(st) != 512 {
		t.Fatalf("alone: %d prompt tokens in the first step, want 512", promptTokens(st))
	}
	for s.HasWork() {
		runStep(t, s, fake)
	}
	add("d", 8, 100) // decodes from its second step on
	runStep(t, s, fake)
	add("long", 2000, 1)
	for range 5 {
		st := runStep(t, s, fake)
		if got := promptTokens(st); got != 32 {
			t.Fatalf("beside a decode: %d long-prompt tokens in a step, want the budget of 32", got)
		}
	}
	add("short", 100, 1)
	st := runStep(t, s, fake)
	if got := promptTokens(st); got != 32+100 {
		t.Fatalf("a short prompt beside the long one: %d prompt tokens, want 32 + 100", got)
	}
}

// TestLongPrefillBudgetToTheEnd: a long prompt stays long to its last
// chunk, even when fewer tokens than the threshold are left.
func TestLongPrefillBudgetToTheEnd(t *testing.T) {
	s, fake := newCapacityScheduler(t,
		Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 512, MaxWaiting: 8, MaxModelLen: 4096, LongPrefillTokens: 256},
		kvcache.Config{BlockSize: 16, Slots: 4, SlotTokens: 4096})
	s.SetLongPrefillBudget(100)
	s.Add(&Request{ID: "d", Prompt: shortPrompt(1, 8), Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 100, Arrival: testBase, PromptLogprobs: -1})
	runStep(t, s, fake)
	s.Add(&Request{ID: "long", Prompt: shortPrompt(2, 300), Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 1, Arrival: testBase, PromptLogprobs: -1})
	for i := range 3 {
		st := runStep(t, s, fake)
		for _, ch := range st.Batch {
			if len(ch.Tokens) > 100 {
				t.Fatalf("step %d: a chunk of %d tokens of the 300-token prompt, over the budget of 100", i, len(ch.Tokens))
			}
		}
	}
}
