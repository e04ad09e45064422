package kvcache

import (
	"testing"

	"github.com/llmserve/llmserve/engine"
)

// benchManager is a manager with 16-token blocks, a cache of 4096 blocks,
// and a 1024-token prompt (64 blocks) already cached.
func benchManager(b *testing.B) (*Manager, []int32) {
	m, err := New(Config{BlockSize: 16, Slots: 4, SlotTokens: 4096, CacheBytes: 4096 * 16 * 4})
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 1024+1)
	for i := range prompt {
		prompt[i] = int32(i % 97)
	}
	m.Admit(0, AdmitOptions{Tokens: prompt})
	m.Commit(0, prompt, len(prompt))
	m.Free(0, true)
	storeAll(m, map[engine.SeqID][]int32{0: prompt})
	if st := m.Stats(); st.CachedBlocks != 64 {
		b.Fatalf("%d blocks cached", st.CachedBlocks)
	}
	return m, prompt
}

// storeAll answers the pending exports with KV fabricated from tokens.
func storeAll(m *Manager, tokens map[engine.SeqID][]int32) {
	exports, _, _ := m.StepOps()
	res := make([]engine.Exported, len(exports))
	for i, e := range exports {
		res[i] = engine.Exported{Tag: e.Tag, Seq: e.Seq, From: e.From, KV: kvOf(tokens[e.Seq][e.From:e.To])}
	}
	m.Store(res)
}

// BenchmarkAdmitHit: a sequence whose 1024-token prompt is cached is
// admitted (64 blocks hashed, found and touched), then freed.
func BenchmarkAdmitHit(b *testing.B) {
	m, prompt := benchManager(b)
	id := engine.SeqID(1)
	for b.Loop() {
		cached, ok := m.Admit(id, AdmitOptions{Tokens: prompt, Count: true})
		if !ok || cached != 1024 {
			b.Fatalf("admit: %d %v", cached, ok)
		}
		m.Free(id, false)
		m.StepOps()
		id++
	}
}

// BenchmarkStore: a sequence with a cached 1024-token prefix and 64 new
// tokens (4 blocks) is admitted, computes, is freed with its new blocks
// exported, and Store files them, evicting as many old ones once the cache
// is full.
func BenchmarkStore(b *testing.B) {
	m, prompt := benchManager(b)
	id := engine.SeqID(1)
	toks := map[engine.SeqID][]int32{}
	seq := append(append([]int32(nil), prompt[:1024]...), make([]int32, 64+1)...)
	for b.Loop() {
		// Four new blocks, unique to this iteration.
		for i := 1024; i < len(seq); i++ {
			seq[i] = int32(id) + int32(i)
		}
		if cached, _ := m.Admit(id, AdmitOptions{Tokens: seq, Count: true}); cached != 1024 {
			b.Fatalf("cached %d", cached)
		}
		m.Commit(id, seq, len(seq))
		m.Free(id, true)
		toks[id] = seq
		storeAll(m, toks)
		delete(toks, id)
		id++
	}
	b.ReportMetric(float64(m.Stats().Evictions)/float64(b.N), "evictions/op")
}
