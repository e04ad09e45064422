package openai

import (
	"crypto/rand"
	"encoding/json"
	"strings"

	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/tokenizer"
)

// Tool calling. The tools are rendered into the prompt by the chat template
// (chat_template.go); this file decides how the answer becomes tool calls,
// by tool_choice, as vLLM does:
//
//   - "none": the answer is content; no call is parsed.
//   - "auto" (the default with tools): the model decides. Its answer is
//     split by the tool-call parser of its template's family
//     (tokenizer.ToolCallParserFor: Hermes/Qwen <tool_call>, Llama 3.x
//     JSON, Mistral [TOOL_CALLS], ...); a template with no known syntax
//     gets no parsing. Calls arrive whole when the answer ends.
//   - "required": the answer is constrained by a grammar to a JSON array
//     of calls, [{"name": ..., "parameters": {...}}, ...] (one call when
//     parallel_tool_calls is false), each call's parameters by its
//     function's schema, so the calls are well-formed whatever the model.
//   - a named function: the answer is constrained to that function's
//     parameters; it is the one call's arguments.
//
// Constrained calls stream as they are generated: a first tool_calls delta
// with the call's id, type and name, then its arguments piece by piece.

// toolPlan is a request's decided tool handling (frontend.NewToolPlan).
type toolPlan = frontend.ToolPlan

// toolFields are the request fields that choose the handling.
type toolFields struct {
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// toolModes are the tool_choice strings of OpenAI's chat and Responses.
var toolModes = map[string]frontend.ToolMode{"none": frontend.ToolNone, "auto": frontend.ToolAuto, "required": frontend.ToolRequired}

// decodeToolChoice decodes a chat request body's tool_choice and
// parallel_tool_calls into req.
func decodeToolChoice(body []byte, req *frontend.Request) error {
	var f toolFields
	if err := decodeJSON(body, &f); err != nil {
		return err
	}
	req.ParallelToolCalls = f.ParallelToolCalls
	tc := frontend.ToolChoice{Text: string(f.ToolChoice)}
	switch jsonKind(f.ToolChoice) {
	case "nothing", "null":
		tc.Text = ""
	case "string":
		var choice string
		_ = json.Unmarshal(f.ToolChoice, &choice)
		mode, ok := toolModes[choice]
		if !ok {
			return invalid("tool_choice", "Unknown tool_choice %q; use \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}.", choice)
		}
		tc.Mode = mode
	case "object":
		var named struct {
			Type     *string `json:"type"`
			Function *struct {
				Name *string `json:"name"`
			} `json:"function"`
		}
		if err := decodeJSON(f.ToolChoice, &named); err != nil {
			return withPrefix("tool_choice", err)
		}
		if named.Type != nil && *named.Type != "function" {
			return invalid("tool_choice.type", "tool_choice.type must be \"function\", got %q.", *named.Type)
		}
		if named.Function == nil || named.Function.Name == nil {
			return invalid("tool_choice.function.name", "A named tool_choice needs function.name.")
		}
		tc.Mode, tc.Name = frontend.ToolNamed, *named.Function.Name
	default:
		return typeError("tool_choice", "a string or an object", jsonKind(f.ToolChoice))
	}
	req.ToolChoice = tc
	return nil
}

// toolChoiceText is how errors quote a tool choice given in another form
// than chat's: as chat would have written it.
func toolChoiceText(mode frontend.ToolMode, name string) string {
	var v any
	switch mode {
	case frontend.ToolNone:
		v = "none"
	case frontend.ToolAuto:
		v = "auto"
	case frontend.ToolRequired:
		v = "required"
	case frontend.ToolNamed:
		v = map[string]any{"type": "function", "function": map[string]any{"name": name}}
	default:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// toolCallDelta is what one push adds to a tool call: the header once
// (id, name), then arguments text.
type toolCallDelta struct {
	index     int
	id, name  string // set on the call's first delta
	arguments string
}

// toolStream turns one choice's generated text into content and tool
// calls, incrementally.
type toolStream struct {
	plan *toolPlan
	// parser splits auto answers.
	parser *tokenizer.ToolCallParser
	// scan reads the constrained JSON of the required mode.
	scan callArrayScanner
	// calls made so far, in order.
	calls []tokenizer.ToolCall
	// started: the named mode's call was announced.
	started bool
}

func newToolStream(tp *toolPlan) *toolStream {
	s := &toolStream{plan: tp}
	if tp.Mode == frontend.ToolAuto && tp.Parser != "" {
		s.parser, _ = tokenizer.NewToolCallParser(tp.Parser)
	}
	return s
}

// active reports whether the stream changes the answer at all.
func (s *toolStream) active() bool { return s.parser != nil || s.plan.Constrained() }

// push adds generated text and returns the content and call deltas it
// settles.
func (s *toolStream) push(text string) (content string, deltas []toolCallDelta) {
	switch {
	case s.plan.Mode == frontend.ToolNamed:
		if !s.started {
			s.started = true
			s.calls = append(s.calls, tokenizer.ToolCall{ID: newCallID(), Type: "function", Name: s.plan.Tools[s.plan.Named].Name})
			deltas = append(deltas, toolCallDelta{index: 0, id: s.calls[0].ID, name: s.calls[0].Name})
		}
		if text != "" {
			s.calls[0].Arguments += text
			deltas = append(deltas, toolCallDelta{index: 0, arguments: text})
		}
		return "", mergeToolDeltas(deltas)
	case s.plan.Mode == frontend.ToolRequired:
		for _, ev := range s.scan.push(text) {
			if ev.start {
				s.calls = append(s.calls, tokenizer.ToolCall{ID: newCallID(), Type: "function", Name: ev.name})
				deltas = append(deltas, toolCallDelta{index: len(s.calls) - 1, id: s.calls[len(s.calls)-1].ID, name: ev.name})
			}
			if ev.arguments != "" && len(s.calls) > 0 {
				s.calls[len(s.calls)-1].Arguments += ev.arguments
				deltas = append(deltas, toolCallDelta{index: len(s.calls) - 1, arguments: ev.arguments})
			}
		}
		return "", mergeToolDeltas(deltas)
	case s.parser != nil:
		return s.parser.Push(text), nil
	}
	return text, nil
}

// flush ends the answer: the auto mode's calls, whole, and what content
// was held back.
func (s *toolStream) flush() (content string, deltas []toolCallDelta) {
	if s.parser == nil {
		return "", nil
	}
	content, calls := s.parser.Flush()
	for _, c := range calls {
		if c.ID == "" {
			c.ID = newCallID()
		}
		c.Type = "function"
		s.calls = append(s.calls, c)
		deltas = append(deltas, toolCallDelta{index: len(s.calls) - 1, id: c.ID, name: c.Name, arguments: c.Arguments})
	}
	return content, deltas
}

// mergeToolDeltas joins consecutive deltas of one call.
func mergeToolDeltas(ds []toolCallDelta) []toolCallDelta {
	var out []toolCallDelta
	for _, d := range ds {
		if n := len(out); n > 0 && out[n-1].index == d.index && d.id == "" {
			out[n-1].arguments += d.arguments
			continue
		}
		out = append(out, d)
	}
	return out
}

// newCallID is an OpenAI-style tool call id.
func newCallID() string { return "call_" + strings.ToLower(rand.Text()[:24]) }

// callEvent is what the scanner saw: a call's start (with its name) and
// text of its arguments.
type callEvent struct {
	start     bool
	name      string
	arguments string
}

// callArrayScanner reads [{"name": "f", "parameters": {...}}, ...]
// incrementally, as the required mode's grammar writes it (name first,
// any JSON whitespace between tokens), and reports each call's name as
// soon as the arguments start and the arguments' text as it comes.
type callArrayScanner struct {
	depth    int  // nesting of [ and {, outside strings
	inString bool // inside a string
	escape   bool // after a backslash inside a string
	// At depth 2 (inside a call object): the last key read, the string
	// being read (key or the name's value), whether a value is expected.
	key       string
	str       strings.Builder
	afterKey  bool // the key was read, ':' not yet
	expecting bool // ':' read, the value not started
	name      string
	// inArgs: the parameters value is being copied; argsDepth is the
	// depth it started at.
	inArgs    bool
	argsDepth int
}

func (sc *callArrayScanner) push(text string) []callEvent {
	var evs []callEvent
	var args strings.Builder
	flushArgs := func() {
		if args.Len() > 0 {
			evs = append(evs, callEvent{arguments: args.String()})
			args.Reset()
		}
	}
	for _, r := range text {
		if sc.inArgs {
			args.WriteRune(r)
			sc.step(r)
			// The value ended: back at its starting depth, outside a
			// string, after a closing bracket (object or array values).
			if !sc.inString && sc.depth == sc.argsDepth && (r == '}' || r == ']') {
				sc.inArgs = false
				flushArgs()
			}
			continue
		}
		if !sc.inString && sc.depth == 2 && sc.expecting && sc.key == "parameters" && (r == '{' || r == '[') {
			sc.step(r)
			sc.expecting = false
			sc.inArgs, sc.argsDepth = true, 2
			evs = append(evs, callEvent{start: true, name: sc.name})
			args.WriteRune(r)
			continue
		}
		wasString := sc.inString
		sc.step(r)
		if sc.depth != 2 {
			continue
		}
		switch {
		case wasString && sc.inString:
			if !sc.escape && r != '\\' {
				sc.str.WriteRune(r)
			}
		case wasString && !sc.inString: // a string at depth 2 ended
			s := sc.str.String()
			sc.str.Reset()
			if sc.expecting && sc.key == "name" {
				sc.name, sc.expecting = s, false
			} else {
				sc.key, sc.afterKey = s, true
			}
		case r == ':' && sc.afterKey:
			sc.afterKey, sc.expecting = false, true
		}
	}
	flushArgs()
	return evs
}

// step tracks strings and nesting for one rune.
func (sc *callArrayScanner) step(r rune) {
	switch {
	case sc.inString && sc.escape:
		sc.escape = false
	case sc.inString && r == '\\':
		sc.escape = true
	case sc.inString && r == '"':
		sc.inString = false
	case sc.inString:
	case r == '"':
		sc.inString = true
	case r == '{' || r == '[':
		sc.depth++
	case r == '}' || r == ']':
		sc.depth--
	}
}

// setTools applies the tool plan to the request: in the constrained modes,
// the grammar that holds the answer to calls (each function's parameters
// checked as a JSON schema, errors naming the tool); in the auto mode, a
// decoder that keeps control tokens, since several families write their
// call markers as control tokens ([TOOL_CALLS], <|python_tag|>).
func (p *genParams) setTools(tp *toolPlan, m Model, skipSpecialSet bool, paramsName string) error {
	if tp.Mode == frontend.ToolAuto && tp.Parser != "" && !skipSpecialSet {
		p.keepSpecial = true
	}
	if !tp.Constrained() {
		return nil
	}
	if p.base.Sampling.Grammar != "" {
		return invalid("tool_choice", "tool_choice %s cannot be combined with structured output (response_format or guided_*): both decide the answer's form.", tp.ChoiceName())
	}
	if p.base.MinTokens > 0 {
		return invalid("min_tokens", "min_tokens cannot be combined with tool_choice %s: the grammar decides where the calls end.", tp.ChoiceName())
	}
	g, err := tp.Grammar(m, paramsName)
	if err != nil {
		return err
	}
	p.base.Sampling.Grammar = g
	return nil
}

// wireToolCalls converts calls to a message's tool_calls.
func wireToolCalls(calls []tokenizer.ToolCall) []chatToolCall {
	out := make([]chatToolCall, len(calls))
	for i, c := range calls {
		out[i] = chatToolCall{ID: c.ID, Type: "function", Function: chatToolFunction{Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// wireToolDeltas converts call pieces to a chunk's tool_calls.
func wireToolDeltas(ds []toolCallDelta) []chatToolCall {
	out := make([]chatToolCall, len(ds))
	for i, d := range ds {
		out[i] = chatToolCall{Index: &ds[i].index, ID: d.id, Function: chatToolFunction{Name: d.name, Arguments: d.arguments}}
		if d.id != "" {
			out[i].Type = "function"
		}
	}
	return out
}

// toolFinish is the finish reason of a choice that made calls: a choice
// that ended on its own (stop) ended to call tools.
func toolFinish(finish string, calls int) string {
	if calls > 0 && finish == "stop" {
		return "tool_calls"
	}
	return finish
}
