package openai

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/frontend"
)

// fuzzSeeds are request bodies that reach every decoding branch.
var fuzzSeeds = []string{
	`{"model":"test-model","messages":[{"role":"user","content":"Hi"}]}`,
	`{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null}],"n":2,"stop":["a"],"logprobs":true,"top_logprobs":2}`,
	`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u","name":"x"}],"max_tokens":5,"max_completion_tokens":6,"temperature":0.5,"top_p":0.5,"top_k":-1,"min_p":0.1,"seed":-5,"logit_bias":{"5":1},"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"ignore_eos":true,"min_tokens":1,"cache_salt":"s","priority":1,"user":"u","stop_token_ids":[5]}`,
	`{"model":"test-model","prompt":"Hello"}`,
	`{"model":"test-model","prompt":["a","b"],"echo":true,"logprobs":2,"n":2}`,
	`{"model":"test-model","prompt":[260,261],"max_tokens":3}`,
	`{"model":"test-model","prompt":[[260],[261,262]],"stop":"x"}`,
	`{"model":"test-model","prompt":[[260],"a"]}`,
	`{"model":5}`, `[]`, `{`, ``, `null`, `{"prompt":null,"messages":null}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
	`{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAA=","detail":"low"}}]}]}`,
	`{"model":"test-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":"data:image/jpeg;base64,/9j/4A=="},{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}}]}]}`,
	`{"model":"test-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"input_audio","input_audio":{"data":"!","format":"ogg"}}]}]}`,
	`{"model":"test-model","messages":[{"role":"user","content":[{"type":"text","text":"<__media__>"},{"type":"image_url","image_url":{"url":"data:,"}}]}]}`,
	`{"prompt":[1e400],"max_tokens":-1}`,
	`{"model":"test-model","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"documents":[{"text":"d"}],"chat_template_kwargs":{"enable_thinking":false}}`,
	`{"model":"test-model","messages":[{"role":"assistant","content":"Hel"}],"chat_template":"{% for m in messages %}{{ m.content }}{% endfor %}","add_generation_prompt":false,"continue_final_message":true}`,
}

// fuzzDecode checks the property both targets share: decoding and
// validating any body never panics, and every error is a 4xx.
func fuzzDecode(t *testing.T, body []byte, decode func([]byte) error) {
	err := decode(body)
	if err == nil {
		return
	}
	var ve *frontend.Error
	var nf *modelNotFoundError
	if !errors.As(err, &ve) && !errors.As(err, &nf) {
		t.Fatalf("error is not a validation error: %T %v", err, err)
	}
	if s := toAPIError(err).status; s < 400 || s >= 500 {
		t.Fatalf("status %d for %v", s, err)
	}
}

func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	m := openaitest.NewModel(f)
	h := newHandler(openaitest.NewBackend[Model](m), Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecode(t, body, func(b []byte) error {
			req, opts, err := decodeChat(b)
			if err != nil {
				return err
			}
			_, err = h.prepareChat(context.Background(), req, opts)
			return err
		})
	})
}

func FuzzDecodeCompletionRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	m := openaitest.NewModel(f)
	h := newHandler(openaitest.NewBackend[Model](m), Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecode(t, body, func(b []byte) error {
			req, opts, copts, err := decodeCompletion(b)
			if err != nil {
				return err
			}
			model, err := h.model(context.Background(), req.Model)
			if err != nil {
				return err
			}
			_, _, _, err = h.prepareCompletion(model, req, opts, copts)
			return err
		})
	})
}

// TestFuzzSeedsServe runs the seeds through the real routes: whatever the
// body, the answer is a 200 or a 4xx, never a 5xx.
func TestFuzzSeedsServe(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		for _, s := range fuzzSeeds {
			m := openaitest.NewModel(t)
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, path, s)
			if rec.Code >= 500 {
				t.Errorf("%s %s: status %d: %s", path, s, rec.Code, rec.Body)
			}
		}
	}
}
