package anthropic

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/frontend"
)

// claudeCodeBody is a request shaped as Claude Code 2.1's (its golden
// shape is tests/testdata/agents/claude-code): adaptive thinking with
// display omitted, context_management, output_config.effort, metadata,
// cache_control on system and message blocks, a system message in the
// conversation, a thinking block with its signature sent back, a tool with
// defer_loading, a server tool, and a tool_result of a tool search.
const claudeCodeBody = `{"model":"test-model","max_tokens":32000,"stream":false,
 "thinking":{"type":"adaptive","display":"omitted"},
 "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
 "output_config":{"effort":"high"},
 "metadata":{"user_id":"{\"device_id\":\"d\",\"session_id\":\"s\"}"},
 "system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1"},{"type":"text","text":"You are an agent.","cache_control":{"type":"ephemeral"}}],
 "tools":[{"name":"Read","description":"Reads a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}},
  {"name":"DeferredToolPlaceholder","description":"A deferred tool.","input_schema":{"type":"object"},"defer_loading":true,"cache_control":{"type":"ephemeral","ttl":"1h"}},
  {"type":"web_search_20250305","name":"web_search","max_uses":3}],
 "messages":[
  {"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"Read note.txt","cache_control":{"type":"ephemeral"}}]},
  {"role":"system","content":[{"type":"text","text":"# Environment\nlinux"}]},
  {"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"c2ln"},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"note.txt"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"pelican"},{"type":"tool_reference","tool_name":"DeferredToolPlaceholder"}],"cache_control":{"type":"ephemeral"}}]}]}`

// Everything Claude Code sends is understood or knowingly ignored: its
// request is answered (on the ?beta=true path it uses), with a request-id
// header, the system message read as the user's text where it stands, the
// server tool not offered, the deferred one offered.
func TestMessagesClaudeCodeRequest(t *testing.T) {
	m := openaitest.NewModel(t)
	m.MaxLen = 40000
	rec := doMessages(t, m, "/v1/messages?beta=true", claudeCodeBody)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if id := rec.Header().Get("request-id"); !strings.HasPrefix(id, "req_") {
		t.Errorf("request-id %q, want req_...", id)
	}
	req, err := decodeMessagesRequest([]byte(claudeCodeBody), false)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := req.request()
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, msg := range typed.Messages {
		roles = append(roles, msg.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool" {
		t.Errorf("roles %s, want system,user,assistant,tool", got)
	}
	if u := typed.Messages[1].Content; !strings.HasSuffix(u, "Read note.txt\n# Environment\nlinux") {
		t.Errorf("user turn %q: the system message should follow its text", u)
	}
	var names []string
	for _, tool := range typed.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "Read,DeferredToolPlaceholder" {
		t.Errorf("tools offered %s", got)
	}
	// Adaptive thinking at effort high: three quarters of max_tokens.
	if typed.ThinkingBudget == nil || *typed.ThinkingBudget != 24000 || typed.Fields.Thinking != "output_config.effort" {
		t.Errorf("thinking budget %v (%s), want 24000 (output_config.effort)", typed.ThinkingBudget, typed.Fields.Thinking)
	}
}

// output_config.format's JSON schema becomes the answer's constraint,
// named by its field.
func TestMessagesOutputFormat(t *testing.T) {
	body := `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"Hi"}],
	 "output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}}}}`
	req, err := decodeMessagesRequest([]byte(body), false)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := req.request()
	if err != nil {
		t.Fatal(err)
	}
	if len(typed.Constraints) != 1 || typed.Constraints[0].Kind != frontend.JSONSchema || typed.Constraints[0].Param != "output_config.format.schema" {
		t.Fatalf("constraints %+v", typed.Constraints)
	}
	if _, err := typed.Constraints[0].Grammar(); err != nil {
		t.Fatal(err)
	}
}

// A silent stream gets a ping each interval of the clock's time, and none
// after stop; events written in between restart the interval.
func TestMessagesPing(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	events := make(chan string, 16)
	p := startPinger(fake, 5*time.Second, func(event string, v any) error {
		b, _ := json.Marshal(v)
		events <- event + " " + string(b)
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.WaitArmed(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	fake.Advance(5 * time.Second)
	if got := <-events; got != `ping {"type":"ping"}` {
		t.Fatalf("got %s, want a ping", got)
	}
	// The ping re-armed the timer; a write restarts it.
	if err := fake.WaitArmed(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	fake.Advance(3 * time.Second)
	if err := p.send("message_start", messagesTypeEvent{Type: "message_start"}); err != nil {
		t.Fatal(err)
	}
	if got := <-events; !strings.HasPrefix(got, "message_start") {
		t.Fatalf("got %s", got)
	}
	fake.Advance(3 * time.Second) // 3 s after the write: no ping yet
	if err := fake.WaitArmed(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	fake.Advance(2 * time.Second)
	if got := <-events; got != `ping {"type":"ping"}` {
		t.Fatalf("got %s, want a ping", got)
	}
	p.stop()
	fake.Advance(time.Minute)
	select {
	case got := <-events:
		t.Fatalf("%s after stop", got)
	default:
	}
}

// A prompt too long for the context is worded as Anthropic's, which
// Claude Code reads for the window: alone, and with max_tokens.
func TestMessagesTooLong(t *testing.T) {
	for _, tt := range []struct {
		words, maxTokens int
		want             string
	}{
		{60, 1, "prompt is too long: 191 tokens > 64 maximum"},
		{4, 60, "input length and `max_tokens` exceed context limit: 23 + 60 > 64, decrease input length or `max_tokens` and try again"},
	} {
		m := openaitest.NewModel(t)
		body := fmt.Sprintf(`{"model":"test-model","max_tokens":%d,"messages":[{"role":"user","content":%q}]}`, tt.maxTokens, strings.Repeat("word ", tt.words))
		rec := doMessages(t, m, "/v1/messages", body)
		var e messagesErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusBadRequest || e.Error.Message != tt.want {
			t.Errorf("%d words, max_tokens %d: %d %s, want %q", tt.words, tt.maxTokens, rec.Code, rec.Body, tt.want)
		}
	}
	msg, ok := tooLongMessage("This model's maximum context length is 64 tokens. However, your request has 70 input tokens. Please reduce the length of the input messages.")
	if !ok || msg != "prompt is too long: 70 tokens > 64 maximum" {
		t.Errorf("got %q %v", msg, ok)
	}
}

// The router's 401 carries a request-id too.
func TestWriteAuthErrorRequestID(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteAuthError(rec, "no key")
	if id := rec.Header().Get("request-id"); rec.Code != http.StatusUnauthorized || !strings.HasPrefix(id, "req_") || len(id) < 20 {
		t.Errorf("%d, request-id %q", rec.Code, id)
	}
}

// While the prompt is prefilled the stream pings, before message_start
// (the SDKs skip pings wherever they come); message_start follows with the
// first piece of the answer, its usage message_delta's.
func TestMessagesPingWhilePrefilling(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Cached = 3
	m.Release = make(chan struct{})
	fake := clock.NewFake(time.Unix(0, 0))
	r := chi.NewRouter()
	Mount(r, testServer(nil, m), Options{Clock: fake, PingInterval: 5 * time.Second})
	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"test-model","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.WaitArmed(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	fake.Advance(5 * time.Second)
	sc := bufio.NewScanner(resp.Body)
	next := func() string {
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return ev
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return ""
	}
	if ev := next(); ev != `{"type":"ping"}` {
		t.Fatalf("first event %s, want a ping while the prompt is prefilled", ev)
	}
	close(m.Release)
	var start, delta struct {
		Message struct{ Usage messagesUsage } `json:"message"`
		Usage   messagesUsage                 `json:"usage"`
	}
	for {
		ev := next()
		switch {
		case strings.HasPrefix(ev, `{"type":"message_start"`):
			_ = json.Unmarshal([]byte(ev), &start)
		case strings.HasPrefix(ev, `{"type":"message_delta"`):
			_ = json.Unmarshal([]byte(ev), &delta)
		case ev == `{"type":"message_stop"}`:
			s, d := start.Message.Usage, delta.Usage
			if s.InputTokens != d.InputTokens || s.CacheReadInputTokens != d.CacheReadInputTokens || d.CacheReadInputTokens != 3 {
				t.Errorf("message_start usage %+v, message_delta usage %+v: want the same prompt counts, 3 cached", s, d)
			}
			m.Wait()
			return
		}
	}
}
