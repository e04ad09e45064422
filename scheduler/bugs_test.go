package scheduler

import (
	"context"
	"fmt"

	"strings"
	"testing"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
)

func newTestScheduler(t *testing.T, cfg Config, kc kvcache.Config) (*Scheduler, *enginetest.Fake) {
	t.Helper()
	kv, err := kvcache.New(kc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	return s, &enginetest.Fake{Slots: kc.Slots, SlotTokens: kc.SlotTokens, Vocab: 100}
}

func runStep(t *testing.T, s *Scheduler, fake *enginetest.Fake) *engine.Step {
	t.Helper()
	st := s.Schedule()
	res, err := fake.Execute(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	s.Update(st, res)
	return st
}

// TestSiblingsOfFinishedChoice0: choices 1..n-1 are to wait until choice
// 0's prompt is in the prefix cache (doc.go), but when choice 0 finishes
// in the step its prompt completes (max_tokens=1, or a stop token first),
// waitForSibling sees it finished and lets the siblings go while its
// export is still queued for the very step that admits them: every
// sibling computes the whole prompt (testdata/siblings.txt, last case).
//
// Fix: keep the siblings waiting while choice 0's export is pending even
// after it finished, e.g. kvcache.Manager.Settled answering false for a
// freed sequence with an export in flight (track pending exports per
// sequence), and waitForSibling asking Settled when choice 0 finished
// instead of returning false.
func TestSiblingsOfFinishedChoice0(t *testing.T) {
	s, fake := newTestScheduler(t,
		Config{MaxNumSeqs: 3, MaxNumBatchedTokens: 32, MaxWaiting: 4, MaxModelLen: 64},
		kvcache.Config{BlockSize: 4, Slots: 3, SlotTokens: 64, CacheBytes: 1 << 10})
	prompt := make([]int32, 10)
	for i := range prompt {
		prompt[i] = int32(i + 1)
	}
	s.Add(&Request{ID: "a", Prompt: prompt, Sampling: engine.DefaultSampling(), N: 3, MaxTokens: 1, Arrival: testBase, PromptLogprobs: -1})
	computed := 0
	for i := 0; s.HasWork() && i < 10; i++ {
		computed += runStep(t, s, fake).NumTokens()
	}
	if want := len(prompt) + 2*1; computed != want {
		t.Errorf("the three choices computed %d tokens; want %d (choice 0 the prompt, the others restore all of it but its last token)", computed, want)
	}
}

// TestDeterministic: the scheduler is meant to be a deterministic state
// machine (raft's RawNode style), so that a run can be replayed and
// golden tests need no sorting. Expire and AbortAll range over the
// requests map, so when several requests end at once their outputs, the
// order of their Frees, and so the export tags, clears and LRU order of
// their blocks, change from run to run.
//
// Fix: visit requests in arrival order (sort by request.order, or keep
// live requests in a slice) in Expire and AbortAll.
func TestDeterministic(t *testing.T) {
	trace := func() string {
		s, fake := newTestScheduler(t,
			Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxWaiting: 16, MaxModelLen: 32},
			kvcache.Config{BlockSize: 2, Slots: 8, SlotTokens: 32, CacheBytes: 1 << 10})
		for i := range 8 {
			s.Add(&Request{ID: fmt.Sprint(i), Prompt: []int32{int32(i + 1), 2, 3, 4, 5}, Sampling: engine.DefaultSampling(),
				N: 1, MaxTokens: 8, Arrival: testBase, Deadline: testBase.Add(time.Second), PromptLogprobs: -1})
		}
		runStep(t, s, fake)
		s.Outputs()
		s.Expire(testBase.Add(time.Second))
		var b strings.Builder
		for _, o := range s.Outputs() {
			fmt.Fprintf(&b, "%s ", o.RequestID)
		}
		st := runStep(t, s, fake)
		for _, e := range st.Exports {
			fmt.Fprintf(&b, "%d:%d ", e.Tag, e.Seq)
		}
		fmt.Fprint(&b, st.Clears)
		return b.String()
	}
	want := trace()
	for range 10 {
		if got := trace(); got != want {
			t.Fatalf("two runs of the same inputs differ:\n%s\n%s", want, got)
		}
	}
}

// TestCachedTokensBestOverChoices: Usage.CachedTokens is documented as
// "the best over the request's choices' first admissions", but Schedule
// sets it from choice 0's admission only. For n > 1 with the prefix cache
// on, choice 0 computes the prompt and its siblings restore it, so the
// usage said 0 cached tokens while 9 of each sibling's 10 were restored
// (two blocks and the first position of the prompt's tail).
//
// Fix: either the code (CachedTokens = max(CachedTokens, cached) on every
// choice's first admission) or the doc (choice 0's hits only, which is
// what a client billed once for the prompt would expect); they must agree.
func TestCachedTokensBestOverChoices(t *testing.T) {
	s, fake := newTestScheduler(t,
		Config{MaxNumSeqs: 2, MaxNumBatchedTokens: 32, MaxWaiting: 4, MaxModelLen: 64},
		kvcache.Config{BlockSize: 4, Slots: 2, SlotTokens: 64, CacheBytes: 1 << 10})
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	s.Add(&Request{ID: "a", Prompt: prompt, Sampling: engine.DefaultSampling(), N: 2, MaxTokens: 4, Arrival: testBase, PromptLogprobs: -1})
	var last *RequestOutput
	for i := 0; s.HasWork() && i < 20; i++ {
		runStep(t, s, fake)
		for _, o := range s.Outputs() {
			if o.Last {
				last = &o
			}
		}
	}
	if last == nil {
		t.Fatal("the request did not finish")
	}
	if got := last.Usage.CachedTokens; got != 9 {
		t.Errorf("CachedTokens %d; choice 1 restored 9 of the prompt", got)
	}
}
