package openai

import (
	"encoding/json"

	"github.com/llmserve/llmserve/api/jsonwire"
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
// The calls are split from the answer by the output processor every
// protocol shares (frontend.Output, given the plan by generation.split);
// this package renders them.

// toolPlan is a request's decided tool handling (frontend.NewToolPlan).
type toolPlan = frontend.ToolPlan

// toolFields are the request fields that choose the handling.
type toolFields struct {
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// decodeToolChoice decodes a chat request body's tool_choice and
// parallel_tool_calls into req.
func decodeToolChoice(body []byte, req *frontend.Request) error {
	var f toolFields
	if err := jsonwire.Decode(body, &f); err != nil {
		return err
	}
	req.ParallelToolCalls = f.ParallelToolCalls
	tc := frontend.ToolChoice{Text: string(f.ToolChoice)}
	switch jsonwire.Kind(f.ToolChoice) {
	case "nothing", "null":
		tc.Text = ""
	case "string":
		var choice string
		_ = json.Unmarshal(f.ToolChoice, &choice)
		mode, ok := frontend.ToolModeOf(choice)
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
		if err := jsonwire.Decode(f.ToolChoice, &named); err != nil {
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
		return jsonwire.TypeError("tool_choice", "a string or an object", jsonwire.Kind(f.ToolChoice))
	}
	req.ToolChoice = tc
	return nil
}

// toolCallDelta is what a delta adds to a tool call (the output
// processor's, frontend.Output).
type toolCallDelta = frontend.ToolCallDelta

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
		out[i] = chatToolCall{Index: &ds[i].Index, ID: d.ID, Function: chatToolFunction{Name: d.Name, Arguments: d.Arguments}}
		if d.ID != "" {
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
