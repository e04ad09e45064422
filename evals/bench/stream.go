package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// sseEvent is one server-sent event as the OpenAI routes use them: an
// optional event name and data lines. Comments, id and retry are dropped.
type sseEvent struct {
	// name is the "event:" field, "" for the default "message".
	name string
	// data is the data lines joined by "\n".
	data []byte
	// hasData reports whether the event had any data line; events without
	// one (keep-alive comments) carry nothing for us.
	hasData bool
}

// parseEvent splits one raw event, as returned by
// sse.EventStreamReader.ReadEvent, into its fields, following the
// EventSource rules (a line "field: value" or "field:value"; a line
// starting with ":" is a comment). The result does not alias raw.
func parseEvent(raw []byte) sseEvent {
	var ev sseEvent
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
			if ev.hasData {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, value...)
			ev.hasData = true
		case "event":
			ev.name = string(value)
		}
	}
	return ev
}

// isDone reports whether data is the OpenAI end-of-stream sentinel.
func isDone(data []byte) bool { return string(bytes.TrimSpace(data)) == "[DONE]" }

// streamChunk is the part of a completions or chat.completions chunk the
// benchmark reads. Fields that are absent or null decode to zero values.
type streamChunk struct {
	Choices []streamChoice `json:"choices"`
	// Usage is present on the final chunk when stream_options.include_usage
	// is set (OpenAI puts it on a chunk with no choices; some servers add it
	// to the last content chunk).
	Usage *usage `json:"usage"`
	// Error is set when the server reports a failure after the headers:
	// {"error":{"message":...}} (OpenAI) or {"error":"..."}.
	Error json.RawMessage `json:"error"`
}

type streamChoice struct {
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

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// hasContent reports whether the chunk carries generated output. A chat
// stream's first chunk (role only, content "") and a final chunk holding
// only finish_reason or usage carry none and must not start the TTFT clock
// or count as a token.
func (c *streamChunk) hasContent() bool {
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

// finished reports whether a choice of the chunk has a finish_reason.
func (c *streamChunk) finished() bool {
	for i := range c.Choices {
		if c.Choices[i].FinishReason != "" {
			return true
		}
	}
	return false
}

// errorText returns the message of an OpenAI or V2 style error value, or ""
// when raw is absent or null.
func errorText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return orUnknown(s)
	}
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return truncate(string(raw), 300)
}

// errorBody extracts a readable message from a non-200 response body.
func errorBody(body []byte) string {
	var env struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"` // FastAPI validation errors
	}
	if json.Unmarshal(body, &env) == nil {
		if msg := errorText(env.Error); msg != "" {
			return msg
		}
		if d := bytes.TrimSpace(env.Detail); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
			var s string
			if json.Unmarshal(d, &s) == nil {
				return s
			}
			return truncate(string(d), 300)
		}
	}
	return truncate(strings.TrimSpace(string(body)), 300)
}

// decodeChunk decodes a data event and returns the failure it reports, or ""
// if it reports none. Data that is not JSON is itself a failure: the stream
// is not an OpenAI one.
func decodeChunk(ev sseEvent) (streamChunk, string) {
	var c streamChunk
	if ev.name == "error" {
		if err := json.Unmarshal(ev.data, &c); err == nil {
			if msg := errorText(c.Error); msg != "" {
				return c, "error event: " + msg
			}
		}
		return c, "error event: " + orUnknown(truncate(string(ev.data), 300))
	}
	if err := json.Unmarshal(ev.data, &c); err != nil {
		return c, fmt.Sprintf("bad stream chunk %q: %v", truncate(string(ev.data), 100), err)
	}
	if msg := errorText(c.Error); msg != "" {
		return c, "error event: " + msg
	}
	return c, ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

func orUnknown(s string) string {
	if s == "" {
		return "(no message)"
	}
	return s
}
