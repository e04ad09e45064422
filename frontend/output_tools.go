package frontend

import (
	"crypto/rand"
	"strings"

	"github.com/llmserve/llmserve/tokenizer"
)

// Tool calls in the answer, by the request's ToolPlan (as vLLM does):
//
//   - ToolAuto with a parser: the model's own syntax (Hermes/Qwen
//     <tool_call>, Llama 3.x JSON, Mistral [TOOL_CALLS], ...) is split from
//     the content by tokenizer.ToolCallParser; calls arrive whole when the
//     answer ends.
//   - ToolRequired: the grammar holds the answer to a JSON array of calls,
//     [{"name": ..., "parameters": {...}}, ...]; each call's header arrives
//     as soon as its arguments start, then its arguments piece by piece.
//   - ToolNamed: the answer is the one call's arguments, streamed as they
//     come after a first delta with the call's id and name.
//
// With the generic format (ToolPlan.Generic, tools_generic.go) the
// required mode's answer is its JSON shape, read by the same scanner (a
// call's header when its arguments start, then the arguments piece by
// piece); the named mode's is the arguments, as above; the auto mode's
// answer is read back by genericParser when it is one of those shapes,
// calls arriving whole when the answer ends.
//
// Otherwise the answer is content.

// ToolCallDelta is what a delta adds to a tool call: its header once (ID,
// Name), then text of its arguments.
type ToolCallDelta struct {
	// Index is the call's place among the answer's calls.
	Index int
	// ID and Name are set on the call's first delta.
	ID, Name  string
	Arguments string
}

// MergeToolCallDeltas joins consecutive deltas of one call (a protocol
// that sends one chunk per batch of tokens merges the batch's deltas).
func MergeToolCallDeltas(ds []ToolCallDelta) []ToolCallDelta {
	var out []ToolCallDelta
	for _, d := range ds {
		if n := len(out); n > 0 && out[n-1].Index == d.Index && d.ID == "" {
			out[n-1].Arguments += d.Arguments
			continue
		}
		out = append(out, d)
	}
	return out
}

// SplitsToolCalls reports whether tp changes the answer at all: a
// constrained mode, or the auto mode with a known parser.
func (tp *ToolPlan) SplitsToolCalls() bool {
	if tp == nil {
		return false
	}
	if tp.Constrained() || tp.Mode == ToolAuto && tp.Generic {
		return true
	}
	if tp.Mode != ToolAuto || tp.Parser == "" {
		return false
	}
	_, err := tokenizer.NewToolCallParser(tp.Parser)
	return err == nil
}

// toolSplitter turns one choice's answer text into content and tool
// calls, incrementally.
type toolSplitter struct {
	plan *ToolPlan
	// parser splits auto answers; generic those in the generic format.
	parser  *tokenizer.ToolCallParser
	generic *genericParser
	// scan reads the constrained JSON of the required mode.
	scan callArrayScanner
	// calls made so far, in order.
	calls []tokenizer.ToolCall
	// started: the named mode's call was announced.
	started bool
}

// newToolSplitter returns nil when tp does not change the answer.
func newToolSplitter(tp *ToolPlan) *toolSplitter {
	if !tp.SplitsToolCalls() {
		return nil
	}
	s := &toolSplitter{plan: tp}
	switch {
	case tp.Generic && tp.Mode == ToolAuto:
		s.generic = &genericParser{}
	case tp.Generic && tp.Mode == ToolRequired:
		// {"tool_call": call} or {"tool_calls": [call, ...]}.
		s.scan = callArrayScanner{callDepth: 2, argsKey: "arguments", byTopKey: tp.Parallel}
	case tp.Mode == ToolAuto:
		s.parser, _ = tokenizer.NewToolCallParser(tp.Parser)
	}
	return s
}

// push adds answer text and returns the content and call deltas it
// settles.
func (s *toolSplitter) push(text string) (content string, deltas []ToolCallDelta) {
	switch {
	case s.generic != nil:
		return s.generic.push(text), nil
	case s.plan.Mode == ToolNamed:
		if !s.started {
			s.started = true
			s.calls = append(s.calls, tokenizer.ToolCall{ID: newCallID(), Type: "function", Name: s.plan.Tools[s.plan.Named].Name})
			deltas = append(deltas, ToolCallDelta{Index: 0, ID: s.calls[0].ID, Name: s.calls[0].Name})
		}
		if text != "" {
			s.calls[0].Arguments += text
			deltas = append(deltas, ToolCallDelta{Index: 0, Arguments: text})
		}
		return "", MergeToolCallDeltas(deltas)
	case s.plan.Mode == ToolRequired:
		for _, ev := range s.scan.push(text) {
			if ev.start {
				s.calls = append(s.calls, tokenizer.ToolCall{ID: newCallID(), Type: "function", Name: ev.name})
				deltas = append(deltas, ToolCallDelta{Index: len(s.calls) - 1, ID: s.calls[len(s.calls)-1].ID, Name: ev.name})
			}
			if ev.arguments != "" && len(s.calls) > 0 {
				s.calls[len(s.calls)-1].Arguments += ev.arguments
				deltas = append(deltas, ToolCallDelta{Index: len(s.calls) - 1, Arguments: ev.arguments})
			}
		}
		return "", MergeToolCallDeltas(deltas)
	case s.parser != nil:
		return s.parser.Push(text), nil
	}
	return text, nil
}

// flush ends the answer: the auto mode's calls, whole, and the content
// that was held back.
func (s *toolSplitter) flush() (content string, deltas []ToolCallDelta) {
	var calls []tokenizer.ToolCall
	switch {
	case s.generic != nil:
		content, calls = s.generic.flush()
	case s.parser != nil:
		content, calls = s.parser.Flush()
	default:
		return "", nil
	}
	for _, c := range calls {
		if c.ID == "" {
			c.ID = newCallID()
		}
		c.Type = "function"
		s.calls = append(s.calls, c)
		deltas = append(deltas, ToolCallDelta{Index: len(s.calls) - 1, ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return content, deltas
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
// soon as the arguments start and the arguments' text as it comes. Its
// zero value reads that shape; callDepth and argsKey set it to others
// (the generic format's {"tool_call": {"name": ..., "arguments": ...}}
// is depth 2 and "arguments"), and byTopKey to either of the generic
// format's ({"tool_call": call} or {"tool_calls": [call, ...]}, depth 3),
// by the top object's key.
type callArrayScanner struct {
	// callDepth is the nesting of a call object (0: 2); argsKey the key
	// of its arguments ("": "parameters"). byTopKey sets callDepth by the
	// key of the top object.
	callDepth int
	argsKey   string
	byTopKey  bool

	depth    int  // nesting of [ and {, outside strings
	inString bool // inside a string
	escape   bool // after a backslash inside a string
	// At callDepth (inside a call object): the last key read, the string
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
	if sc.callDepth == 0 {
		sc.callDepth = 2
	}
	argsKey := sc.argsKey
	if argsKey == "" {
		argsKey = "parameters"
	}
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
		if !sc.inString && sc.depth == sc.callDepth && sc.expecting && sc.key == argsKey && (r == '{' || r == '[') {
			sc.step(r)
			sc.expecting = false
			sc.inArgs, sc.argsDepth = true, sc.callDepth
			evs = append(evs, callEvent{start: true, name: sc.name})
			args.WriteRune(r)
			continue
		}
		wasString := sc.inString
		sc.step(r)
		top := sc.byTopKey && sc.depth == 1
		if sc.depth != sc.callDepth && !top {
			continue
		}
		switch {
		case wasString && sc.inString:
			if !sc.escape && r != '\\' {
				sc.str.WriteRune(r)
			}
		case wasString && !sc.inString: // a string at callDepth (or the top) ended
			s := sc.str.String()
			sc.str.Reset()
			if top {
				if s == "tool_calls" {
					sc.callDepth = 3
				} else {
					sc.callDepth = 2
				}
				continue
			}
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
