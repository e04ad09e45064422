package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// messagesHandler is testHandler's setup with the Messages routes.
func messagesHandler(models ...openai.Model) http.Handler {
	r := chi.NewRouter()
	Mount(r, testServer(nil, models...), Options{})
	return r
}

// eventGate signals gate once per content_block_delta event written, so
// that a scripted model pushes its next batch only after the handler
// wrote the last one's delta: batches are never coalesced.
type eventGate struct {
	http.ResponseWriter
	gate chan struct{}
}

func (w *eventGate) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if bytes.HasPrefix(b, []byte("event: content_block_delta\n")) {
		w.gate <- struct{}{}
	}
	return n, err
}

func (w *eventGate) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func doMessages(t *testing.T, m *openaitest.Model, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	var w http.ResponseWriter = rec
	if m.Gate != nil {
		w = &eventGate{ResponseWriter: rec, gate: m.Gate}
	}
	messagesHandler(m).ServeHTTP(w, req)
	m.Wait()
	return rec
}

// Tool call ids are random; golden files hold them as toolu_X.
var toolIDs = regexp.MustCompile(`toolu_[a-z0-9]+`)

const weatherTool = `"tools":[{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`

func TestMessagesGolden(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		script openaitest.Script
		stream bool
	}{
		{name: "messages.json", body: `{"model":"test-model","max_tokens":10,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`},
		{
			name:   "messages_stop_sequence.json",
			body:   `{"model":"test-model","max_tokens":10,"stop_sequences":["rld"],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
			script: openaitest.TextScript("Hello", " world!"),
		},
		{
			name: "messages_max_tokens.json",
			body: `{"model":"test-model","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`,
			script: func(*scheduler.Request) []openaitest.Batch {
				return []openaitest.Batch{{Outs: []scheduler.Output{{Tokens: openaitest.Tokens("Hello world"), Finish: scheduler.FinishLength}}}}
			},
		},
		{
			name:   "messages_tool_use.json",
			body:   `{"model":"test-model","max_tokens":30,` + weatherTool + `,"tool_choice":{"type":"tool","name":"get_weather"},"messages":[{"role":"user","content":"Weather?"}]}`,
			script: openaitest.TextScript(`{"city": `, `"Paris"}`),
		},
		{
			name:   "messages_stream.sse",
			body:   `{"model":"test-model","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`,
			script: openaitest.TextScript("Hel", "lo wo", "rld!"),
			stream: true,
		},
		{
			name:   "messages_stream_tool_use.sse",
			body:   `{"model":"test-model","max_tokens":30,"stream":true,` + weatherTool + `,"tool_choice":{"type":"tool","name":"get_weather"},"messages":[{"role":"user","content":"Weather?"}]}`,
			script: openaitest.TextScript(`{"city": `, `"Paris"}`),
			stream: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Script = tt.script
			m.MaxLen = 512 // room for the tools the fallback template gets in the system prompt
			m.Cached = 3
			if tt.stream {
				m.Gate = make(chan struct{}, 1000)
			}
			rec := doMessages(t, m, "/v1/messages", tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			got := rec.Body.Bytes()
			if tt.stream {
				if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
					t.Errorf("Content-Type = %q", ct)
				}
			} else {
				got = openaitest.IndentJSON(t, got)
			}
			openaitest.CheckGolden(t, tt.name, toolIDs.ReplaceAll(got, []byte("toolu_X")))
		})
	}
}

// The stream's events come in Anthropic's order whatever the pieces.
func TestMessagesStreamSequence(t *testing.T) {
	var got []string
	ms := newMessagesStream(func(event string, v any) error {
		b, _ := json.Marshal(v)
		var typ struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
			} `json:"delta"`
		}
		_ = json.Unmarshal(b, &typ)
		if typ.Type != event {
			t.Errorf("event %s carries type %s", event, typ.Type)
		}
		if typ.Delta.Type != "" && event == "content_block_delta" {
			event += "/" + typ.Delta.Type
		}
		got = append(got, event)
		return nil
	})
	steps := []error{
		ms.start("msg_1", "m", messagesUsage{InputTokens: 3}),
		ms.thinking("hmm"), ms.thinking(" ok"), ms.text(""), ms.text("Hi"),
		ms.tool(frontend.ToolCallDelta{ID: "call_a", Name: "f"}), ms.tool(frontend.ToolCallDelta{Arguments: `{"x":`}), ms.tool(frontend.ToolCallDelta{Arguments: `1}`}),
		ms.tool(frontend.ToolCallDelta{ID: "call_b", Name: "g", Arguments: `{}`}),
		ms.finish("tool_use", nil, messagesUsage{OutputTokens: 7}),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"message_start", "ping",
		"content_block_start", "content_block_delta/thinking_delta", "content_block_delta/thinking_delta", "content_block_stop",
		"content_block_start", "content_block_delta/text_delta", "content_block_stop",
		"content_block_start", "content_block_delta/input_json_delta", "content_block_delta/input_json_delta", "content_block_stop",
		"content_block_start", "content_block_delta/input_json_delta", "content_block_stop",
		"message_delta", "message_stop",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
}

// chatView writes typed messages as chat messages in JSON, for comparing.
func chatView(msgs []frontend.Message) string {
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		v := map[string]any{"role": m.Role, "content": m.Content}
		if m.ReasoningContent != "" {
			v["reasoning_content"] = m.ReasoningContent
		}
		if m.ToolCallID != "" {
			v["tool_call_id"] = m.ToolCallID
		}
		if len(m.ToolCalls) > 0 {
			var calls []any
			for _, c := range m.ToolCalls {
				calls = append(calls, map[string]any{"id": c.ID, "type": c.Type, "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
			}
			v["tool_calls"] = calls
		}
		out[i] = v
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// Messages turns become the chat messages the template renders.
func TestMessagesChatBody(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{
			"system blocks and string content",
			`{"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":"Hi"}]}`,
			`[{"content":"a\nb","role":"system"},{"content":"Hi","role":"user"}]`,
		},
		{
			"tool round trip",
			`{"messages":[{"role":"user","content":"w?"},` +
				`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"Let me see."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},{"type":"text","text":"and?"}]}]}`,
			`[{"content":"w?","role":"user"},` +
				`{"content":"Let me see.","reasoning_content":"t","role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"toolu_1","type":"function"}]},` +
				`{"content":"sunny","role":"tool","tool_call_id":"toolu_1"},{"content":"and?","role":"user"}]`,
		},
		{
			"tool result only, is_error",
			`{"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"boom","is_error":true}]}]}`,
			`[{"content":"w?","role":"user"},{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":"{}","name":"f"},"id":"toolu_1","type":"function"}]},` +
				`{"content":"Error: boom","role":"tool","tool_call_id":"toolu_1"}]`,
		},
		{
			"a final assistant turn is continued",
			`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Once upon"}]}`,
			`[{"content":"Hi","role":"user"},{"content":"Once upon","role":"assistant"}]`,
		},
		{
			"consecutive user turns merge",
			`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
			`[{"content":"a\nb","role":"user"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := decodeMessagesRequest([]byte(tt.body), true)
			if err != nil {
				t.Fatal(err)
			}
			typed, err := req.request()
			if err != nil {
				t.Fatal(err)
			}
			if got := chatView(typed.Messages); got != tt.want {
				t.Errorf("messages\n got %s\nwant %s", got, tt.want)
			}
			prefill := strings.Contains(tt.name, "continued")
			if tpl := typed.Template; tpl.ContinueFinalMessage != prefill || tpl.AddGenerationPrompt == prefill {
				t.Errorf("template options %+v, want continue_final_message %v", tpl, prefill)
			}
		})
	}
	// thinking switches the template's enable_thinking.
	for typ, want := range map[string]string{
		`"thinking":{"type":"enabled","budget_tokens":1024},`: `{"enable_thinking":true}`,
		`"thinking":{"type":"disabled"},`:                     `{"enable_thinking":false}`,
		``:                                                    `null`,
	} {
		req, err := decodeMessagesRequest([]byte(`{"max_tokens":2000,`+typ+`"messages":[{"role":"user","content":"Hi"}]}`), false)
		if err != nil {
			t.Fatal(err)
		}
		typed, err := req.request()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(typed.Template.Kwargs)
		if string(got) != want {
			t.Errorf("%s: chat_template_kwargs %s, want %s", typ, got, want)
		}
	}
}

// Bad input is refused with a 400 naming the field, in Anthropic's shape.
func TestMessagesBadInput(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct {
		name, path, body string
		status           int
		typ, contains    string
	}{
		{"missing max_tokens", "/v1/messages", `{"model":"test-model",` + user + `}`, 400, "invalid_request_error", "max_tokens: Field required"},
		{"zero max_tokens", "/v1/messages", `{"model":"test-model","max_tokens":0,` + user + `}`, 400, "invalid_request_error", "max_tokens"},
		{"unknown model", "/v1/messages", `{"model":"nope","max_tokens":5,` + user + `}`, 404, "not_found_error", "nope"},
		{"unknown tool_use_id", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_zz","content":"x"}]}]}`, 400, "invalid_request_error", "toolu_zz"},
		{"image block", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`, 400, "invalid_request_error", "messages[0].content[0]: the model `test-model` reads text only"},
		{"document block", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, 400, "invalid_request_error", "messages[0].content[0]: document blocks are not supported"},
		{"system role in messages", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"system","content":"x"},{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "top-level `system`"},
		{"assistant first", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"assistant","content":"Hi"},{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "messages[0].role: the first message must use the \"user\" role"},
		{"empty messages", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[]}`, 400, "invalid_request_error", "messages"},
		{"bad budget", "/v1/messages", `{"model":"test-model","max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":100},` + user + `}`, 400, "invalid_request_error", "thinking.budget_tokens"},
		{"budget over max_tokens", "/v1/messages", `{"model":"test-model","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000},` + user + `}`, 400, "invalid_request_error", "max_tokens"},
		{"temperature over 1", "/v1/messages", `{"model":"test-model","max_tokens":5,"temperature":1.5,` + user + `}`, 400, "invalid_request_error", "temperature"},
		{"unknown tool_choice", "/v1/messages", `{"model":"test-model","max_tokens":5,` + weatherTool + `,"tool_choice":{"type":"maybe"},` + user + `}`, 400, "invalid_request_error", "tool_choice.type"},
		{"tool_choice names no tool", "/v1/messages", `{"model":"test-model","max_tokens":5,` + weatherTool + `,"tool_choice":{"type":"tool","name":"x"},` + user + `}`, 400, "invalid_request_error", "\"x\""},
		{"tool_choice.name named", "/v1/messages", `{"model":"test-model","max_tokens":5,` + weatherTool + `,"tool_choice":{"type":"tool","name":"x"},` + user + `}`, 400, "invalid_request_error", "tool_choice.name"},
		{"tool name pattern", "/v1/messages", `{"model":"test-model","max_tokens":5,"tools":[{"name":"get weather","input_schema":{"type":"object"}}],` + user + `}`, 400, "invalid_request_error", "tools[0].name: String should match pattern"},
		{"server tool name pattern", "/v1/messages", `{"model":"test-model","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web search"}],` + user + `}`, 400, "invalid_request_error", "tools[0].name"},
		{"prefill ends in whitespace", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Sure, "}]}`, 400, "invalid_request_error", "final assistant content cannot end with trailing whitespace"},
		{"unknown thinking type", "/v1/messages", `{"model":"test-model","max_tokens":5,"thinking":{"type":"maybe"},` + user + `}`, 400, "invalid_request_error", "thinking.type"},
		{"thinking display", "/v1/messages", `{"model":"test-model","max_tokens":5,"thinking":{"type":"adaptive","display":"full"},` + user + `}`, 400, "invalid_request_error", "thinking.display"},
		{"effort", "/v1/messages", `{"model":"test-model","max_tokens":5,"output_config":{"effort":"huge"},` + user + `}`, 400, "invalid_request_error", "output_config.effort"},
		{"output format type", "/v1/messages", `{"model":"test-model","max_tokens":5,"output_config":{"format":{"type":"regex"}},` + user + `}`, 400, "invalid_request_error", "output_config.format.type"},
		{"output format schema", "/v1/messages", `{"model":"test-model","max_tokens":5,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string","format":"nope"}}}}},` + user + `}`, 400, "invalid_request_error", "output_config.format.schema"},
		{"cache_control type", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"forever"}}]}]}`, 400, "invalid_request_error", "messages[0].content[0].cache_control.type"},
		{"cache_control ttl", "/v1/messages", `{"model":"test-model","max_tokens":5,"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral","ttl":"2h"}}],` + user + `}`, 400, "invalid_request_error", "system[0].cache_control.ttl"},
		{"system message first", "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "messages[0].role"},
		{"context_management type", "/v1/messages", `{"model":"test-model","max_tokens":5,"context_management":[],` + user + `}`, 400, "invalid_request_error", "context_management"},
		{"not JSON", "/v1/messages", `{`, 400, "invalid_request_error", "JSON"},
		{"count_tokens unknown tool_use_id", "/v1/messages/count_tokens", `{"model":"test-model","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_zz"}]}]}`, 400, "invalid_request_error", "toolu_zz"},
		{"count_tokens unknown model", "/v1/messages/count_tokens", `{"model":"nope",` + user + `}`, 404, "not_found_error", "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			rec := doMessages(t, m, tt.path, tt.body)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			var e messagesErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Type != "error" || e.Error.Type != tt.typ {
				t.Fatalf("body %s, want an Anthropic %s (%v)", rec.Body, tt.typ, err)
			}
			if !strings.Contains(e.Error.Message, tt.contains) {
				t.Errorf("message %q does not contain %q", e.Error.Message, tt.contains)
			}
			if len(m.Requests()) != 0 {
				t.Errorf("a refused request reached the model")
			}
		})
	}
}

func TestMessagesErrorMapping(t *testing.T) {
	_, notFound := testServer(nil).Prepare(context.Background(), &frontend.Request{Model: "m"})
	tests := []struct {
		err    error
		status int
		typ    string
	}{
		{frontend.Invalid("x", "bad"), 400, "invalid_request_error"},
		{notFound, 404, "not_found_error"},
		{&http.MaxBytesError{Limit: 10}, 413, "request_too_large"},
		{scheduler.ErrQueueFull, 429, "rate_limit_error"},
		{scheduler.ErrNoWorker, 529, "overloaded_error"},
		{scheduler.ErrClosed, 529, "overloaded_error"},
		{scheduler.ErrDeadline, 504, "timeout_error"},
		{scheduler.ErrEngine, 500, "api_error"},
		{errors.New("surprise"), 500, "api_error"},
	}
	for _, tt := range tests {
		status, body := messagesErrorOf(tt.err)
		if status != tt.status || body.Type != "error" || body.Error.Type != tt.typ || body.Error.Message == "" {
			t.Errorf("%v: %d %+v, want %d %s", tt.err, status, body, tt.status, tt.typ)
		}
	}
	if _, body := messagesErrorOf(frontend.Invalid("max_tokens", "bad")); body.Error.Message != "max_tokens: bad" {
		t.Errorf("a validation error's message does not name its field: %q", body.Error.Message)
	}
	for status, typ := range map[int]string{401: "authentication_error", 403: "permission_error"} {
		if s, got := messagesStatus(status); s != status || got != typ {
			t.Errorf("%d: %d %s", status, s, got)
		}
	}
}

// count_tokens counts the prompt the request renders to, tools included.
func TestMessagesCountTokens(t *testing.T) {
	m := openaitest.NewModel(t)
	m.MaxLen = 4096
	count := func(body string) int {
		rec := doMessages(t, m, "/v1/messages/count_tokens", body)
		if rec.Code != 200 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var got struct {
			InputTokens int `json:"input_tokens"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		return got.InputTokens
	}
	plain := count(`{"model":"test-model","messages":[{"role":"user","content":"Hi"}]}`)
	rendered, _ := m.Tok.Encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", true)
	if plain != len(rendered) {
		t.Errorf("input_tokens %d, want %d", plain, len(rendered))
	}
	if sys := count(`{"model":"test-model","system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`); sys <= plain {
		t.Errorf("a system prompt added no tokens: %d <= %d", sys, plain)
	}
	if len(m.Requests()) != 0 {
		t.Errorf("count_tokens generated")
	}
	// The same request generates from exactly that many tokens.
	rec := doMessages(t, m, "/v1/messages", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`)
	if rec.Code != 200 || len(m.Requests()) != 1 || len(m.Requests()[0].Prompt) != plain {
		t.Errorf("generation prompt differs from count_tokens (%d): %s", plain, rec.Body)
	}
}

// With a reasoning parser the thinking comes back as a thinking block
// before the text, streamed as thinking_delta, whatever the cuts; with
// thinking.display "omitted" the block comes back empty.
func TestMessagesThinking(t *testing.T) {
	for _, omit := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			testMessagesThinking(t, stream, omit)
		}
	}
}

func testMessagesThinking(t *testing.T, stream, omit bool) {
	fm := openaitest.NewModel(t)
	fm.MaxLen = 256
	fm.SetScript(openaitest.ThinkScript("<think>a b</think>Hello world!"))
	m := &openaitest.ReasoningModel{Model: fm, Parser: "qwen3"}
	body := `{"model":"test-model","max_tokens":50,"messages":[{"role":"user","content":"Hi"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"earlier","signature":""},{"type":"text","text":"Yes"}]},{"role":"user","content":"And?"}]`
	if stream {
		body += `,"stream":true`
	}
	want := "a b"
	if omit {
		body += `,"thinking":{"type":"adaptive","display":"omitted"}`
		want = ""
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body+"}"))
	rec := httptest.NewRecorder()
	messagesHandler(m).ServeHTTP(rec, req)
	fm.Wait()
	if rec.Code != 200 {
		t.Fatalf("stream %v: %d %s", stream, rec.Code, rec.Body)
	}
	var got messagesResponse
	if !stream {
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
	} else {
		// Rebuild the message from the events, as the SDK does.
		for line := range strings.Lines(rec.Body.String()) {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type         string         `json:"type"`
				ContentBlock *messagesBlock `json:"content_block"`
				Delta        struct {
					Type, Text, Thinking string
					StopReason           string `json:"stop_reason"`
				} `json:"delta"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			switch ev.Type {
			case "content_block_start":
				got.Content = append(got.Content, *ev.ContentBlock)
			case "content_block_delta":
				b := &got.Content[len(got.Content)-1]
				switch ev.Delta.Type {
				case "text_delta":
					*b.Text += ev.Delta.Text
				case "thinking_delta":
					*b.Thinking += ev.Delta.Thinking
				}
			case "message_delta":
				got.StopReason = &ev.Delta.StopReason
			}
		}
	}
	if len(got.Content) != 2 || got.Content[0].Type != "thinking" || *got.Content[0].Thinking != want ||
		got.Content[0].Signature == nil || got.Content[1].Type != "text" || *got.Content[1].Text != "Hello world!" ||
		got.StopReason == nil || *got.StopReason != "max_tokens" {
		t.Errorf("stream %v, omitted %v: %s", stream, omit, rec.Body)
	}
}

// A generation that fails after the stream started ends it with an
// Anthropic error event, no message_stop; before it started, the same
// failure is a response in Anthropic's shape.
func TestMessagesGenerationError(t *testing.T) {
	script := openaitest.OutsScript(
		[]scheduler.Output{openaitest.Out("", openaitest.Token("Hello"))},
		[]scheduler.Output{{Finish: scheduler.FinishAbort, Err: scheduler.ErrEngine}},
	)
	m := openaitest.NewModel(t)
	m.Script = script
	m.Gate = make(chan struct{}, 100)
	rec := doMessages(t, m, "/v1/messages", `{"model":"test-model","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	body := rec.Body.String()
	last := body[strings.LastIndex(strings.TrimSuffix(body, "\n\n"), "\n\n")+2:]
	if !strings.Contains(body, `"text":"Hello"`) || strings.Contains(body, "message_stop") ||
		!strings.HasPrefix(last, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"") {
		t.Errorf("stream:\n%s", body)
	}
	m = openaitest.NewModel(t)
	m.Script = script
	rec = doMessages(t, m, "/v1/messages", `{"model":"test-model","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`)
	var e messagesErrorBody
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Type != "api_error" {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}

// A client that goes away cancels its generation, streamed or not.
func TestMessagesClientGone(t *testing.T) {
	for _, stream := range []bool{true, false} {
		m := openaitest.NewModel(t)
		m.Hold = true
		m.Script = openaitest.OutsScript([]scheduler.Output{openaitest.Out(scheduler.FinishNone, openaitest.Token("Hello"))})
		srv := httptest.NewServer(messagesHandler(m))
		ctx, cancel := context.WithCancel(context.Background())
		body := fmt.Sprintf(`{"model":"test-model","max_tokens":10,"messages":[{"role":"user","content":"Hi"}],"stream":%v}`, stream)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
		if !stream {
			m.OnSubmit = cancel
		}
		resp, err := http.DefaultClient.Do(req)
		if stream {
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.Contains(sc.Text(), `"text":"Hello"`) {
					break
				}
			}
			cancel()
			resp.Body.Close()
		} else if err == nil {
			resp.Body.Close()
			t.Fatal("request succeeded")
		}
		select {
		case <-m.Cancelled():
		case <-time.After(5 * time.Second):
			t.Fatalf("stream=%v: Stream.Cancel was not called after the client went away", stream)
		}
		m.Wait()
		cancel()
		srv.Close()
	}
}

// FuzzDecodeMessages: no Messages body makes the decoder or the prepare
// path it feeds panic or fail with anything but a 4xx.
// fuzzDecode checks the property every decoder's fuzz target shares:
// decoding and validating any body never panics, and every error is a
// 4xx (bad input, or a model that is not served).
func fuzzDecode(t *testing.T, body []byte, decode func([]byte) error) {
	err := decode(body)
	if err == nil {
		return
	}
	var ve *frontend.Error
	s := openai.ErrorOf(err).Status
	if !errors.As(err, &ve) && s != http.StatusNotFound {
		t.Fatalf("error is not a validation error: %T %v", err, err)
	}
	if s < 400 || s >= 500 {
		t.Fatalf("status %d for %v", s, err)
	}
}

func FuzzDecodeMessages(f *testing.F) {
	for _, s := range []string{
		`{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"test-model","max_tokens":5,"system":[{"type":"text","text":"s"}],"stop_sequences":["x"],"temperature":0.5,"top_k":2,"metadata":{"user_id":"u"},` +
			`"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},` +
			`"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ok"}],"is_error":true},{"type":"text","text":"and?"}]}]}`,
		`{"model":"test-model","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},{"role":"user","content":"x"},{"role":"assistant","content":"pre"}]}`,
		`{"messages":[null,{"role":"system"}],"tools":[1],"tool_choice":"any"}`,
	} {
		f.Add([]byte(s))
	}
	m := openaitest.NewModel(f)
	s := openai.New(openaitest.NewBackend[openai.Model](m), openai.Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecode(t, body, func(b []byte) error {
			req, err := decodeMessagesRequest(b, false)
			if err != nil {
				return err
			}
			typed, err := req.request()
			if err != nil {
				return err
			}
			_, err = s.Prepare(context.Background(), typed)
			return err
		})
	})
}
