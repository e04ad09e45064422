package frontend

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmserve/llmserve/tokenizer"
)

// hermes renders the tools' names, as templates with tool support do.
const hermes = `{%- for m in messages -%}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}{%- if tools %}<tools>{{ tools | map(attribute="function") | map(attribute="name") | join(",") }}</tools>{% endif -%}
<|im_start|>assistant
`

func weatherTools(t *testing.T) []Tool {
	t.Helper()
	desc := "Weather in a city"
	var tools []Tool
	for _, f := range []struct {
		name   string
		desc   *string
		params string
	}{{"get_weather", &desc, `{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`}, {"now", nil, ""}} {
		var params json.RawMessage
		if f.params != "" {
			params = json.RawMessage(f.params)
		}
		def, err := FunctionTool(f.name, f.desc, params)
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, Tool{Name: f.name, Parameters: params, Definition: def})
	}
	return tools
}

func TestRendersTools(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want bool
	}{
		{"", false},    // the fallback
		{echo, true},   // shows the names
		{hermes, true}, //
		{"{{ messages[0].content }}", false},
		{"{{ raise_exception('no') }}", true}, // fails: used as it is
	} {
		ct, err := tokenizer.NewChatTemplate(tt.src, "<s>", "</s>")
		if err != nil {
			t.Fatal(err)
		}
		if got := RendersTools(ct); got != tt.want || sourceRendersTools(ct.Source()) != tt.want {
			t.Errorf("%q: %v, want %v", tt.src, got, tt.want)
		}
	}
}

// The generic format: the tools and the answer format in the system
// message, earlier calls in their assistant turns, tool results as user
// turns; a template that renders tools gets them as before.
func TestGenericPrompt(t *testing.T) {
	tools := weatherTools(t)
	msgs := []Message{
		{Role: "user", Content: "Weather in Paris?", HasContent: true},
		{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{ID: "call_1", Type: "function", Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{Role: "tool", Content: "sunny", HasContent: true, ToolCallID: "call_1"},
	}
	fallback := testTokenizer(t, "")
	render := func(tok *tokenizer.Tokenizer, req *Request) (string, int) {
		t.Helper()
		req.Template.AddGenerationPrompt = true
		toks, text, err := NewPrompt(req).Render(tok, req.Messages, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return text, len(toks)
	}
	without, nWithout := render(fallback, &Request{Messages: msgs})
	with, nWith := render(fallback, &Request{Messages: msgs, Tools: tools})
	if nWith <= nWithout {
		t.Errorf("tokens with tools %d, without %d", nWith, nWithout)
	}
	for _, want := range []string{
		"<|im_start|>system\nTools:\n",
		`{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}` + "\n",
		`{"name":"now"}` + "\n",
		`Answer {"tool_call": {"name": ..., "arguments": {...}}} to call one, else {"response": "..."}.<|im_end|>`,
		"<|im_start|>user\nWeather in Paris?<|im_end|>\n",
		"<|im_start|>assistant\n" + `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}<|im_end|>` + "\n",
		"<|im_start|>user\n" + `{"tool_response":{"name":"get_weather","content":"sunny"}}<|im_end|>` + "\n<|im_start|>assistant\n",
	} {
		if !strings.Contains(with, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, with)
		}
	}
	if strings.Contains(without, "tool") != true || strings.Contains(without, "Tools:") {
		t.Errorf("without tools: %q", without)
	}

	// A system message keeps its text first; no parallel calls, no
	// tool_calls line; a named choice says so.
	no := false
	sys := append([]Message{{Role: "system", Content: "Be brief.", HasContent: true}}, msgs[0])
	text, _ := render(fallback, &Request{Messages: sys, Tools: tools, ParallelToolCalls: &no, ToolChoice: ToolChoice{Mode: ToolNamed, Name: "now"}})
	if !strings.HasPrefix(text, "<|im_start|>system\nBe brief.\n\nTools:\n") || strings.Contains(text, "tool_calls") ||
		!strings.Contains(text, "}\n"+`Answer with the arguments of "now", a JSON object.<|im_end|>`) || strings.Count(text, "<|im_start|>system") != 1 {
		t.Errorf("named, with a system message:\n%s", text)
	}
	// tool_choice none: the tools are not offered.
	if text, _ := render(fallback, &Request{Messages: msgs, Tools: tools, ToolChoice: ToolChoice{Mode: ToolNone}}); text != without {
		t.Errorf("tool_choice none:\n%s", text)
	}
	// A template that renders tools: as before, for the model's template
	// and a client's.
	h := testTokenizer(t, hermes)
	text, _ = render(h, &Request{Messages: msgs[:1], Tools: tools})
	if text != "<|im_start|>user\nWeather in Paris?<|im_end|>\n<tools>get_weather,now</tools><|im_start|>assistant" {
		t.Errorf("hermes: %q", text)
	}
	text, _ = render(fallback, &Request{Messages: msgs[:1], Tools: tools, Template: Template{Source: hermes}})
	if text != "<|im_start|>user\nWeather in Paris?<|im_end|>\n<tools>get_weather,now</tools><|im_start|>assistant" {
		t.Errorf("hermes as the client's template: %q", text)
	}
	// A client's template without tool support gets the generic format.
	text, _ = render(h, &Request{Messages: msgs[:1], Tools: tools, Template: Template{Source: tokenizer.FallbackChatTemplate}})
	if !strings.Contains(text, "Tools:\n") {
		t.Errorf("the fallback as the client's template: %q", text)
	}
}

// The plan: generic for a template without tools, its grammar's shapes.
func TestGenericToolPlan(t *testing.T) {
	tools := weatherTools(t)
	no := false
	for _, tt := range []struct {
		req  Request
		want string
	}{
		{Request{Tools: tools, ToolChoice: ToolChoice{Mode: ToolRequired}}, `{"anyOf": [{"type": "object", "properties": {"tool_call": {"anyOf": [`},
		{Request{Tools: tools, ToolChoice: ToolChoice{Mode: ToolRequired}, ParallelToolCalls: &no}, `{"type": "object", "properties": {"tool_call": {"anyOf": [`},
		{Request{Tools: tools, ToolChoice: ToolChoice{Mode: ToolNamed, Name: "now"}}, `{"type": "object", "properties": {}}`},
	} {
		tp, err := NewToolPlan(&tt.req, tokenizer.FallbackChatTemplate)
		if err != nil || !tp.Generic || tp.Parser != "" {
			t.Fatalf("%+v %v", tp, err)
		}
		if s := string(tp.Schema()); !strings.HasPrefix(s, tt.want) || !json.Valid(tp.Schema()) {
			t.Errorf("schema %s, want it to start %s", s, tt.want)
		}
		if g, err := tp.Grammar(nil, "tools[%d].parameters"); err != nil || g == "" {
			t.Errorf("grammar %q %v", g, err)
		}
	}
	tp, _ := NewToolPlan(&Request{Tools: tools}, tokenizer.FallbackChatTemplate)
	if tp.Mode != ToolAuto || !tp.Generic || !tp.SplitsToolCalls() {
		t.Errorf("auto: %+v", tp)
	}
	tp, _ = NewToolPlan(&Request{Tools: tools}, hermes)
	if tp.Generic || tp.Parser != tokenizer.ToolCallParserFor(hermes) {
		t.Errorf("hermes: %+v", tp)
	}
	tp, _ = NewToolPlan(&Request{Tools: tools, ToolChoice: ToolChoice{Mode: ToolNone}}, tokenizer.FallbackChatTemplate)
	if tp.Generic || tp.SplitsToolCalls() {
		t.Errorf("none: %+v", tp)
	}
}

type splitCall struct{ name, args string }

// split runs answer through tp's splitter in pushes of about size bytes.
func split(tp *ToolPlan, answer string, size int) (string, []splitCall) {
	s := newToolSplitter(tp)
	var content string
	var calls []splitCall
	add := func(c string, ds []ToolCallDelta) {
		content += c
		for _, d := range ds {
			if d.ID != "" {
				calls = append(calls, splitCall{name: d.Name})
			}
			calls[d.Index].args += d.Arguments
		}
	}
	// Cut at character boundaries, as the detokenizer hands out text.
	for i := 0; i < len(answer); {
		j := min(i+size, len(answer))
		for j < len(answer) && !utf8.RuneStart(answer[j]) {
			j++
		}
		add(s.push(answer[i:j]))
		i = j
	}
	add(s.flush())
	return content, calls
}

// The answers in the generic format become calls and content, however
// the text is cut.
func TestGenericAnswers(t *testing.T) {
	tools := weatherTools(t)
	plan := func(c ToolChoice, parallel bool) *ToolPlan {
		tp, err := NewToolPlan(&Request{Tools: tools, ToolChoice: c, ParallelToolCalls: &parallel}, tokenizer.FallbackChatTemplate)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	auto := plan(ToolChoice{}, true)
	weather := splitCall{"get_weather", `{"city": "Paris"}`}
	for _, tt := range []struct {
		tp      *ToolPlan
		answer  string
		content string
		calls   []splitCall
	}{
		{auto, "It is sunny.", "It is sunny.", nil},
		{auto, "  \n It is {sunny}.", "  \n It is {sunny}.", nil},
		{auto, ` {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}` + "\n", "", []splitCall{weather}},
		{auto, `{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "now"}]}`, "", []splitCall{weather, {"now", "{}"}}},
		{auto, `{"tool_call": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}`, "", []splitCall{weather}},
		{auto, `{"response": "It is \"sunny\"."}`, `It is "sunny".`, nil},
		{auto, `{"response": {"a": 1}}`, `{"a": 1}`, nil},
		{auto, `{"answer": "x"}`, `{"answer": "x"}`, nil},
		{auto, `{"tool_call": {"arguments": {}}}`, `{"tool_call": {"arguments": {}}}`, nil},
		{auto, `{"response": "cut`, `{"response": "cut`, nil},
		{auto, `{"response": "a"} and more`, `{"response": "a"} and more`, nil},
		{plan(ToolChoice{Mode: ToolRequired}, true), `{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name":"now","arguments":{}}]}`, "", []splitCall{weather, {"now", "{}"}}},
		{plan(ToolChoice{Mode: ToolRequired}, true), ` { "tool_call" : {"name": "get_weather", "arguments": {"city": "Paris"}}}`, "", []splitCall{weather}},
		{plan(ToolChoice{Mode: ToolRequired}, false), `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`, "", []splitCall{weather}},
		{plan(ToolChoice{Mode: ToolNamed, Name: "get_weather"}, true), `{"city": "Paris"}`, "", []splitCall{weather}},
	} {
		for _, size := range []int{1, 3, 1000} {
			content, calls := split(tt.tp, tt.answer, size)
			if content != tt.content || len(calls) != len(tt.calls) {
				t.Errorf("%q in pushes of %d: content %q, calls %+v; want %q, %+v", tt.answer, size, content, calls, tt.content, tt.calls)
				continue
			}
			for i := range calls {
				if calls[i] != tt.calls[i] {
					t.Errorf("%q in pushes of %d: call %d %+v, want %+v", tt.answer, size, i, calls[i], tt.calls[i])
				}
			}
		}
	}
}

// FuzzGenericAnswer: the generic format's splitters read any answer, cut
// anywhere, the same as whole, and an answer that is not one of the
// format's shapes comes back as it was.
func FuzzGenericAnswer(f *testing.F) {
	for _, s := range []string{
		`{"tool_call": {"name": "f", "arguments": {"a": [1, "}"]}}}`,
		`{"tool_calls": [{"name": "f", "arguments": {}}, {"name": "g"}]}`,
		`{"response": "hi \"there\""}`, ` text {`, `{"response": 1}`, `{"tool_call": {"name": ""}}`, `{`, ``,
	} {
		f.Add(s, uint8(3))
	}
	tools := []Tool{{Name: "f"}, {Name: "g"}}
	plans := []*ToolPlan{
		{Mode: ToolAuto, Tools: tools, Generic: true},
		{Mode: ToolRequired, Tools: tools, Generic: true},
		{Mode: ToolRequired, Tools: tools, Generic: true, Parallel: true},
		{Mode: ToolRequired, Tools: tools},
	}
	f.Fuzz(func(t *testing.T, answer string, size uint8) {
		for _, tp := range plans {
			content, calls := split(tp, answer, 1000000)
			c2, calls2 := split(tp, answer, int(size)%16+1)
			if content != c2 || len(calls) != len(calls2) {
				t.Fatalf("mode %d: %q whole: %q %+v; cut: %q %+v", tp.Mode, answer, content, calls, c2, calls2)
			}
			for i := range calls {
				if calls[i] != calls2[i] {
					t.Fatalf("mode %d: %q call %d: %+v cut %+v", tp.Mode, answer, i, calls[i], calls2[i])
				}
			}
			if tp.Mode == ToolAuto && len(calls) == 0 {
				if _, _, ok := parseGeneric(answer); !ok && content != answer {
					t.Fatalf("%q came back as %q", answer, content)
				}
			}
		}
	})
}

// gemma refuses a system turn and turns that do not alternate, as
// Gemma's template does; it renders no tools.
const gemma = `{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}` +
	`{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}` +
	`<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}
{{ m['content'] }}<end_of_turn>
{% endfor %}<start_of_turn>model
`

// A template that refuses a system turn gets the tools in the first turn,
// and parallel calls' results in one user turn, so that turns alternate.
func TestGenericPromptStrictTemplate(t *testing.T) {
	tools := weatherTools(t)
	tok := testTokenizer(t, gemma)
	msgs := []Message{
		{Role: "user", Content: "Weather in Paris and London?", HasContent: true},
		{Role: "assistant", ToolCalls: []tokenizer.ToolCall{
			{ID: "a", Type: "function", Name: "get_weather", Arguments: `{"city": "Paris"}`},
			{ID: "b", Type: "function", Name: "get_weather", Arguments: `{"city": "London"}`}}},
		{Role: "tool", Content: "sunny", HasContent: true, ToolCallID: "a"},
		{Role: "tool", Content: "rain", HasContent: true, ToolCallID: "b"},
	}
	req := &Request{Messages: msgs, Tools: tools, Template: Template{AddGenerationPrompt: true}}
	text, err := NewPrompt(req).Apply(tok, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<start_of_turn>user\nTools:\n{\"name\":\"get_weather\"",
		`to call one, else {"response": "..."}.` + "\n\nWeather in Paris and London?<end_of_turn>",
		"<start_of_turn>model\n" + `{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "London"}}]}<end_of_turn>`,
		"<start_of_turn>user\n" + `{"tool_response":{"name":"get_weather","content":"sunny"}}` + "\n" + `{"tool_response":{"name":"get_weather","content":"rain"}}<end_of_turn>`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, text)
		}
	}
	// A system message the template refuses stays an error.
	sys := append([]Message{{Role: "system", Content: "Be brief.", HasContent: true}}, msgs...)
	_, err = NewPrompt(&Request{Messages: sys, Tools: tools}).Apply(tok, sys)
	badParam(t, err, "messages")
}
