package frontend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/llmserve/llmserve/tokenizer"
)

// The generic tool format, for chat templates that do not render tools
// (the fallback template, and the many that predate tool calling), after
// llama.cpp's server's generic format: the tools are described in the
// system prompt, and the model answers in JSON,
//
//	{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}
//	{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}   (parallel calls)
//	{"response": "It is sunny."}
//
// which the output side reads back into calls and content (output_tools.go,
// output_tools_generic.go). It is used when a request has tools, its
// tool_choice is not "none" and its template does not render a tool given
// to it (RendersTools); a template that does is used as it is. In the
// prompt (Prompt.Apply), the tools and the answer format go into the system
// message (prepended when there is none), an assistant turn's earlier
// calls are written into its content in the answer format, and a tool turn
// becomes a user turn holding {"tool_response": {"name", "content"}}
// (templates without tools seldom know the tool role; the call ids, which
// the model never sees, give way to the called function's name).
// tool_choice "required" and a named function hold the answer with a
// grammar (ToolPlan.Schema): to the call shapes, and for a named function
// to its arguments, as with any template; "auto" leaves the model free and
// reads a JSON answer of these shapes when it gives one, else its text is
// the content.

// probeTool is the tool RendersTools offers a template.
var probeTool = json.RawMessage(`{"type": "function", "function": {"name": "llmserve_probe_tool", "description": "A probe.", "parameters": {"type": "object", "properties": {"llmserve_probe_arg": {"type": "string"}}}}}`)

// toolSupport remembers RendersTools by template source; it keeps at most
// maxToolSupport sources (client templates vary without bound).
var toolSupport = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

const maxToolSupport = 64

// RendersTools reports whether ct renders the tools it is given: a user
// turn rendered with a probe tool shows the tool's name. A template that
// fails to render the probe counts as rendering tools (it is used as it
// is, and reports its own errors).
func RendersTools(ct *tokenizer.ChatTemplate) bool {
	src := ct.Source()
	toolSupport.Lock()
	v, ok := toolSupport.m[src]
	toolSupport.Unlock()
	if ok {
		return v
	}
	out, err := ct.Render([]tokenizer.Message{{Role: "user", Content: "Hello"}},
		tokenizer.ChatOptions{AddGenerationPrompt: true, Tools: []json.RawMessage{probeTool}})
	v = err != nil || strings.Contains(out, "llmserve_probe_tool")
	toolSupport.Lock()
	if len(toolSupport.m) < maxToolSupport {
		toolSupport.m[src] = v
	}
	toolSupport.Unlock()
	return v
}

// sourceRendersTools is RendersTools for a template's source; a source
// that does not parse counts as rendering tools.
func sourceRendersTools(source string) bool {
	toolSupport.Lock()
	v, ok := toolSupport.m[source]
	toolSupport.Unlock()
	if ok {
		return v
	}
	ct, err := tokenizer.NewChatTemplate(source, "", "")
	if err != nil {
		return true
	}
	return RendersTools(ct)
}

// genericTools is what the generic format's prompt needs of a request.
type genericTools struct {
	tools []Tool
	mode  ToolMode
	named string
}

// systemText is the system prompt's part that describes the tools and
// the answer format, kept short (small models have small contexts). It
// depends only on the tools and the tool choice, so that it stays the
// same from turn to turn (the prefix cache keeps it).
func (g *genericTools) systemText() string {
	var b strings.Builder
	b.WriteString("Tools:\n")
	for _, t := range g.tools {
		b.Write(functionOf(t))
		b.WriteByte('\n')
	}
	if g.mode == ToolNamed {
		name, _ := json.Marshal(g.named)
		fmt.Fprintf(&b, `Answer with the arguments of %s, a JSON object.`, name)
		return b.String()
	}
	// Parallel calls ({"tool_calls": [...]}) are read back, but not
	// offered: small models have small contexts, and most calls are one.
	b.WriteString(`Answer {"tool_call": {"name": ..., "arguments": {...}}} to call one`)
	if g.mode == ToolRequired {
		b.WriteString(".")
	} else {
		b.WriteString(`, else {"response": "..."}.`)
	}
	return b.String()
}

// functionOf is a tool's function (name, description, parameters, in
// that order) in compact JSON, from its definition.
func functionOf(t Tool) []byte {
	var def struct {
		Function struct {
			Description json.RawMessage `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	_ = json.Unmarshal(t.Definition, &def)
	name, _ := json.Marshal(t.Name)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"name":%s`, name)
	for _, f := range []struct {
		key string
		raw json.RawMessage
	}{{"description", def.Function.Description}, {"parameters", def.Function.Parameters}} {
		if len(f.raw) > 0 && string(f.raw) != "null" {
			fmt.Fprintf(&b, `,%q:`, f.key)
			if json.Compact(&b, f.raw) != nil {
				b.WriteString("null")
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// messages rewrites msgs for the generic format (see above): the
// tools and the answer format in the system message (system false: at the
// start of the first message, for templates that refuse a system turn),
// earlier calls in their assistant turns' content, tool results as user
// turns, one for consecutive results (templates that want turns to
// alternate).
func (g *genericTools) messages(msgs []tokenizer.Message, system bool) []tokenizer.Message {
	out := make([]tokenizer.Message, 0, len(msgs)+1)
	sys := g.systemText()
	switch {
	case len(msgs) > 0 && msgs[0].Role == "system":
		m := msgs[0]
		if m.Content != "" {
			m.Content += "\n\n"
		}
		m.Content += sys
		out = append(out, m)
		msgs = msgs[1:]
	case system || len(msgs) == 0:
		out = append(out, tokenizer.Message{Role: "system", Content: sys})
	}
	called := map[string]string{} // call id -> the function's name
	for i, m := range msgs {
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			if m.Content != "" {
				m.Content += "\n"
			}
			m.Content += callsText(m.ToolCalls)
			for _, c := range m.ToolCalls {
				called[c.ID] = c.Name
			}
			m.ToolCalls = nil
		case m.Role == "tool":
			name := m.Name
			if name == "" {
				name = called[m.ToolCallID]
			}
			resp := struct {
				Name    string `json:"name,omitempty"`
				Content string `json:"content"`
			}{name, m.Content}
			b, _ := json.Marshal(map[string]any{"tool_response": resp})
			if n := len(out); i > 0 && msgs[i-1].Role == "tool" && n > 0 {
				out[n-1].Content += "\n" + string(b)
				continue
			}
			m = tokenizer.Message{Role: "user", Content: string(b)}
		}
		if i == 0 && len(out) == 0 {
			m.Content = sys + "\n\n" + m.Content
		}
		out = append(out, m)
	}
	return out
}

// callsText is calls in the generic answer format, arguments as they were
// written (text that is not JSON becomes a JSON string).
func callsText(calls []tokenizer.ToolCall) string {
	call := func(c tokenizer.ToolCall) string {
		name, _ := json.Marshal(c.Name)
		args := strings.TrimSpace(c.Arguments)
		switch {
		case args == "":
			args = "{}"
		case !json.Valid([]byte(args)):
			b, _ := json.Marshal(c.Arguments)
			args = string(b)
		}
		return fmt.Sprintf(`{"name": %s, "arguments": %s}`, name, args)
	}
	if len(calls) == 1 {
		return `{"tool_call": ` + call(calls[0]) + "}"
	}
	parts := make([]string, len(calls))
	for i, c := range calls {
		parts[i] = call(c)
	}
	return `{"tool_calls": [` + strings.Join(parts, ", ") + "]}"
}
