package frontend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

// echo shows what the template sees.
const echo = `{%- for m in messages -%}[{{ m.role }}:{{ m.content }}` +
	`{%- if m.tool_calls %} calls={{ m.tool_calls | length }}{% endif -%}]{% endfor -%}` +
	`{%- if tools is not none %} tools={{ tools | map(attribute="function") | map(attribute="name") | join(",") }}{% endif -%}` +
	`{%- if add_generation_prompt %}<gen>{% endif -%}`

func testTokenizer(t *testing.T, template string) *tokenizer.Tokenizer {
	t.Helper()
	v := tokenizertest.New(tokenizertest.Spec{Pieces: []string{"Hi"}})
	tok, err := tokenizer.New(v, template)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func badParam(t *testing.T, err error, param string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Kind != BadRequest || e.Param != param {
		t.Fatalf("err %v, want a BadRequest naming %q", err, param)
	}
}

// A request renders through the template with its options, and errors
// name its protocol's fields.
func TestPromptRender(t *testing.T) {
	tok := testTokenizer(t, echo)
	def, err := FunctionTool("f", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := &Request{
		Messages: []Message{{Role: "developer", Content: "be", HasContent: true}, {Role: "user", Content: "Hi", HasContent: true}},
		Template: Template{AddGenerationPrompt: true},
		Tools:    []Tool{{Name: "f", Definition: def}},
		Fields:   Fields{Messages: "input"},
	}
	p := NewPrompt(req)
	if p.Param != "input" || p.Size != len(def) {
		t.Fatalf("prompt %+v", p)
	}
	toks, text, err := p.Render(tok, req.Messages, 1000)
	if err != nil || text != "[system:be][user:Hi] tools=f<gen>" || len(toks) == 0 {
		t.Fatalf("render %q %v %v", text, toks, err)
	}
	_, _, err = p.Render(tok, req.Messages, 10)
	badParam(t, err, "input")
	badParam(t, p.CheckSize(req.Messages, 4, 3), "input")
	p.Template = "{% if %}"
	_, err = p.Apply(tok, req.Messages)
	badParam(t, err, "chat_template")
}

func TestConstraintGrammar(t *testing.T) {
	for _, c := range []Constraint{
		{Kind: JSONObject, Param: "a"},
		{Kind: JSONSchema, Param: "b", Schema: []byte(`{"type":"object"}`)},
		{Kind: Regex, Param: "c", Pattern: "a+"},
		{Kind: Choice, Param: "d", Choices: []string{"x", "y"}},
		{Kind: Grammar, Param: "e", Pattern: `root ::= "a"`},
	} {
		if g, err := c.Grammar(); err != nil || g == "" {
			t.Errorf("%+v: %q %v", c, g, err)
		}
	}
	for _, c := range []Constraint{
		{Kind: JSONSchema, Param: "text.format.schema", Schema: []byte(`{"type":"nope"}`)},
		{Kind: Regex, Param: "guided_regex", Pattern: "("},
		{Kind: Choice, Param: "guided_choice"},
		{Kind: Grammar, Param: "guided_grammar", Pattern: " "},
	} {
		_, err := c.Grammar()
		badParam(t, err, c.Param)
	}
}

// Requests sets each prompt's id, cap and times from the submission.
func TestSubmissionRequests(t *testing.T) {
	arrival := time.Unix(100, 0)
	s := Submission{Base: scheduler.Request{N: 2}, ID: "cmpl-1", Arrival: arrival, Deadline: arrival.Add(time.Minute), MaxModelLen: 10}
	reqs := s.Requests([]Input{{Tokens: []int32{1, 2, 3}}, {Tokens: []int32{4}}})
	if len(reqs) != 2 || reqs[0].ID != "cmpl-1-0" || reqs[1].ID != "cmpl-1-1" || reqs[0].MaxTokens != 7 || reqs[1].MaxTokens != 9 ||
		reqs[0].N != 2 || !reqs[1].Arrival.Equal(arrival) || !reqs[0].Deadline.Equal(arrival.Add(time.Minute)) {
		t.Fatalf("requests %+v %+v", reqs[0], reqs[1])
	}
	s.MaxTokens, s.MaxTokensSet = 5, true
	if one := s.Requests([]Input{{Tokens: []int32{1}}}); one[0].ID != "cmpl-1" || one[0].MaxTokens != 5 {
		t.Fatalf("one prompt %+v", one[0])
	}
}

func TestDeadline(t *testing.T) {
	arrival := time.Unix(100, 0)
	if d := Deadline(context.Background(), arrival, 0); !d.IsZero() {
		t.Errorf("no deadline: %v", d)
	}
	if d := Deadline(context.Background(), arrival, time.Second); !d.Equal(arrival.Add(time.Second)) {
		t.Errorf("timeout: %v", d)
	}
	ctx, cancel := context.WithDeadline(context.Background(), arrival.Add(time.Millisecond))
	defer cancel()
	if d := Deadline(ctx, arrival, time.Second); !d.Equal(arrival.Add(time.Millisecond)) {
		t.Errorf("the client's sooner deadline: %v", d)
	}
	if !strings.Contains(TooMuchText("prompt", 9, 4, 8).Error(), "the prompt is 9 bytes") {
		t.Error("TooMuchText names the field")
	}
}
