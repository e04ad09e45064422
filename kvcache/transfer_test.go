package kvcache

import (
	"context"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
)

func fakeKV(n int) *engine.KV {
	kv := &engine.KV{Layout: enginetest.Layout, N: n, Data: make([]byte, n*enginetest.Layout.BytesPerPosition())}
	for i := range kv.Data {
		kv.Data[i] = byte(i)
	}
	return kv
}

// TestImport: imported KV becomes blocks and a tail that a sequence with
// those tokens hits (all but its last token); the budget bounds it; with
// caching off nothing is imported.
func TestImport(t *testing.T) {
	tokens := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		name       string
		cacheBytes int64
		n          int
		imported   int
		hit        int
	}{
		{"blocks and a tail", 1 << 10, 10, 10, 9},
		{"blocks only", 1 << 10, 8, 8, 8},
		{"less than a block", 1 << 10, 3, 3, 3},
		{"over budget", 6 * 4, 10, 4, 4}, // the tail, then the second block, are evicted
		{"caching off", 0, 10, 0, 0},
		{"more positions than tokens", 1 << 10, 11, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{BlockSize: 4, Slots: 1, SlotTokens: 16, CacheBytes: tc.cacheBytes})
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Import(tokens, "s", fakeKV(tc.n)); got != tc.imported {
				t.Fatalf("imported %d positions, want %d", got, tc.imported)
			}
			if cached, _ := m.Admit(1, AdmitOptions{Tokens: tokens, Salt: "s"}); cached != tc.hit {
				t.Fatalf("a sequence with the tokens hit %d, want %d", cached, tc.hit)
			}
			if tc.imported > 0 {
				if cached, _ := m.Admit(2, AdmitOptions{Tokens: tokens, Salt: "other"}); cached != 0 {
					t.Fatalf("another salt hit %d", cached)
				}
			}
		})
	}
}

// TestKeep: a sequence admitted with Keep exports its first KeepPositions
// positions when freed with offer; Lease reads them until Release. Freed
// before it held them, or without offer, it keeps nothing.
func TestKeep(t *testing.T) {
	fake := &enginetest.Fake{Slots: 2, SlotTokens: 16}
	exec := func(st *engine.Step) engine.StepResult {
		t.Helper()
		res, err := fake.Execute(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	m, err := New(Config{BlockSize: 4, Slots: 2, SlotTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{1, 2, 3, 4, 5, 6}
	m.Admit(1, AdmitOptions{Tokens: prompt, Keep: "a", KeepPositions: len(prompt)})
	m.Admit(2, AdmitOptions{Tokens: prompt, Keep: "b", KeepPositions: len(prompt)})
	exec(&engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: prompt}, {Seq: 2, Slot: 1, Tokens: prompt[:3]}}})
	m.Commit(1, prompt, len(prompt))
	m.Commit(2, prompt, 3)
	m.Free(1, true)
	m.Free(2, true) // holds 3 of 6: nothing to keep
	if !m.Keeping("a") || m.Keeping("b") {
		t.Fatalf("keeping a %v b %v", m.Keeping("a"), m.Keeping("b"))
	}
	e, c, r := m.StepOps()
	m.Store(exec(&engine.Step{Exports: e, Clears: c, Restores: r}).Exported)
	kept := m.TakeKept()
	if len(kept) != 1 || kept[0].Name != "a" || !kept[0].OK || kept[0].Positions != len(prompt) {
		t.Fatalf("kept %+v", kept)
	}
	ref := m.Lease("a")
	if ref == nil || ref.KV().N != len(prompt) || int64(ref.KV().Size()) != kept[0].Bytes || m.Stats().Leases != 1 || m.Stats().LeaseBytes != kept[0].Bytes {
		t.Fatalf("lease %v, stats %+v", ref, m.Stats())
	}
	want := slices.Clone(ref.KV().Data)
	// The manager's release leaves the ref's KV readable (a Guard arena
	// would fault otherwise) until the ref's own Release frees it.
	if !m.Release("a") || m.HostMemory().Bufs != 1 || !slices.Equal(ref.KV().Data, want) {
		t.Fatalf("after the manager's release: %+v", m.HostMemory())
	}
	ref.Release()
	ref.Release()
	if m.HostMemory().Bufs != 0 {
		t.Fatalf("after the ref's release: %+v", m.HostMemory())
	}
	if m.Release("a") || m.Lease("a") != nil || m.Stats().LeaseBytes != 0 {
		t.Fatal("release")
	}
}
