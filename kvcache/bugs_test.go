package kvcache

import (
	"context"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
)

// TestFreeBeforeStepOps: a sequence admitted with a prefix hit and freed
// before the next StepOps leaves its Restore queued behind the Clear of
// its slot, so the step restores the freed sequence's prefix into a slot
// the manager calls free. The next sequence admitted there starts at
// position 0 in a slot that holds the old prefix; the engine fails it
// (ErrInvalidBatch), or a restore into it ("not empty").
//
// The scheduler never frees between Admit and StepOps today (both happen
// inside Schedule), but Free's contract says the slot "can be admitted to
// at once", and any caller that aborts a sequence admitted in the same
// step (an abort path inside Schedule, a future admission-then-preemption)
// hits it. Fix: Free drops the sequence's queued restores
// (m.restores = slices.DeleteFunc(m.restores, func(r engine.Restore) bool
// { return r.Seq == id })); the Clear of a slot that was never filled is
// harmless.
func TestFreeBeforeStepOps(t *testing.T) {
	m, err := New(Config{BlockSize: 4, Slots: 1, SlotTokens: 16, CacheBytes: 1 << 10})
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
	ops := func() *engine.Step {
		e, c, r := m.StepOps()
		return &engine.Step{Exports: e, Clears: c, Restores: r}
	}
	// Cache "1 2 3 4".
	prompt := []int32{1, 2, 3, 4, 5}
	m.Admit(1, AdmitOptions{Tokens: prompt})
	exec(&engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: prompt}}})
	m.Commit(1, prompt, len(prompt))
	m.Free(1, true)
	m.Store(exec(ops()).Exported)

	// Seq 2 hits the block, and is freed (aborted) before the step.
	if cached, _ := m.Admit(2, AdmitOptions{Tokens: prompt}); cached != 4 {
		t.Fatalf("cached %d, want 4", cached)
	}
	m.Free(2, false)
	// Seq 3 takes the slot and computes from position 0.
	other := []int32{9, 9, 9}
	if cached, ok := m.Admit(3, AdmitOptions{Tokens: other}); !ok || cached != 0 {
		t.Fatalf("admit: %d %v", cached, ok)
	}
	st := ops()
	if i := slices.IndexFunc(st.Restores, func(r engine.Restore) bool { return r.Seq == 2 }); i >= 0 {
		t.Errorf("StepOps restores freed sequence 2 into slot %d after clearing it", st.Restores[i].Slot)
	}
	st.Batch = []engine.Chunk{{Seq: 3, Slot: 0, Pos: 0, Tokens: other}}
	if res := exec(st); len(res.Failures) > 0 {
		t.Fatalf("the engine failed the next sequence in the slot: %v", res.Failures[0].Err)
	}
}
