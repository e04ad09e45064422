package openai

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/grammar"
)

const objSchema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`

func TestStructuredValidation(t *testing.T) {
	tests := []struct {
		name  string
		path  string // "" means chat
		body  string
		param string
		msg   string // substring of the message
	}{
		{"response_format type missing", "", `{` + chatOK + `,"response_format":{}}`, "response_format.type", "needs a type"},
		{"response_format type unknown", "", `{` + chatOK + `,"response_format":{"type":"xml"}}`, "response_format.type", `"xml"`},
		{"response_format type not string", "", `{` + chatOK + `,"response_format":{"type":5}}`, "response_format.type", "expected a string"},
		{"response_format not object", "", `{` + chatOK + `,"response_format":"json"}`, "response_format", "expected an object"},
		{"json_schema missing", "", `{` + chatOK + `,"response_format":{"type":"json_schema"}}`, "response_format.json_schema", "needs json_schema"},
		{"schema missing", "", `{` + chatOK + `,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "response_format.json_schema.schema", "needs a schema"},
		{"schema not a schema", "", `{` + chatOK + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}}}`, "response_format.json_schema.schema", "expected a JSON schema"},
		{"schema invalid", "", `{` + chatOK + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"strin"}}}}`, "response_format.json_schema.schema", `unknown type "strin"`},
		{"schema keyword unsupported", "/v1/completions", `{"model":"test-model","prompt":"a","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}}}}`,
			"response_format.json_schema.schema", `keyword "minimum" at #/properties/n is not supported`},
		{"schema ref missing", "", `{` + chatOK + `,"response_format":{"type":"json_schema","json_schema":{"schema":{"$ref":"#/$defs/x"}}}}`, "response_format.json_schema.schema", "points to nothing"},
		{"guided_json string not json", "", `{` + chatOK + `,"guided_json":"{nope"}`, "guided_json", "not valid JSON"},
		{"guided_json number", "", `{` + chatOK + `,"guided_json":5}`, "guided_json", "expected a JSON schema"},
		{"guided_json unsupported", "/v1/completions", `{"model":"test-model","prompt":"a","guided_json":{"allOf":[]}}`, "guided_json", `"allOf"`},
		{"guided_regex bad", "", `{` + chatOK + `,"guided_regex":"(a"}`, "guided_regex", "missing closing )"},
		{"guided_regex lookahead", "/v1/completions", `{"model":"test-model","prompt":"a","guided_regex":"(?=a)b"}`, "guided_regex", "(?="},
		{"guided_regex backreference", "", `{` + chatOK + `,"guided_regex":"(a)\\1"}`, "guided_regex", `\1`},
		{"guided_regex type", "", `{` + chatOK + `,"guided_regex":5}`, "guided_regex", "expected a string"},
		{"guided_choice empty", "", `{` + chatOK + `,"guided_choice":[]}`, "guided_choice", "at least one"},
		{"guided_choice type", "", `{` + chatOK + `,"guided_choice":[1]}`, "guided_choice", "expected a string"},
		{"guided_grammar bad", "", `{` + chatOK + `,"guided_grammar":"root ::= \"a"}`, "guided_grammar", "unterminated literal"},
		{"guided_grammar no root", "/v1/completions", `{"model":"test-model","prompt":"a","guided_grammar":"start ::= \"a\""}`, "guided_grammar", `no "root"`},
		{"guided_grammar crash bait", "", `{` + chatOK + `,"guided_grammar":"root ::= (\"a\"?)*"}`, "guided_grammar", "can be empty"},
		{"guided_grammar reversed bounds", "", `{` + chatOK + `,"guided_grammar":"root ::= \"a\"{5,2}"}`, "guided_grammar", "below the minimum"},
		{"guided_grammar empty", "", `{` + chatOK + `,"guided_grammar":"  "}`, "guided_grammar", "must not be empty"},
		{"structured_outputs regex", "", `{` + chatOK + `,"structured_outputs":{"regex":"a{3,1}"}}`, "structured_outputs.regex", "invalid repeat count"},
		{"structured_outputs json", "", `{` + chatOK + `,"structured_outputs":{"json":{"not":{}}}}`, "structured_outputs.json", `"not"`},
		{"two kinds", "", `{` + chatOK + `,"response_format":{"type":"json_object"},"guided_regex":"a"}`, "guided_regex", "response_format and guided_regex"},
		{"two in structured_outputs", "/v1/completions", `{"model":"test-model","prompt":"a","structured_outputs":{"regex":"a","choice":["a"]}}`, "structured_outputs.choice", "structured_outputs.regex and structured_outputs.choice"},
		{"guided and structured", "", `{` + chatOK + `,"guided_choice":["a"],"structured_outputs":{"grammar":"root ::= \"a\""}}`, "structured_outputs.grammar", "guided_choice and structured_outputs.grammar"},
		{"min_tokens", "", `{` + chatOK + `,"min_tokens":2,"guided_choice":["a"]}`, "min_tokens", "cannot be combined with guided_choice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			path := tt.path
			if path == "" {
				path = "/v1/chat/completions"
			}
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, path, tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status = %d: %s", rec.Code, rec.Body)
			}
			e := errorBody(t, rec.Body.Bytes())
			if str(e.Param) != tt.param || !strings.Contains(e.Message, tt.msg) || e.Type != typeBadRequest {
				t.Errorf("error = param %q, %q; want param %q with %q", str(e.Param), e.Message, tt.param, tt.msg)
			}
			if len(m.Requests()) != 0 {
				t.Error("the request was submitted")
			}
		})
	}
}

func TestStructuredAccepted(t *testing.T) {
	mustSchema := func(s string) string {
		g, err := grammar.FromJSONSchema([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	mustRegex := func(s string) string {
		g, err := grammar.FromRegex(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	choices, _ := grammar.Choices([]string{"yes", "no"})
	tests := []struct {
		name, path, body, grammar string
	}{
		{"no structured output", "", `{` + chatOK + `}`, ""},
		{"text", "", `{` + chatOK + `,"response_format":{"type":"text"}}`, ""},
		{"nulls", "", `{` + chatOK + `,"response_format":null,"guided_json":null,"guided_regex":null,"guided_choice":null,"guided_grammar":null,"structured_outputs":null}`, ""},
		{"json_object", "", `{` + chatOK + `,"response_format":{"type":"json_object"}}`, grammar.AnyJSONObject()},
		{"json_schema", "", `{` + chatOK + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","description":"d","strict":true,"schema":` + objSchema + `}}}`, mustSchema(objSchema)},
		{"json_schema completions", "/v1/completions", `{"model":"test-model","prompt":"a","stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + objSchema + `}}}`, mustSchema(objSchema)},
		{"guided_json object", "", `{` + chatOK + `,"guided_json":` + objSchema + `}`, mustSchema(objSchema)},
		{"guided_json string", "/v1/completions", `{"model":"test-model","prompt":"a","guided_json":"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}"}`, mustSchema(objSchema)},
		{"guided_regex", "", `{` + chatOK + `,"guided_regex":"[a-c]+"}`, mustRegex("[a-c]+")},
		{"guided_choice", "", `{` + chatOK + `,"guided_choice":["yes","no"]}`, choices},
		{"guided_grammar", "/v1/completions", `{"model":"test-model","prompt":"a","guided_grammar":"root ::= \"a\" | \"b\""}`, `root ::= "a" | "b"`},
		{"structured_outputs json", "", `{` + chatOK + `,"structured_outputs":{"json":` + objSchema + `}}`, mustSchema(objSchema)},
		{"structured_outputs choice", "", `{` + chatOK + `,"structured_outputs":{"choice":["yes","no"]}}`, choices},
		{"structured_outputs json_object", "", `{` + chatOK + `,"structured_outputs":{"json_object":true}}`, grammar.AnyJSONObject()},
		{"text beside guided", "", `{` + chatOK + `,"response_format":{"type":"text"},"guided_regex":"[a-c]+"}`, mustRegex("[a-c]+")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			path := tt.path
			if path == "" {
				path = "/v1/chat/completions"
			}
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, path, tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d: %s", rec.Code, rec.Body)
			}
			reqs := m.Requests()
			if len(reqs) != 1 || reqs[0].Sampling.Grammar != tt.grammar {
				t.Fatalf("grammar %q, want %q", reqs[0].Sampling.Grammar, tt.grammar)
			}
		})
	}
}

// checkingModel is a fake model whose runtime refuses every grammar.
type checkingModel struct {
	*openaitest.Model
}

func (checkingModel) CheckGrammar(string) error { return errors.New("llama.cpp refused it") }

func TestStructuredModelCheck(t *testing.T) {
	m := openaitest.NewModel(t)
	rec := openaitest.Do(t, testHandler(checkingModel{m}), m, http.MethodPost, "/v1/chat/completions", `{`+chatOK+`,"guided_grammar":"root ::= <|x|>"}`)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status = %d: %s", rec.Code, rec.Body)
	}
	if e := errorBody(t, rec.Body.Bytes()); str(e.Param) != "guided_grammar" || !strings.Contains(e.Message, "llama.cpp refused it") {
		t.Errorf("error = %+v", e)
	}
	if len(m.Requests()) != 0 {
		t.Error("the request was submitted")
	}
}

// Structured-output fields, whatever their bytes, decode and validate to
// a grammar or a 4xx, never a panic.
func FuzzStructuredFields(f *testing.F) {
	for _, s := range []string{
		`{"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + objSchema + `}}}`,
		`{"response_format":{"type":"json_object"},"guided_regex":"a"}`,
		`{"guided_json":"{\"type\":\"array\",\"items\":{\"enum\":[1,\"a\"]},\"maxItems\":2}"}`,
		`{"guided_regex":"(cat|dog)s?\\d{2}"}`, `{"guided_choice":["a","b"]}`,
		`{"guided_grammar":"root ::= \"a\" [0-9]*"}`,
		`{"structured_outputs":{"json":{"anyOf":[{"type":"null"},{"$ref":"#"}]}}}`,
		`{"structured_outputs":{"regex":"x","choice":[],"grammar":"","json_object":true}}`,
	} {
		f.Add([]byte(s))
	}
	m := openaitest.NewModel(f)
	h := newHandler(openaitest.NewBackend[Model](m), Options{})
	f.Fuzz(func(t *testing.T, fields []byte) {
		body := []byte(`{"model":"test-model","prompt":"a",` + strings.TrimPrefix(string(fields), "{"))
		fuzzDecode(t, body, func(b []byte) error {
			req, opts, copts, err := decodeCompletion(b)
			if err != nil {
				return err
			}
			model, err := h.model(context.Background(), req.Model)
			if err != nil {
				return err
			}
			p, _, _, err := h.prepareCompletion(model, req, opts, copts)
			if err == nil && p.Base.Sampling.Grammar != "" {
				if err := grammar.Check(p.Base.Sampling.Grammar); err != nil {
					t.Fatalf("accepted a grammar Check refuses: %v", err)
				}
			}
			return err
		})
	})
}
