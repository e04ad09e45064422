package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/scheduler"
)

// Embedding calls from many goroutines, beside generating requests, each
// get their own vectors in order; steps carry several inputs at once,
// within the engine's capacity.
func TestEmbedBesideGeneration(t *testing.T) {
	var mu sync.Mutex
	var fakes []*enginetest.Fake
	c := testCore(t, func() *enginetest.Fake {
		f := &enginetest.Fake{EmbedTokens: 40, EmbedInputs: 3}
		mu.Lock()
		fakes = append(fakes, f)
		mu.Unlock()
		return f
	}, nil)
	streams, err := c.Submit(context.Background(), []*scheduler.Request{request("gen", []int32{1, 2, 3}, 50)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			var inputs [][]int32
			for i := range 1 + g%4 {
				in := make([]int32, 1+(g*7+i*3)%20)
				for k := range in {
					in[k] = int32(g*10 + i + k)
				}
				inputs = append(inputs, in)
			}
			vecs, err := c.Embed(context.Background(), inputs)
			if err != nil {
				errs <- fmt.Errorf("caller %d: %w", g, err)
				return
			}
			for i, in := range inputs {
				if !slices.Equal(vecs[i], enginetest.FakeEmbedding(in)) {
					errs <- fmt.Errorf("caller %d input %d: %v, want %v", g, i, vecs[i], enginetest.FakeEmbedding(in))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	toks, last := drain(t, streams[0])
	if !slices.Equal(toks, want([]int32{1, 2, 3}, 50)) || last.Finish != scheduler.FinishLength {
		t.Errorf("generation beside embeddings: %v (%s)", toks, last.Finish)
	}
	mu.Lock()
	defer mu.Unlock()
	f := fakes[len(fakes)-1]
	st := f.Stats()
	if st.MaxEmbedInputs < 2 || st.MaxEmbedInputs > 3 {
		t.Errorf("most inputs in one step: %d, want 2 or 3 (capacity 3)", st.MaxEmbedInputs)
	}
}

func TestEmbedRefusals(t *testing.T) {
	c := testCore(t, func() *enginetest.Fake { return &enginetest.Fake{EmbedTokens: 8, EmbedInputs: 2} }, nil)
	_, err := c.Embed(context.Background(), [][]int32{{1, 2}, make([]int32, 9)})
	if !errors.Is(err, engine.ErrInvalidBatch) {
		t.Errorf("an input longer than a step: err = %v, want ErrInvalidBatch", err)
	}
	// The core still embeds afterwards.
	vecs, err := c.Embed(context.Background(), [][]int32{{4, 5}})
	if err != nil || !slices.Equal(vecs[0], enginetest.FakeEmbedding([]int32{4, 5})) {
		t.Errorf("after a refusal: %v, %v", vecs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Embed(ctx, [][]int32{{1}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: err = %v", err)
	}
}

// Embedding inputs fill what the step's token budget leaves beside the
// generation (max_num_batched_tokens is 64 here): a step exceeds it by at
// most the one input that is always taken.
func TestEmbedSharesTheStepBudget(t *testing.T) {
	var mu sync.Mutex
	var fake *enginetest.Fake
	c := testCore(t, func() *enginetest.Fake {
		mu.Lock()
		defer mu.Unlock()
		fake = &enginetest.Fake{EmbedTokens: 128, EmbedInputs: 8}
		return fake
	}, nil)
	prompt := make([]int32, 100)
	for i := range prompt {
		prompt[i] = int32(1 + i%50)
	}
	streams, err := c.Submit(context.Background(), []*scheduler.Request{request("long", prompt, 20)})
	if err != nil {
		t.Fatal(err)
	}
	var inputs [][]int32
	for i := range 6 {
		inputs = append(inputs, slices.Repeat([]int32{int32(i + 1)}, 20))
	}
	vecs, err := c.Embed(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		if !slices.Equal(vecs[i], enginetest.FakeEmbedding(in)) {
			t.Errorf("input %d: %v", i, vecs[i])
		}
	}
	drain(t, streams[0])
	mu.Lock()
	defer mu.Unlock()
	if got := fake.Stats().MaxStepTokens; got > 64+20 {
		t.Errorf("a step carried %d tokens; the budget is 64 plus one 20-token input", got)
	}
}
