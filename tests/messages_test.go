package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
// against the real server: the official @anthropic-ai/sdk, bad input in
// Anthropic's error shape, and the head.

// TestAnthropicSDK runs tests/node/anthropic_messages.cjs: messages.create
// and messages.stream (text, a forced tool use and its tool_result sent
// back), messages.countTokens, and the SDK's typed errors, with the SDK's
// apiKey (x-api-key) against --api-key.
func TestAnthropicSDK(t *testing.T) {
	t.Parallel()
	node, modules := nodeModules(t, filepath.Join("@anthropic-ai", "sdk"))
	p := startServeProc(t, "--api-key", "sdk-key")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("node", "anthropic_messages.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "LLMSERVE_URL="+p.url, "LLMSERVE_KEY=sdk-key", "LLMSERVE_MODEL=stories260K")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var out struct {
		OK        bool           `json:"ok"`
		Text      string         `json:"text"`
		ToolInput map[string]any `json:"tool_input"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || !out.OK || out.Text == "" || out.ToolInput["city"] == nil {
		t.Fatalf("node printed %s (%v); stderr %s", stdout.String(), err, stderr.String())
	}
	t.Logf("SDK: text %q, tool input %v", out.Text, out.ToolInput)
}

// TestAnthropicSDKChecks runs tests/node/anthropic_checks.cjs, issue 31's
// Messages points through the official SDK on the embedded model:
// output_config.format held by the grammar and parsed by the SDK's
// helper, tool names and a prefill's trailing whitespace refused as typed
// 400s naming Anthropic's fields, request-id on every answer, and
// message_start's usage equal to message_delta's.
func TestAnthropicSDKChecks(t *testing.T) {
	t.Parallel()
	node, modules := nodeModules(t, filepath.Join("@anthropic-ai", "sdk"))
	s := startServer(t, models.GenerativeConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("node", "anthropic_checks.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "LLMSERVE_URL="+s.URL, "LLMSERVE_MODEL="+s.model.Name())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Logf("SDK: %s", strings.TrimSpace(stdout.String()))
}

// messagesPost posts body to path and decodes the Anthropic error it
// answers.
func messagesError(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Type != "error" {
		t.Fatalf("%s: %d, not an Anthropic error (%v)", body, resp.StatusCode, err)
	}
	return resp.StatusCode, e.Error.Type, e.Error.Message
}

// Bad input gets a 4xx in Anthropic's error shape, naming what is wrong.
func TestMessagesBadInputServer(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	const user = `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct {
		name, path, body string
		status           int
		typ, contains    string
	}{
		{"missing max_tokens", "/v1/messages", `{"model":"stories260K",` + user + `}`, 400, "invalid_request_error", "max_tokens"},
		{"unknown tool_use_id", "/v1/messages", `{"model":"stories260K","max_tokens":4,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"x"}]}]}`, 400, "invalid_request_error", "toolu_2"},
		{"image block", "/v1/messages", `{"model":"stories260K","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`, 400, "invalid_request_error", "messages[0].content[1]: the model `stories260K` reads text only"},
		{"system role in messages", "/v1/messages", `{"model":"stories260K","max_tokens":4,"messages":[{"role":"system","content":"x"},{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "system"},
		{"unknown role", "/v1/messages", `{"model":"stories260K","max_tokens":4,"messages":[{"role":"tool","content":"x"}]}`, 400, "invalid_request_error", "role"},
		{"unknown model", "/v1/messages", `{"model":"claude-opus-4","max_tokens":4,` + user + `}`, 404, "not_found_error", "claude-opus-4"},
		{"budget below 1024", "/v1/messages", `{"model":"stories260K","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":512},` + user + `}`, 400, "invalid_request_error", "budget_tokens"},
		{"max_tokens beyond the context", "/v1/messages", `{"model":"stories260K","max_tokens":100000000,` + user + `}`, 400, "invalid_request_error", "max_tokens"},
		{"count_tokens image", "/v1/messages/count_tokens", `{"model":"stories260K","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}`, 400, "invalid_request_error", "reads text only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, typ, msg := messagesError(t, s.URL+tt.path, tt.body)
			if status != tt.status || typ != tt.typ || !strings.Contains(msg, tt.contains) {
				t.Errorf("%d %s %q, want %d %s containing %q", status, typ, msg, tt.status, tt.typ, tt.contains)
			}
		})
	}
}

// The generation path is chat's: a Messages request and the chat request
// it translates to give the same greedy text from the same prompt tokens.
func TestMessagesSameAsChat(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	ref := stories260k.ReferenceGreedy()
	var msg struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
			OutputTokens         int `json:"output_tokens"`
		} `json:"usage"`
	}
	if code, _ := s.post(t, "/v1/messages", map[string]any{
		"model": "stories260K", "max_tokens": 20, "temperature": 0, "system": "S",
		"messages": []map[string]any{{"role": "user", "content": ref.Prompt}},
	}, &msg); code != 200 {
		t.Fatalf("status %d", code)
	}
	var chat struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if code, _ := s.post(t, "/v1/chat/completions", map[string]any{
		"model": "stories260K", "max_tokens": 20, "temperature": 0,
		"messages": []map[string]any{{"role": "system", "content": "S"}, {"role": "user", "content": ref.Prompt}},
	}, &chat); code != 200 {
		t.Fatalf("status %d", code)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != chat.Choices[0].Message.Content ||
		msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens != chat.Usage.PromptTokens || msg.Usage.OutputTokens != chat.Usage.CompletionTokens {
		t.Errorf("messages %+v; chat %+v", msg, chat)
	}
	want := map[string]string{"stop": "end_turn", "length": "max_tokens"}[chat.Choices[0].FinishReason]
	if msg.StopReason != want {
		t.Errorf("stop_reason %s for finish_reason %s", msg.StopReason, chat.Choices[0].FinishReason)
	}
}

// TestHeadMessages: /v1/messages through `llmserve head` answers as one
// serve process does, streamed and not.
func TestHeadMessages(t *testing.T) {
	t.Parallel()
	ref := startServeProc(t)
	w := startWorkerProc(t, "both")
	h := startHeadProc(t, []*headWorker{w})
	req := map[string]any{"model": "stories260K", "max_tokens": 16, "temperature": 0, "messages": []map[string]any{{"role": "user", "content": "Lily"}}}
	text := func(p *pdProc) string {
		code, body := p.post(t, "/v1/messages", req)
		var m struct {
			Type    string
			Content []struct{ Text string }
		}
		if code != 200 || json.Unmarshal(body, &m) != nil || m.Type != "message" || len(m.Content) != 1 {
			t.Fatalf("%s: %d %s", p.url, code, body)
		}
		return m.Content[0].Text
	}
	got, want := text(h), text(ref)
	if got != want {
		t.Errorf("through the head %q, one serve process %q", got, want)
	}
	stream := map[string]any{"stream": true}
	for k, v := range req {
		stream[k] = v
	}
	code, body := h.post(t, "/v1/messages", stream)
	var events []string
	var streamed strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var d struct {
				Delta struct{ Text string } `json:"delta"`
			}
			_ = json.Unmarshal([]byte(data), &d)
			streamed.WriteString(d.Delta.Text)
		}
	}
	if code != 200 || len(events) < 6 || events[0] != "message_start" || events[len(events)-1] != "message_stop" || streamed.String() != want {
		t.Errorf("stream through the head: %d %v %q, want %q", code, events, streamed.String(), want)
	}
	if code, _ := h.post(t, "/v1/messages/count_tokens", map[string]any{"model": "stories260K", "messages": req["messages"]}); code != 200 {
		t.Errorf("count_tokens through the head: %d", code)
	}
}
