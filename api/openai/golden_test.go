package openai

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

// streamScript answers "Hello world!" in three batches per choice: "Hel",
// "lo wo", "rld!" + stop token. Choices advance together.
func streamScript(req *scheduler.Request) []openaitest.Batch {
	parts := [][]int32{{openaitest.Token("Hel")}, {openaitest.Token("lo"), openaitest.Token(" wo")}, {openaitest.Token("rld"), openaitest.Token("!"), openaitest.IMEnd}}
	var batches []openaitest.Batch
	for k, p := range parts {
		var b openaitest.Batch
		for i := range req.N {
			o := scheduler.Output{Choice: i, Tokens: p}
			if k == len(parts)-1 {
				o.Finish = scheduler.FinishStop
			}
			b.Outs = append(b.Outs, o)
			b.Events++
		}
		batches = append(batches, b)
	}
	return batches
}

// logprobScript answers "Hello world" with logprobs and stops at length.
func logprobScript(req *scheduler.Request) []openaitest.Batch {
	out := scheduler.Output{
		Tokens: []int32{openaitest.Token("Hello"), openaitest.Token(" world")},
		Logprobs: []engine.Logprobs{
			openaitest.Logprob("Hello", -0.25, openaitest.Alt("Hello", -0.25), openaitest.Alt("Hi", -1.5)),
			openaitest.Logprob(" world", -0.5, openaitest.Alt(" there", -0.75), openaitest.Alt(" world", -0.5)),
		},
		Finish: scheduler.FinishLength,
	}
	if req.PromptLogprobs >= 0 {
		for range len(req.Prompt) - 1 {
			out.PromptLogprobs = append(out.PromptLogprobs, openaitest.Logprob("a", -2, openaitest.Alt("b", -1)))
		}
	}
	return []openaitest.Batch{{Outs: []scheduler.Output{out}}}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		body   string
		script func(*scheduler.Request) []openaitest.Batch
		stream bool
	}{
		{
			name: "chat.json",
			path: "/v1/chat/completions",
			body: `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"max_tokens":10}`,
		},
		{
			name:   "chat_logprobs.json",
			path:   "/v1/chat/completions",
			body:   `{"model":"test-model","messages":[{"role":"system","content":"c"},{"role":"user","content":[{"type":"text","text":"Hi"}]}],"logprobs":true,"top_logprobs":2,"max_tokens":2}`,
			script: logprobScript,
		},
		{
			name: "completion.json",
			path: "/v1/completions",
			body: `{"model":"test-model","prompt":["a","b"],"n":2,"max_tokens":10}`,
		},
		{
			name:   "completion_echo_logprobs.json",
			path:   "/v1/completions",
			body:   `{"model":"test-model","prompt":"Hi there","echo":true,"logprobs":1,"max_tokens":2}`,
			script: logprobScript,
		},
		{
			name:   "chat_stream.sse",
			path:   "/v1/chat/completions",
			body:   `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"n":2,"stream":true,"stream_options":{"include_usage":true}}`,
			script: streamScript,
			stream: true,
		},
		{
			name:   "completion_stream.sse",
			path:   "/v1/completions",
			body:   `{"model":"test-model","prompt":"Hi","stream":true,"stream_options":{"include_usage":true}}`,
			script: streamScript,
			stream: true,
		},
		{
			name:   "chat_stream_plain.sse",
			path:   "/v1/chat/completions",
			body:   `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"stream":true}`,
			script: streamScript,
			stream: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openaitest.NewModel(t)
			m.Script = tt.script
			m.Cached = 3
			if tt.stream {
				m.Gate = make(chan struct{}, 1000)
			}
			rec := openaitest.Do(t, testHandler(m), m, http.MethodPost, tt.path, tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			got := rec.Body.Bytes()
			if tt.stream {
				if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
					t.Errorf("Content-Type = %q", ct)
				}
				for _, h := range []string{"Cache-Control: no-cache", "X-Accel-Buffering: no"} {
					k, v, _ := bytes.Cut([]byte(h), []byte(": "))
					if got := rec.Header().Get(string(k)); got != string(v) {
						t.Errorf("%s = %q, want %q", k, got, v)
					}
				}
			} else {
				got = openaitest.IndentJSON(t, got)
			}
			openaitest.CheckGolden(t, tt.name, got)
			if m.Cancels() != 0 {
				t.Errorf("a request that finished normally was cancelled")
			}
		})
	}
}
