package benchio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Event is one server-sent event as the OpenAI routes use them: an
// optional event name and data lines. Comments, id and retry are dropped.
type Event struct {
	// Name is the "event:" field, "" for the default "message".
	Name string
	// Data is the data lines joined by "\n".
	Data []byte
	// HasData reports whether the event had any data line; events without
	// one (keep-alive comments) carry nothing for us.
	HasData bool
}

// ParseEvent splits one raw event, as returned by
// sse.EventStreamReader.ReadEvent, into its fields, following the
// EventSource rules (a line "field: value" or "field:value"; a line
// starting with ":" is a comment). The result does not alias raw.
func ParseEvent(raw []byte) Event {
	var ev Event
	for _, line := range bytes.FieldsFunc(raw, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data":
			if ev.HasData {
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data = append(ev.Data, value...)
			ev.HasData = true
		case "event":
			ev.Name = string(value)
		}
	}
	return ev
}

// IsDone reports whether data is the OpenAI end-of-stream sentinel.
func IsDone(data []byte) bool { return string(bytes.TrimSpace(data)) == "[DONE]" }

// Chunk is the part of a completions or chat.completions chunk the
// benchmark reads. Fields that are absent or null decode to zero values.
type Chunk struct {
	Choices []Choice `json:"choices"`
	// Usage is present on the final chunk when stream_options.include_usage
	// is set (OpenAI puts it on a chunk with no choices; some servers add it
	// to the last content chunk).
	Usage *Usage `json:"usage"`
	// Error is set when the server reports a failure after the headers:
	// {"error":{"message":...}} (OpenAI) or {"error":"..."}.
	Error json.RawMessage `json:"error"`
}

// Choice is one choice of a Chunk.
type Choice struct {
	// Text is the generated text of a completions chunk.
	Text string `json:"text"`
	// FinishReason is set on a choice's last chunk.
	FinishReason string `json:"finish_reason"`
	// Delta is the generated part of a chat chunk.
	Delta struct {
		Content string `json:"content"`
		// ReasoningContent (vLLM, DeepSeek) and Reasoning (Ollama, OpenRouter)
		// carry the thinking part of reasoning models: generated tokens too.
		ReasoningContent string          `json:"reasoning_content"`
		Reasoning        string          `json:"reasoning"`
		ToolCalls        json.RawMessage `json:"tool_calls"`
	} `json:"delta"`
}

// Usage is a chunk's token counts, as the server reports them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// HasContent reports whether the chunk carries generated output. A chat
// stream's first chunk (role only, content "") and a final chunk holding
// only finish_reason or usage carry none and must not start the TTFT clock
// or count as a token.
func (c *Chunk) HasContent() bool {
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Text != "" || ch.Delta.Content != "" || ch.Delta.ReasoningContent != "" || ch.Delta.Reasoning != "" {
			return true
		}
		if tc := bytes.TrimSpace(ch.Delta.ToolCalls); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) && !bytes.Equal(tc, []byte("[]")) {
			return true
		}
	}
	return false
}

// Finished reports whether a choice of the chunk has a finish_reason.
func (c *Chunk) Finished() bool {
	for i := range c.Choices {
		if c.Choices[i].FinishReason != "" {
			return true
		}
	}
	return false
}

// ErrorText returns the message of an OpenAI or V2 style error value, or ""
// when raw is absent or null.
func ErrorText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return OrUnknown(s)
	}
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return Truncate(string(raw), 300)
}

// ErrorBody extracts a readable message from a non-200 response body.
func ErrorBody(body []byte) string {
	var env struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"` // FastAPI validation errors
	}
	if json.Unmarshal(body, &env) == nil {
		if msg := ErrorText(env.Error); msg != "" {
			return msg
		}
		if d := bytes.TrimSpace(env.Detail); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
			var s string
			if json.Unmarshal(d, &s) == nil {
				return s
			}
			return Truncate(string(d), 300)
		}
	}
	return Truncate(strings.TrimSpace(string(body)), 300)
}

// DecodeChunk decodes a data event and returns the failure it reports, or ""
// if it reports none. Data that is not JSON is itself a failure: the stream
// is not an OpenAI one.
func DecodeChunk(ev Event) (Chunk, string) {
	var c Chunk
	if ev.Name == "error" {
		if err := json.Unmarshal(ev.Data, &c); err == nil {
			if msg := ErrorText(c.Error); msg != "" {
				return c, "error event: " + msg
			}
		}
		return c, "error event: " + OrUnknown(Truncate(string(ev.Data), 300))
	}
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		return c, fmt.Sprintf("bad stream chunk %q: %v", Truncate(string(ev.Data), 100), err)
	}
	if msg := ErrorText(c.Error); msg != "" {
		return c, "error event: " + msg
	}
	return c, ""
}

// Truncate cuts s to at most n bytes, on a rune boundary, marking a cut
// with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// OrUnknown is s, or "(no message)" when s is empty.
func OrUnknown(s string) string {
	if s == "" {
		return "(no message)"
	}
	return s
}
