package openai

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/scheduler"
)

// TestGoOpenAIClient talks to the routes through the go-openai SDK over
// real HTTP, proving wire compatibility with a widely used client.
func TestGoOpenAIClient(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Cached = 2
	srv := httptest.NewServer(testHandler(m))
	defer srv.Close()
	cfg := goopenai.DefaultConfig("sk-unused")
	cfg.BaseURL = srv.URL + "/v1"
	client := goopenai.NewClientWithConfig(cfg)
	ctx := context.Background()
	msgs := []goopenai.ChatCompletionMessage{
		{Role: goopenai.ChatMessageRoleSystem, Content: "Be brief."},
		{Role: goopenai.ChatMessageRoleUser, Content: "Hi"},
	}

	t.Run("chat", func(t *testing.T) {
		resp, err := client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{
			Model: "test-model", Messages: msgs, MaxCompletionTokens: 20, N: 2, Temperature: 0.7, Stop: []string{"zzz"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.ID != "chatcmpl-test" || resp.Object != "chat.completion" || resp.Model != "test-model" || len(resp.Choices) != 2 {
			t.Fatalf("response %+v", resp)
		}
		for i, c := range resp.Choices {
			if c.Index != i || c.Message.Role != "assistant" || c.Message.Content != "Hello world!" || c.FinishReason != goopenai.FinishReasonStop {
				t.Errorf("choice %d: %+v", i, c)
			}
		}
		if u := resp.Usage; u.CompletionTokens != 8 || u.TotalTokens != u.PromptTokens+8 || u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 2 {
			t.Errorf("usage %+v", u)
		}
	})

	t.Run("completion", func(t *testing.T) {
		resp, err := client.CreateCompletion(ctx, goopenai.CompletionRequest{
			Model: "test-model", Prompt: []string{"a", "b"}, MaxTokens: 5, Echo: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Object != "text_completion" || len(resp.Choices) != 2 {
			t.Fatalf("response %+v", resp)
		}
		for i, c := range resp.Choices {
			want := []string{"a", "b"}[i] + "Hello world!"
			if c.Index != i || c.Text != want || c.FinishReason != "stop" {
				t.Errorf("choice %d: %+v", i, c)
			}
		}
	})

	t.Run("chat stream", func(t *testing.T) {
		m.SetScript(openaitest.StreamScript)
		defer m.SetScript(nil)
		stream, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{
			Model: "test-model", Messages: msgs, Stream: true,
			StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		var text strings.Builder
		var role string
		var finish goopenai.FinishReason
		var usage *goopenai.Usage
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if chunk.Usage != nil {
				usage = chunk.Usage
			}
			for _, c := range chunk.Choices {
				if c.Delta.Role != "" {
					role = c.Delta.Role
				}
				text.WriteString(c.Delta.Content)
				if c.FinishReason != "" {
					finish = c.FinishReason
				}
			}
		}
		if role != "assistant" || text.String() != "Hello world!" || finish != goopenai.FinishReasonStop {
			t.Errorf("role %q text %q finish %q", role, text.String(), finish)
		}
		if usage == nil || usage.CompletionTokens != 6 {
			t.Errorf("usage %+v", usage)
		}
	})

	t.Run("stream error after headers", func(t *testing.T) {
		m.SetScript(openaitest.OutsScript(
			[]scheduler.Output{openaitest.Out(scheduler.FinishNone, openaitest.Token("Hello"))},
			[]scheduler.Output{{Finish: scheduler.FinishAbort, Err: scheduler.ErrEngine}},
		))
		defer m.SetScript(nil)
		stream, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: "test-model", Messages: msgs, Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		for {
			_, err = stream.Recv()
			if err != nil {
				break
			}
		}
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) || apiErr.Type != typeInternal {
			t.Errorf("stream error %v, want the server's error object", err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "nope", Messages: msgs})
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param == nil || *apiErr.Param != "model" {
			t.Errorf("unknown model: %#v", err)
		}
		_, err = client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "test-model", Messages: msgs, MaxCompletionTokens: 1000})
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Code != "context_length_exceeded" {
			t.Errorf("too long: %#v", err)
		}
	})
	m.Wait()
}
