package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models/stories260k"
	"github.com/llmserve/llmserve/scheduler"
)

// generateAll serves five greedy requests at once and returns their
// tokens.
func generateAll(t *testing.T, g *Generative) [][]int32 {
	t.Helper()
	var reqs []*scheduler.Request
	for i, text := range []string{"Once upon a time", "Lily and Tom", "The cat sat on the mat and", "One day",
		"Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her big dog"} {
		prompt, err := g.Tokenizer().Encode(text, true)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, &scheduler.Request{ID: fmt.Sprint(i), Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 40,
			Arrival: time.Now(), PromptLogprobs: -1, IgnoreEOS: true})
	}
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

// A model served with itself as its draft model generates what it
// generates without, with nearly every draft token accepted, and the
// spec_decode counters count the drafts.
func TestDraftModelServes(t *testing.T) {
	dir := t.TempDir()
	path, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	load := func(sp scheduler.Speculative) *Generative {
		g, err := LoadGenerative(GenerativeConfig{Path: path, CacheDir: dir, MaxNumSeqs: 4, MaxWaiting: 8, Speculative: sp}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	want := generateAll(t, load(scheduler.Speculative{}))
	g := load(scheduler.Speculative{Method: scheduler.SpecDraft, Model: path, NumTokens: 4})
	got := generateAll(t, g)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	st := g.Stats().Spec
	if st.Drafts == 0 || st.AcceptedTokens*10 < st.DraftTokens*9 {
		t.Fatalf("spec stats %+v", st)
	}
	t.Logf("%+v", st)
}

// Under a KV memory cap that preempts sequences, with the prefix cache
// restoring what they had, a self-drafting model still generates what it
// generates without speculation and without the cap.
func TestDraftModelPreempted(t *testing.T) {
	dir := t.TempDir()
	path, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	load := func(cfg GenerativeConfig) *Generative {
		cfg.Path, cfg.CacheDir, cfg.MaxNumSeqs, cfg.MaxWaiting = path, dir, 4, 8
		g, err := LoadGenerative(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	want := generateAll(t, load(GenerativeConfig{}))
	// The cap counts the draft's KV too: 192 KiB holds the positions 96
	// KiB of the target alone would.
	g := load(GenerativeConfig{KVMemoryBytes: 192 << 10, PrefixCacheBytes: 1 << 20,
		Speculative: scheduler.Speculative{Method: scheduler.SpecDraft, Model: path, NumTokens: 4}})
	if got, alone := g.Stats().KV.CapacityTokens, load(GenerativeConfig{KVMemoryBytes: 96 << 10}).Stats().KV.CapacityTokens; got != alone || got == 0 {
		t.Fatalf("a 192 KiB cap with a self-draft holds %d tokens, 96 KiB without a draft %d: the cap must count the draft's KV", got, alone)
	}
	// The second time, the long prompt's blocks come from the cache.
	for range 2 {
		got := generateAll(t, g)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("request %d\n got %v\nwant %v", i, got[i], want[i])
			}
		}
	}
	st := g.Stats()
	if st.Preemptions == 0 || st.KV.HitTokens == 0 || st.Spec.AcceptedTokens == 0 {
		t.Fatalf("%d preemptions, %d prefix cache hit tokens, spec %+v", st.Preemptions, st.KV.HitTokens, st.Spec)
	}
	t.Logf("%d preemptions, %d prefix cache hit tokens, spec %+v", st.Preemptions, st.KV.HitTokens, st.Spec)
}

// A draft model that is missing, not a GGUF file or of another
// vocabulary fails the load with a ConfigError for SpeculativeModel that
// names the draft's file (and, for the vocabulary, the model's).
func TestDraftModelStartupErrors(t *testing.T) {
	dir := t.TempDir()
	path, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	notGGUF := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notGGUF, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	shape, err := synth.LookupShape("stories260k")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-vocab.gguf")
	if _, err := synth.Write(other, synth.Options{Shape: shape, DType: "f32", VocabPath: path, Seed: 1, AddedTokens: []string{"<extra>"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		draft string
		want  []string
	}{
		{filepath.Join(dir, "missing.gguf"), []string{"missing.gguf", "no such file"}},
		{notGGUF, []string{notGGUF, "is not a GGUF file"}},
		{other, []string{other, path, "vocabulary", "513 tokens"}},
	} {
		_, err := LoadGenerative(GenerativeConfig{Path: path, CacheDir: dir, MaxNumSeqs: 2, MaxWaiting: 4,
			Speculative: scheduler.Speculative{Method: scheduler.SpecDraft, Model: c.draft}}, nil, nil)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Setting != "SpeculativeModel" {
			t.Fatalf("draft %s: err = %v, want a ConfigError for SpeculativeModel", c.draft, err)
		}
		for _, w := range c.want {
			if !strings.Contains(ce.Msg, w) {
				t.Errorf("draft %s: %q does not say %q", c.draft, ce.Msg, w)
			}
		}
	}
}
