//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"testing"

	"github.com/llmserve/llmserve/engine"
)

// BenchmarkDecodeStep measures one decode step of `seqs` sequences (one
// token each) while `idle` cells hold other sequences' KV: in a unified KV
// cache every query scans every used cell.
func BenchmarkDecodeStep(b *testing.B) {
	m := loadModel(b)
	for _, fa := range []string{"on", "off"} {
		for _, kvTokens := range []int{4096, 32768} {
			for _, seqs := range []int{1, 16, 64} {
				for _, idle := range []int{0, 3000, 16000} {
					if idle+seqs*(32+128) > kvTokens {
						continue
					}
					b.Run(fmt.Sprintf("fa=%s/kv=%d/seqs=%d/idle=%d", fa, kvTokens, seqs, idle), func(b *testing.B) {
						c := newContext(b, m, ContextParams{KVTokens: kvTokens, Slots: 128, BatchTokens: 2048, Threads: 1, FlashAttention: fa})
						ctx := context.Background()
						// Fill idle cells in slot 127.
						for done := 0; done < idle; done += 512 {
							n := min(512, idle-done)
							toks := make([]int32, n)
							for i := range toks {
								toks[i] = int32(3 + (done+i)%500)
							}
							if _, err := c.Execute(ctx, &engine.Step{Batch: []engine.Chunk{{Seq: 999, Slot: 127, Pos: int32(done), Tokens: toks}}}); err != nil {
								b.Fatal(err)
							}
						}
						step := &engine.Step{}
						for s := range seqs {
							step.Added = append(step.Added, engine.NewSequence{Seq: engine.SeqID(s), Sampling: engine.DefaultSampling()})
							toks := make([]int32, 32)
							for i := range toks {
								toks[i] = int32(10 + s + i)
							}
							step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: toks, Sample: true})
						}
						res, err := c.Execute(ctx, step)
						if err != nil {
							b.Fatal(err)
						}
						pos := int32(32)
						step = &engine.Step{}
						for s := range seqs {
							step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: []int32{res.Samples[s].Token}, Sample: true})
						}
						for b.Loop() {
							for s := range step.Batch {
								step.Batch[s].Pos = pos
							}
							res, err = c.Execute(ctx, step)
							if err != nil {
								b.Fatal(err)
							}
							for s := range step.Batch {
								step.Batch[s].Tokens[0] = res.Samples[s].Token
							}
							pos++
							if pos >= 32+128 {
								b.StopTimer()
								for s := range seqs {
									c.Execute(ctx, &engine.Step{MemOps: []engine.MemOp{{Kind: engine.MemRemove, Dst: engine.Slot(s), P0: 32, P1: -1}}})
								}
								pos = 32
								b.StartTimer()
							}
						}
						b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/step")
					})
				}
			}
		}
	}
}
