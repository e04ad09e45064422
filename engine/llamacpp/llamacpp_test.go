//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/models/stories260k"
)

func loadModel(t testing.TB) *Model {
	t.Helper()
	path, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newContext(t testing.TB, m *Model, p ContextParams) *Context {
	t.Helper()
	if p.KVTokens == 0 {
		p.KVTokens = 2048
	}
	if p.Slots == 0 {
		p.Slots = 8
	}
	if p.BatchTokens == 0 {
		p.BatchTokens = 512
	}
	c, err := NewContext(m, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// generate runs one sequence greedily: the prompt in one chunk, then one
// token per step.
func generate(t testing.TB, c *Context, seq engine.SeqID, slot engine.Slot, prompt []int32, n int) []int32 {
	t.Helper()
	ctx := context.Background()
	step := &engine.Step{
		Added: []engine.NewSequence{{Seq: seq, Sampling: engine.DefaultSampling()}},
		Batch: []engine.Chunk{{Seq: seq, Slot: slot, Tokens: prompt, Sample: true}},
	}
	var out []int32
	pos := int32(len(prompt))
	for len(out) < n {
		res, err := c.Execute(ctx, step)
		if err != nil {
			t.Fatal(err)
		}
		tok := res.Samples[0].Token
		out = append(out, tok)
		step = &engine.Step{Batch: []engine.Chunk{{Seq: seq, Slot: slot, Pos: pos, Tokens: []int32{tok}, Sample: true}}}
		pos++
	}
	if _, err := c.Execute(ctx, &engine.Step{
		Removed: []engine.SeqID{seq},
		MemOps:  []engine.MemOp{{Kind: engine.MemRemove, Dst: slot, P0: -1, P1: -1}},
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTokenize(t *testing.T) {
	m := loadModel(t)
	ref := stories260k.ReferenceGreedy()
	got, err := m.Tokenize(ref.Prompt, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ref.PromptTokens) {
		t.Fatalf("Tokenize(%q) = %v, want %v", ref.Prompt, got, ref.PromptTokens)
	}
	var text []byte
	for _, tok := range ref.GeneratedTokens {
		text = append(text, m.Piece(tok, false)...)
	}
	if string(text) != ref.GeneratedText {
		t.Fatalf("pieces = %q, want %q", text, ref.GeneratedText)
	}
	if got, err := m.Detokenize(ref.GeneratedTokens, false, false); err != nil || got != ref.GeneratedText {
		t.Fatalf("Detokenize = %q, %v", got, err)
	}
	// BOS is dropped; llama.cpp keeps the SentencePiece prefix space.
	if got, _ := m.Detokenize(ref.PromptTokens, true, false); got != " "+ref.Prompt {
		t.Fatalf("Detokenize(prompt) = %q, want %q", got, " "+ref.Prompt)
	}
	if info := m.Info(); info.NCtxTrain != 512 || info.NVocab != 512 || info.ChatTemplate != "" {
		t.Fatalf("info = %+v", info)
	}
	if !m.IsEOG(m.EOS()) || m.EOS() != 2 || m.BOS() != 1 || !m.IsControl(1) || m.IsEOG(432) {
		t.Fatalf("special tokens: bos %d eos %d", m.BOS(), m.EOS())
	}
}

func TestGreedyMatchesReference(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	got := generate(t, c, 1, 0, ref.PromptTokens, len(ref.GeneratedTokens))
	if !slices.Equal(got, ref.GeneratedTokens) {
		t.Fatalf("greedy tokens\n got %v\nwant %v", got, ref.GeneratedTokens)
	}
	if st := c.Stats(); st.DecodedTokens != uint64(len(ref.PromptTokens)+len(ref.GeneratedTokens)-1) {
		t.Fatalf("decoded %d tokens", st.DecodedTokens)
	}
}

// Sequences decoded together in one batch give what each gives alone.
func TestBatchedSequencesMatchSolo(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	prompts := []string{"Once upon a time", "The cat sat", "Lily and Tom went to the park", "One day"}
	var toks [][]int32
	var solo [][]int32
	for i, p := range prompts {
		tk, err := m.Tokenize(p, true, true)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tk)
		solo = append(solo, generate(t, c, engine.SeqID(100+i), engine.Slot(i), tk, 30))
	}
	// Now all at once, with prompts and decodes mixed in the same batches.
	ctx := context.Background()
	outs := make([][]int32, len(prompts))
	pos := make([]int32, len(prompts))
	var step engine.Step
	for i := range prompts {
		step.Added = append(step.Added, engine.NewSequence{Seq: engine.SeqID(i), Sampling: engine.DefaultSampling()})
	}
	// Stagger: sequence i joins at step i.
	for iter := 0; ; iter++ {
		step.Batch = step.Batch[:0]
		for i := range prompts {
			switch {
			case iter == i:
				step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(i), Slot: engine.Slot(i), Tokens: toks[i], Sample: true})
				pos[i] = int32(len(toks[i]))
			case iter > i && len(outs[i]) < 30:
				last := outs[i][len(outs[i])-1]
				step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(i), Slot: engine.Slot(i), Pos: pos[i], Tokens: []int32{last}, Sample: true})
				pos[i]++
			}
		}
		if len(step.Batch) == 0 {
			break
		}
		res, err := c.Execute(ctx, &step)
		if err != nil {
			t.Fatal(err)
		}
		step.Added = nil
		for _, s := range res.Samples {
			outs[s.Seq] = append(outs[s.Seq], s.Token)
		}
	}
	for i := range prompts {
		if !slices.Equal(outs[i], solo[i]) {
			t.Errorf("prompt %q batched\n got %v\nwant %v", prompts[i], outs[i], solo[i])
		}
	}
}

// A prefix shared with llama_memory_seq_cp continues exactly like a prefix
// computed from scratch, and decodes only the suffix.
func TestSharedPrefix(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	prompt := append(slices.Clone(ref.PromptTokens), ref.GeneratedTokens[:40]...)
	want := ref.GeneratedTokens[40:]
	ctx := context.Background()
	// Slot 0 computes the first 32 tokens and keeps them.
	if _, err := c.Execute(ctx, &engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: engine.DefaultSampling()}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: prompt[:32]}},
	}); err != nil {
		t.Fatal(err)
	}
	before := c.Stats().DecodedTokens
	// Slot 1 shares them, then decodes the rest.
	step := &engine.Step{
		Added:  []engine.NewSequence{{Seq: 2, Sampling: engine.DefaultSampling()}},
		MemOps: []engine.MemOp{{Kind: engine.MemCopy, Src: 0, Dst: 1, P0: 0, P1: 32}},
		Batch:  []engine.Chunk{{Seq: 2, Slot: 1, Pos: 32, Tokens: prompt[32:], Sample: true}},
	}
	res, err := c.Execute(ctx, step)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().DecodedTokens - before; got != uint64(len(prompt)-32) {
		t.Fatalf("decoded %d tokens, want %d", got, len(prompt)-32)
	}
	// Dropping slot 0 must not take the shared cells away from slot 1.
	if _, err := c.Execute(ctx, &engine.Step{MemOps: []engine.MemOp{{Kind: engine.MemRemove, Dst: 0, P0: -1, P1: -1}}}); err != nil {
		t.Fatal(err)
	}
	got := []int32{res.Samples[0].Token}
	pos := int32(len(prompt))
	for len(got) < len(want) {
		res, err := c.Execute(ctx, &engine.Step{Batch: []engine.Chunk{{Seq: 2, Slot: 1, Pos: pos, Tokens: got[len(got)-1:], Sample: true}}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Samples[0].Token)
		pos++
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after shared prefix\n got %v\nwant %v", got, want)
	}
	if lo, hi := c.SeqPosRange(1); lo != 0 || hi != pos-1 {
		t.Fatalf("slot 1 holds [%d, %d]", lo, hi)
	}
}

func TestLogprobsAndSeqState(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	s := engine.DefaultSampling()
	s.Logprobs, s.TopLogprobs = true, 3
	res, err := c.Execute(context.Background(), &engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: s}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: ref.PromptTokens, Sample: true, Targets: ref.PromptTokens[1:]}},
	})
	if err != nil {
		t.Fatal(err)
	}
	lp := res.Samples[0].Logprobs
	if lp == nil || len(lp.Top) != 3 || lp.Top[0].Token != ref.GeneratedTokens[0] || lp.Chosen.Token != ref.GeneratedTokens[0] {
		t.Fatalf("logprobs = %+v", lp)
	}
	if lp.Chosen.Logprob != lp.Top[0].Logprob || lp.Chosen.Logprob > 0 || lp.Top[1].Logprob > lp.Top[0].Logprob {
		t.Fatalf("logprobs = %+v", lp)
	}
	if n := len(res.PromptLogprobs); n != 1 || len(res.PromptLogprobs[0].Logprobs) != len(ref.PromptTokens)-1 {
		t.Fatalf("prompt logprobs = %+v", res.PromptLogprobs)
	}
	state, err := c.SeqState(0)
	if err != nil || len(state) == 0 {
		t.Fatalf("SeqState: %d bytes, %v", len(state), err)
	}
	if err := c.SetSeqState(3, state); err != nil {
		t.Fatal(err)
	}
	if lo, hi := c.SeqPosRange(3); lo != 0 || hi != int32(len(ref.PromptTokens)-1) {
		t.Fatalf("imported slot holds [%d, %d]", lo, hi)
	}
}

func TestBadBatch(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ctx := context.Background()
	if _, err := c.Execute(ctx, &engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: []int32{1}}}}); err != nil {
		t.Fatal(err)
	}
	cases := []engine.Step{
		{Batch: []engine.Chunk{{Seq: 1, Slot: 99, Tokens: []int32{1}}}},
		{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: 1, Tokens: []int32{9999}}}},
		{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: 5, Tokens: []int32{1}}}},
		{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: 1, Tokens: []int32{}}}},
		{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: 1, Tokens: []int32{1}, Sample: true}}},
	}
	for i := range cases {
		if _, err := c.Execute(ctx, &cases[i]); !errors.Is(err, engine.ErrInvalidBatch) {
			t.Errorf("case %d: err = %v, want ErrInvalidBatch", i, err)
		}
	}
}
