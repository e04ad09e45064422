//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models/stories260k"
)

// loraFiles writes stories260K, a LoRA adapter for it (seed) and the model
// with that adapter merged, and returns their paths.
func loraFiles(t testing.TB, seed uint64) (base, adapter, merged string) {
	t.Helper()
	dir := t.TempDir()
	base, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	adapter = filepath.Join(dir, "lora.gguf")
	if _, err := synth.WriteLoRA(adapter, synth.LoRAOptions{Base: base, Rank: 4, Alpha: 8, Seed: seed, Strength: 0.5}); err != nil {
		t.Fatal(err)
	}
	merged = filepath.Join(dir, "merged.gguf")
	if err := synth.WriteMerged(merged, base, adapter, 1); err != nil {
		t.Fatal(err)
	}
	return base, adapter, merged
}

func loadAdapter(t testing.TB, m *Model, name, path string) *Adapter {
	t.Helper()
	a, err := m.LoadAdapter(name, path, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// promptLogits evaluates prompt as one chunk of a new sequence (with
// adapter a when not nil) and returns the logits of its last position.
func promptLogits(t *testing.T, c *Context, a engine.Adapter, prompt []int32) []float32 {
	t.Helper()
	st := engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: engine.DefaultSampling(), Adapter: a}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: prompt, Sample: true}},
	}
	res, err := c.Execute(context.Background(), &st)
	if err != nil || len(res.Failures) > 0 {
		t.Fatal(err, res.Failures)
	}
	lg := slices.Clone(c.logits(len(prompt) - 1))
	if _, err := c.Execute(context.Background(), &engine.Step{Clears: []engine.Slot{0}, Removed: []engine.SeqID{1}}); err != nil {
		t.Fatal(err)
	}
	return lg
}

// TestLoRALogitsEqualMerged holds llama.cpp's adapter path to the merged
// model synth writes (W + alpha/rank·B·A computed in Go): the logits agree
// within float rounding, and differ from the base model's.
func TestLoRALogitsEqualMerged(t *testing.T) {
	basePath, adapterPath, mergedPath := loraFiles(t, 3)
	base := loadFile(t, basePath)
	merged := loadFile(t, mergedPath)
	a := loadAdapter(t, base, "story", adapterPath)
	if a.Alpha() != 8 || a.AdapterName() != "story" {
		t.Fatalf("adapter alpha %g name %q", a.Alpha(), a.AdapterName())
	}
	withLoRA := newContext(t, base, ContextParams{LoRA: true, KVType: "f32", FlashAttention: "off"})
	plain := newContext(t, merged, ContextParams{KVType: "f32", FlashAttention: "off"})
	prompt := tokenize(t, base, "Once upon a time, there was a little girl named Lily.")

	got := promptLogits(t, withLoRA, a, prompt)
	want := promptLogits(t, plain, nil, prompt)
	baseLogits := promptLogits(t, withLoRA, nil, prompt)
	var maxErr, maxChange float64
	for i := range got {
		maxErr = max(maxErr, math.Abs(float64(got[i]-want[i]))/max(1, math.Abs(float64(want[i]))))
		maxChange = max(maxChange, math.Abs(float64(got[i]-baseLogits[i])))
	}
	t.Logf("adapter vs merged: max relative error %.3g; adapter vs base: max change %.3g", maxErr, maxChange)
	if maxErr > 1e-4 {
		t.Fatalf("adapter logits differ from the merged model's by %g (relative)", maxErr)
	}
	if maxChange < 0.1 {
		t.Fatalf("the adapter changes the logits by at most %g", maxChange)
	}
	// Greedy continuations agree too.
	r1 := &seqRun{seq: 1, prompt: prompt, n: 12, adapter: a}
	drive(t, withLoRA, r1)
	r2 := generate(t, plain, prompt, 12)
	if !slices.Equal(r1.out, r2.out) {
		t.Fatalf("greedy with the adapter %v, merged %v", r1.out, r2.out)
	}
}

// TestLoRAMixedStep runs the base model and two adapters in the same steps
// (prompts and decodes interleaved): each sequence's tokens and logprobs
// equal its solo run bit for bit, and each step with adapters switched
// once per adapter.
func TestLoRAMixedStep(t *testing.T) {
	basePath, p1, _ := loraFiles(t, 5)
	dir := t.TempDir()
	p2 := filepath.Join(dir, "lora2.gguf")
	if _, err := synth.WriteLoRA(p2, synth.LoRAOptions{Base: basePath, Rank: 8, Seed: 9, Strength: 0.5, Targets: []string{"attn_q", "ffn_up"}}); err != nil {
		t.Fatal(err)
	}
	m := loadFile(t, basePath)
	a1 := loadAdapter(t, m, "one", p1)
	a2 := loadAdapter(t, m, "two", p2)
	c := newContext(t, m, ContextParams{LoRA: true})
	prompt := tokenize(t, m, "Once upon a time")
	var adapters = []engine.Adapter{nil, a1, a2, a1, nil, a2}
	var solo []*seqRun
	for _, a := range adapters {
		r := &seqRun{seq: 1, prompt: prompt, n: 10, adapter: a}
		drive(t, c, r)
		solo = append(solo, r)
	}
	if slices.Equal(solo[0].out, solo[1].out) || slices.Equal(solo[1].out, solo[2].out) {
		t.Fatalf("adapters do not change the output: base %v one %v two %v", solo[0].out, solo[1].out, solo[2].out)
	}
	before := c.Stats()
	var runs []*seqRun
	for i, a := range adapters {
		runs = append(runs, &seqRun{seq: engine.SeqID(10 + i), slot: engine.Slot(i), prompt: prompt, n: 10, adapter: a, start: i % 3, chunk: 3})
	}
	drive(t, c, runs...)
	for i, r := range runs {
		if !sameRun(r, solo[i]) {
			t.Errorf("sequence %d (adapter %v): batched %v, solo %v", i, adapters[i], r.out, solo[i].out)
		}
	}
	st := c.Stats()
	steps, switches := st.AdapterSteps-before.AdapterSteps, st.AdapterSwitches-before.AdapterSwitches
	t.Logf("%d steps with adapters, %d switches (%.2f per step)", steps, switches, float64(switches)/float64(steps))
	if steps == 0 || switches > 2*steps || switches < steps {
		t.Fatalf("%d switches in %d steps", switches, steps)
	}

	// Two slots: each adapter's decode is padded with a token in the
	// other's stream, so the two evaluations of a step have the same
	// shape and the same streams, which is where llama.cpp would reuse
	// the first adapter's graph for the second (lora.go).
	c2 := newContext(t, m, ContextParams{LoRA: true, Slots: 2})
	r1 := &seqRun{seq: 1, slot: 0, prompt: prompt, n: 10, adapter: a1}
	r2 := &seqRun{seq: 2, slot: 1, prompt: prompt, n: 10, adapter: a2}
	drive(t, c2, r1, r2)
	if !sameRun(r1, solo[1]) || !sameRun(r2, solo[2]) {
		t.Fatalf("two slots: one %v (solo %v), two %v (solo %v)", r1.out, solo[1].out, r2.out, solo[2].out)
	}
}

// TestLoRANoStaleGraph: llama.cpp reuses an evaluation's graph for the
// next of the same shape and streams, and checks the adapters by address
// only. On a model whose evaluations are not padded (Q8_0), a sequence
// with one adapter followed in its slot by a one-token prompt with
// another evaluates two graphs of one shape back to back: with reuse on,
// the second would run with the first adapter (lora.go).
func TestLoRANoStaleGraph(t *testing.T) {
	dir := t.TempDir()
	vocab, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	basePath := filepath.Join(dir, "q8.gguf")
	shape := synth.Shape{Name: "tiny-q8", Of: "a test", Embd: 64, Layers: 3, Heads: 4, HeadsKV: 2, FF: 128, Context: 512, RopeTheta: 10000, RMSEps: 1e-5, Vocab: 512}
	if _, err := synth.Write(basePath, synth.Options{Shape: shape, DType: "q8_0", VocabPath: vocab, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	m := loadFile(t, basePath)
	var as []*Adapter
	for _, seed := range []uint64{1, 2} {
		p := filepath.Join(dir, fmt.Sprintf("lora%d.gguf", seed))
		if _, err := synth.WriteLoRA(p, synth.LoRAOptions{Base: basePath, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		as = append(as, loadAdapter(t, m, fmt.Sprint(seed), p))
	}
	prompt := []int32{m.BOS()}
	fresh := newContext(t, m, ContextParams{LoRA: true, Slots: 1})
	want := &seqRun{seq: 1, prompt: prompt, n: 8, adapter: as[1]}
	drive(t, fresh, want)
	c := newContext(t, m, ContextParams{LoRA: true, Slots: 1})
	drive(t, c, &seqRun{seq: 1, prompt: prompt, n: 8, adapter: as[0]})
	got := &seqRun{seq: 2, prompt: prompt, n: 8, adapter: as[1]}
	drive(t, c, got)
	if !sameRun(got, want) {
		t.Fatalf("after another adapter: %v, fresh %v (graphs reused: %d)", got.out, want.out, c.graphReuses())
	}
	if c.Pads() {
		t.Fatal("the model pads its evaluations: the test needs one that does not")
	}
}

// TestLoRABadFiles: a file that is not an adapter, and an adapter of
// another model's shapes, are ErrAdapter errors that say why.
func TestLoRABadFiles(t *testing.T) {
	basePath, _, _ := loraFiles(t, 1)
	m := loadFile(t, basePath)
	if _, err := m.LoadAdapter("x", basePath, 1); !errors.Is(err, ErrAdapter) {
		t.Fatalf("base model as adapter: %v", err)
	} else {
		t.Log(err)
	}
	if _, err := m.LoadAdapter("x", filepath.Join(t.TempDir(), "missing.gguf"), 1); !errors.Is(err, ErrAdapter) {
		t.Fatalf("missing file: %v", err)
	}
	// An adapter for a model of other dimensions.
	dir := t.TempDir()
	other := filepath.Join(dir, "other.gguf")
	if _, err := synth.Write(other, synth.Options{Shape: synth.Shape{Name: "other", Of: "a test", Embd: 96, Layers: 5, Heads: 4, HeadsKV: 2, FF: 128, Context: 512,
		RopeTheta: 10000, RMSEps: 1e-5, Vocab: 512}, DType: "f32", VocabPath: basePath, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(dir, "wrong.gguf")
	if _, err := synth.WriteLoRA(wrong, synth.LoRAOptions{Base: other}); err != nil {
		t.Fatal(err)
	}
	_, err := m.LoadAdapter("x", wrong, 1)
	if !errors.Is(err, ErrAdapter) {
		t.Fatalf("adapter of other shapes: %v", err)
	}
	t.Log(err)
}

// TestLoRAUnloadWhileUsed: closing an adapter a sequence holds keeps it
// until the sequence is removed; new sequences naming it fail.
func TestLoRAUnloadWhileUsed(t *testing.T) {
	basePath, p1, _ := loraFiles(t, 5)
	m := loadFile(t, basePath)
	a, err := m.LoadAdapter("one", p1, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := newContext(t, m, ContextParams{LoRA: true})
	prompt := tokenize(t, m, "Once upon a time")
	ctx := context.Background()
	st := engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: engine.DefaultSampling(), Adapter: a}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: prompt, Sample: true}},
	}
	res, err := c.Execute(ctx, &st)
	if err != nil || len(res.Failures) > 0 {
		t.Fatal(err, res.Failures)
	}
	a.Close()
	if a.Users() != 1 {
		t.Fatalf("users %d", a.Users())
	}
	// Still decodes.
	st = engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: int32(len(prompt)), Tokens: []int32{res.Samples[0].Token}, Sample: true}},
		Added: []engine.NewSequence{{Seq: 2, Sampling: engine.DefaultSampling(), Adapter: a}}}
	res, err = c.Execute(ctx, &st)
	if err != nil || len(res.Samples) != 1 || len(res.Failures) != 1 || !errors.Is(res.Failures[0].Err, ErrAdapterClosed) {
		t.Fatalf("after close: %v %+v", err, res)
	}
	if _, err := c.Execute(ctx, &engine.Step{Clears: []engine.Slot{0}, Removed: []engine.SeqID{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if a.Users() != 0 || a.c != nil {
		t.Fatalf("adapter not freed: users %d", a.Users())
	}
	// A context without LoRA refuses adapters.
	b := loadAdapter(t, m, "b", p1)
	plain := newContext(t, m, ContextParams{})
	res, err = plain.Execute(ctx, &engine.Step{Added: []engine.NewSequence{{Seq: 1, Sampling: engine.DefaultSampling(), Adapter: b}}})
	if err != nil || len(res.Failures) != 1 {
		t.Fatalf("plain context: %v %+v", err, res)
	}
}

// BenchmarkLoRASwitch measures what adapter groups cost: 8 sequences
// decoding together, all base, all one adapter, and split over the base
// and 1, 2 or 3 adapters (one batch per group), and the base model on a
// context with graph reuse on (ContextParams.LoRA off). The model is
// stories260K, or the GGUF at $LLMSERVE_LORA_BENCH_MODEL (such as
// llmserve synth --shape smollm2-135m --dtype q8_0).
func BenchmarkLoRASwitch(b *testing.B) {
	basePath, _, _ := loraFiles(b, 5)
	if p := os.Getenv("LLMSERVE_LORA_BENCH_MODEL"); p != "" {
		basePath = p
	}
	m := loadFile(b, basePath)
	var as []engine.Adapter
	for _, seed := range []uint64{5, 6, 7} {
		p := filepath.Join(b.TempDir(), "l.gguf")
		if _, err := synth.WriteLoRA(p, synth.LoRAOptions{Base: basePath, Rank: 8, Seed: seed}); err != nil {
			b.Fatal(err)
		}
		as = append(as, loadAdapter(b, m, "a", p))
	}
	prompt := tokenize(b, m, "Once upon a time")
	for _, tc := range []struct {
		name   string
		lora   bool
		groups int // 0: base only; g: base and g-1 adapters; -1: one adapter
	}{{"reuse/base", false, 0}, {"noreuse/base", true, 0}, {"noreuse/1adapter", true, -1}, {"noreuse/base+1", true, 2}, {"noreuse/base+2", true, 3}, {"noreuse/base+3", true, 4}} {
		b.Run(tc.name, func(b *testing.B) {
			c := newContext(b, m, ContextParams{LoRA: tc.lora, Slots: 8, SlotTokens: 4096, Threads: 1})
			const n = 8
			var st engine.Step
			for i := range n {
				var a engine.Adapter
				switch {
				case tc.groups < 0:
					a = as[0]
				case tc.groups > 0 && i%tc.groups > 0:
					a = as[i%tc.groups-1]
				}
				st.Added = append(st.Added, engine.NewSequence{Seq: engine.SeqID(i), Sampling: engine.DefaultSampling(), Adapter: a})
				st.Batch = append(st.Batch, engine.Chunk{Seq: engine.SeqID(i), Slot: engine.Slot(i), Tokens: prompt, Sample: true})
			}
			ctx := context.Background()
			res, err := c.Execute(ctx, &st)
			if err != nil || len(res.Failures) > 0 {
				b.Fatal(err, res.Failures)
			}
			pos := int32(len(prompt))
			last := make([]int32, n)
			for _, s := range res.Samples {
				last[s.Seq] = s.Token
			}
			before := c.Stats()
			b.ResetTimer()
			for range b.N {
				st := engine.Step{}
				for i := range n {
					st.Batch = append(st.Batch, engine.Chunk{Seq: engine.SeqID(i), Slot: engine.Slot(i), Pos: pos, Tokens: []int32{last[i]}, Sample: true})
				}
				res, err := c.Execute(ctx, &st)
				if err != nil || len(res.Failures) > 0 {
					b.Fatal(err, res.Failures)
				}
				for _, s := range res.Samples {
					last[s.Seq] = s.Token
				}
				pos++
				if int(pos) >= c.SlotTokens()-1 {
					b.Fatal("slot full: lower -benchtime")
				}
			}
			st2 := c.Stats()
			b.ReportMetric(float64(st2.Evaluations-before.Evaluations)/float64(b.N), "evals/step")
			b.ReportMetric(float64(st2.AdapterSwitches-before.AdapterSwitches)/float64(b.N), "switches/step")
		})
	}
}
