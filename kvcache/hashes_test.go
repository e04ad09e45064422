package kvcache

import (
	"context"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
)

// TestBlockHashesMatchEvents: the hashes a router computes with
// BlockHashes are the ones the Manager's BlockStored events carry, chained
// by Parent, and the salt separates namespaces.
func TestBlockHashesMatchEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		salt   string
		prompt []int32
	}{
		{"two blocks and a tail", "", []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"salted", "s", []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"exact blocks", "", []int32{4, 3, 2, 1, 8, 7, 6, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{BlockSize: 4, Slots: 1, SlotTokens: 16, CacheBytes: 1 << 12, MaxEvents: 64})
			if err != nil {
				t.Fatal(err)
			}
			fake := &enginetest.Fake{Slots: 1, SlotTokens: 16}
			exec := func(st *engine.Step) engine.StepResult {
				t.Helper()
				res, err := fake.Execute(context.Background(), st)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			m.Admit(1, AdmitOptions{Tokens: tc.prompt, Salt: tc.salt})
			exec(&engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: tc.prompt}}})
			m.Commit(1, tc.prompt, len(tc.prompt))
			m.Free(1, true)
			e, c, r := m.StepOps()
			m.Store(exec(&engine.Step{Exports: e, Clears: c, Restores: r}).Exported)

			want := BlockHashes(tc.prompt, tc.salt, 4)
			if len(want) != len(tc.prompt)/4 {
				t.Fatalf("%d hashes, want %d", len(want), len(tc.prompt)/4)
			}
			stored := map[Hash]Event{}
			for _, ev := range m.DrainEvents() {
				if ev.Kind == BlockStored {
					stored[ev.Hash] = ev
				}
			}
			for i, h := range want {
				ev, ok := stored[h]
				if !ok {
					t.Fatalf("block %d: no BlockStored event with its hash", i)
				}
				if ev.Depth != i || ev.Parent != parentOf(want, i) {
					t.Errorf("block %d: event depth %d parent %x, want %d %x", i, ev.Depth, ev.Parent[:4], i, parentOf(want, i))
				}
			}
			if other := BlockHashes(tc.prompt, tc.salt+"x", 4); len(other) > 0 && other[0] == want[0] {
				t.Error("a different salt gives the same hash")
			}
		})
	}
	if BlockHashes([]int32{1, 2, 3}, "", 4) != nil || BlockHashes([]int32{1}, "", 0) != nil {
		t.Error("no full block must give no hashes")
	}
}
