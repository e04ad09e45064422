package frontend

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmserve/llmserve/grammar"
	"github.com/llmserve/llmserve/tokenizer"
)

// ToolPlan is a request's decided tool handling, as vLLM decides it by
// tool_choice:
//
//   - ToolNone (no tools, or "none"): the answer is content.
//   - ToolAuto (the default with tools): the model decides; its answer is
//     split by the tool-call parser of its template's family (Parser, ""
//     for a template with no known syntax).
//   - ToolRequired: the answer is held by a grammar to a JSON array of
//     calls, [{"name", "parameters"}, ...] (one when !Parallel).
//   - ToolNamed: the answer is held to the named function's parameters.
//
// With a template that does not render tools (Generic), the tools are
// described in the system prompt and the answer takes the generic
// format's JSON shapes instead (tools_generic.go): the auto mode reads
// them back when the model answers so, the required mode holds the
// answer to them; the named mode is as above.
type ToolPlan struct {
	// Mode is never ToolDefault.
	Mode  ToolMode
	Tools []Tool
	// Named is the index of the named function (ToolNamed).
	Named int
	// Parallel lets the model make more than one call.
	Parallel bool
	// Parser is the auto mode's tool-call parser ("" with Generic).
	Parser string
	// Generic: the template does not render tools, so the generic format
	// carries them (not in ToolNone).
	Generic bool
}

// NewToolPlan decides req's tool handling against its tools. template is
// the chat template that renders them (Prompt.ToolTemplate), for the auto
// mode's parser. Errors name req's fields in its protocol's terms.
func NewToolPlan(req *Request, template string) (*ToolPlan, error) {
	tp := &ToolPlan{Tools: req.Tools, Parallel: req.ParallelToolCalls == nil || *req.ParallelToolCalls}
	tc := req.ToolChoice
	mode := tc.Mode
	switch mode {
	case ToolDefault:
		mode = ToolAuto
		if len(req.Tools) == 0 {
			mode = ToolNone
		}
	case ToolNamed:
		tp.Named = -1
		for i, t := range tp.Tools {
			if t.Name == tc.Name {
				tp.Named = i
			}
		}
		if tp.Named < 0 {
			return nil, Invalid(Name(req.Fields.ToolChoiceName, "tool_choice.function.name"),
				"tool_choice names the function %q, which is not among the request's tools.", tc.Name)
		}
	}
	if len(req.Tools) == 0 && mode != ToolNone {
		return nil, Invalid("tool_choice", "tool_choice %s needs tools; give tools or leave tool_choice out.", tc.Text)
	}
	tp.Mode = mode
	tp.Generic = mode != ToolNone && !sourceRendersTools(template)
	if mode == ToolAuto && !tp.Generic {
		tp.Parser = tokenizer.ToolCallParserFor(template)
	}
	return tp, nil
}

// Constrained reports whether the answer is held to a grammar.
func (tp *ToolPlan) Constrained() bool {
	return tp.Mode == ToolRequired || tp.Mode == ToolNamed
}

// Schema is the JSON schema the answer is held to in the constrained
// modes: the named function's parameters, or the array of calls. With
// Generic, the required mode's calls take the generic format's shapes:
// {"tool_call": call}, and with parallel calls {"tool_calls": [call,
// ...]} too, each call {"name": ..., "arguments": ...}.
func (tp *ToolPlan) Schema() []byte {
	params := func(t Tool) json.RawMessage {
		if t.Parameters == nil {
			return json.RawMessage(`{"type": "object", "properties": {}}`)
		}
		return t.Parameters
	}
	argsKey := "parameters"
	if tp.Generic {
		argsKey = "arguments"
	}
	call := func(t Tool) string {
		name, _ := json.Marshal(t.Name)
		return fmt.Sprintf(`{"type": "object", "properties": {"name": {"const": %s}, %q: %s}, "required": ["name", %q]}`, name, argsKey, params(t), argsKey)
	}
	if tp.Mode == ToolNamed {
		return params(tp.Tools[tp.Named])
	}
	var alts []string
	for _, t := range tp.Tools {
		alts = append(alts, call(t))
	}
	items := fmt.Sprintf(`{"anyOf": [%s]}`, strings.Join(alts, ", "))
	if tp.Generic {
		one := fmt.Sprintf(`{"type": "object", "properties": {"tool_call": %s}, "required": ["tool_call"]}`, items)
		if !tp.Parallel {
			return []byte(one)
		}
		return fmt.Appendf(nil, `{"anyOf": [%s, {"type": "object", "properties": {"tool_calls": {"type": "array", "minItems": 1, "items": %s}}, "required": ["tool_calls"]}]}`, one, items)
	}
	maxItems := ""
	if !tp.Parallel {
		maxItems = `, "maxItems": 1`
	}
	return fmt.Appendf(nil, `{"type": "array", "minItems": 1%s, "items": %s}`, maxItems, items)
}

// Grammar is the grammar that holds the answer to calls in the
// constrained modes, each function's parameters checked as a JSON schema
// first (errors name them by paramsName, with %d for the tool's index),
// and checked by m's runtime when it can. It is "" in the other modes.
func (tp *ToolPlan) Grammar(m Model, paramsName string) (string, error) {
	if !tp.Constrained() {
		return "", nil
	}
	for i, t := range tp.Tools {
		if t.Parameters == nil || (tp.Mode == ToolNamed && i != tp.Named) {
			continue
		}
		if _, err := grammar.FromJSONSchema(t.Parameters); err != nil {
			return "", SchemaError(fmt.Sprintf(paramsName, i), err)
		}
	}
	g, err := grammar.FromJSONSchema(tp.Schema())
	if err != nil {
		return "", SchemaError("tools", err)
	}
	if gc, ok := m.(GrammarChecker); ok {
		if err := gc.CheckGrammar(g); err != nil {
			return "", Invalid("tools", "The model's runtime cannot use the grammar the tools give: %v.", err)
		}
	}
	return g, nil
}

// ChoiceName is the constrained tool choice as errors name it.
func (tp *ToolPlan) ChoiceName() string {
	if tp.Mode == ToolNamed {
		return fmt.Sprintf("naming %q", tp.Tools[tp.Named].Name)
	}
	return `"required"`
}

// toolModes are the tool_choice strings chat and Responses share.
var toolModes = map[string]ToolMode{"none": ToolNone, "auto": ToolAuto, "required": ToolRequired}

// ToolModeOf is the mode a tool_choice string names ("none", "auto",
// "required"), and whether it names one.
func ToolModeOf(s string) (ToolMode, bool) {
	m, ok := toolModes[s]
	return m, ok
}

// ToolChoiceText is how errors quote a tool choice given in another form
// than chat's: as chat would have written it.
func ToolChoiceText(mode ToolMode, name string) string {
	var v any
	switch mode {
	case ToolNone:
		v = "none"
	case ToolAuto:
		v = "auto"
	case ToolRequired:
		v = "required"
	case ToolNamed:
		v = map[string]any{"type": "function", "function": map[string]any{"name": name}}
	default:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}
