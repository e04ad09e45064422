//go:build cgo

package llamacpp

import (
	"context"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
)

// loadKVQ8 writes and loads a small dummy-weight model whose KV rows are
// one q8_0 block (one KV head of 32 dimensions): 34 bytes.
func loadKVQ8(t testing.TB) *Model {
	t.Helper()
	return loadSynth(t, synth.Shape{Name: "kv-q8", Of: "a test", Embd: 128, Layers: 2, Heads: 4, HeadsKV: 1, FF: 256, Context: 8192,
		RopeTheta: 10000, RMSEps: 1e-5, Vocab: 512}, "f32", 3)
}

// prefill computes prompt into slot as sequence seq and returns the
// sampled token.
func prefill(t *testing.T, c *Context, seq engine.SeqID, slot engine.Slot, prompt []int32) {
	t.Helper()
	res, err := c.Execute(context.Background(), &engine.Step{
		Added: []engine.NewSequence{{Seq: seq, Sampling: engine.DefaultSampling()}},
		Batch: []engine.Chunk{{Seq: seq, Slot: slot, Tokens: prompt, Sample: true}},
	})
	if err != nil || len(res.Failures) > 0 {
		t.Fatal(err, res.Failures)
	}
}

func clearSlots(t *testing.T, c *Context, slots ...engine.Slot) {
	t.Helper()
	if _, err := c.Execute(context.Background(), &engine.Step{Clears: slots}); err != nil {
		t.Fatal(err)
	}
}

func tokensOf(n, seed int, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(1 + (i*37+seed*101)%(vocab-1))
	}
	return out
}

// TestVirtualKVMemory checks that the KV memory follows the positions
// held: a context whose slots hold 8 × 4096 positions commits nothing at
// creation, the pages of the positions a slot holds when it computes
// them, and gives them back when the slot is cleared.
func TestVirtualKVMemory(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{Slots: 8, SlotTokens: 4096})
	mem := c.KVMemory()
	bpp := int64(c.KVLayout().BytesPerPosition())
	if !mem.Paged {
		t.Fatalf("KV memory not paged: %s", c.notPaged)
	}
	if want := 8 * 4096 * bpp; mem.Reserved != want || mem.Committed != 0 {
		t.Fatalf("KVMemory = %+v, want reserved %d, committed 0", mem, want)
	}
	idle := c.kvResidentPages()
	tensors := int64(len(c.pages.of[0]))
	if idle > tensors {
		t.Errorf("%d KV pages resident after creation (the clear must commit nothing)", idle)
	}

	prefill(t, c, 1, 3, tokensOf(300, 1, c.nVocab))
	// 300 positions × row bytes per tensor, in whole pages.
	row := bpp / tensors
	perTensor := (300*row + pageSize - 1) / pageSize
	got := c.KVMemory().Committed
	if want := tensors * perTensor * pageSize; got != want {
		t.Errorf("committed %d bytes after 300 positions, want %d", got, want)
	}
	resident := c.kvResidentPages() - idle
	if resident < tensors*perTensor || resident > tensors*(perTensor+1) {
		t.Errorf("%d KV pages resident after 300 positions, want %d to %d", resident, tensors*perTensor, tensors*(perTensor+1))
	}

	clearSlots(t, c, 3)
	if got := c.KVMemory().Committed; got != 0 {
		t.Errorf("committed %d bytes after the clear", got)
	}
	if got := c.kvResidentPages(); got > idle {
		t.Errorf("%d KV pages resident after the clear, %d before the sequence", got, idle)
	}
}

// TestVirtualKVNeighbours clears a slot whose pages it shares with a
// running neighbour (rows of q8_0 KV, 34 bytes, and 4352 cells: streams
// do not end on page boundaries) and checks that the neighbour decodes on
// bit for bit as it does alone: giving pages back never zeroes another
// slot's positions.
func TestVirtualKVNeighbours(t *testing.T) {
	m := loadKVQ8(t)
	p := ContextParams{Slots: 6, SlotTokens: 4352, KVType: "q8_0"}
	c := newContext(t, m, p)
	if !c.KVMemory().Paged {
		t.Fatalf("KV memory not paged: %s", c.notPaged)
	}
	if row := c.pages.ranges[0].rowBytes; (row*4352)%pageSize == 0 {
		t.Fatalf("streams of %d-byte rows end on page boundaries: the test needs shared pages", row)
	}
	prompt := tokensOf(64, 2, c.nVocab)
	want := &seqRun{seq: 1, slot: 3, prompt: prompt, n: 40}
	drive(t, c, want)

	// Slot 3 decodes while slots 2 and 4 (its neighbours, sharing its
	// first and last pages) fill and are cleared between its steps.
	ctx := context.Background()
	s := engine.DefaultSampling()
	s.Logprobs = true
	got := &seqRun{seq: 1, slot: 3, prompt: prompt, n: 40}
	next := engine.Chunk{Seq: 1, Slot: 3, Tokens: prompt, Sample: true}
	st := &engine.Step{Added: []engine.NewSequence{{Seq: 1, Sampling: s}}}
	for i := 0; len(got.out) < got.n; i++ {
		switch i {
		case 2:
			prefill(t, c, 2, 2, tokensOf(900, 3, c.nVocab))
			prefill(t, c, 3, 4, tokensOf(500, 4, c.nVocab))
		case 8:
			clearSlots(t, c, 2)
		case 14:
			clearSlots(t, c, 4)
			prefill(t, c, 4, 2, tokensOf(100, 5, c.nVocab))
		case 20:
			clearSlots(t, c, 2)
		}
		st.Batch = []engine.Chunk{next}
		res, err := c.Execute(ctx, st)
		if err != nil || len(res.Failures) > 0 || len(res.Samples) != 1 {
			t.Fatal(err, res.Failures)
		}
		smp := res.Samples[0]
		got.out = append(got.out, smp.Token)
		got.lps = append(got.lps, smp.Logprobs.Chosen.Logprob)
		next = engine.Chunk{Seq: 1, Slot: 3, Pos: next.Pos + int32(len(next.Tokens)), Tokens: []int32{smp.Token}, Sample: true}
		st = &engine.Step{}
	}
	if !sameRun(got, want) {
		t.Errorf("slot 3 beside cleared neighbours:\n got %v\nwant %v", got.out, want.out)
	}
	clearSlots(t, c, 3)
	if got := c.KVMemory().Committed; got != 0 {
		t.Errorf("committed %d bytes with every slot empty", got)
	}
}

// TestVirtualKVNotPagedWithoutFlashAttention: V stored transposed is
// written across the whole stream, so that context says it is not paged.
func TestVirtualKVNotPagedWithoutFlashAttention(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{Slots: 2, FlashAttention: "off"})
	if mem := c.KVMemory(); mem.Paged || mem.Committed != mem.Reserved || c.KVNotPaged() == "" {
		t.Fatalf("KVMemory = %+v (%q), want not paged, committed = reserved", mem, c.KVNotPaged())
	}
}
