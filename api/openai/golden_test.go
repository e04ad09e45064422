package openai

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
)

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		body   string
		script openaitest.Script
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
			script: openaitest.LogprobScript,
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
			script: openaitest.LogprobScript,
		},
		{
			name:   "chat_stream.sse",
			path:   "/v1/chat/completions",
			body:   `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"n":2,"stream":true,"stream_options":{"include_usage":true}}`,
			script: openaitest.StreamScript,
			stream: true,
		},
		{
			name:   "completion_stream.sse",
			path:   "/v1/completions",
			body:   `{"model":"test-model","prompt":"Hi","stream":true,"stream_options":{"include_usage":true}}`,
			script: openaitest.StreamScript,
			stream: true,
		},
		{
			name:   "chat_stream_plain.sse",
			path:   "/v1/chat/completions",
			body:   `{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"stream":true}`,
			script: openaitest.StreamScript,
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
