package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/models"
)

// The generic tool format (issue 31 item 1): the embedded model's
// fallback template renders no tools, so the tools are described in the
// system prompt and the answer takes a JSON shape the server reads back.

// cityParams keeps the toy model's calls short: its context is 512
// tokens, and the tools' descriptions take a good part of it.
const cityParams = `{"type":"object","properties":{"city":{"type":"string","enum":["Paris","London"]}},"required":["city"]}`

// cityTool is get_weather as the generic format's system prompt writes
// it.
const cityTool = `{"name":"get_weather","description":"The weather in a city.","parameters":` + cityParams + `}`

func cityTools() []openai.Tool {
	return []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: "get_weather", Description: "The weather in a city.", Parameters: json.RawMessage(cityParams)}}}
}

// tokenCount is the number of tokens text encodes to (vLLM's /tokenize).
func tokenCount(t *testing.T, s *server, text string) int {
	t.Helper()
	no := false
	var out struct{ Count int }
	if code, _ := s.post(t, "/tokenize", map[string]any{"model": "stories260K", "prompt": text, "add_special_tokens": &no}, &out); code != 200 {
		t.Fatalf("tokenize: %d", code)
	}
	return out.Count
}

// go-openai on the embedded model: the prompt with tools exceeds the one
// without by at least the tool's description, and a constrained answer
// (tool_choice required) parses back into a call, streamed or not.
func TestGenericToolsGoOpenAI(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	client := openaiClient(s)
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "What is the weather in Paris?"}}
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, MaxCompletionTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	without := resp.Usage.PromptTokens
	resp, err = client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: cityTools(), MaxCompletionTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	with, desc := resp.Usage.PromptTokens, tokenCount(t, s, cityTool)
	if with < without+desc {
		t.Fatalf("prompt tokens with the tool %d, without %d: the tool's description (%d tokens) is not in the prompt", with, without, desc)
	}
	t.Logf("prompt tokens: %d without tools, %d with (the description alone: %d)", without, with, desc)

	// Without parallel calls the answer is {"tool_call": ...}; with them
	// (odd seeds) it may also be {"tool_calls": [...]}, which the toy
	// model may go on filling until max_tokens cuts the last call.
	schema := compileSchema(t, cityParams)
	for seed := range 4 {
		parallel := seed%2 == 1
		req := openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: cityTools(), ToolChoice: "required",
			ParallelToolCalls: &parallel, MaxCompletionTokens: 120, Temperature: 1, Seed: &seed}
		resp, err := client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		calls := c.Message.ToolCalls
		if c.FinishReason == openai.FinishReasonLength && parallel && len(calls) > 1 {
			calls = calls[:len(calls)-1]
		} else if c.FinishReason != openai.FinishReasonToolCalls || (!parallel && len(calls) != 1) {
			t.Fatalf("seed %d: %+v", seed, c)
		}
		if len(calls) == 0 || c.Message.Content != "" {
			t.Fatalf("seed %d: %+v", seed, c)
		}
		for _, call := range calls {
			var v any
			if err := json.Unmarshal([]byte(call.Function.Arguments), &v); err != nil || schema.Validate(v) != nil || call.Function.Name != "get_weather" {
				t.Fatalf("seed %d: call %+v does not match the schema (%v)", seed, call, err)
			}
		}
		t.Logf("seed %d, parallel %v: %d calls, finish %s", seed, parallel, len(c.Message.ToolCalls), c.FinishReason)
		// Streamed, the same call arrives as deltas.
		req.Stream = true
		stream, err := client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		name, args, finish := streamedToolCalls(t, stream)
		var wantName, wantArgs string
		for _, call := range c.Message.ToolCalls {
			wantName += call.Function.Name
			wantArgs += call.Function.Arguments
		}
		if name != wantName || args != wantArgs || finish != string(c.FinishReason) {
			t.Fatalf("seed %d streamed: %q %q %q, want the unstreamed %q %q %q", seed, name, args, finish, wantName, wantArgs, c.FinishReason)
		}
	}
}

// genericScript answers the generic format's way: a call when the tools
// are offered, the answer once the tool's result is in. It records the
// prompts.
type genericScript struct {
	mu      sync.Mutex
	prompts []string
}

func (g *genericScript) answer(prompt string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prompts = append(g.prompts, prompt)
	switch {
	case strings.Contains(prompt, `{"tool_response":`):
		return `{"response": "It is sunny in Paris."}`, true
	case strings.Contains(prompt, "Tools:\n"):
		return `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`, true
	}
	return "", false
}

func (g *genericScript) last() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.prompts[len(g.prompts)-1]
}

// The auto mode's loop on the embedded model through go-openai: the model
// (scripted) answers a call in the generic format, which becomes
// tool_calls; the call and its result go back into the prompt in the
// generic format; the model's {"response": ...} becomes the content.
func TestGenericToolsLoop(t *testing.T) {
	var script genericScript
	s := startServer(t, scripted(models.GenerativeConfig{}, script.answer))
	client := openaiClient(s)
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "What is the weather in Paris?"}}
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: cityTools()})
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls || m.Content != "" || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || m.ToolCalls[0].ID == "" {
		t.Fatalf("turn 1: %+v", resp.Choices[0])
	}
	if p := script.last(); !strings.HasPrefix(p, "<s> <|im_start|>system\nTools:\n"+cityTool+"\n") {
		t.Errorf("turn 1's prompt: %q", p)
	}
	msgs = append(msgs, m, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: m.ToolCalls[0].ID, Content: "sunny, 21 C"})
	resp, err = client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: cityTools()})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; c.FinishReason != openai.FinishReasonStop || c.Message.Content != "It is sunny in Paris." || len(c.Message.ToolCalls) != 0 {
		t.Fatalf("turn 2: %+v", c)
	}
	p := script.last()
	for _, want := range []string{
		"<|im_start|>assistant\n" + `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}<|im_end|>`,
		"<|im_start|>user\n" + `{"tool_response":{"name":"get_weather","content":"sunny, 21 C"}}<|im_end|>`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("turn 2's prompt lacks %q:\n%s", want, p)
		}
	}
	// Turn 2 re-sends turn 1's prompt, which the prefix cache keeps.
	if resp.Usage.PromptTokensDetails == nil || resp.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Errorf("turn 2 usage %+v: nothing cached", resp.Usage)
	}
}

// A template that renders tools gets them as before: the prompt is the
// template's, with no generic system prompt.
func TestGenericToolsNotForToolTemplates(t *testing.T) {
	var script genericScript
	s := startServer(t, scripted(models.GenerativeConfig{ChatTemplate: hermesTemplate}, script.answer))
	client := openaiClient(s)
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Weather?"}}
	resp, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "stories260K", Messages: msgs, Tools: cityTools(), MaxCompletionTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>tools\nget_weather\n<|im_end|>\n<|im_start|>assistant"
	if p := script.last(); p != "<s> "+want { // BOS, and the vocabulary's leading space
		t.Errorf("prompt %q, want the template's %q", p, want)
	}
	if resp.Usage.PromptTokens != tokenCount(t, s, want)+1 { // and BOS
		t.Errorf("prompt tokens %d, want %d", resp.Usage.PromptTokens, tokenCount(t, s, want)+1)
	}
}

// The official node SDKs, Anthropic's for Messages and OpenAI's for
// Responses (tests/node/generic_tools.cjs), on the embedded model: token
// counts with the tool exceed those without by its description; a forced
// call (tool_choice any / required) parses back into a tool_use block and
// a function_call item; and, with the model scripted to answer in the
// generic format, the auto mode's round trip, streamed and not.
func TestGenericToolsNode(t *testing.T) {
	node, modules := nodeModules(t, filepath.Join("@anthropic-ai", "sdk"))
	nodeModules(t, "openai")
	plain := startServer(t, models.GenerativeConfig{})
	var script genericScript
	scriptedSrv := startServer(t, scripted(models.GenerativeConfig{}, script.answer))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("node", "generic_tools.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "LLMSERVE_URL="+plain.URL, "LLMSERVE_SCRIPTED_URL="+scriptedSrv.URL,
		"LLMSERVE_MODEL=stories260K", "TOOL_DESCRIPTION_TOKENS="+itoa(tokenCount(t, plain, cityTool)))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Logf("node: %s", strings.TrimSpace(stdout.String()))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
