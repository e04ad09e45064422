package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
)

// errorBody decodes an OpenAI error response and checks that it has
// exactly the four members.
func errorBody(t *testing.T, body []byte) errorObject {
	t.Helper()
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("error body is not JSON: %v\n%s", err, body)
	}
	if len(raw) != 1 || raw["error"] == nil {
		t.Fatalf("error body must be {\"error\":{...}}: %s", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error object lacks %q: %s", k, body)
		}
	}
	var e errorResponse
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	return e.Error
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

const chatOK = `"model":"test-model","messages":[{"role":"user","content":"Hi"}]`

func TestValidation(t *testing.T) {
	long := `"` + strings.Repeat("a", 60) + `"`
	ids := make([]string, 70)
	for i := range ids {
		ids[i] = "260"
	}
	longIDs := "[" + strings.Join(ids, ",") + "]"
	tests := []struct {
		name   string
		path   string // "" means chat
		body   string
		status int
		param  string // "<null>" for null
		code   string // "" to skip
		msg    string // substring of the message
	}{
		// Bodies.
		{name: "invalid json", body: `{"model":`, status: 400, param: "<null>", msg: "not valid JSON"},
		{name: "trailing garbage", body: `{` + chatOK + `} x`, status: 400, param: "<null>", msg: "not valid JSON"},
		{name: "empty body", body: ``, status: 400, param: "<null>", msg: "empty"},
		{name: "array body", body: `[]`, status: 400, param: "<null>", msg: "must be a JSON object"},
		{name: "string body", body: `"hi"`, status: 400, param: "<null>", msg: "must be a JSON object"},

		// Model.
		{name: "model type", body: `{"model":5,"messages":[{"role":"user","content":"Hi"}]}`, status: 400, param: "model", msg: "expected a string"},
		{name: "no model", body: `{"messages":[{"role":"user","content":"Hi"}]}`, status: 400, param: "model", msg: "model is required"},
		{name: "empty model", body: `{"model":"","messages":[{"role":"user","content":"Hi"}]}`, status: 400, param: "model", msg: "model is required"},
		{name: "temperature above 2", body: `{` + chatOK + `,"temperature":5}`, status: 400, param: "temperature", msg: "between 0 and 2, got 5"},
		{name: "temperature negative", body: `{` + chatOK + `,"temperature":-0.5}`, status: 400, param: "temperature", msg: "between 0 and 2"},
		{name: "unknown model", body: `{"model":"gpt-4","messages":[{"role":"user","content":"Hi"}]}`, status: 404, param: "model", code: "model_not_found", msg: "The model `gpt-4` does not exist."},

		// Messages.
		{name: "messages missing", body: `{"model":"test-model"}`, status: 400, param: "messages"},
		{name: "messages null", body: `{"model":"test-model","messages":null}`, status: 400, param: "messages"},
		{name: "messages empty", body: `{"model":"test-model","messages":[]}`, status: 400, param: "messages", msg: "at least one"},
		{name: "messages string", body: `{"model":"test-model","messages":"hi"}`, status: 400, param: "messages", msg: "expected an array of message objects, but got a string"},
		{name: "message not object", body: `{"model":"test-model","messages":[5]}`, status: 400, param: "messages[0]"},
		{name: "role missing", body: `{"model":"test-model","messages":[{"content":"x"}]}`, status: 400, param: "messages[0].role"},
		{name: "role unknown", body: `{"model":"test-model","messages":[{"role":"function","content":"x"}]}`, status: 400, param: "messages[0].role", msg: "function"},
		{name: "role type", body: `{"model":"test-model","messages":[{"role":5,"content":"x"}]}`, status: 400, param: "messages[0].role"},
		{name: "content type", body: `{"model":"test-model","messages":[{"role":"user","content":"a"},{"role":"user","content":5}]}`, status: 400, param: "messages[1].content"},
		{name: "content missing", body: `{"model":"test-model","messages":[{"role":"user"}]}`, status: 400, param: "messages[0].content"},
		{name: "content parts empty", body: `{"model":"test-model","messages":[{"role":"user","content":[]}]}`, status: 400, param: "messages[0].content"},
		{name: "image part bad url", body: `{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, status: 400, param: "messages[0].content[1].image_url.url", msg: "scheme"},
		{name: "image part text model", body: `{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`, status: 400, param: "messages[0].content[1]", msg: "--mmproj"},
		{name: "file part", body: `{"model":"test-model","messages":[{"role":"user","content":[{"type":"file","file":{}}]}]}`, status: 400, param: "messages[0].content[0].type", msg: "file"},
		{name: "part no type", body: `{"model":"test-model","messages":[{"role":"user","content":[{"text":"a"}]}]}`, status: 400, param: "messages[0].content[0].type"},
		{name: "part no text", body: `{"model":"test-model","messages":[{"role":"user","content":[{"type":"text"}]}]}`, status: 400, param: "messages[0].content[0].text"},
		{name: "part text type", body: `{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, status: 400, param: "messages[0].content[0].text"},
		{name: "part not object", body: `{"model":"test-model","messages":[{"role":"user","content":["a"]}]}`, status: 400, param: "messages[0].content[0]"},
		{name: "name type", body: `{"model":"test-model","messages":[{"role":"user","content":"a","name":1}]}`, status: 400, param: "messages[0].name"},

		// Lengths.
		{name: "max_tokens zero", body: `{` + chatOK + `,"max_tokens":0}`, status: 400, param: "max_tokens"},
		{name: "max_tokens negative", body: `{` + chatOK + `,"max_tokens":-1}`, status: 400, param: "max_tokens"},
		{name: "max_tokens string", body: `{` + chatOK + `,"max_tokens":"5"}`, status: 400, param: "max_tokens", msg: "Invalid type for 'max_tokens': expected an integer, but got a string."},
		{name: "max_tokens float", body: `{` + chatOK + `,"max_tokens":1.5}`, status: 400, param: "max_tokens", msg: "the number 1.5"},
		{name: "max_tokens huge", body: `{` + chatOK + `,"max_tokens":1e400}`, status: 400, param: "max_tokens"},
		{name: "max_completion_tokens zero", body: `{` + chatOK + `,"max_completion_tokens":0}`, status: 400, param: "max_completion_tokens"},
		{name: "prompt plus max_tokens", body: `{` + chatOK + `,"max_tokens":60}`, status: 400, param: "messages", code: "context_length_exceeded",
			msg: "This model's maximum context length is 64 tokens. However, you requested 70 tokens (10 in the messages, 60 in the completion). Please reduce the length of the messages or completion."},
		{name: "prompt too long", body: `{"model":"test-model","messages":[{"role":"user","content":` + long + `}]}`, status: 400, param: "messages", code: "context_length_exceeded",
			msg: "This model's maximum context length is 64 tokens. However, your request has 69 input tokens."},
		{name: "min_tokens above max_tokens", body: `{` + chatOK + `,"max_tokens":5,"min_tokens":6}`, status: 400, param: "min_tokens"},
		{name: "min_tokens above context", body: `{` + chatOK + `,"min_tokens":60}`, status: 400, param: "min_tokens"},
		{name: "min_tokens negative", body: `{` + chatOK + `,"min_tokens":-1}`, status: 400, param: "min_tokens"},

		// Sampling.
		{name: "temperature negative", body: `{` + chatOK + `,"temperature":-0.5}`, status: 400, param: "temperature"},
		{name: "temperature string", body: `{` + chatOK + `,"temperature":"hot"}`, status: 400, param: "temperature", msg: "expected a number"},
		{name: "top_p zero", body: `{` + chatOK + `,"top_p":0}`, status: 400, param: "top_p"},
		{name: "top_p above one", body: `{` + chatOK + `,"top_p":1.5}`, status: 400, param: "top_p"},
		{name: "top_k", body: `{` + chatOK + `,"top_k":-2}`, status: 400, param: "top_k"},
		{name: "top_k float", body: `{` + chatOK + `,"top_k":2.5}`, status: 400, param: "top_k"},
		{name: "min_p", body: `{` + chatOK + `,"min_p":2}`, status: 400, param: "min_p"},
		{name: "presence_penalty", body: `{` + chatOK + `,"presence_penalty":3}`, status: 400, param: "presence_penalty"},
		{name: "frequency_penalty", body: `{` + chatOK + `,"frequency_penalty":-3}`, status: 400, param: "frequency_penalty"},
		{name: "repetition_penalty", body: `{` + chatOK + `,"repetition_penalty":0}`, status: 400, param: "repetition_penalty"},
		// Values that used to reach llama.cpp's sampler and abort the process.
		{name: "temperature denormal", body: `{` + chatOK + `,"temperature":1e-40}`, status: 400, param: "temperature", msg: "temperature must be 0 (greedy) or in [1e-05, 100000]; got 1e-40."},
		{name: "temperature tiny", body: `{` + chatOK + `,"temperature":1.2e-38}`, status: 400, param: "temperature", msg: "got 1.2e-38"},
		{name: "temperature huge", body: `{` + chatOK + `,"temperature":1e39}`, status: 400, param: "temperature", msg: "got 1e+39"},
		{name: "temperature below float32", body: `{` + chatOK + `,"temperature":1e-46}`, status: 400, param: "temperature", msg: "got 1e-46"},
		{name: "temperature smallest double", body: `{` + chatOK + `,"temperature":4.9e-324}`, status: 400, param: "temperature"},
		{name: "long param is cut", body: `{` + chatOK + `,"cache_salt":{"` + strings.Repeat("k", 5000) + "\":\"\xff\"}}", status: 400, param: "cache_salt." + strings.Repeat("k", 200-len("cache_salt.")) + "…"},
		{name: "repetition_penalty tiny", body: `{` + chatOK + `,"repetition_penalty":1e-38}`, status: 400, param: "repetition_penalty", msg: "in [0.01, 100]"},
		{name: "stop tokens ban everything", body: `{` + chatOK + `,"min_tokens":1,"stop_token_ids":` + allTokens() + `}`, status: 400, param: "stop_token_ids", msg: "whole vocabulary"},
		// Limits that no retry can meet are 400s naming the field, not 429s.
		{name: "n above max_num_seqs", body: `{` + chatOK + `,"n":17}`, status: 400, param: "n", msg: "limit of 16 sequences"},
		{name: "more prompts than the queue holds", path: "/v1/completions", body: `{"model":"test-model","prompt":` + manyPrompts(65) + `}`, status: 400, param: "prompt", msg: "queues at most 64"},
		{name: "prompt text longer than any context", path: "/v1/completions", body: `{"model":"test-model","prompt":"` + strings.Repeat("Hello ", 5000) + `"}`, status: 400, param: "prompt", code: "context_length_exceeded", msg: "no text longer than"},
		{name: "messages longer than any context", body: `{"model":"test-model","messages":[{"role":"user","content":"` + strings.Repeat("Hello ", 5000) + `"}]}`, status: 400, param: "messages", code: "context_length_exceeded"},
		// Text that is not valid Unicode is refused, not replaced.
		{name: "invalid utf-8 content", body: "{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}", status: 400, param: "messages[0].content", msg: "not valid UTF-8"},
		{name: "invalid utf-8 prompt", path: "/v1/completions", body: "{\"model\":\"test-model\",\"prompt\":\"\xc3\"}", status: 400, param: "prompt", msg: "not valid UTF-8"},
		{name: "lone surrogate", path: "/v1/completions", body: `{"model":"test-model","prompt":["ok","a\ud800b"]}`, status: 400, param: "prompt[1]", msg: "surrogate"},
		{name: "lone low surrogate in stop", body: `{` + chatOK + `,"stop":["x","\udc00"]}`, status: 400, param: "stop[1]"},
		{name: "invalid utf-8 part text", body: "{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xfe\"}]}]}", status: 400, param: "messages[0].content[0].text"},
		{name: "seed string", body: `{` + chatOK + `,"seed":"x"}`, status: 400, param: "seed"},
		{name: "seed float", body: `{` + chatOK + `,"seed":1.5}`, status: 400, param: "seed"},
		{name: "seed too big", body: `{` + chatOK + `,"seed":99999999999999999999}`, status: 400, param: "seed"},
		{name: "n zero", body: `{` + chatOK + `,"n":0}`, status: 400, param: "n"},
		{name: "n too big", body: `{` + chatOK + `,"n":129}`, status: 400, param: "n"},
		{name: "n string", body: `{` + chatOK + `,"n":"2"}`, status: 400, param: "n"},
		{name: "stop number", body: `{` + chatOK + `,"stop":5}`, status: 400, param: "stop"},
		{name: "stop element", body: `{` + chatOK + `,"stop":["a",5]}`, status: 400, param: "stop[1]"},
		{name: "stop object", body: `{` + chatOK + `,"stop":{}}`, status: 400, param: "stop"},
		{name: "stop_token_ids out of range", body: `{` + chatOK + `,"stop_token_ids":[99999]}`, status: 400, param: "stop_token_ids"},
		{name: "stop_token_ids negative", body: `{` + chatOK + `,"stop_token_ids":[-1]}`, status: 400, param: "stop_token_ids"},
		{name: "stop_token_ids type", body: `{` + chatOK + `,"stop_token_ids":["a"]}`, status: 400, param: "stop_token_ids"},
		{name: "logit_bias key", body: `{` + chatOK + `,"logit_bias":{"abc":1}}`, status: 400, param: "logit_bias"},
		{name: "logit_bias token", body: `{` + chatOK + `,"logit_bias":{"99999":1}}`, status: 400, param: "logit_bias"},
		{name: "logit_bias value", body: `{` + chatOK + `,"logit_bias":{"5":200}}`, status: 400, param: "logit_bias"},
		{name: "logit_bias value type", body: `{` + chatOK + `,"logit_bias":{"5":"x"}}`, status: 400, param: "logit_bias"},
		{name: "logit_bias type", body: `{` + chatOK + `,"logit_bias":[1]}`, status: 400, param: "logit_bias"},
		{name: "logprobs type", body: `{` + chatOK + `,"logprobs":"yes"}`, status: 400, param: "logprobs"},
		{name: "top_logprobs without logprobs", body: `{` + chatOK + `,"top_logprobs":2}`, status: 400, param: "top_logprobs"},
		{name: "top_logprobs too many", body: `{` + chatOK + `,"logprobs":true,"top_logprobs":21}`, status: 400, param: "top_logprobs"},
		{name: "top_logprobs negative", body: `{` + chatOK + `,"logprobs":true,"top_logprobs":-1}`, status: 400, param: "top_logprobs"},

		// Streaming and extensions.
		{name: "stream type", body: `{` + chatOK + `,"stream":"yes"}`, status: 400, param: "stream"},
		{name: "stream_options without stream", body: `{` + chatOK + `,"stream_options":{"include_usage":true}}`, status: 400, param: "stream_options"},
		{name: "include_usage type", body: `{` + chatOK + `,"stream":true,"stream_options":{"include_usage":"yes"}}`, status: 400, param: "stream_options.include_usage"},
		{name: "ignore_eos type", body: `{` + chatOK + `,"ignore_eos":1}`, status: 400, param: "ignore_eos"},
		{name: "cache_salt empty", body: `{` + chatOK + `,"cache_salt":""}`, status: 400, param: "cache_salt"},
		{name: "cache_salt type", body: `{` + chatOK + `,"cache_salt":5}`, status: 400, param: "cache_salt"},
		{name: "priority type", body: `{` + chatOK + `,"priority":"high"}`, status: 400, param: "priority"},
		{name: "user type", body: `{` + chatOK + `,"user":5}`, status: 400, param: "user"},

		// Completions.
		{name: "prompt missing", path: "/v1/completions", body: `{"model":"test-model"}`, status: 400, param: "prompt"},
		{name: "prompt empty string", path: "/v1/completions", body: `{"model":"test-model","prompt":""}`, status: 400, param: "prompt"},
		{name: "prompt empty array", path: "/v1/completions", body: `{"model":"test-model","prompt":[]}`, status: 400, param: "prompt"},
		{name: "prompt empty element", path: "/v1/completions", body: `{"model":"test-model","prompt":["a",""]}`, status: 400, param: "prompt[1]"},
		{name: "prompt number", path: "/v1/completions", body: `{"model":"test-model","prompt":5}`, status: 400, param: "prompt"},
		{name: "prompt object", path: "/v1/completions", body: `{"model":"test-model","prompt":{}}`, status: 400, param: "prompt"},
		{name: "prompt float id", path: "/v1/completions", body: `{"model":"test-model","prompt":[260,1.5]}`, status: 400, param: "prompt[1]"},
		{name: "prompt negative id", path: "/v1/completions", body: `{"model":"test-model","prompt":[-1]}`, status: 400, param: "prompt[0]", msg: "outside the vocabulary"},
		{name: "prompt id too big", path: "/v1/completions", body: `{"model":"test-model","prompt":[99999]}`, status: 400, param: "prompt[0]", msg: "outside the vocabulary"},
		{name: "prompt id huge", path: "/v1/completions", body: `{"model":"test-model","prompt":[1e30]}`, status: 400, param: "prompt[0]"},
		{name: "prompt empty token array", path: "/v1/completions", body: `{"model":"test-model","prompt":[[260],[]]}`, status: 400, param: "prompt[1]"},
		{name: "prompt nested id", path: "/v1/completions", body: `{"model":"test-model","prompt":[[260],[260,99999]]}`, status: 400, param: "prompt[1][1]"},
		{name: "prompt mixed strings", path: "/v1/completions", body: `{"model":"test-model","prompt":["a",1]}`, status: 400, param: "prompt[1]"},
		{name: "prompt mixed ids", path: "/v1/completions", body: `{"model":"test-model","prompt":[1,"a"]}`, status: 400, param: "prompt[1]"},
		{name: "prompt mixed arrays", path: "/v1/completions", body: `{"model":"test-model","prompt":[[1],"a"]}`, status: 400, param: "prompt[1]"},
		{name: "prompt bools", path: "/v1/completions", body: `{"model":"test-model","prompt":[true]}`, status: 400, param: "prompt[0]"},
		{name: "prompt too long", path: "/v1/completions", body: `{"model":"test-model","prompt":` + longIDs + `}`, status: 400, param: "prompt", code: "context_length_exceeded",
			msg: "your request has 70 input tokens"},
		{name: "second prompt too long", path: "/v1/completions", body: `{"model":"test-model","prompt":[[260],` + longIDs + `]}`, status: 400, param: "prompt[1]", code: "context_length_exceeded"},
		{name: "completion max_tokens", path: "/v1/completions", body: `{"model":"test-model","prompt":"a","max_tokens":63}`, status: 400, param: "prompt", code: "context_length_exceeded",
			msg: "you requested 65 tokens (2 in the messages, 63 in the completion)"},
		{name: "completion logprobs range", path: "/v1/completions", body: `{"model":"test-model","prompt":"a","logprobs":21}`, status: 400, param: "logprobs"},
		{name: "completion logprobs bool", path: "/v1/completions", body: `{"model":"test-model","prompt":"a","logprobs":true}`, status: 400, param: "logprobs"},
		{name: "echo type", path: "/v1/completions", body: `{"model":"test-model","prompt":"a","echo":"yes"}`, status: 400, param: "echo"},
		{name: "completion unknown model", path: "/v1/completions", body: `{"model":"nope","prompt":"a"}`, status: 404, param: "model", code: "model_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			path := tt.path
			if path == "" {
				path = "/v1/chat/completions"
			}
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, path, tt.body)
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			e := errorBody(t, rec.Body.Bytes())
			if got := str(e.Param); got != tt.param {
				t.Errorf("param = %q, want %q (message %q)", got, tt.param, e.Message)
			}
			if tt.code != "" && str(e.Code) != tt.code {
				t.Errorf("code = %q, want %q", str(e.Code), tt.code)
			}
			wantType := map[int]string{400: typeBadRequest, 404: typeNotFound}[tt.status]
			if e.Type != wantType {
				t.Errorf("type = %q, want %q", e.Type, wantType)
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", e.Message, tt.msg)
			}
			if len(m.Requests()) != 0 {
				t.Errorf("a rejected request reached the scheduler")
			}
		})
	}
}

// allTokens lists every token id of the test vocabulary as JSON.
func allTokens() string {
	ids := make([]string, openaitest.Vocab.NumTokens())
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// manyPrompts is a JSON array of n one-word prompts.
func manyPrompts(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(`"a",`, n), ",") + "]"
}

// TestAccepted checks inputs that must be accepted.
func TestAccepted(t *testing.T) {
	tests := []struct {
		name, path, body string
	}{
		{"unknown fields", "", `{` + chatOK + `,"tools_future":{"x":1},"service_tier":"auto","best_of":1}`},
		{"nulls", "", `{` + chatOK + `,"max_tokens":null,"temperature":null,"stop":null,"stream":null,"stream_options":null,"logprobs":null,"seed":null,"n":null}`},
		{"all roles", "", `{"model":"test-model","messages":[{"role":"developer","content":"d"},{"role":"system","content":"s"},{"role":"user","content":"u","name":"bob"},{"role":"assistant","content":null},{"role":"tool","content":"t","tool_call_id":"x"}]}`},
		{"text parts", "", `{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`},
		{"top_k off", "", `{` + chatOK + `,"top_k":-1}`},
		{"stop many", "", `{` + chatOK + `,"stop":["a","b","c","d","e","f"]}`},
		{"prompt ids", "/v1/completions", `{"model":"test-model","prompt":[260,261]}`},
		{"prompt id arrays", "/v1/completions", `{"model":"test-model","prompt":[[260],[261,262]]}`},
		{"prompt strings", "/v1/completions", `{"model":"test-model","prompt":["a","b"],"echo":true}`},
		{"whitespace", "/v1/completions", "\n {\"model\" : \"test-model\", \"prompt\" : [ 260 , 261 ] } \n"},
		{"escaped text", "/v1/completions", `{"model":"test-model","prompt":"caf\u00e9 \ud83d\ude00 \"q\" \\u","stop":["\u00e9"]}`},
		{"temperature edges", "", `{` + chatOK + `,"temperature":1e-5}`},
		{"n at max_num_seqs", "", `{` + chatOK + `,"n":16}`},
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
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	m := openaitest.NewModel(t)
	h := newHandler(openaitest.NewBackend[Model](m), Options{MaxBodyBytes: 100})
	body := fmt.Sprintf(`{"model":"test-model","prompt":%q}`, strings.Repeat("a", 200))
	rec := openaitest.Do(t, http.HandlerFunc(h.completions), m, http.MethodPost, "/v1/completions", body)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d: %s", rec.Code, rec.Body)
	}
	e := errorBody(t, rec.Body.Bytes())
	if e.Type != typeTooLarge || !strings.Contains(e.Message, "100 bytes") {
		t.Errorf("error = %+v", e)
	}
}
