package tests

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/tokenizer"
)

// scripted returns cfg with its model's answers decided by script: an
// enginetest.Scripted under the real engine, so that the model writes what
// a test needs (a tool call in its template's format) while the API, the
// frontend, the scheduler and llama.cpp stay real. It is the engine double
// the agent tests (Claude Code, Codex) drive their tool loops with.
func scripted(cfg models.GenerativeConfig, script enginetest.Script) models.GenerativeConfig {
	cfg.WrapExecutor = func(x engine.Executor, v tokenizer.Vocab) engine.Executor {
		return &enginetest.Scripted{Executor: x, Vocab: v, Script: script}
	}
	return cfg
}

// hermesTemplate is a ChatML template that offers tools and writes tool
// calls the Hermes way (<tool_call>...</tool_call>), so tool_choice auto
// parses them; it renders tool calls and tool results back into the prompt.
const hermesTemplate = `{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.content %}{{ m.content }}{% endif %}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function.name }}</tool_call>{% endfor %}{% endif %}<|im_end|>
{% endfor %}{% if tools %}<|im_start|>tools
{% for t in tools %}{{ t.function.name }}
{% endfor %}<|im_end|>
{% endif %}<|im_start|>assistant
`

// A tool loop through go-openai on the real stack with a scripted model:
// the first turn's answer is a Hermes tool call, which the auto mode's
// parser turns into tool_calls (streamed and not); the tool's result goes
// back in the second turn, whose answer is text. The script sees each
// prompt as the template rendered it.
func TestScriptedToolLoop(t *testing.T) {
	var mu sync.Mutex
	var prompts []string
	script := func(prompt string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		prompts = append(prompts, prompt)
		if strings.Contains(prompt, "sunny, 21") {
			return "It is sunny in Paris.", true
		}
		return "Let me look.<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}` + "\n</tool_call>", true
	}
	s := startServer(t, scripted(models.GenerativeConfig{ChatTemplate: hermesTemplate}, script))
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = s.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)
	ctx := context.Background()

	tools := []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: "get_weather", Description: "Weather in a city", Parameters: json.RawMessage(weatherParams)}}}
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Weather in Paris?"}}
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls || strings.TrimSpace(m.Content) != "Let me look." || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city": "Paris", "unit": "c"}` {
		t.Fatalf("turn 1: %+v", resp.Choices[0])
	}
	mu.Lock()
	if len(prompts) != 1 || !strings.Contains(prompts[0], "<|im_start|>user\nWeather in Paris?<|im_end|>") || !strings.Contains(prompts[0], "tools\nget_weather\n") {
		t.Errorf("the script saw %q", prompts)
	}
	mu.Unlock()

	// Streamed, the same call arrives as deltas.
	stream, err := client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: tools, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	name, args, finish := streamedToolCalls(t, stream)
	if name != "get_weather" || args != `{"city": "Paris", "unit": "c"}` || finish != "tool_calls" {
		t.Fatalf("streamed turn 1: %q %q %q", name, args, finish)
	}

	// Turn 2: the tool's result is in the prompt; the answer is text.
	msgs = append(msgs, m, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: m.ToolCalls[0].ID, Content: "sunny, 21 C"})
	resp, err = client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; c.FinishReason != openai.FinishReasonStop || c.Message.Content != "It is sunny in Paris." || len(c.Message.ToolCalls) != 0 {
		t.Fatalf("turn 2: %+v", c)
	}
	// The answer's tokens are the model's own count: the text and EOS.
	if resp.Usage.CompletionTokens == 0 || resp.Usage.PromptTokens == 0 {
		t.Errorf("turn 2 usage %+v", resp.Usage)
	}
	mu.Lock()
	if len(prompts) != 3 || !strings.Contains(prompts[2], "<tool_call>get_weather</tool_call>") || !strings.Contains(prompts[2], "<|im_start|>tool\nsunny, 21 C") {
		t.Errorf("turn 2's prompt: %q", prompts[len(prompts)-1])
	}
	mu.Unlock()
}

// streamedToolCalls reads a chat stream to its end and closes it: the
// tool calls' names and arguments concatenated over the deltas, and the
// finish reason.
func streamedToolCalls(t *testing.T, stream *openai.ChatCompletionStream) (name, args, finish string) {
	t.Helper()
	defer stream.Close()
	for {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return name, args, finish
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if c.FinishReason != "" {
				finish = string(c.FinishReason)
			}
		}
	}
}
