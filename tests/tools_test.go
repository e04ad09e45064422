package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	openai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/models"
)

const weatherParams = `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["city", "unit"]}`
const addParams = `{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}`

func toolDefs() []map[string]any {
	return []map[string]any{
		{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather in a city", "parameters": json.RawMessage(weatherParams)}},
		{"type": "function", "function": map[string]any{"name": "add", "parameters": json.RawMessage(addParams)}},
	}
}

func compileSchema(t *testing.T, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// chatChunkTools is a stream chunk as far as these tests read it.
type chatChunkTools struct {
	Choices []struct {
		Delta struct {
			Content   *string
			ToolCalls []struct {
				Index    *int
				ID       string
				Type     string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
		FinishReason *string `json:"finish_reason"`
	}
}

type streamedCall struct{ id, name, args string }

// streamChatTools posts a streamed chat request and gathers its content,
// calls and finish reason.
func streamChatTools(t *testing.T, s *server, body map[string]any) (content string, calls []streamedCall, finish string) {
	t.Helper()
	body["stream"] = true
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch chatChunkTools
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				content += *c.Delta.Content
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index == nil {
					t.Fatalf("tool call delta without index: %s", line)
				}
				i := *tc.Index
				if i == len(calls) {
					if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
						t.Fatalf("first delta of call %d lacks id, type or name: %s", i, line)
					}
					calls = append(calls, streamedCall{id: tc.ID, name: tc.Function.Name})
				} else if i != len(calls)-1 || tc.ID != "" {
					t.Fatalf("delta for call %d after %d calls: %s", i, len(calls), line)
				}
				calls[i].args += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	return content, calls, finish
}

// tool_choice required: the toy model's answer is held to calls whose
// arguments match the function's schema, streamed as tool_calls deltas.
// The model's template renders tools (hermesTemplate): the calls are the
// constrained modes' own JSON (generic_tools_test.go has the generic
// format of templates without tools).
func TestToolChoiceRequiredStreamed(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{ChatTemplate: hermesTemplate})
	schemas := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherParams), "add": compileSchema(t, addParams)}
	for _, seed := range []int{0, 1, 2, 3} {
		content, calls, finish := streamChatTools(t, s, map[string]any{
			"model": "stories260K", "messages": []map[string]string{{"role": "user", "content": "What is the weather in Paris?"}},
			"tools": toolDefs(), "tool_choice": "required", "parallel_tool_calls": seed%2 == 1, "max_tokens": 300, "temperature": 1, "seed": seed,
		})
		// With parallel calls the toy model may go on calling until
		// max_tokens; without, it makes exactly one and stops.
		parallel := seed%2 == 1
		if content != "" || len(calls) == 0 || (!parallel && (len(calls) != 1 || finish != "tool_calls")) {
			t.Fatalf("seed %d: content %q, finish %q, calls %+v", seed, content, finish, calls)
		}
		if finish == "length" {
			calls = calls[:len(calls)-1] // the last one was cut
		}
		for _, c := range calls {
			sch := schemas[c.name]
			if sch == nil {
				t.Fatalf("seed %d: call to unknown function %q", seed, c.name)
			}
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.args))
			if err != nil {
				t.Fatalf("seed %d: arguments %q are not JSON: %v", seed, c.args, err)
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("seed %d: arguments %s do not match %s's schema: %v", seed, c.args, c.name, err)
			}
		}
	}
}

// A named function and parallel_tool_calls false, through the go-openai
// client, not streamed; then the call and its result go back as history.
// The template renders tools, as above.
func TestToolChoiceNamedAndRoundTrip(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{ChatTemplate: hermesTemplate})
	client := openaiClient(s)
	var tools []openai.Tool
	for _, d := range []struct{ name, params string }{{"get_weather", weatherParams}, {"add", addParams}} {
		tools = append(tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: d.name, Parameters: json.RawMessage(d.params)}})
	}
	no := false
	req := openai.ChatCompletionRequest{
		Model: "stories260K", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Add 2 and 3."}},
		Tools: tools, ToolChoice: openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "add"}},
		ParallelToolCalls: &no, MaxCompletionTokens: 200,
	}
	resp, err := client.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "add" || resp.Choices[0].FinishReason != openai.FinishReasonToolCalls {
		t.Fatalf("answer %+v, finish %q", msg, resp.Choices[0].FinishReason)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(msg.ToolCalls[0].Function.Arguments))
	if err != nil || compileSchema(t, addParams).Validate(v) != nil {
		t.Fatalf("arguments %q: %v", msg.ToolCalls[0].Function.Arguments, err)
	}
	// The call and its result, back in the conversation.
	req.Messages = append(req.Messages, msg, openai.ChatCompletionMessage{Role: "tool", ToolCallID: msg.ToolCalls[0].ID, Content: "5"})
	req.ToolChoice = "none"
	if _, err := client.CreateChatCompletion(context.Background(), req); err != nil {
		t.Fatalf("history with a tool call and its result: %v", err)
	}
	// Required with parallel calls off: exactly one call.
	req.Messages = req.Messages[:1]
	req.ToolChoice = "required"
	resp, err = client.CreateChatCompletion(context.Background(), req)
	if err != nil || len(resp.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("required without parallel calls: %+v %v", resp, err)
	}
}

// tool_choice auto with a template that writes Hermes calls: the answer's
// <tool_call> block becomes a call (the toy model is made to write one
// with guided_choice) and none of its text reaches content, streamed or not.
func TestToolChoiceAutoParsesCalls(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	const tmpl = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if tools %}<tool_call>{{ tools | map(attribute="function") | map(attribute="name") | join(",") }}</tool_call>
{% endif %}<|im_start|>assistant
`
	answer := "Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>"
	body := func() map[string]any {
		return map[string]any{
			"model": "stories260K", "messages": []map[string]string{{"role": "user", "content": "Weather in Paris?"}},
			"tools": toolDefs(), "chat_template": tmpl, "guided_choice": []string{answer}, "max_tokens": 150,
		}
	}
	var e errBody
	if code, _ := s.post(t, "/v1/chat/completions", body(), &e); code != 200 {
		t.Fatalf("%d %+v", code, e)
	}
	content, calls, finish := streamChatTools(t, s, body())
	if strings.TrimSpace(content) != "Let me check." || len(calls) != 1 || calls[0].name != "get_weather" ||
		calls[0].args != `{"city": "Paris", "unit": "c"}` || finish != "tool_calls" {
		t.Errorf("streamed: content %q, calls %+v, finish %q", content, calls, finish)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content   *string
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if code, _ := s.post(t, "/v1/chat/completions", body(), &resp); code != 200 {
		t.Fatal(code)
	}
	m := resp.Choices[0].Message
	if m.Content == nil || strings.TrimSpace(*m.Content) != "Let me check." || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID == "" ||
		m.ToolCalls[0].Function.Arguments != `{"city": "Paris", "unit": "c"}` || resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("not streamed: %+v", resp)
	}
	// tool_choice none: the same answer stays content.
	b := body()
	b["tool_choice"] = "none"
	resp.Choices = nil
	if code, _ := s.post(t, "/v1/chat/completions", b, &resp); code != 200 || len(resp.Choices[0].Message.ToolCalls) != 0 ||
		!strings.Contains(*resp.Choices[0].Message.Content, "<tool_call>") {
		t.Errorf("tool_choice none: %d %+v", code, resp)
	}
}

func TestToolsBadInput(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	msgs := []map[string]string{{"role": "user", "content": "Hi"}}
	tests := []struct {
		name  string
		extra map[string]any
		param string
	}{
		{"tool_choice naming an undefined function", map[string]any{"tools": toolDefs(), "tool_choice": map[string]any{"type": "function", "function": map[string]string{"name": "fly"}}}, "tool_choice.function.name"},
		{"tool_choice without tools", map[string]any{"tool_choice": "required"}, "tool_choice"},
		{"unknown tool_choice", map[string]any{"tools": toolDefs(), "tool_choice": "always"}, "tool_choice"},
		{"unsupported schema keyword", map[string]any{"tool_choice": "required", "tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "f",
			"parameters": json.RawMessage(`{"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}}`)}}}}, "tools[0].function.parameters"},
		{"required with response_format", map[string]any{"tools": toolDefs(), "tool_choice": "required", "response_format": map[string]string{"type": "json_object"}}, "tool_choice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"model": "stories260K", "messages": msgs, "max_tokens": 5}
			for k, v := range tt.extra {
				body[k] = v
			}
			var e errBody
			if code, _ := s.post(t, "/v1/chat/completions", body, &e); code != 400 || e.Error.Param != tt.param {
				t.Errorf("%d %+v, want 400 naming %s", code, e, tt.param)
			}
		})
	}
}
