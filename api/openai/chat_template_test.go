package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
)

// promptText is the text of the prompt the model was given.
func promptText(t *testing.T, m *openaitest.Model) string {
	t.Helper()
	reqs := m.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the model, want 1", len(reqs))
	}
	var b strings.Builder
	for _, id := range reqs[0].Prompt {
		b.Write(openaitest.Vocab.Piece(id, true))
	}
	return b.String()
}

// The prompt-shaping fields of a chat request, through HTTP: each case's
// rendered prompt is what the model receives.
func TestChatPromptFields(t *testing.T) {
	const echo = `{%- for m in messages -%}[{{ m.role }}:{{ m.content }}` +
		`{%- if m.tool_calls %} calls={{ m.tool_calls | tojson }}{% endif -%}` +
		`{%- if m.tool_call_id %} id={{ m.tool_call_id }}{% endif -%}` +
		`{%- if m.reasoning_content %} think={{ m.reasoning_content }}{% endif %}]{% endfor -%}` +
		`{%- if tools is not none %} tools={{ tools | tojson }}{% endif -%}` +
		`{%- if documents is not none %} docs={{ documents | length }}{% endif -%}` +
		`{%- if enable_thinking is defined %} thinking={{ enable_thinking }}{% endif -%}` +
		`{%- if add_generation_prompt %}<gen>{% endif -%}`
	tests := []struct {
		name, fields, messages, want string
	}{
		{
			name:     "defaults",
			messages: `[{"role":"user","content":"Hi"}]`,
			want:     "[user:Hi]<gen>",
		},
		{
			name:     "no generation prompt",
			fields:   `"add_generation_prompt":false,`,
			messages: `[{"role":"user","content":"Hi"}]`,
			want:     "[user:Hi]",
		},
		{
			name:     "tools and calls",
			fields:   `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],`,
			messages: `[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}]`,
			want: `[user:Hi][assistant: calls=[{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]][tool:sunny id=c1]` +
				` tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]<gen>`,
		},
		{
			name:     "arguments as an object, reasoning",
			messages: `[{"role":"assistant","content":"a","reasoning_content":"hmm","tool_calls":[{"id":"c","function":{"name":"f","arguments":{"z":1,"a":2}}}]}]`,
			fields:   `"add_generation_prompt":false,`,
			want:     `[assistant:a calls=[{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": 2}}}] think=hmm]`,
		},
		{
			name:     "kwargs and documents",
			fields:   `"chat_template_kwargs":{"enable_thinking":false},"documents":[{"title":"a","text":"b"}],`,
			messages: `[{"role":"user","content":"Hi"}]`,
			want:     "[user:Hi] docs=1 thinking=False<gen>",
		},
		{
			name:     "continue final message",
			fields:   `"add_generation_prompt":false,"continue_final_message":true,`,
			messages: `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello wo"}]`,
			want:     "[user:Hi][assistant:Hello wo",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.MaxLen = 4096
			m.SetScript(openaitest.HelloScript)
			h := testHandler(m)
			body := `{"model":"test-model",` + tt.fields + `"chat_template":` + jsonString(echo) + `,"messages":` + tt.messages + `}`
			rec := openaitest.Do(t, h, m, http.MethodPost, "/v1/chat/completions", body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			// The template writes no BOS, so the tokenizer adds it.
			if got := promptText(t, m); got != "<s>"+tt.want {
				t.Errorf("prompt\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// The model's own template (ChatML here) with continue_final_message
// leaves the assistant's turn open.
func TestChatContinueFinalMessageModelTemplate(t *testing.T) {
	m := openaitest.NewModel(t)
	m.SetScript(openaitest.HelloScript)
	body := `{"model":"test-model","add_generation_prompt":false,"continue_final_message":true,` +
		`"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]}`
	rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	const want = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello"
	if got := promptText(t, m); !strings.HasSuffix(got, want) {
		t.Errorf("prompt %q, want it to end with %q", got, want)
	}
}

func TestChatPromptFieldErrors(t *testing.T) {
	user := `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct {
		name, body, param, msg string
	}{
		{"both generation prompt and continue", `"continue_final_message":true,` + user, "continue_final_message", "cannot both be true"},
		{"continue without the final message", `"add_generation_prompt":false,"continue_final_message":true,"chat_template":"x",` + user, "continue_final_message", "does not appear"},
		{"template syntax", `"chat_template":"{% if %}",` + user, "chat_template", "not a valid Jinja"},
		{"template refuses", `"chat_template":"{{ raise_exception('no users') }}",` + user, "chat_template", "no users"},
		{"template loops", `"chat_template":"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",` + user, "chat_template", "loop iterations"},
		{"template recursion", `"chat_template":"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",` + user, "chat_template", "nested deeper"},
		{"empty template", `"chat_template":"",` + user, "chat_template", "must not be empty"},
		{"template type", `"chat_template":5,` + user, "chat_template", ""},
		{"kwargs type", `"chat_template_kwargs":[1],` + user, "chat_template_kwargs", ""},
		{"tools type", `"tools":{},` + user, "tools", ""},
		{"tool not object", `"tools":[1],` + user, "tools[0]", "tool object"},
		{"tool type", `"tools":[{"type":"retrieval","function":{"name":"f"}}],` + user, "tools[0].type", "only \"function\""},
		{"tool without function", `"tools":[{"type":"function"}],` + user, "tools[0].function", "needs a function"},
		{"tool without name", `"tools":[{"type":"function","function":{"description":"d"}}],` + user, "tools[0].function.name", "needs a name"},
		{"tool parameters", `"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}],` + user, "tools[0].function.parameters", "JSON Schema"},
		{"document type", `"documents":["x"],` + user, "documents[0]", "document object"},
		{"tool_calls type", `"messages":[{"role":"assistant","content":"a","tool_calls":{}}]`, "messages[0].tool_calls", ""},
		{"tool call without function", `"messages":[{"role":"assistant","tool_calls":[{"id":"c"}]}]`, "messages[0].tool_calls[0].function", "function object"},
		{"tool call without name", `"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}]`, "messages[0].tool_calls[0].function.name", "name"},
		{"tool call arguments", `"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}]`, "messages[0].tool_calls[0].function.arguments", "not valid JSON"},
		{"tool call arguments type", `"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":5}}]}]`, "messages[0].tool_calls[0].function.arguments", ""},
		{"tool_call_id type", `"messages":[{"role":"tool","content":"x","tool_call_id":5}]`, "messages[0].tool_call_id", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.SetScript(openaitest.HelloScript)
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, "/v1/chat/completions", `{"model":"test-model",`+tt.body+`}`)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			e := errorBody(t, rec.Body.Bytes())
			if str(e.Param) != tt.param || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("param %q message %q, want param %q and a message containing %q", str(e.Param), e.Message, tt.param, tt.msg)
			}
		})
	}
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
