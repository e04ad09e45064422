package openai

import (
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

// submitted runs one request and returns what reached the scheduler.
func submitted(t *testing.T, m *openaitest.Model, path, body string) []scheduler.Request {
	t.Helper()
	rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, path, body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return m.Requests()
}

func TestRequestMapping(t *testing.T) {
	chatPrompt := append([]int32{0}, openaitest.Tokens("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")...)
	m := openaitest.NewModel(t)
	reqs := submitted(t, m, "/v1/chat/completions", `{
		"model": "test-model",
		"messages": [{"role": "user", "content": "Hi"}],
		"max_tokens": 7, "min_tokens": 2, "n": 3,
		"temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
		"presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
		"seed": 4294967297, "stop": "END", "stop_token_ids": [260, 5],
		"logit_bias": {"270": -100, "5": 2.5},
		"logprobs": true, "top_logprobs": 3,
		"cache_salt": "tenant-a", "priority": -2, "user": "bob", "ignore_eos": false
	}`)
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	want := scheduler.Request{
		ID:     "chatcmpl-test",
		Prompt: chatPrompt,
		Sampling: engine.Sampling{
			Temperature: 0.5, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1,
			PresencePenalty: 0.5, FrequencyPenalty: -0.5, Seed: 1,
			LogitBias: []engine.TokenBias{{Token: 5, Bias: 2.5}, {Token: 270, Bias: -100}},
			Logprobs:  true, TopLogprobs: 3,
		},
		N: 3, MaxTokens: 7, MinTokens: 2,
		StopTokens:     []int32{1, 5, 260, openaitest.IMEnd},
		Priority:       -2,
		Arrival:        reqs[0].Arrival,
		CacheSalt:      "tenant-a",
		PromptLogprobs: -1,
	}
	slices.Sort(want.StopTokens)
	if !reflect.DeepEqual(reqs[0], want) {
		t.Errorf("request\n got %+v\nwant %+v", reqs[0], want)
	}
}

func TestRequestDefaults(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		body  string
		check func(t *testing.T, reqs []scheduler.Request)
	}{
		{
			name: "chat defaults",
			path: "/v1/chat/completions",
			body: `{"model":"test-model","messages":[{"role":"user","content":"Hi"}]}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				r := reqs[0]
				if r.MaxTokens != 64-10 {
					t.Errorf("MaxTokens = %d, want the rest of the context, 54", r.MaxTokens)
				}
				if r.N != 1 || r.Sampling.Temperature != 1 || r.Sampling.TopP != 1 || r.Sampling.RepetitionPenalty != 1 {
					t.Errorf("defaults: %+v", r)
				}
				if r.Sampling.Seed != 1234 {
					t.Errorf("Seed = %d, want the random one (1234 in tests)", r.Sampling.Seed)
				}
				if !slices.Equal(r.StopTokens, []int32{1, openaitest.IMEnd}) {
					t.Errorf("StopTokens = %v, want the model's", r.StopTokens)
				}
				if r.PromptLogprobs != -1 || r.Sampling.Logprobs {
					t.Errorf("logprobs asked for: %+v", r)
				}
			},
		},
		{
			name: "max_completion_tokens wins",
			path: "/v1/chat/completions",
			body: `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"max_completion_tokens":5}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				if reqs[0].MaxTokens != 5 {
					t.Errorf("MaxTokens = %d", reqs[0].MaxTokens)
				}
			},
		},
		{
			name: "ignore_eos",
			path: "/v1/chat/completions",
			body: `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"ignore_eos":true,"stop_token_ids":[261]}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				if !reqs[0].IgnoreEOS || !slices.Equal(reqs[0].StopTokens, []int32{261}) {
					t.Errorf("IgnoreEOS %v StopTokens %v", reqs[0].IgnoreEOS, reqs[0].StopTokens)
				}
			},
		},
		{
			name: "top_k off",
			path: "/v1/chat/completions",
			body: `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"top_k":-1}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				if reqs[0].Sampling.TopK != 0 {
					t.Errorf("TopK = %d", reqs[0].Sampling.TopK)
				}
			},
		},
		{
			name: "developer renders as system",
			path: "/v1/chat/completions",
			body: `{"model":"test-model","messages":[{"role":"developer","content":"a"},{"role":"user","content":"b"}]}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				want := append([]int32{0}, openaitest.Tokens("<|im_start|>system\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n")...)
				if !slices.Equal(reqs[0].Prompt, want) {
					t.Errorf("Prompt = %v, want %v", reqs[0].Prompt, want)
				}
			},
		},
		{
			name: "completion text prompt gets BOS",
			path: "/v1/completions",
			body: `{"model":"test-model","prompt":"Hello world","max_tokens":4}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				if want := []int32{0, openaitest.Token("Hello"), openaitest.Token(" world")}; !slices.Equal(reqs[0].Prompt, want) {
					t.Errorf("Prompt = %v, want %v", reqs[0].Prompt, want)
				}
				if reqs[0].MaxTokens != 4 {
					t.Errorf("MaxTokens = %d", reqs[0].MaxTokens)
				}
			},
		},
		{
			name: "completion token prompt as given",
			path: "/v1/completions",
			body: `{"model":"test-model","prompt":[260,261]}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				if !slices.Equal(reqs[0].Prompt, []int32{260, 261}) || reqs[0].MaxTokens != 62 {
					t.Errorf("Prompt = %v MaxTokens = %d", reqs[0].Prompt, reqs[0].MaxTokens)
				}
			},
		},
		{
			name: "echo with logprobs asks for prompt logprobs",
			path: "/v1/completions",
			body: `{"model":"test-model","prompt":"a","echo":true,"logprobs":2}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				if reqs[0].PromptLogprobs != 2 || !reqs[0].Sampling.Logprobs || reqs[0].Sampling.TopLogprobs != 2 {
					t.Errorf("%+v", reqs[0])
				}
			},
		},
		{
			name: "multi prompt: one request each, same seed, own max_tokens",
			path: "/v1/completions",
			body: `{"model":"test-model","prompt":["a","Hello world"],"n":2,"seed":7}`,
			check: func(t *testing.T, reqs []scheduler.Request) {
				if len(reqs) != 2 {
					t.Fatalf("%d requests", len(reqs))
				}
				for i, r := range reqs {
					if r.N != 2 || r.Sampling.Seed != 7 {
						t.Errorf("request %d: N %d seed %d", i, r.N, r.Sampling.Seed)
					}
				}
				if reqs[0].ID == reqs[1].ID {
					t.Errorf("ids not unique: %q", reqs[0].ID)
				}
				if reqs[0].MaxTokens != 62 || reqs[1].MaxTokens != 61 {
					t.Errorf("MaxTokens %d %d", reqs[0].MaxTokens, reqs[1].MaxTokens)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, submitted(t, openaitest.NewModel(t), tt.path, tt.body))
		})
	}
}

// TestBOSRule: a template that writes the BOS text itself must not get a
// second BOS from the encoder.
func TestBOSRule(t *testing.T) {
	for _, tt := range []struct {
		name     string
		template string
	}{
		{"template writes BOS", "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"},
		{"template without BOS", "{% for m in messages %}{{ m['content'] }}{% endfor %}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Tok = openaitest.NewTokenizer(t, tt.template)
			reqs := submitted(t, m, "/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":"Hi"}]}`)
			if want := []int32{0, openaitest.Token("Hi")}; !slices.Equal(reqs[0].Prompt, want) {
				t.Errorf("Prompt = %v, want %v (exactly one BOS)", reqs[0].Prompt, want)
			}
		})
	}
}
