//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"testing"

	"github.com/llmserve/llmserve/engine"
)

// BenchmarkPrefill measures one prompt of n tokens decoded in one step.
func BenchmarkPrefill(b *testing.B) {
	m := loadModel(b)
	for _, fa := range []string{"off", "on"} {
		for _, n := range []int{64, 256} {
			b.Run(fmt.Sprintf("fa=%s/n=%d", fa, n), func(b *testing.B) {
				c := newContext(b, m, ContextParams{KVTokens: 4096, Slots: 4, BatchTokens: 512, Threads: 1, FlashAttention: fa})
				toks := make([]int32, n)
				for i := range toks {
					toks[i] = int32(3 + i%500)
				}
				ctx := context.Background()
				step := &engine.Step{Added: []engine.NewSequence{{Seq: 1, Sampling: engine.DefaultSampling()}}}
				for b.Loop() {
					step.Batch = []engine.Chunk{{Seq: 1, Slot: 0, Tokens: toks, Sample: true}}
					step.MemOps = []engine.MemOp{{Kind: engine.MemRemove, Dst: 0, P0: -1, P1: -1}}
					if _, err := c.Execute(ctx, step); err != nil {
						b.Fatal(err)
					}
					step.Added = nil
				}
			})
		}
	}
}
