//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/llmserve/llmserve/engine"
)

// BenchmarkDecodeStep measures one decode step of seqs sequences (one
// token each, at position ~128), on stories260K or the model in
// LLMSERVE_BENCH_MODEL (e.g. the SmolLM2-135M shape of `llmserve synth`).
// On models whose one-row kernels differ (probePadding), a lone sequence
// gets a throwaway row beside it, as in serving (decode.go).
//
//	LLMSERVE_BENCH_MODEL=/tmp/smollm2-q8.gguf go test -run XXX -bench DecodeStep ./engine/llamacpp/
func BenchmarkDecodeStep(b *testing.B) {
	m := benchModel(b)
	threads := 2
	for _, seqs := range []int{1, 2, 4, 16} {
		b.Run(fmt.Sprintf("seqs=%d", seqs), func(b *testing.B) {
			c := newContext(b, m, ContextParams{Slots: max(seqs, 2), SlotTokens: 512, Threads: threads})
			ctx := context.Background()
			step := &engine.Step{}
			for s := range seqs {
				step.Added = append(step.Added, engine.NewSequence{Seq: engine.SeqID(s), Sampling: engine.DefaultSampling()})
				toks := make([]int32, 128)
				for i := range toks {
					toks[i] = int32(10 + (s*7+i)%200)
				}
				step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: toks, Sample: true})
			}
			res, err := c.Execute(ctx, step)
			if err != nil || len(res.Failures) > 0 {
				b.Fatal(err, res.Failures)
			}
			pos := int32(128)
			step = &engine.Step{}
			for s := range seqs {
				step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: []int32{res.Samples[s].Token}, Sample: true})
			}
			for b.Loop() {
				for s := range step.Batch {
					step.Batch[s].Pos = pos
				}
				res, err = c.Execute(ctx, step)
				if err != nil || len(res.Failures) > 0 {
					b.Fatal(err, res.Failures)
				}
				for s := range step.Batch {
					step.Batch[s].Tokens[0] = res.Samples[s].Token
				}
				if pos++; pos >= 500 {
					b.StopTimer()
					var clr engine.Step
					for s := range seqs {
						clr.Clears = append(clr.Clears, engine.Slot(s))
					}
					// Recompute the first 128 positions and go on from there.
					if _, err := c.Execute(ctx, &clr); err != nil {
						b.Fatal(err)
					}
					refill := &engine.Step{}
					for s := range seqs {
						toks := make([]int32, 128)
						for i := range toks {
							toks[i] = int32(10 + (s*7+i)%200)
						}
						refill.Batch = append(refill.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: toks})
					}
					if _, err := c.Execute(ctx, refill); err != nil {
						b.Fatal(err)
					}
					pos = 128
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/step")
			b.ReportMetric(float64(seqs)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// benchModel is the model in LLMSERVE_BENCH_MODEL, or stories260K.
func benchModel(b *testing.B) *Model {
	if path := os.Getenv("LLMSERVE_BENCH_MODEL"); path != "" {
		return loadFile(b, path)
	}
	return loadModel(b)
}

// BenchmarkPrefill measures the evaluation of one prompt chunk of n tokens
// into an empty slot (model as in BenchmarkDecodeStep).
func BenchmarkPrefill(b *testing.B) {
	m := benchModel(b)
	for _, n := range []int{128, 512} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			c := newContext(b, m, ContextParams{Slots: 2, SlotTokens: 1024, Threads: 2})
			ctx := context.Background()
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(10 + i%200)
			}
			st := &engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: toks}}}
			clr := &engine.Step{Clears: []engine.Slot{0}}
			for b.Loop() {
				if res, err := c.Execute(ctx, st); err != nil || len(res.Failures) > 0 {
					b.Fatal(err, res.Failures)
				}
				b.StopTimer()
				if _, err := c.Execute(ctx, clr); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
