package tests

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// visionServer serves stories260K with idefics3's image tokens added and
// the tiny synthesized projector of seed 1 (evals/synth/testdata/mmproj),
// with the chatml template, as llama-server was run for the answers below.
func visionServer(t *testing.T) *server {
	t.Helper()
	text, mm := visionFiles(t)
	return mediaServer(t, "vision", text, mm)
}

// mediaServer serves the text model with the projector mm as name, with
// the chatml template.
func mediaServer(t *testing.T, name, text, mm string) *server {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	registry := models.NewRegistry()
	t.Cleanup(func() { registry.Close() })
	g, err := models.LoadGenerative(models.GenerativeConfig{
		Name: name, Path: text, MMProj: mm, ChatTemplate: chatmlTemplate, CacheDir: modelDir,
		MaxNumSeqs: 8, MaxWaiting: 32, Threads: 1, PrefixCacheBytes: 64 << 20,
	}, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.Add(g); err != nil {
		t.Fatal(errors.Join(err, g.Close()))
	}
	h, err := api.NewHandler(api.Options{Registry: registry, Logger: log, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{URL: srv.URL, model: g, reg: reg, registry: registry}
}

// visionFiles writes the vision model of visionServer: stories260K with
// idefics3's image tokens (text) and the tiny projector of seed 1 (mm).
func visionFiles(t *testing.T) (text, mm string) {
	t.Helper()
	base, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	text, mm, err = synth.WriteTinyVision(t.TempDir(), base)
	if err != nil {
		t.Fatal(err)
	}
	return text, mm
}

// chatmlTemplate is ChatML as llama.cpp's --chat-template chatml renders it.
const chatmlTemplate = `{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`

// TestImageChat sends image_url parts with go-openai and checks the
// answers against llama.cpp's llama-server (ec98e2002, --mmproj, the same
// files, --chat-template chatml, temperature 0): the same prompt token
// counts (image positions included) and the same text, alone and 8 at
// once; the repeated image hits the media cache.
func TestImageChat(t *testing.T) {
	png, err := os.ReadFile("../evals/synth/testdata/mmproj/gradient-64.png")
	if err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	image := openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: url}}
	text := func(s string) openai.ChatMessagePart {
		return openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: s}
	}
	s := visionServer(t)
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = s.URL + "/v1"
	c := openai.NewClientWithConfig(cfg)
	for _, tc := range []struct {
		name   string
		parts  []openai.ChatMessagePart
		prompt int
		answer string
	}{
		// llama-server's answers to the same requests.
		{"image then text", []openai.ChatMessagePart{image, text("Describe")}, 98, "\"Momeape-eapy?\"\n\""},
		{"two images", []openai.ChatMessagePart{text("Look:"), image, text("and this"), image}, 153, "\" said, \"Yes,\" said, \"Yes,\" S"},
	} {
		// go-openai leaves out a temperature of 0 (omitempty), so the
		// greedy requests go as JSON with the client's own message types.
		body := map[string]any{"model": "vision", "max_tokens": 16, "temperature": 0,
			"messages": []openai.ChatCompletionMessage{{Role: "user", MultiContent: tc.parts}}}
		check := func(label string) {
			var resp openai.ChatCompletionResponse
			if code, _ := s.post(t, "/v1/chat/completions", body, &resp); code != 200 || len(resp.Choices) != 1 {
				t.Errorf("%s %s: status %d, %+v", tc.name, label, code, resp)
				return
			}
			if resp.Usage.PromptTokens != tc.prompt || resp.Choices[0].Message.Content != tc.answer {
				t.Errorf("%s %s: %d prompt tokens, %q; llama-server: %d, %q", tc.name, label,
					resp.Usage.PromptTokens, resp.Choices[0].Message.Content, tc.prompt, tc.answer)
			}
		}
		check("alone")
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() { check(strings.Repeat("+", i+1)) })
		}
		wg.Wait()
	}
	// The Messages and Responses APIs read the same image into the same
	// prompt, so they answer as chat does.
	b64 := base64.StdEncoding.EncodeToString(png)
	var msg struct {
		Content []struct{ Text string }
		Usage   struct {
			InputTokens int `json:"input_tokens"`
			// The chat requests left the prompt in the prefix cache.
			CacheRead int `json:"cache_read_input_tokens"`
		}
	}
	if code, _ := s.post(t, "/v1/messages", map[string]any{"model": "vision", "max_tokens": 16, "temperature": 0,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64}},
			map[string]any{"type": "text", "text": "Describe"}}}}}, &msg); code != 200 || len(msg.Content) != 1 ||
		msg.Content[0].Text != "\"Momeape-eapy?\"\n\"" || msg.Usage.InputTokens+msg.Usage.CacheRead != 98 {
		t.Errorf("messages with an image block: %d %+v", code, msg)
	}
	var rsp struct {
		OutputText string `json:"output_text"`
		Output     []struct {
			Content []struct{ Text string }
		}
		Usage struct {
			InputTokens int `json:"input_tokens"`
		}
	}
	if code, _ := s.post(t, "/v1/responses", map[string]any{"model": "vision", "max_output_tokens": 16, "temperature": 0,
		"input": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_image", "image_url": url},
			map[string]any{"type": "input_text", "text": "Describe"}}}}}, &rsp); code != 200 || len(rsp.Output) == 0 ||
		len(rsp.Output[len(rsp.Output)-1].Content) == 0 || rsp.Output[len(rsp.Output)-1].Content[0].Text != "\"Momeape-eapy?\"\n\"" || rsp.Usage.InputTokens != 98 {
		t.Errorf("responses with an input_image: %d %+v", code, rsp)
	}

	// go-openai itself: the image's positions count in usage.
	resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "vision", MaxCompletionTokens: 4,
		Messages: []openai.ChatCompletionMessage{{Role: "user", MultiContent: []openai.ChatMessagePart{image, text("Describe")}}}})
	if err != nil || resp.Usage.PromptTokens != 98 || resp.Usage.CompletionTokens != 4 {
		t.Errorf("go-openai image chat: %v, usage %+v", err, resp.Usage)
	}
	q, h := s.model.MediaCacheStats()
	if q == 0 || h < q-2 {
		t.Errorf("media cache: %d queries, %d hits; want every query after the first image's two chunks to hit", q, h)
	}
}

// TestAudioChat sends an input_audio part (the audio golden's 1-s WAV) to
// stories260K with qwen2a's audio tokens, a 1024-position context and the
// tiny-audio projector, and checks the answer against llama-server
// (ec98e2002, --mmproj, the same files, -c 1024 --chat-template chatml,
// temperature 0): 800 prompt tokens (a 30-s window is 750) and the same
// text.
func TestAudioChat(t *testing.T) {
	wav, err := os.ReadFile("../evals/synth/testdata/mmproj/sweep-1s.wav")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "stories260K-audio-512.gguf")
	if _, err := synth.WriteWithAudioTokens(short, base); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "stories260K-audio.gguf")
	if err := synth.WriteWithContextLength(text, short, 1024); err != nil {
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
	s := mediaServer(t, "audio", text, mm)
	body := map[string]any{"model": "audio", "max_tokens": 16, "temperature": 0,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": base64.StdEncoding.EncodeToString(wav), "format": "wav"}},
			map[string]any{"type": "text", "text": "Describe"}}}}}
	var resp openai.ChatCompletionResponse
	if code, _ := s.post(t, "/v1/chat/completions", body, &resp); code != 200 || len(resp.Choices) != 1 ||
		resp.Usage.PromptTokens != 800 || resp.Choices[0].Message.Content != "Sent up to the. Fromeake the fam" {
		t.Fatalf("audio chat: %d %+v; llama-server: 800 prompt tokens, %q", code, resp, "Sent up to the. Fromeake the fam")
	}
	// An image to this audio-only projector is a 400 naming the part.
	png, err := os.ReadFile("../evals/synth/testdata/mmproj/gradient-64.png")
	if err != nil {
		t.Fatal(err)
	}
	var bad struct {
		Error struct{ Message, Param string }
	}
	code, _ := s.post(t, "/v1/chat/completions", map[string]any{"model": "audio", "max_tokens": 4,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)}}}}}}, &bad)
	if code != 400 || bad.Error.Param != "messages[0].content[0]" {
		t.Errorf("image to an audio projector: %d %+v", code, bad)
	}
}
