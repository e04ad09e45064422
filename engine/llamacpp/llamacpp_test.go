//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models/stories260k"
)

func loadModel(t testing.TB) *Model {
	t.Helper()
	path, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return loadFile(t, path)
}

// loadFile loads the GGUF file at path, closed when the test ends.
func loadFile(t testing.TB, path string) *Model {
	t.Helper()
	m, err := Load(path, ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// loadQ8 writes and loads a small dummy-weight model whose matrices are all
// Q8_0 (dimensions that are multiples of 32), with stories260K's
// vocabulary.
func loadQ8(t testing.TB) *Model {
	t.Helper()
	return loadSynth(t, synth.Shape{Name: "tiny-q8", Of: "a test", Embd: 64, Layers: 3, Heads: 4, HeadsKV: 2, FF: 128, Context: 512,
		RopeTheta: 10000, RMSEps: 1e-5, Vocab: 512}, "q8_0", 7)
}

// loadSynth writes a dummy-weight model of shape with stories260K's
// vocabulary and loads it, closed when the test ends.
func loadSynth(t testing.TB, shape synth.Shape, dtype string, seed uint64) *Model {
	t.Helper()
	dir := t.TempDir()
	vocab, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, shape.Name+".gguf")
	if _, err := synth.Write(path, synth.Options{Shape: shape, DType: synth.DType(dtype), VocabPath: vocab, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return loadFile(t, path)
}

func newContext(t testing.TB, m *Model, p ContextParams) *Context {
	t.Helper()
	if p.Slots == 0 {
		p.Slots = 8
	}
	if p.SlotTokens == 0 {
		p.SlotTokens = 512
	}
	c, err := NewContext(m, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// seqRun is one sequence driven by drive: it joins at step start, feeds its
// prompt in chunks of chunk tokens (0: all at once), then decodes n tokens
// greedily, recording each token's logprob bit for bit.
type seqRun struct {
	seq    engine.SeqID
	slot   engine.Slot
	prompt []int32
	n      int
	start  int
	chunk  int
	// adapter is the sequence's LoRA adapter, or nil.
	adapter engine.Adapter

	out []int32
	lps []float32
	pos int32
}

// drive runs the sequences together until all are done.
func drive(t testing.TB, c *Context, runs ...*seqRun) {
	t.Helper()
	driveWith(t, c, nil, runs...)
}

// driveWith is drive with a hook that completes each chunk before the
// step (media spans).
func driveWith(t testing.TB, c *Context, hook func(*seqRun, *engine.Chunk), runs ...*seqRun) {
	t.Helper()
	ctx := context.Background()
	for step := 0; ; step++ {
		var st engine.Step
		active := false
		for _, r := range runs {
			switch {
			case step < r.start:
				active = true
				continue
			case len(r.out) >= r.n:
				continue
			}
			active = true
			if step == r.start {
				s := engine.DefaultSampling()
				s.Logprobs = true
				st.Added = append(st.Added, engine.NewSequence{Seq: r.seq, Sampling: s, History: r.prompt, Adapter: r.adapter})
			}
			ch := engine.Chunk{Seq: r.seq, Slot: r.slot, Pos: r.pos}
			if int(r.pos) < len(r.prompt) {
				end := len(r.prompt)
				if r.chunk > 0 {
					end = min(end, int(r.pos)+r.chunk)
				}
				ch.Tokens = r.prompt[r.pos:end]
				ch.Sample = end == len(r.prompt)
			} else {
				ch.Tokens = r.out[len(r.out)-1:]
				ch.Sample = true
			}
			if hook != nil {
				hook(r, &ch)
			}
			r.pos += int32(len(ch.Tokens))
			st.Batch = append(st.Batch, ch)
		}
		if !active {
			break
		}
		res, err := c.Execute(ctx, &st)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) > 0 {
			t.Fatalf("step %d: failures %v", step, res.Failures)
		}
		for _, smp := range res.Samples {
			for _, r := range runs {
				if r.seq == smp.Seq {
					r.out = append(r.out, smp.Token)
					r.lps = append(r.lps, smp.Logprobs.Chosen.Logprob)
				}
			}
		}
	}
	var clear engine.Step
	for _, r := range runs {
		clear.Clears = append(clear.Clears, r.slot)
		clear.Removed = append(clear.Removed, r.seq)
	}
	if _, err := c.Execute(ctx, &clear); err != nil {
		t.Fatal(err)
	}
}

// generate runs one sequence greedily, alone, in slot 0.
func generate(t testing.TB, c *Context, prompt []int32, n int) *seqRun {
	t.Helper()
	r := &seqRun{seq: 1, prompt: prompt, n: n}
	drive(t, c, r)
	return r
}

// sameRun reports whether two runs produced the same tokens and bitwise
// the same logprobs.
func sameRun(a, b *seqRun) bool {
	if !slices.Equal(a.out, b.out) || len(a.lps) != len(b.lps) {
		return false
	}
	for i := range a.lps {
		if math.Float32bits(a.lps[i]) != math.Float32bits(b.lps[i]) {
			return false
		}
	}
	return true
}

func tokenize(t testing.TB, m *Model, s string) []int32 {
	t.Helper()
	toks, err := m.Tokenize(s, true, true)
	if err != nil {
		t.Fatal(err)
	}
	return toks
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
	got := generate(t, c, ref.PromptTokens, len(ref.GeneratedTokens))
	if !slices.Equal(got.out, ref.GeneratedTokens) {
		t.Fatalf("greedy tokens\n got %v\nwant %v", got.out, ref.GeneratedTokens)
	}
	st := c.Stats()
	if st.DecodedTokens != uint64(len(ref.PromptTokens)+len(ref.GeneratedTokens)-1) {
		t.Fatalf("decoded %d tokens", st.DecodedTokens)
	}
	// Every one-token step was padded to two rows.
	if st.PaddingTokens != uint64(len(ref.GeneratedTokens)-1) {
		t.Fatalf("%d padding tokens for %d one-token steps", st.PaddingTokens, len(ref.GeneratedTokens)-1)
	}
}

// A sequence's tokens and logprobs are bit for bit the same alone and
// batched with others, whatever the slots, the holes between them, the
// prompt chunking and the mix of prefill and decode.
func TestBatchInvariance(t *testing.T) {
	t.Run("F32, padded", func(t *testing.T) {
		c := newContext(t, loadModel(t), ContextParams{Slots: 12, MicroBatchTokens: 16})
		if !c.Pads() {
			t.Fatal("F32 weights take other kernels for one row: the probe must ask for padding")
		}
		testBatchInvariance(t, c)
	})
	t.Run("Q8_0, unpadded", func(t *testing.T) {
		c := newContext(t, loadQ8(t), ContextParams{Slots: 12, MicroBatchTokens: 16})
		if c.Pads() {
			t.Fatal("Q8_0 weights take kernels that sum alike: the probe must not ask for padding")
		}
		testBatchInvariance(t, c)
	})
}

func testBatchInvariance(t *testing.T, c *Context) {
	m := c.model
	prompts := []string{
		"Once upon a time", "The cat sat", "Lily and Tom went to the park to play with a big red ball",
		"One day", "Sam", "The little bird wanted to fly high in the sky, but it was scared of the wind",
	}
	var solo []*seqRun
	for _, p := range prompts {
		solo = append(solo, generate(t, c, tokenize(t, m, p), 24))
	}
	layouts := []struct {
		name  string
		slots []engine.Slot
		start []int
		chunk []int
	}{
		{"packed, together", []engine.Slot{0, 1, 2, 3, 4, 5}, []int{0, 0, 0, 0, 0, 0}, []int{0, 0, 0, 0, 0, 0}},
		{"staggered joins", []engine.Slot{0, 1, 2, 3, 4, 5}, []int{0, 3, 1, 7, 2, 5}, []int{0, 0, 0, 0, 0, 0}},
		{"holes between slots", []engine.Slot{1, 3, 4, 7, 9, 11}, []int{0, 2, 4, 6, 8, 10}, []int{0, 0, 0, 0, 0, 0}},
		{"chunked prompts", []engine.Slot{5, 0, 11, 2, 8, 6}, []int{0, 1, 0, 2, 3, 0}, []int{2, 3, 5, 1, 7, 17}},
		{"lone sequences at the edges", []engine.Slot{11, 0, 6, 10, 1, 5}, []int{0, 30, 60, 90, 120, 150}, []int{0, 0, 0, 0, 0, 4}},
		// Chunks of one length in consecutive slots share an evaluation.
		{"equal chunks side by side", []engine.Slot{0, 1, 2, 3, 4, 5}, []int{0, 0, 0, 0, 0, 0}, []int{2, 2, 2, 2, 2, 2}},
		{"equal chunks, staggered", []engine.Slot{6, 7, 8, 9, 10, 11}, []int{0, 0, 1, 1, 0, 0}, []int{3, 3, 3, 3, 3, 3}},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			var runs []*seqRun
			for i := range prompts {
				runs = append(runs, &seqRun{seq: engine.SeqID(10 + i), slot: l.slots[i], prompt: solo[i].prompt, n: 24, start: l.start[i], chunk: l.chunk[i]})
			}
			drive(t, c, runs...)
			for i := range runs {
				if !sameRun(runs[i], solo[i]) {
					t.Errorf("prompt %q: batched run differs\n got %v %v\nwant %v %v", prompts[i], runs[i].out, runs[i].lps, solo[i].out, solo[i].lps)
				}
			}
		})
	}
}

// Prompts of one length in consecutive slots are evaluated in one
// llama_decode; others in one each.
func TestEqualChunksShareAnEvaluation(t *testing.T) {
	c := newContext(t, loadModel(t), ContextParams{Slots: 8, MicroBatchTokens: 64})
	step := &engine.Step{}
	for i, slot := range []engine.Slot{0, 1, 2, 3, 5, 6} {
		n := 8
		if slot == 6 {
			n = 9
		}
		toks := make([]int32, n)
		for j := range toks {
			toks[j] = int32(20 + i + j)
		}
		step.Added = append(step.Added, engine.NewSequence{Seq: engine.SeqID(i), Sampling: engine.DefaultSampling()})
		step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(i), Slot: slot, Tokens: toks, Sample: true})
	}
	before := c.Stats().Evaluations
	res, err := c.Execute(context.Background(), step)
	if err != nil || len(res.Failures) > 0 || len(res.Samples) != 6 {
		t.Fatal(err, res.Failures, res.Samples)
	}
	// Slots 0-3 together; 5 alone (4 is not in the batch); 6 is longer.
	if got := c.Stats().Evaluations - before; got != 3 {
		t.Fatalf("%d evaluations, want 3", got)
	}
}

// KV exported from one slot and restored into another continues exactly
// like the original: same tokens, same logprobs, bit for bit.
func TestExportRestore(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	prompt := append(slices.Clone(ref.PromptTokens), ref.GeneratedTokens[:40]...) // 45 tokens
	want := generate(t, c, prompt, 20)
	ctx := context.Background()

	if l := c.KVLayout(); l.BytesPerPosition() != 640 || len(l.Sections) != 10 {
		t.Fatalf("layout %+v: %d bytes per position", l, l.BytesPerPosition())
	}
	// Prefill 40 tokens into slot 2, export two blocks of 16, clear.
	res, err := c.Execute(ctx, &engine.Step{Batch: []engine.Chunk{{Seq: 7, Slot: 2, Tokens: prompt[:40]}}})
	if err != nil || len(res.Failures) > 0 {
		t.Fatal(err, res.Failures)
	}
	res, err = c.Execute(ctx, &engine.Step{
		Exports: []engine.Export{{Tag: 1, Seq: 7, Slot: 2, From: 0, To: 16}, {Tag: 2, Seq: 7, Slot: 2, From: 16, To: 32}, {Tag: 3, Seq: 7, Slot: 2, From: 30, To: 99}},
		Clears:  []engine.Slot{2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Exported) != 3 || res.Exported[0].KV == nil || res.Exported[1].KV == nil || res.Exported[2].KV != nil {
		t.Fatalf("exported %+v", res.Exported)
	}
	if c.SlotLen(2) != 0 {
		t.Fatalf("slot 2 holds %d positions after its clear", c.SlotLen(2))
	}
	blocks := []*engine.KV{res.Exported[0].KV, res.Exported[1].KV}
	if blocks[0].Size() != 16*640 {
		t.Fatalf("block of %d bytes", blocks[0].Size())
	}
	// Restore into slot 5 and compute only the rest of the prompt.
	r := &seqRun{seq: 8, slot: 5, prompt: prompt, n: 20, pos: 32}
	before := c.Stats().DecodedTokens
	if res, err := c.Execute(ctx, &engine.Step{Restores: []engine.Restore{{Seq: 8, Slot: 5, KV: blocks}}}); err != nil || len(res.Failures) > 0 {
		t.Fatal(err, res.Failures)
	}
	if c.SlotLen(5) != 32 {
		t.Fatalf("slot 5 holds %d positions after the restore", c.SlotLen(5))
	}
	drive(t, c, r)
	if !sameRun(r, want) {
		t.Fatalf("after restore\n got %v %v\nwant %v %v", r.out, r.lps, want.out, want.lps)
	}
	if got := c.Stats().DecodedTokens - before; got != uint64(len(prompt)-32+19) {
		t.Fatalf("decoded %d tokens after the restore, want %d", got, len(prompt)-32+19)
	}
	// A restore into a slot that is not empty, or of a foreign layout,
	// fails that sequence only.
	if _, err := c.Execute(ctx, &engine.Step{Batch: []engine.Chunk{{Seq: 9, Slot: 3, Tokens: prompt[:4]}}}); err != nil {
		t.Fatal(err)
	}
	foreign := &engine.KV{Layout: &engine.KVLayout{Sections: []engine.KVSection{{Groups: 1, Unit: 4}}}, N: 2, Data: make([]byte, 8)}
	res, err = c.Execute(ctx, &engine.Step{Restores: []engine.Restore{{Seq: 9, Slot: 3, KV: blocks}, {Seq: 10, Slot: 4, KV: []*engine.KV{foreign}}}})
	if err != nil || len(res.Failures) != 2 || !errors.Is(res.Failures[0].Err, engine.ErrInvalidBatch) || !errors.Is(res.Failures[1].Err, engine.ErrKVLayout) {
		t.Fatalf("bad restores: %v %+v", err, res.Failures)
	}
}

// A step's bad chunks and bad samplers fail their own sequences; the
// others get what they get alone.
func TestFailuresStayLocal(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	want := generate(t, c, ref.PromptTokens, 1)
	ctx := context.Background()
	hot := engine.DefaultSampling()
	hot.Temperature = 1e-40 // would abort llama.cpp's dist sampler
	rep := engine.DefaultSampling()
	rep.Temperature, rep.RepetitionPenalty = 1, 1e-38
	res, err := c.Execute(ctx, &engine.Step{
		Added: []engine.NewSequence{
			{Seq: 1, Sampling: engine.DefaultSampling()}, {Seq: 2, Sampling: hot}, {Seq: 3, Sampling: rep},
			{Seq: 4, Sampling: engine.DefaultSampling()}, {Seq: 5, Sampling: engine.DefaultSampling()}, {Seq: 6, Sampling: engine.DefaultSampling()},
		},
		Batch: []engine.Chunk{
			{Seq: 1, Slot: 0, Tokens: ref.PromptTokens, Sample: true},
			{Seq: 2, Slot: 1, Tokens: ref.PromptTokens, Sample: true},
			{Seq: 3, Slot: 2, Tokens: ref.PromptTokens, Sample: true},
			{Seq: 4, Slot: 3, Pos: 7, Tokens: ref.PromptTokens, Sample: true}, // positions not consecutive
			{Seq: 5, Slot: 99, Tokens: ref.PromptTokens, Sample: true},        // no such slot
			{Seq: 6, Slot: 5, Tokens: []int32{1, 9999}, Sample: true},         // token outside the vocabulary
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Samples) != 1 || res.Samples[0].Seq != 1 || res.Samples[0].Token != want.out[0] {
		t.Fatalf("samples %+v, want sequence 1 with token %d", res.Samples, want.out[0])
	}
	failed := map[engine.SeqID]error{}
	for _, f := range res.Failures {
		failed[f.Seq] = f.Err
	}
	var re *engine.RangeError
	if !errors.As(failed[2], &re) || re.Field != engine.FieldTemperature || !errors.As(failed[3], &re) || re.Field != engine.FieldRepetitionPenalty {
		t.Fatalf("failures %v", failed)
	}
	for _, seq := range []engine.SeqID{4, 5, 6} {
		if !errors.Is(failed[seq], engine.ErrInvalidBatch) {
			t.Errorf("sequence %d: %v, want ErrInvalidBatch", seq, failed[seq])
		}
	}
}

// The named parameters take the names their docs give, "" as the default,
// and refuse any other with the names they take.
func TestParamNames(t *testing.T) {
	path, err := stories260k.File(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// "none" names its device (MainGPU), which a machine without GPUs
	// does not have.
	for _, mode := range []string{"", "layer", "row"} {
		m, err := Load(path, ModelParams{SplitMode: mode})
		if err != nil {
			t.Fatalf("split mode %q: %v", mode, err)
		}
		m.Close()
	}
	if _, err := Load(path, ModelParams{SplitMode: "diagonal"}); err == nil ||
		!strings.Contains(err.Error(), `unknown split mode "diagonal" (want none, layer or row)`) {
		t.Fatalf("split mode diagonal: %v", err)
	}
	m := loadFile(t, path)
	for _, p := range []ContextParams{
		{FlashAttention: "auto"}, {FlashAttention: "on"}, {FlashAttention: "off"},
		// (q8_0 and q4_0 need head sizes of a multiple of 32, which
		// stories260K does not have: refused below.)
		{KVType: "f16"}, {KVType: "f32"}, {KVType: "bf16"},
	} {
		p.Slots, p.SlotTokens = 1, 256
		c, err := NewContext(m, p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		c.Close()
	}
	for p, want := range map[ContextParams]string{
		{FlashAttention: "maybe"}: `flash attention "maybe" (want auto, on or off)`,
		{KVType: "q5_1"}:          `KV cache type "q5_1" (want f16, f32, bf16, q8_0 or q4_0)`,
		// stories260K's heads of 8 values: q8_0 and q4_0 blocks are 32
		// (llama.cpp would abort the process on them).
		{KVType: "q8_0"}: `KV cache type "q8_0" stores blocks of 32 values, which do not divide this model's attention head size 8`,
		{KVType: "q4_0"}: `KV cache type "q4_0" stores blocks of 32 values, which do not divide this model's attention head size 8`,
	} {
		p.Slots, p.SlotTokens = 1, 256
		if c, err := NewContext(m, p); err == nil {
			c.Close()
			t.Fatalf("%+v: no error", p)
		} else if !strings.Contains(err.Error(), want) {
			t.Fatalf("%+v: %v, want %q", p, err, want)
		}
	}
}

// Sampling at the edges of every valid range works (the chain stays
// finite), for every sampler stage.
func TestSamplingRangeEdges(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	edges := []engine.Sampling{
		{Temperature: engine.MinTemperature, TopP: 1, RepetitionPenalty: 1},
		{Temperature: engine.MaxTemperature, TopP: 1, RepetitionPenalty: 1},
		{Temperature: engine.MinTemperature, TopP: 1e-9, RepetitionPenalty: engine.MinRepetitionPenalty},
		{Temperature: engine.MinTemperature, TopP: 1, MinP: 1, RepetitionPenalty: engine.MaxRepetitionPenalty},
		{Temperature: 1, TopK: 1 << 30, TopP: 1, RepetitionPenalty: 1, PresencePenalty: -2, FrequencyPenalty: 2},
		{Temperature: 1, TopP: 1, RepetitionPenalty: 1, LogitBias: []engine.TokenBias{{Token: 0, Bias: 100}, {Token: 5, Bias: -100}}},
	}
	ctx := context.Background()
	for i, s := range edges {
		if err := s.Validate(m.NumTokens()); err != nil {
			t.Fatalf("edge %d: %v", i, err)
		}
		seq := engine.SeqID(100 + i)
		for range 2 {
			res, err := c.Execute(ctx, &engine.Step{
				Added: []engine.NewSequence{{Seq: seq, Sampling: s, History: ref.PromptTokens}},
				Batch: []engine.Chunk{{Seq: seq, Slot: 0, Tokens: ref.PromptTokens, Sample: true}},
			})
			if err != nil || len(res.Failures) > 0 || len(res.Samples) != 1 {
				t.Fatalf("edge %d: %v %+v", i, err, res.Failures)
			}
			if _, err := c.Execute(ctx, &engine.Step{Clears: []engine.Slot{0}, Removed: []engine.SeqID{seq}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Growing the context keeps the running sequences' KV bit for bit: they
// continue exactly as if nothing had happened, and the new slots work.
func TestResize(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{Slots: 2})
	prompts := []string{"Once upon a time", "The cat sat on the mat and", "Lily"}
	var solo []*seqRun
	for _, p := range prompts[:2] {
		solo = append(solo, generate(t, c, tokenize(t, m, p), 30))
	}
	wantThird := generate(t, c, tokenize(t, m, prompts[2]), 10)
	// Run both to half way, grow to 6 slots, run on, and add a third
	// sequence in a new slot.
	runs := []*seqRun{
		{seq: 1, slot: 0, prompt: solo[0].prompt, n: 15},
		{seq: 2, slot: 1, prompt: solo[1].prompt, n: 15},
	}
	drive(t, c, runs...) // drive clears the slots at the end: redo without clearing
	for _, r := range runs {
		r.out, r.lps, r.pos, r.n = nil, nil, 0, 30
	}
	half := func(st *engine.Step) {
		t.Helper()
		res, err := c.Execute(context.Background(), st)
		if err != nil || len(res.Failures) > 0 {
			t.Fatal(err, res.Failures)
		}
		for _, smp := range res.Samples {
			for _, r := range runs {
				if r.seq == smp.Seq {
					r.out = append(r.out, smp.Token)
					r.lps = append(r.lps, smp.Logprobs.Chosen.Logprob)
				}
			}
		}
	}
	s := engine.DefaultSampling()
	s.Logprobs = true
	half(&engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: s}, {Seq: 2, Sampling: s}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: runs[0].prompt, Sample: true}, {Seq: 2, Slot: 1, Tokens: runs[1].prompt, Sample: true}},
	})
	for _, r := range runs {
		r.pos = int32(len(r.prompt))
	}
	step := func() {
		var st engine.Step
		for _, r := range runs {
			st.Batch = append(st.Batch, engine.Chunk{Seq: r.seq, Slot: r.slot, Pos: r.pos, Tokens: r.out[len(r.out)-1:], Sample: true})
			r.pos++
		}
		half(&st)
	}
	for range 14 {
		step()
	}
	if err := c.Resize(6); err != nil {
		t.Fatal(err)
	}
	if c.Slots() != 6 || c.SlotLen(0) != int(runs[0].pos) || c.SlotLen(1) != int(runs[1].pos) || c.Stats().Resizes != 1 {
		t.Fatalf("after the resize: %d slots, slot lengths %d %d", c.Slots(), c.SlotLen(0), c.SlotLen(1))
	}
	for range 15 {
		step()
	}
	for i, r := range runs {
		if !sameRun(r, solo[i]) {
			t.Errorf("sequence %d across the resize:\n got %v %v\nwant %v %v", i, r.out, r.lps, solo[i].out, solo[i].lps)
		}
	}
	third := &seqRun{seq: 3, slot: 5, prompt: wantThird.prompt, n: 10}
	drive(t, c, third)
	if !sameRun(third, wantThird) {
		t.Errorf("a new slot after the resize: %v, want %v", third.out, wantThird.out)
	}
	// Shrinking may not drop a sequence.
	if err := c.Resize(1); err == nil {
		t.Fatal("shrinking over an occupied slot succeeded")
	}
	if c.Slots() != 6 || c.SlotLen(1) != int(runs[1].pos) {
		t.Fatalf("a failed shrink changed the context: %d slots", c.Slots())
	}
	if _, err := c.Execute(context.Background(), &engine.Step{Clears: []engine.Slot{1}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Resize(1); err != nil || c.Slots() != 1 || c.SlotLen(0) != int(runs[0].pos) {
		t.Fatalf("shrink to 1: %v, %d slots", err, c.Slots())
	}
}
