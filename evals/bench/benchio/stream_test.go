package benchio

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/r3labs/sse/v2"
)

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		event   string
		data    string
		hasData bool
	}{
		{"data with space", `data: {"a":1}`, "", `{"a":1}`, true},
		{"data without space", `data:{"a":1}`, "", `{"a":1}`, true},
		{"done", "data: [DONE]", "", "[DONE]", true},
		{"comment only", ": keep-alive", "", "", false},
		{"named event", "event: error\ndata: oops", "error", "oops", true},
		{"multi-line data", "data: a\ndata: b", "", "a\nb", true},
		{"crlf", "data: x\r\nid: 3\r\n", "", "x", true},
		{"empty data field", "data", "", "", true},
		{"only two spaces kept", "data:  x", "", " x", true},
		{"unknown fields ignored", "retry: 10\nfoo: bar", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := ParseEvent([]byte(tt.raw))
			if ev.Name != tt.event || string(ev.Data) != tt.data || ev.HasData != tt.hasData {
				t.Errorf("ParseEvent(%q) = {%q %q %v}, want {%q %q %v}", tt.raw, ev.Name, ev.Data, ev.HasData, tt.event, tt.data, tt.hasData)
			}
		})
	}
}

// TestEventStreamReader checks the split the sse package does together with
// ParseEvent on whole streams as servers write them.
func TestEventStreamReader(t *testing.T) {
	stream := ": ping\n\n" +
		"data: {\"choices\":[{\"text\":\"a\"}]}\n\n" +
		"data: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n" +
		"event: error\ndata: {\"error\":\"x\"}\n\n" +
		"data: [DONE]\n\n"
	r := sse.NewEventStreamReader(strings.NewReader(stream), 1<<16)
	var got []string
	for {
		raw, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ev := ParseEvent(raw)
		if ev.HasData {
			got = append(got, ev.Name+"|"+string(ev.Data))
		}
	}
	want := []string{`|{"choices":[{"text":"a"}]}`, `|{"choices":[{"text":"b"}]}`, `error|{"error":"x"}`, "|[DONE]"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecodeChunk(t *testing.T) {
	tests := []struct {
		name       string
		event      string
		data       string
		content    bool
		completion int // usage.completion_tokens, -1 for no usage
		failure    string
	}{
		{"completion text", "", `{"choices":[{"index":0,"text":" the","finish_reason":null}]}`, true, -1, ""},
		{"completion empty text", "", `{"choices":[{"index":0,"text":"","finish_reason":"length"}]}`, false, -1, ""},
		{"chat role chunk", "", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, false, -1, ""},
		{"chat null content", "", `{"choices":[{"index":0,"delta":{"content":null}}]}`, false, -1, ""},
		{"chat content", "", `{"choices":[{"index":0,"delta":{"content":"hi"}}]}`, true, -1, ""},
		{"chat reasoning_content", "", `{"choices":[{"delta":{"reasoning_content":"hm"}}]}`, true, -1, ""},
		{"chat reasoning", "", `{"choices":[{"delta":{"reasoning":"hm"}}]}`, true, -1, ""},
		{"chat tool call", "", `{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}`, true, -1, ""},
		{"chat null tool calls", "", `{"choices":[{"delta":{"tool_calls":null}}]}`, false, -1, ""},
		{"usage chunk", "", `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`, false, 7, ""},
		{"usage on last content chunk", "", `{"choices":[{"text":"x"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`, true, 7, ""},
		{"null usage", "", `{"choices":[{"text":"x"}],"usage":null}`, true, -1, ""},
		{"null error", "", `{"choices":[{"text":"x"}],"error":null}`, true, -1, ""},
		{"openai error", "", `{"error":{"message":"KV cache full","type":"server_error","code":503}}`, false, -1, "error event: KV cache full"},
		{"string error", "", `{"error":"model crashed"}`, false, -1, "error event: model crashed"},
		{"odd error", "", `{"error":{"code":1}}`, false, -1, `error event: {"code":1}`},
		{"named error event", "error", `{"error":{"message":"boom"}}`, false, -1, "error event: boom"},
		{"named error event, text", "error", `boom`, false, -1, "error event: boom"},
		{"not json", "", `hello`, false, -1, "bad stream chunk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, failure := DecodeChunk(Event{Name: tt.event, Data: []byte(tt.data), HasData: true})
			if tt.failure == "" && failure != "" || !strings.HasPrefix(failure, tt.failure) {
				t.Fatalf("failure = %q, want prefix %q", failure, tt.failure)
			}
			if failure != "" {
				return
			}
			if got := c.HasContent(); got != tt.content {
				t.Errorf("HasContent = %v, want %v", got, tt.content)
			}
			got := -1
			if c.Usage != nil {
				got = c.Usage.CompletionTokens
			}
			if got != tt.completion {
				t.Errorf("completion tokens = %d, want %d", got, tt.completion)
			}
		})
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":{"message":"too many requests","type":"rate_limit","code":429}}`, "too many requests"},
		{`{"error":"model not found"}`, "model not found"},
		{`{"detail":"Not Found"}`, "Not Found"},
		{`{"detail":[{"loc":["body"]}]}`, `[{"loc":["body"]}]`},
		{"upstream connect error\n", "upstream connect error"},
		{"", ""},
		{strings.Repeat("é", 400), strings.Repeat("é", 150) + "..."},
	}
	for _, tt := range tests {
		if got := ErrorBody([]byte(tt.body)); got != tt.want {
			t.Errorf("ErrorBody(%.40q) = %.60q, want %.60q", tt.body, got, tt.want)
		}
	}
}

// FuzzParseStream feeds arbitrary server bytes through the reader, the
// event parser and the chunk decoder: nothing may panic or loop.
func FuzzParseStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: error\r\ndata: {\"error\":{\"message\":\"x\"}}\r\n\r\n"))
	f.Add([]byte(": c\n\ndata\n\ndata:{\"usage\":{\"completion_tokens\":3}}\r\r"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[]}}],\"error\":null}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := sse.NewEventStreamReader(strings.NewReader(string(stream)), 1<<16)
		for range 1000 {
			raw, err := r.ReadEvent()
			if err != nil {
				return
			}
			ev := ParseEvent(raw)
			if !ev.HasData || IsDone(ev.Data) {
				continue
			}
			c, failure := DecodeChunk(ev)
			if failure == "" {
				_ = c.HasContent()
			}
		}
	})
}

// BenchmarkChunk measures the client's cost per streamed token (parse and
// decode one chunk), which is overhead the benchmark adds on the machine it
// shares with the server.
func BenchmarkChunk(b *testing.B) {
	raw := []byte(`data: {"id":"cmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}`)
	for b.Loop() {
		ev := ParseEvent(raw)
		c, failure := DecodeChunk(ev)
		if failure != "" || !c.HasContent() {
			b.Fatal(failure)
		}
	}
}
