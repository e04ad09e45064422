package scheduler

import (
	"fmt"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
)

// answer fabricates the engine's result for a step: every chunk that
// samples gets a token, every export its KV (in the fake's layout, content
// irrelevant here).
func answer(step *engine.Step, tok int32) engine.StepResult {
	var res engine.StepResult
	for _, c := range step.Batch {
		if c.Sample {
			res.Samples = append(res.Samples, engine.Sample{Seq: c.Seq, Token: tok})
		}
	}
	for _, e := range step.Exports {
		n := e.To - e.From
		res.Exported = append(res.Exported, engine.Exported{Tag: e.Tag, Seq: e.Seq, From: e.From,
			KV: &engine.KV{Layout: benchLayout, N: n, Data: make([]byte, 4*n)}})
	}
	return res
}

var benchLayout = &engine.KVLayout{Sections: []engine.KVSection{{Groups: 1, Unit: 4}}}

// BenchmarkStep256 is one Schedule and Update at 256 running sequences
// that decode (the steady state of a full server), with the prefix cache
// on: each op is a 256-token step, 256 samples appended, and a block
// hashed for every 16th token of each sequence.
func BenchmarkStep256(b *testing.B) { benchStep256(b, 0) }

// BenchmarkStep256KVCapacity is BenchmarkStep256 with a KV token capacity
// that never runs out: every decode reserves its position (a new block
// every 16th token of each sequence).
func BenchmarkStep256KVCapacity(b *testing.B) { benchStep256(b, 1<<40) }

func benchStep256(b *testing.B, capacity int) {
	const n = 256
	kv, err := kvcache.New(kvcache.Config{BlockSize: 16, Slots: n, SlotTokens: 1 << 20, CacheBytes: 64 << 20, CapacityTokens: capacity})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{MaxNumSeqs: n, MaxNumBatchedTokens: 8192, MaxWaiting: n, MaxModelLen: 1 << 20, KVCapacityTokens: capacity}, kv)
	if err != nil {
		b.Fatal(err)
	}
	system := make([]int32, 64) // a shared system prompt
	for i := range system {
		system[i] = int32(i)
	}
	for i := range n {
		prompt := append(append([]int32(nil), system...), int32(i), int32(i+1), int32(i+2))
		s.Add(&Request{ID: fmt.Sprint(i), Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1,
			MaxTokens: 1 << 19, Arrival: testBase, PromptLogprobs: -1})
	}
	// Prefill everything, until every sequence decodes.
	for range 4 {
		st := s.Schedule()
		s.Update(st, answer(st, 7))
		s.Outputs()
	}
	if st := s.Stats(); st.Running != n || st.Waiting != 0 {
		b.Fatalf("%+v", st)
	}
	tok := int32(0)
	b.ReportAllocs()
	for b.Loop() {
		st := s.Schedule()
		if len(st.Batch) != n {
			b.Fatalf("%d chunks", len(st.Batch))
		}
		tok = (tok + 1) % 1000
		s.Update(st, answer(st, tok))
		s.Outputs()
	}
}

// BenchmarkAdmit256 is a step that admits 256 waiting requests whose
// 1024-token prompt shares 960 cached tokens with an earlier one (60
// blocks restored each), and the step after it that finishes them all.
func BenchmarkAdmit256(b *testing.B) {
	const n = 256
	kv, err := kvcache.New(kvcache.Config{BlockSize: 16, Slots: n, SlotTokens: 2048, CacheBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{MaxNumSeqs: n, MaxNumBatchedTokens: 1 << 16, MaxWaiting: n, MaxModelLen: 2048}, kv)
	if err != nil {
		b.Fatal(err)
	}
	prompt := func(i int) []int32 {
		p := make([]int32, 1024)
		for j := range p {
			p[j] = int32(j)
		}
		for j := 960; j < len(p); j++ {
			p[j] = int32(i*7 + j)
		}
		return p
	}
	add := func(id string, i int) {
		s.Add(&Request{ID: id, Prompt: prompt(i), Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 1, Arrival: testBase, PromptLogprobs: -1})
	}
	run := func() {
		for s.HasWork() {
			st := s.Schedule()
			s.Update(st, answer(st, 7))
			s.Outputs()
		}
	}
	add("warm", 0)
	run()
	round := 0
	for b.Loop() {
		b.StopTimer()
		for i := range n {
			add(fmt.Sprint(round, "/", i), round*n+i)
		}
		round++
		b.StartTimer()
		run()
	}
	st := kv.Stats()
	b.ReportMetric(float64(st.HitTokens)/float64(st.QueryTokens), "hit-ratio")
}
