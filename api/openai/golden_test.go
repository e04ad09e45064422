package openai

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// indentJSON pretty-prints a JSON body so golden files diff well.
func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// streamScript answers "Hello world!" in three batches per choice: "Hel",
// "lo wo", "rld!" + stop token. Choices advance together.
func streamScript(req *scheduler.Request) []fakeBatch {
	parts := [][]int32{{tok("Hel")}, {tok("lo"), tok(" wo")}, {tok("rld"), tok("!"), imEnd}}
	var batches []fakeBatch
	for k, p := range parts {
		var b fakeBatch
		for i := range req.N {
			o := scheduler.Output{Choice: i, Tokens: p}
			if k == len(parts)-1 {
				o.Finish = scheduler.FinishStop
			}
			b.outs = append(b.outs, o)
			b.events++
		}
		batches = append(batches, b)
	}
	return batches
}

// logprobScript answers "Hello world" with logprobs and stops at length.
func logprobScript(req *scheduler.Request) []fakeBatch {
	out := scheduler.Output{
		Tokens: []int32{tok("Hello"), tok(" world")},
		Logprobs: []engine.Logprobs{
			lp("Hello", -0.25, alt("Hello", -0.25), alt("Hi", -1.5)),
			lp(" world", -0.5, alt(" there", -0.75), alt(" world", -0.5)),
		},
		Finish: scheduler.FinishLength,
	}
	if req.PromptLogprobs >= 0 {
		for range len(req.Prompt) - 1 {
			out.PromptLogprobs = append(out.PromptLogprobs, lp("a", -2, alt("b", -1)))
		}
	}
	return []fakeBatch{{outs: []scheduler.Output{out}}}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		body   string
		script func(*scheduler.Request) []fakeBatch
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
			m := newFakeModel(t)
			m.script = tt.script
			m.cached = 3
			if tt.stream {
				m.gate = make(chan struct{}, 1000)
			}
			rec := do(t, testHandler(m), m, http.MethodPost, tt.path, tt.body)
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
				got = indentJSON(t, got)
			}
			checkGolden(t, tt.name, got)
			if m.cancels != 0 {
				t.Errorf("a request that finished normally was cancelled")
			}
		})
	}
}
