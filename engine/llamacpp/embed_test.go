//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/llmserve/llmserve/engine"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func embed(t *testing.T, c *Context, inputs ...[]int32) []engine.Embedding {
	t.Helper()
	step := &engine.Step{}
	for i, in := range inputs {
		step.Embeds = append(step.Embeds, engine.EmbedInput{Tag: uint64(i), Tokens: in})
	}
	res, err := c.Execute(context.Background(), step)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Embeddings) != len(inputs) {
		t.Fatalf("%d embeddings for %d inputs", len(res.Embeddings), len(inputs))
	}
	return res.Embeddings
}

// Every input embedded among others equals its embedding alone, for each
// pooling, and a generating sequence beside them is not disturbed.
func TestEmbeddingsBatchedEqualSingle(t *testing.T) {
	m := loadModel(t)
	texts := []string{"Once upon a time", "The cat sat on the mat.", "Lily and Ben went to the park to play with a big red ball.", "Hi"}
	for _, pooling := range []string{"mean", "cls", "last"} {
		t.Run(pooling, func(t *testing.T) {
			c := newContext(t, m, ContextParams{Slots: 2, SlotTokens: 256, Pooling: pooling})
			var inputs [][]int32
			for _, s := range texts {
				inputs = append(inputs, tokenize(t, m, s))
			}
			together := embed(t, c, inputs...)
			for i, in := range inputs {
				alone := embed(t, c, in)[0]
				if together[i].Err != nil || alone.Err != nil {
					t.Fatalf("input %d: %v / %v", i, together[i].Err, alone.Err)
				}
				if len(alone.Vector) != m.Info().NEmbd {
					t.Fatalf("input %d: %d dimensions, want %d", i, len(alone.Vector), m.Info().NEmbd)
				}
				if cos := cosine(together[i].Vector, alone.Vector); cos < 0.9999 {
					t.Errorf("input %d: cosine(batched, alone) = %.6f < 0.9999", i, cos)
				}
			}
			// (cls pools the first token, BOS in every input of a causal model.)
			if cos := cosine(together[0].Vector, together[1].Vector); pooling != "cls" && cos > 0.9999 {
				t.Errorf("two different texts embed alike: cosine %.6f", cos)
			}
		})
	}
}

func TestEmbeddingsRefuseBadInput(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{Slots: 2, SlotTokens: 256, Pooling: "mean", EmbedTokens: 256, EmbedInputs: 2})
	long := make([]int32, 300)
	for i := range long {
		long[i] = 5
	}
	res := embed(t, c, []int32{1, 2, 3}, nil, []int32{1, 99999}, long, []int32{4, 5}, []int32{6})
	for i, wantOK := range []bool{true, false, false, false, true, false} {
		if got := res[i].Err == nil; got != wantOK {
			t.Errorf("input %d: err = %v, want ok=%v", i, res[i].Err, wantOK)
		}
		if res[i].Err != nil && !errors.Is(res[i].Err, engine.ErrInvalidBatch) {
			t.Errorf("input %d: %v does not wrap ErrInvalidBatch", i, res[i].Err)
		}
	}
	none := newContext(t, m, ContextParams{Slots: 2, SlotTokens: 256, Pooling: "none"})
	if r := embed(t, none, []int32{1, 2}); !errors.Is(r[0].Err, ErrNoPooling) {
		t.Errorf("pooling none: err = %v, want ErrNoPooling", r[0].Err)
	}
}
