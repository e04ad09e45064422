package kvcache

import (
	"context"
	"encoding/binary"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
)

func heapObjectBytes() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// The cache's bytes live off the Go heap: 64 MiB of cached blocks leave the
// heap (and so the collector's goal) where it was.
func TestCacheBytesOffTheGoHeap(t *testing.T) {
	const unit = 4 << 10 // bytes per position: a 64 KiB block at block size 16
	layout := &engine.KVLayout{Sections: []engine.KVSection{{Groups: 1, Unit: unit}}}
	m, err := New(Config{BlockSize: 16, Slots: 1, SlotTokens: 1024, CacheBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	before := heapObjectBytes()
	for chain := range 16 {
		// 64 blocks, 4 MiB, per import; the source is garbage afterwards.
		tokens := make([]int32, 64*16)
		for i := range tokens {
			tokens[i] = int32(chain*100000 + i)
		}
		kv := &engine.KV{Layout: layout, N: len(tokens), Data: make([]byte, len(tokens)*unit)}
		if n := m.Import(tokens, "", kv); n != len(tokens) {
			t.Fatalf("imported %d of %d positions", n, len(tokens))
		}
	}
	after := heapObjectBytes()
	st := m.Stats()
	if st.CachedBytes != 64<<20 || m.HostMemory().Bytes != st.CachedBytes {
		t.Fatalf("cached %d bytes, host memory %+v", st.CachedBytes, m.HostMemory())
	}
	if grown := int64(after) - int64(before); grown > 4<<20 {
		t.Fatalf("the Go heap grew by %d bytes while the cache took %d", grown, st.CachedBytes)
	}
	t.Logf("cache %d MiB; Go heap objects %d -> %d KiB", st.CachedBytes>>20, before>>10, after>>10)
	m.Close()
	if hm := m.HostMemory(); hm.Bufs != 0 || hm.Bytes != 0 {
		t.Fatalf("after Close: %+v", hm)
	}
}

// A restore queued by Admit reads cached KV that something evicts before
// the engine applies it (here an Import over the budget): the entry is
// pinned, so its memory outlives the restore; under the tests' Guard arena
// a read of freed memory would fault. Once the step is done, the next
// StepOps frees it.
func TestEvictedWhileRestoring(t *testing.T) {
	fake := &enginetest.Fake{Slots: 2, SlotTokens: 32}
	exec := func(st *engine.Step) engine.StepResult {
		t.Helper()
		res, err := fake.Execute(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) > 0 {
			t.Fatalf("failures %+v", res.Failures)
		}
		return res
	}
	bs := 4
	bpp := enginetest.Layout.BytesPerPosition()
	m, err := New(Config{BlockSize: bs, Slots: 2, SlotTokens: 32, CacheBytes: int64(2 * bs * bpp)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := []int32{1, 2, 3, 4, 5}
	other := []int32{9, 8, 7, 6, 5, 4, 3, 2}
	if n := m.Import(prompt, "", tokenKV(prompt[:4])); n != 4 {
		t.Fatalf("imported %d", n)
	}
	if cached, ok := m.Admit(1, AdmitOptions{Tokens: prompt}); !ok || cached != 4 {
		t.Fatalf("admit: cached %d ok %v", cached, ok)
	}
	// Two newer blocks over a budget of two: the prompt's block goes.
	if n := m.Import(other, "", tokenKV(other)); n != len(other) {
		t.Fatalf("imported %d", n)
	}
	if m.Stats().CachedBlocks != 2 || m.HostMemory().Bufs != 3 {
		t.Fatalf("stats %+v, host memory %+v", m.Stats(), m.HostMemory())
	}
	e, c, r := m.StepOps()
	exec(&engine.Step{Added: []engine.NewSequence{{Seq: 1, Sampling: engine.DefaultSampling()}}, Exports: e, Clears: c, Restores: r, Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: 4, Tokens: prompt[4:], Sample: true}}})
	if n := fake.SlotLen(0); n != 5 {
		t.Fatalf("slot holds %d positions", n)
	}
	m.StepOps()
	if hm := m.HostMemory(); hm.Bufs != 2 {
		t.Fatalf("the evicted block was not freed after its restore: %+v", hm)
	}
}

// tokenKV is the fake engine's KV of tokens: each position holds its token.
func tokenKV(tokens []int32) *engine.KV {
	kv := &engine.KV{Layout: enginetest.Layout, N: len(tokens)}
	for _, t := range tokens {
		kv.Data = binary.LittleEndian.AppendUint32(kv.Data, uint32(t))
	}
	return kv
}
