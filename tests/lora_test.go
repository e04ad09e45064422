package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	openai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/api"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// loraServer serves stories260K with the LoRA adapters of cfg and the
// runtime adapter routes on.
func loraServer(t *testing.T, cfg models.GenerativeConfig) *server {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	registry := models.NewRegistry()
	t.Cleanup(func() { registry.Close() })
	cfg.CacheDir, cfg.MaxNumSeqs, cfg.InitialSeqs, cfg.MaxWaiting, cfg.Threads, cfg.PrefixCacheBytes = modelDir, 16, 4, 64, 1, 64<<20
	g, err := models.LoadGenerative(cfg, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.Add(g); err != nil {
		t.Fatal(errors.Join(err, g.Close()))
	}
	h, err := api.NewHandler(api.Options{Registry: registry, Logger: log, Registerer: reg, Gatherer: reg, LoRARuntimeUpdates: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{URL: srv.URL, model: g, reg: reg, registry: registry}
}

// writeLoRAs writes n adapters for stories260K and returns their paths.
func writeLoRAs(t *testing.T, n int) []string {
	t.Helper()
	dir := t.TempDir()
	base, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("lora%d.gguf", i))
		if _, err := synth.WriteLoRA(p, synth.LoRAOptions{Base: base, Rank: 4, Seed: uint64(10 + i), Strength: 0.5}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func loraGreedy(t *testing.T, s *server, model string) string {
	t.Helper()
	var resp struct {
		Choices []struct{ Text string }
		Error   struct{ Message string }
	}
	// go-openai leaves temperature 0 out, so greedy goes through post.
	code, _ := s.post(t, "/v1/completions", map[string]any{"model": model, "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}, &resp)
	if code != 200 || len(resp.Choices) != 1 {
		t.Errorf("%s: %d %s", model, code, resp.Error.Message)
		return ""
	}
	return resp.Choices[0].Text
}

// TestLoRAServe: adapters are listed in /v1/models with their parent,
// picked by the model name on completions and chat (concurrently with the
// base model, each answer equal to its solo one), loaded and unloaded at
// run time with vLLM's routes and statuses, and an unknown adapter is a
// 404 naming it.
func TestLoRAServe(t *testing.T) {
	paths := writeLoRAs(t, 3)
	s := loraServer(t, models.GenerativeConfig{LoRAs: []models.LoRA{{Name: "story-a", Path: paths[0]}, {Name: "story-b", Path: paths[1]}}, LoRARuntime: true, MaxLoRAs: 2})
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = s.URL + "/v1"
	c := openai.NewClientWithConfig(cfg)
	ctx := context.Background()

	list, err := c.ListModels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	parents := map[string]string{}
	for _, m := range list.Models {
		ids = append(ids, m.ID)
		parents[m.ID] = m.Parent
	}
	if !slices.Equal(ids, []string{"stories260K", "story-a", "story-b"}) || parents["story-a"] != "stories260K" || parents["stories260K"] != "" {
		t.Fatalf("models %v, parents %v", ids, parents)
	}

	base, a, b := loraGreedy(t, s, "stories260K"), loraGreedy(t, s, "story-a"), loraGreedy(t, s, "story-b")
	if base == a || a == b {
		t.Fatalf("adapters change nothing: base %q, a %q, b %q", base, a, b)
	}
	// Together, in the same steps: each equals its solo answer.
	want := map[string]string{"stories260K": base, "story-a": a, "story-b": b}
	var wg sync.WaitGroup
	for i := range 12 {
		model := []string{"stories260K", "story-a", "story-b"}[i%3]
		wg.Go(func() {
			if got := loraGreedy(t, s, model); got != want[model] {
				t.Errorf("%s batched: %q, solo %q", model, got, want[model])
			}
		})
	}
	wg.Wait()
	chat, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "story-a", MaxCompletionTokens: 4,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hi"}}})
	if err != nil || chat.Model != "story-a" {
		t.Fatalf("chat with the adapter: %v %+v", err, chat)
	}

	// The Messages and Responses APIs pick adapters by name too.
	var msg struct {
		Model string
		Error struct{ Message string }
	}
	if code, _ := s.post(t, "/v1/messages", map[string]any{"model": "story-b", "max_tokens": 4,
		"messages": []map[string]string{{"role": "user", "content": "Hi"}}}, &msg); code != 200 || msg.Model != "story-b" {
		t.Fatalf("messages with the adapter: %d %+v", code, msg)
	}
	if code, _ := s.post(t, "/v1/responses", map[string]any{"model": "story-a", "max_output_tokens": 4, "input": "Hi"}, &msg); code != 200 || msg.Model != "story-a" {
		t.Fatalf("responses with the adapter: %d %+v", code, msg)
	}

	// Unknown adapter: a 404 that names it.
	var apiErr *openai.APIError
	_, err = c.CreateCompletion(ctx, openai.CompletionRequest{Model: "story-z", Prompt: "x", MaxTokens: 1})
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 || !strings.Contains(apiErr.Message, "story-z") {
		t.Fatalf("unknown adapter: %v", err)
	}

	// Runtime load and unload, with vLLM's statuses.
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if code, _ := s.post(t, "/v1/load_lora_adapter", map[string]string{"lora_name": "story-c", "lora_path": paths[2]}, nil); code != 200 {
		t.Fatalf("load: %d", code)
	}
	if got := loraGreedy(t, s, "story-c"); got == base || got == a {
		t.Fatalf("story-c answers %q", got)
	}
	// An adapter for a model of other dimensions.
	other := filepath.Join(t.TempDir(), "other.gguf")
	vocab, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Write(other, synth.Options{Shape: synth.Shape{Name: "other", Of: "a test", Embd: 96, Layers: 5, Heads: 4, HeadsKV: 2, FF: 128, Context: 512,
		RopeTheta: 10000, RMSEps: 1e-5}, DType: "f32", VocabPath: vocab, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong.gguf")
	if _, err := synth.WriteLoRA(wrong, synth.LoRAOptions{Base: other}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		body map[string]string
		code int
		has  string
	}{
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "story-c", "lora_path": paths[2]}, 400, "already been loaded"},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "stories260K", "lora_path": paths[2]}, 400, "already been loaded"},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "x"}, 400, "lora_path"},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "x", "lora_path": "/nonexistent/a.gguf"}, 404, "/nonexistent/a.gguf"},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "x", "lora_path": s.model.Path()}, 400, s.model.Path()},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "x", "lora_path": wrong}, 400, "incorrect shape"},
		{"/v1/unload_lora_adapter", map[string]string{"lora_name": "nope"}, 404, "nope"},
	} {
		e.Error.Message = ""
		if code, _ := s.post(t, tc.path, tc.body, &e); code != tc.code || !strings.Contains(e.Error.Message, tc.has) {
			t.Errorf("%s %v: %d %q, want %d with %q", tc.path, tc.body, code, e.Error.Message, tc.code, tc.has)
		}
	}
	if code, _ := s.post(t, "/v1/unload_lora_adapter", map[string]string{"lora_name": "story-c"}, nil); code != 200 {
		t.Fatalf("unload: %d", code)
	}
	_, err = c.CreateCompletion(ctx, openai.CompletionRequest{Model: "story-c", Prompt: "x", MaxTokens: 1})
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 {
		t.Fatalf("unloaded adapter: %v", err)
	}
	if v := s.metric(t, "vllm:lora_requests_info"); v <= 0 {
		t.Fatalf("vllm:lora_requests_info = %v", v)
	}
	if v := s.metric(t, "llmserve_lora_adapter_switches_total"); v < 1 {
		t.Fatalf("llmserve_lora_adapter_switches_total = %v", v)
	}
}

// TestLoRARoutesOff: without --enable-lora-runtime-updates the routes are
// not there (404), as in vLLM.
func TestLoRARoutesOff(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	if code, _ := s.post(t, "/v1/load_lora_adapter", map[string]string{"lora_name": "x", "lora_path": "y"}, nil); code != http.StatusNotFound {
		t.Fatalf("load_lora_adapter without the flag: %d", code)
	}
}
