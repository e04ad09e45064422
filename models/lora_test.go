package models

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models/stories260k"
	"github.com/llmserve/llmserve/scheduler"
)

// TestLoRASameStep submits a base-model request and one of each of two
// adapters in one batch, so the scheduler admits them in the same step and
// they decode together, one batch per adapter in every step: each gives
// the tokens it gives alone. Unloading an adapter takes it off at once.
func TestLoRASameStep(t *testing.T) {
	dir := t.TempDir()
	base, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	var loras []LoRA
	for i, name := range []string{"one", "two"} {
		p := filepath.Join(dir, name+".gguf")
		if _, err := synth.WriteLoRA(p, synth.LoRAOptions{Base: base, Rank: 4, Seed: uint64(20 + i), Strength: 0.5}); err != nil {
			t.Fatal(err)
		}
		loras = append(loras, LoRA{Name: name, Path: p})
	}
	g, err := LoadGenerative(GenerativeConfig{Path: base, CacheDir: dir, MaxNumSeqs: 4, MaxWaiting: 8, LoRAs: loras}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	reg := NewRegistry()
	if err := reg.Add(g); err != nil {
		t.Fatal(err)
	}
	prompt, err := g.Tokenizer().Encode("Once upon a time", true)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	req := func(a *Adapter) *scheduler.Request {
		n++
		r := &scheduler.Request{ID: string(rune('a' + n)), Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 12,
			Arrival: time.Now(), PromptLogprobs: -1, IgnoreEOS: true}
		if a != nil {
			r.Adapter = a.Handle()
		}
		return r
	}
	run := func(reqs ...*scheduler.Request) [][]int32 {
		streams, err := g.Submit(context.Background(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]int32, len(streams))
		for i, s := range streams {
			for {
				outs, err := s.Recv(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range outs {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					out[i] = append(out[i], o.Tokens...)
				}
			}
		}
		return out
	}
	one, _ := reg.GetAdapter("one")
	two, _ := reg.GetAdapter("two")
	var solo [][]int32
	for _, a := range []*Adapter{nil, one, two} {
		solo = append(solo, run(req(a))[0])
	}
	if slices.Equal(solo[0], solo[1]) || slices.Equal(solo[1], solo[2]) {
		t.Fatalf("the adapters change nothing: %v", solo)
	}
	together := run(req(nil), req(one), req(two))
	for i := range solo {
		if !slices.Equal(together[i], solo[i]) {
			t.Errorf("request %d: together %v, alone %v", i, together[i], solo[i])
		}
	}
	if s := g.Stats().AdapterSwitches; s < 2*12 {
		t.Errorf("%d adapter switches; the batched run alone makes two per step", s)
	}
	if err := reg.UnloadAdapter("one"); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.GetAdapter("one"); ok {
		t.Fatal("unloaded adapter still served")
	}
	if err := reg.UnloadAdapter("one"); !errors.Is(err, ErrAdapterNotFound) {
		t.Fatalf("second unload: %v", err)
	}
	if _, err := reg.LoadAdapter("", LoRA{Name: g.Name(), Path: loras[0].Path}); !errors.Is(err, ErrAdapterExists) {
		t.Fatalf("adapter named like the model: %v", err)
	}
}
