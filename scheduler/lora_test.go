package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
)

type testAdapter string

func (a testAdapter) AdapterName() string { return string(a) }

// TestMaxLoRAs: with MaxLoRAs 2, no step holds more than two distinct
// adapters; a request of a third waits, the later requests of the running
// adapters wait behind it (so the running ones drain), base-model requests
// go on, and every request finishes, the blocked one before the later
// ones of the adapters it waited for.
func TestMaxLoRAs(t *testing.T) {
	s, fake := newTestScheduler(t,
		Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxWaiting: 32, MaxModelLen: 64, MaxLoRAs: 2},
		kvcache.Config{BlockSize: 4, Slots: 8, SlotTokens: 64, CacheBytes: 1 << 12})
	prompt := []int32{1, 2, 3, 4, 5}
	add := func(id string, a engine.Adapter, maxTokens int, at time.Duration) {
		s.Add(&Request{ID: id, Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: maxTokens,
			Arrival: testBase.Add(at), PromptLogprobs: -1, Adapter: a, IgnoreEOS: true})
	}
	add("a1", testAdapter("a"), 6, 0)
	add("b1", testAdapter("b"), 6, 1)
	add("c1", testAdapter("c"), 3, 2) // blocked: a and b run
	add("a2", testAdapter("a"), 3, 3) // waits behind c1
	add("base", nil, 3, 4)            // no adapter: runs at once
	started := map[string]int{}
	finished := map[string]int{}
	for step := 0; s.HasWork() && step < 100; step++ {
		st := s.Schedule()
		stats := s.Stats()
		if len(stats.RunningLoRAs) > 2 {
			t.Fatalf("step %d: %d adapters running: %v", step, len(stats.RunningLoRAs), stats.RunningLoRAs)
		}
		for _, sq := range s.running {
			if _, ok := started[sq.req.req.ID]; !ok {
				started[sq.req.req.ID] = step
			}
		}
		res, err := fake.Execute(t.Context(), st)
		if err != nil {
			t.Fatal(err)
		}
		s.Update(st, res)
		for _, o := range s.Outputs() {
			if o.Last {
				finished[o.RequestID] = step
			}
		}
		if step == 0 {
			if want := []string{"a", "b"}; !slices.Equal(stats.RunningLoRAs, want) || !slices.Equal(stats.WaitingLoRAs, []string{"a", "c"}) || stats.MaxLoRAs != 2 {
				t.Fatalf("step 0: running %v waiting %v max %d", stats.RunningLoRAs, stats.WaitingLoRAs, stats.MaxLoRAs)
			}
		}
	}
	if len(finished) != 5 {
		t.Fatalf("finished %v", finished)
	}
	if started["base"] != 0 {
		t.Errorf("the base request started at step %d, want 0", started["base"])
	}
	if started["c1"] <= finished["b1"] && started["c1"] <= finished["a1"] {
		t.Errorf("c1 started at %d before an adapter slot was free (a1 ended %d, b1 %d)", started["c1"], finished["a1"], finished["b1"])
	}
	if started["a2"] < started["c1"] {
		t.Errorf("a2 (step %d) jumped c1 (step %d), which waited first", started["a2"], started["c1"])
	}
}

// TestLoRAPrefixCache: the prefix cache shares blocks within an adapter,
// never between adapters or with the base model.
func TestLoRAPrefixCache(t *testing.T) {
	s, fake := newTestScheduler(t,
		Config{MaxNumSeqs: 1, MaxNumBatchedTokens: 64, MaxWaiting: 32, MaxModelLen: 64},
		kvcache.Config{BlockSize: 4, Slots: 1, SlotTokens: 64, CacheBytes: 1 << 12})
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	run := func(id string, a engine.Adapter) int {
		s.Add(&Request{ID: id, Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 1,
			Arrival: testBase, PromptLogprobs: -1, Adapter: a, IgnoreEOS: true})
		cached := -1
		for i := 0; s.HasWork() && i < 20; i++ {
			runStep(t, s, fake)
			for _, o := range s.Outputs() {
				if o.Last {
					cached = o.Usage.CachedTokens
				}
			}
		}
		return cached
	}
	for _, c := range []struct {
		id      string
		adapter engine.Adapter
		cached  int
	}{{"base", nil, 0}, {"a", testAdapter("a"), 0}, {"b", testAdapter("b"), 0}, {"a again", testAdapter("a"), 9}, {"base again", nil, 9}, {"b again", testAdapter("b"), 9}} {
		if got := run(c.id, c.adapter); got != c.cached {
			t.Errorf("%s: %d cached tokens, want %d", c.id, got, c.cached)
		}
	}
	// A base salt cannot name an adapter's namespace.
	r := &Request{CacheSalt: "\x00lora\x001\x00a"}
	if r.CacheKey() == (&Request{Adapter: testAdapter("a")}).CacheKey() {
		t.Fatal("a base salt names an adapter's namespace")
	}
}
