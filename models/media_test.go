package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/models/stories260k"
	"github.com/llmserve/llmserve/scheduler"
)

const mmprojTestdata = "../evals/synth/testdata/mmproj"

// loadVisionModel serves stories260K with idefics3's image tokens and the
// tiny synthesized projector of seed 1 (evals/synth/testdata/mmproj).
func loadVisionModel(t *testing.T, cfg GenerativeConfig) *Generative {
	t.Helper()
	dir := t.TempDir()
	base, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	text, mm, err := synth.WriteTinyVision(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Path, cfg.MMProj, cfg.CacheDir = text, mm, dir
	g, err := LoadGenerative(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// greedyRun submits a prompt with its media and returns the tokens; it
// may run on another goroutine than the test's.
func greedyRun(t *testing.T, g *Generative, id string, toks []int32, spans []scheduler.Media, n int) []int32 {
	t.Helper()
	r := &scheduler.Request{ID: id, Prompt: toks, Media: spans, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: n,
		Arrival: time.Now(), PromptLogprobs: -1, IgnoreEOS: true}
	streams, err := g.Submit(context.Background(), []*scheduler.Request{r})
	if err != nil {
		t.Error(err)
		return nil
	}
	var out []int32
	for {
		outs, err := streams[0].Recv(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Error(err)
			return nil
		}
		for _, o := range outs {
			if o.Err != nil {
				t.Error(o.Err)
				return nil
			}
			out = append(out, o.Tokens...)
		}
	}
}

// TestMediaServe runs the golden image prompt through PrepareMedia and the
// engine core: the tokens are llama-mtmd-cli's; 8 requests with the image
// at once each give them too, and the repeated image is encoded once.
func TestMediaServe(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(mmprojTestdata, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Prompt       string  `json:"prompt"`
		NPrompt      int     `json:"n_prompt_tokens"`
		NPredict     int     `json:"n_predict"`
		GeneratedIDs []int32 `json:"generated_ids"`
		Image        struct {
			File string `json:"file"`
		} `json:"image"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(mmprojTestdata, golden.Image.File))
	if err != nil {
		t.Fatal(err)
	}
	g := loadVisionModel(t, GenerativeConfig{MaxNumSeqs: 8, MaxWaiting: 16})
	if !g.ReadsMedia(media.Image) || g.ReadsMedia(media.Audio) {
		t.Fatalf("ReadsMedia: image %v, audio %v", g.ReadsMedia(media.Image), g.ReadsMedia(media.Audio))
	}
	items := []media.Item{{Kind: media.Image, Data: png, Param: "messages[0].content[0]"}}
	toks, spans, err := g.PrepareMedia(context.Background(), golden.Prompt, true, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != golden.NPrompt || len(spans) != 2 {
		t.Fatalf("%d prompt tokens in %d media spans; want %d tokens (llama-mtmd-cli's), 2 spans (a tile and the whole image)", len(toks), len(spans), golden.NPrompt)
	}
	if got := greedyRun(t, g, "solo", toks, spans, golden.NPredict); !slices.Equal(got, golden.GeneratedIDs) {
		t.Fatalf("generated %v, llama-mtmd-cli %v", got, golden.GeneratedIDs)
	}

	var wg sync.WaitGroup
	outs := make([][]int32, 8)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks, spans, err := g.PrepareMedia(context.Background(), golden.Prompt, true, items)
			if err != nil {
				t.Error(err)
				return
			}
			outs[i] = greedyRun(t, g, fmt.Sprint("r", i), toks, spans, golden.NPredict)
		}()
	}
	wg.Wait()
	for i, out := range outs {
		if !slices.Equal(out, golden.GeneratedIDs) {
			t.Errorf("request %d of 8: %v, want %v", i, out, golden.GeneratedIDs)
		}
	}
	if q, h := g.MediaCacheStats(); q != 18 || h != 16 {
		t.Errorf("media cache: %d queries, %d hits; want 18, 16 (2 chunks an image, encoded once)", q, h)
	}
}

// TestMediaRefuses checks that what a projector cannot read is a
// *media.Error naming the part, and a model without one says so.
func TestMediaRefuses(t *testing.T) {
	g := loadVisionModel(t, GenerativeConfig{MaxImagePixels: 128 * 128})
	big := image.NewNRGBA(image.Rect(0, 0, 200, 100))
	big.Set(3, 3, color.NRGBA{R: 200, A: 255})
	var bigPNG bytes.Buffer
	if err := png.Encode(&bigPNG, big); err != nil {
		t.Fatal(err)
	}
	prompt := "look: " + media.Marker
	for _, tc := range []struct {
		name string
		item media.Item
		want string
	}{
		{"corrupt", media.Item{Kind: media.Image, Data: []byte("\x89PNG\r\n\x1a\nnot really"), Param: "messages[0].content[1]"}, "cannot decode the image"},
		{"not an image", media.Item{Kind: media.Image, Data: []byte("hello"), Param: "messages[0].content[1]"}, "cannot decode the image"},
		{"too large", media.Item{Kind: media.Image, Data: bigPNG.Bytes(), Param: "messages[0].content[1]"}, "200×100 pixels"},
		{"audio", media.Item{Kind: media.Audio, Data: []byte("RIFF"), Param: "messages[0].content[1]"}, "does not read audio"},
	} {
		_, _, err := g.PrepareMedia(context.Background(), prompt, true, []media.Item{tc.item})
		var me *media.Error
		if !errors.As(err, &me) || me.Param != tc.item.Param || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a *media.Error for %s saying %q", tc.name, err, tc.item.Param, tc.want)
		}
	}

	dir := t.TempDir()
	plain, err := LoadGenerative(GenerativeConfig{CacheDir: dir}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, _, err = plain.PrepareMedia(context.Background(), prompt, true, []media.Item{{Kind: media.Image, Data: []byte{1}, Param: "p"}})
	if !errors.Is(err, media.ErrNoProjector) {
		t.Errorf("without a projector: %v, want ErrNoProjector", err)
	}
}

// TestAudioServe runs the audio golden (evals/synth/testdata/mmproj/
// golden-audio.json: llama-mtmd-cli --audio on stories260K with qwen2a's
// audio tokens and the tiny-audio projector) through PrepareMedia, where
// libmtmd's helper decodes the WAV, and the engine core: the prompt has
// the CLI's 799 positions and greedy decoding its tokens.
func TestAudioServe(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(mmprojTestdata, "golden-audio.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Prompt       string  `json:"prompt"`
		NPrompt      int     `json:"n_prompt_tokens"`
		NPredict     int     `json:"n_predict"`
		GeneratedIDs []int32 `json:"generated_ids"`
		Audio        struct {
			File string `json:"file"`
		} `json:"audio"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	wav, err := os.ReadFile(filepath.Join(mmprojTestdata, golden.Audio.File))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	withTokens := filepath.Join(dir, "stories260K-audio-512.gguf")
	if _, err := synth.WriteWithAudioTokens(withTokens, base); err != nil {
		t.Fatal(err)
	}
	// The CLI ran with -c 1024: one clip takes 750 positions.
	text := filepath.Join(dir, "stories260K-audio.gguf")
	if err := synth.WriteWithContextLength(text, withTokens, 1024); err != nil {
		t.Fatal(err)
	}
	shape, err := synth.LookupProjectorShape("tiny-audio")
	if err != nil {
		t.Fatal(err)
	}
	mm := filepath.Join(dir, "mmproj-audio.gguf")
	if _, err := synth.WriteProjector(mm, synth.ProjectorOptions{Shape: shape, Base: text, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	g, err := LoadGenerative(GenerativeConfig{Path: text, MMProj: mm, CacheDir: dir, MaxNumSeqs: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !g.ReadsMedia(media.Audio) || g.ReadsMedia(media.Image) {
		t.Fatalf("ReadsMedia: image %v, audio %v", g.ReadsMedia(media.Image), g.ReadsMedia(media.Audio))
	}
	items := []media.Item{{Kind: media.Audio, Data: wav, Param: "messages[0].content[0]"}}
	toks, spans, err := g.PrepareMedia(context.Background(), golden.Prompt, true, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != golden.NPrompt || len(spans) != 1 {
		t.Fatalf("%d prompt tokens in %d media spans; want %d (llama-mtmd-cli's) in 1", len(toks), len(spans), golden.NPrompt)
	}
	if got := greedyRun(t, g, "audio", toks, spans, golden.NPredict); !slices.Equal(got, golden.GeneratedIDs) {
		t.Fatalf("generated %v, llama-mtmd-cli %v", got, golden.GeneratedIDs)
	}
	// Bytes that are not audio are a client error naming the part.
	_, _, err = g.PrepareMedia(context.Background(), golden.Prompt, true, []media.Item{{Kind: media.Audio, Data: []byte("RIFF\x00\x00\x00\x00WAVEjunk"), Param: "messages[0].content[0]"}})
	var me *media.Error
	if !errors.As(err, &me) || me.Param != "messages[0].content[0]" {
		t.Errorf("corrupt WAV: %v, want a *media.Error naming the part", err)
	}
}

// TestMediaKeysByProjector checks that an image's placeholders depend on
// the projector file: two projectors' rows never share prefix-cache keys,
// and the same projector always gives the same ones.
func TestMediaKeysByProjector(t *testing.T) {
	png, err := os.ReadFile(filepath.Join(mmprojTestdata, "gradient-64.png"))
	if err != nil {
		t.Fatal(err)
	}
	a := loadVisionModel(t, GenerativeConfig{})
	other := filepath.Join(t.TempDir(), "mmproj-seed2.gguf")
	shape, err := synth.LookupProjectorShape("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteProjector(other, synth.ProjectorOptions{Shape: shape, Base: a.Path(), Seed: 2}); err != nil {
		t.Fatal(err)
	}
	b, err := LoadGenerative(GenerativeConfig{Path: a.Path(), MMProj: other, CacheDir: t.TempDir()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	items := []media.Item{{Kind: media.Image, Data: png, Param: "p"}}
	prompt := "look: " + media.Marker
	ta, _, err := a.PrepareMedia(context.Background(), prompt, true, items)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := a.PrepareMedia(context.Background(), prompt, true, items)
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := b.PrepareMedia(context.Background(), prompt, true, items)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ta, again) {
		t.Errorf("the same projector gave other placeholders: %v, %v", ta, again)
	}
	if len(ta) != len(tb) {
		t.Fatalf("%d and %d positions", len(ta), len(tb))
	}
	for i := range ta {
		if (ta[i] < 0) != (tb[i] < 0) || (ta[i] >= 0 && ta[i] != tb[i]) || (ta[i] < 0 && ta[i] == tb[i]) {
			t.Fatalf("position %d: %d and %d; want equal text tokens and different placeholders", i, ta[i], tb[i])
		}
	}
}
