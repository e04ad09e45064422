package frontend

import (
	"encoding/json"
	"strings"

	"github.com/llmserve/llmserve/tokenizer"
)

// genericParser reads the auto mode's answer in the generic tool format
// (tools_generic.go): an answer whose first non-space character is "{" is
// held until it ends, then read as {"tool_call": call}, {"tool_calls":
// [call, ...]} or {"response": text}; one that is none of them (or not
// JSON) is the content as written. Any other answer is content, passed on
// as it comes.
type genericParser struct {
	held  strings.Builder
	plain bool
}

// push adds answer text and returns the content it settles.
func (p *genericParser) push(text string) string {
	if p.plain {
		return text
	}
	p.held.WriteString(text)
	s := p.held.String()
	t := strings.TrimLeft(s, " \t\r\n")
	if t == "" || t[0] == '{' {
		return ""
	}
	p.plain = true
	p.held.Reset()
	return s
}

// flush ends the answer: the calls of a generic answer, or the content.
func (p *genericParser) flush() (string, []tokenizer.ToolCall) {
	if p.plain {
		return "", nil
	}
	s := p.held.String()
	p.held.Reset()
	if content, calls, ok := parseGeneric(s); ok {
		return content, calls
	}
	return s, nil
}

// genericCall is a call in the generic format.
type genericCall struct {
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// parseGeneric reads an answer in the generic format; ok is false when s
// is not one JSON object of its shapes.
func parseGeneric(s string) (content string, calls []tokenizer.ToolCall, ok bool) {
	var v map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(s))
	if dec.Decode(&v) != nil || strings.TrimSpace(s[dec.InputOffset():]) != "" || len(v) != 1 {
		return "", nil, false
	}
	call := func(raw json.RawMessage) (tokenizer.ToolCall, bool) {
		var c genericCall
		if json.Unmarshal(raw, &c) != nil || c.Name == nil || *c.Name == "" {
			return tokenizer.ToolCall{}, false
		}
		return tokenizer.ToolCall{Type: "function", Name: *c.Name, Arguments: argumentsText(c.Arguments)}, true
	}
	if raw, ok := v["tool_call"]; ok {
		c, ok := call(raw)
		return "", []tokenizer.ToolCall{c}, ok
	}
	if raw, ok := v["tool_calls"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
			return "", nil, false
		}
		for _, r := range list {
			c, ok := call(r)
			if !ok {
				return "", nil, false
			}
			calls = append(calls, c)
		}
		return "", calls, true
	}
	if raw, ok := v["response"]; ok {
		var text string
		if json.Unmarshal(raw, &text) == nil {
			return text, nil, true
		}
		return string(raw), nil, true
	}
	return "", nil, false
}

// argumentsText is a call's arguments as the OpenAI API carries them: the
// JSON text of the object (absent or null: {}); arguments written as a
// JSON string holding the object are that string.
func argumentsText(raw json.RawMessage) string {
	t := strings.TrimSpace(string(raw))
	switch {
	case t == "" || t == "null":
		return "{}"
	case t[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return t
}
