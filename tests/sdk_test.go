package tests

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// The go-openai client works by pointing its base URL at the server.
func TestGoOpenAIClient(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = s.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)
	ctx := context.Background()
	ref := stories260k.ReferenceGreedy()

	models, err := client.ListModels(ctx)
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "stories260K" {
		t.Fatalf("ListModels: %+v %v", models, err)
	}

	// go-openai drops temperature 0 (omitempty), so these requests sample;
	// a seed makes them repeatable.
	seed := 7
	compReq := openai.CompletionRequest{Model: "stories260K", Prompt: ref.Prompt, MaxTokens: 60, Seed: &seed}
	comp, err := client.CreateCompletion(ctx, compReq)
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text == "" || comp.Usage.PromptTokens != 5 || comp.Usage.CompletionTokens == 0 {
		t.Fatalf("completion %q, usage %+v", comp.Choices[0].Text, comp.Usage)
	}

	chatReq := openai.ChatCompletionRequest{
		Model:               "stories260K",
		Messages:            []openai.ChatCompletionMessage{{Role: "system", Content: "You tell stories."}, {Role: "user", Content: "Tell me about Lily."}},
		MaxCompletionTokens: 30,
		Seed:                new(int),
	}
	chat, err := client.CreateChatCompletion(ctx, chatReq)
	if err != nil {
		t.Fatal(err)
	}
	if chat.Choices[0].Message.Role != "assistant" || chat.Choices[0].Message.Content == "" || chat.Usage.PromptTokens == 0 {
		t.Fatalf("chat = %+v", chat)
	}

	// The same seeded request streamed gives the same text.
	chatReq.Stream = true
	chatReq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := client.CreateChatCompletionStream(ctx, chatReq)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var text strings.Builder
	var finish openai.FinishReason
	var usage *openai.Usage
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
			text.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if text.String() != chat.Choices[0].Message.Content || finish != chat.Choices[0].FinishReason {
		t.Fatalf("streamed %q (%s), non-streamed %q (%s)", text.String(), finish, chat.Choices[0].Message.Content, chat.Choices[0].FinishReason)
	}
	if usage == nil || usage.CompletionTokens != chat.Usage.CompletionTokens {
		t.Fatalf("stream usage %+v, want %+v", usage, chat.Usage)
	}

	compReq.Stream = true
	cstream, err := client.CreateCompletionStream(ctx, compReq)
	if err != nil {
		t.Fatal(err)
	}
	defer cstream.Close()
	text.Reset()
	for {
		chunk, err := cstream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Text)
		}
	}
	if text.String() != comp.Choices[0].Text {
		t.Fatalf("streamed completion %q, non-streamed %q", text.String(), comp.Choices[0].Text)
	}
}
