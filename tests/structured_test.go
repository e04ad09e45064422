package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmserve/llmserve/models"
)

// structuredSchemas are small schemas whose grammars end within a few
// hundred tokens whatever the model writes: strings have a maxLength,
// arrays a maxItems.
var structuredSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer"}},"required":["name","age"]}`,
	`{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":4}`,
	`{"enum":["red","green","blue"]}`,
	`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"null"},"c":{"type":"string","format":"date"}},"required":["b"]}`,
	`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}},"required":["id","ok"]},"maxItems":2}},"required":["items"]}`,
	`{"anyOf":[{"type":"integer"},{"type":"string","minLength":1,"maxLength":5}]}`,
	`{"type":"array","prefixItems":[{"type":"string","maxLength":4},{"type":"integer"},{"$ref":"#/$defs/flag"}],"items":false,"minItems":3,"$defs":{"flag":{"type":"boolean"}}}`,
	`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"kind":{"const":"x"},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["id","kind","tags"]}`,
}

// Eight requests at once, each with its own schema, return JSON their
// schema accepts, streamed and not, greedy and sampled, through chat and
// completions: stories260K writes children's stories, so only the grammar
// can make it write that.
func TestStructuredOutputConcurrent(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	validators := make([]*jsonschema.Schema, len(structuredSchemas))
	for i, src := range structuredSchemas {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		url := fmt.Sprintf("mem://schema%d.json", i)
		if err := c.AddResource(url, doc); err != nil {
			t.Fatal(err)
		}
		if validators[i], err = c.Compile(url); err != nil {
			t.Fatal(err)
		}
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			var wg sync.WaitGroup
			texts := make([]string, len(structuredSchemas))
			finish := make([]string, len(structuredSchemas))
			for i, src := range structuredSchemas {
				wg.Go(func() {
					body := map[string]any{
						"max_tokens": 400, "stream": stream,
						"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
							"name": fmt.Sprintf("s%d", i), "strict": true, "schema": json.RawMessage(src)}},
					}
					if i%2 == 1 {
						body["temperature"], body["seed"] = 1.0, i
					} else {
						body["temperature"] = 0
					}
					path := "/v1/completions"
					if i%4 < 2 {
						path = "/v1/chat/completions"
						body["messages"] = []map[string]string{{"role": "user", "content": "Tell me about the cat."}}
					} else {
						body["prompt"] = "Once upon a time"
					}
					texts[i], finish[i] = s.structured(t, path, body)
				})
			}
			wg.Wait()
			for i, text := range texts {
				t.Logf("schema %d: %s", i, text)
				if finish[i] != "stop" {
					t.Errorf("schema %d: finish_reason %q, text %q", i, finish[i], text)
					continue
				}
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if err != nil {
					t.Errorf("schema %d: %q is not JSON: %v", i, text, err)
					continue
				}
				if err := validators[i].Validate(v); err != nil {
					t.Errorf("schema %d: %q does not validate: %v", i, text, err)
				}
			}
		})
	}
}

// structured runs one request and returns the text of choice 0 and its
// finish_reason, reading the SSE stream when body asks for one.
func (s *server) structured(t *testing.T, path string, body map[string]any) (text, finish string) {
	t.Helper()
	if _, ok := body["model"]; !ok {
		body["model"] = s.model.Name()
	}
	type choice struct {
		Text    string `json:"text"`
		Message *struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	type answer struct {
		Choices []choice        `json:"choices"`
		Error   json.RawMessage `json:"error"`
	}
	add := func(a *answer) {
		for _, c := range a.Choices {
			text += c.Text
			if c.Message != nil {
				text += c.Message.Content
			}
			if c.Delta != nil {
				text += c.Delta.Content
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if body["stream"] != true {
		var a answer
		if code, _ := s.post(t, path, body, &a); code != 200 {
			t.Errorf("%s: status %d: %s", path, code, a.Error)
			return "", ""
		}
		add(&a)
		return text, finish
	}
	for _, ev := range s.stream(t, context.Background(), path, body) {
		if ev == "[DONE]" {
			continue
		}
		var a answer
		if err := json.Unmarshal([]byte(ev), &a); err != nil || a.Error != nil {
			t.Errorf("%s: event %q: %v", path, ev, err)
			continue
		}
		add(&a)
	}
	return text, finish
}

// guided_regex, guided_choice and guided_grammar force the output too.
func TestStructuredOutputGuided(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	cases := []struct {
		field string
		value any
		check func(string) bool
	}{
		{"guided_regex", `[A-Z][a-z]{2,6} (cat|dog)s?`, func(out string) bool {
			return len(out) > 0 && out[0] >= 'A' && out[0] <= 'Z' && (strings.HasSuffix(out, "cat") || strings.HasSuffix(out, "dog") || strings.HasSuffix(out, "cats") || strings.HasSuffix(out, "dogs"))
		}},
		{"guided_choice", []string{"alpha", "beta", "gamma"}, func(out string) bool { return out == "alpha" || out == "beta" || out == "gamma" }},
		{"guided_grammar", `root ::= "<" [0-9]{3} ">"`, func(out string) bool { return len(out) == 5 && out[0] == '<' && out[4] == '>' }},
		{"structured_outputs", map[string]any{"choice": []string{"yes", "no"}}, func(out string) bool { return out == "yes" || out == "no" }},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			body := map[string]any{"prompt": "Once upon a time", "max_tokens": 64, "temperature": 0.8, "seed": 3, "stream": stream, tc.field: tc.value}
			out, finish := s.structured(t, "/v1/completions", body)
			if finish != "stop" || !tc.check(out) {
				t.Errorf("%s (stream %v): %q, finish_reason %q", tc.field, stream, out, finish)
			}
		}
	}
}

// Bad structured-output requests are 400s that name the field; the
// server keeps serving.
func TestStructuredOutputBadInput(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	chat := `"model":"stories260K","messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body, param, contains string
	}{
		{"invalid schema", "/v1/chat/completions", `{` + chat + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"objekt"}}}}`,
			"response_format.json_schema.schema", `"objekt"`},
		{"schema not JSON", "/v1/completions", `{"model":"stories260K","prompt":"a","guided_json":"{\"type\":"}`, "guided_json", "not valid JSON"},
		{"unsupported keyword", "/v1/chat/completions", `{` + chat + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"n":{"type":"string","pattern":"^a"}}}}}}`,
			"response_format.json_schema.schema", `"pattern"`},
		{"bad GBNF", "/v1/completions", `{"model":"stories260K","prompt":"a","guided_grammar":"root ::= (\"a\""}`, "guided_grammar", "expecting ')'"},
		{"GBNF that crashes llama.cpp", "/v1/completions", `{"model":"stories260K","prompt":"a","guided_grammar":"root ::= (\"a\"?)*"}`, "guided_grammar", "empty"},
		{"GBNF with an unknown token", "/v1/completions", `{"model":"stories260K","prompt":"a","guided_grammar":"root ::= <|no-such-token|>"}`, "guided_grammar", "runtime"},
		{"bad regex", "/v1/completions", `{"model":"stories260K","prompt":"a","guided_regex":"[a-"}`, "guided_regex", "missing closing ]"},
		{"two kinds", "/v1/completions", `{"model":"stories260K","prompt":"a","guided_regex":"a","guided_choice":["a"]}`, "guided_choice", "at most one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var resp completionResponse
			code, _ := s.postRaw(t, tc.path, []byte(tc.body), &resp)
			if code != 400 || resp.Error == nil {
				t.Fatalf("status %d: %+v", code, resp.Error)
			}
			if resp.Error.Param == nil || *resp.Error.Param != tc.param || !strings.Contains(resp.Error.Message, tc.contains) {
				t.Errorf("param %v, message %q; want %q with %q", resp.Error.Param, resp.Error.Message, tc.param, tc.contains)
			}
		})
	}
	// Still serving, with a grammar too.
	out, finish := s.structured(t, "/v1/completions", map[string]any{"prompt": "a", "guided_choice": []string{"ok"}, "max_tokens": 8})
	if out != "ok" || finish != "stop" {
		t.Fatalf("after bad input: %q %q", out, finish)
	}
}
