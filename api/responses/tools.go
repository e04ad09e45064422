package responses

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/grammar"
	"github.com/llmserve/llmserve/tokenizer"
)

// The Responses API's tools, as Codex CLI and the SDKs send them:
//
//	function    offered as is.
//	namespace   a group of function tools (Codex groups an MCP server's
//	            tools so); each is offered as the function
//	            "<namespace>__<name>", and a call to it comes back as a
//	            function_call item with name and namespace apart.
//	custom      a freeform tool: its input is text, not JSON, optionally
//	            in a grammar (format {"type": "grammar", "syntax": "lark" or
//	            "regex", "definition"}). It is offered as a function with
//	            one string parameter, "input", and a call comes back as a
//	            custom_tool_call item whose input is that string. When
//	            tool_choice names it, the whole answer is the input,
//	            constrained by the grammar (a Lark subset is translated to
//	            GBNF: grammar.FromLark); in the auto mode the model writes
//	            the input inside the call's JSON and the grammar is not
//	            enforced (docs/API.md).
//	hosted      web_search, file_search, code_interpreter, ...: tools
//	            OpenAI runs itself. They are not offered to the model and
//	            never refused: the request runs as if they were absent.

// hostedTools are the tool types OpenAI runs on its side; a request may
// list them, the model is not offered them.
var hostedTools = map[string]bool{
	"web_search": true, "web_search_preview": true, "web_search_2025_08_26": true, "web_search_preview_2025_03_11": true,
	"file_search": true, "code_interpreter": true, "image_generation": true, "computer_use_preview": true,
	"computer_use": true, "mcp": true, "local_shell": true, "shell": true, "apply_patch": true, "tool_search": true,
}

// namespaceSep joins a namespace and a function name into the name the
// model sees.
const namespaceSep = "__"

// respToolInfo is what the output side needs to know of one offered
// tool, by the name the model sees.
type respToolInfo struct {
	// namespace and name are the tool's own (namespace "" for a tool not
	// in one).
	namespace, name string
	// custom: a freeform tool, whose calls are custom_tool_call items.
	custom bool
	// grammar is a custom tool's GBNF ("" for free text), and param its
	// field path for errors.
	grammar, param string
}

// respTools are a request's tools: those offered to the model, and by
// the name the model sees, what each is.
type respTools struct {
	offered []frontend.Tool
	byName  map[string]respToolInfo
	// hosted counts the hosted tools left out.
	hosted int
}

// modelName is the name the model sees for a tool of a namespace.
func modelName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + namespaceSep + name
}

// decodeRespTools reads a request's tools.
func decodeRespTools(raws []json.RawMessage) (*respTools, error) {
	ts := &respTools{byName: map[string]respToolInfo{}}
	for i, raw := range raws {
		if err := ts.add(raw, "", fmt.Sprintf("tools[%d]", i)); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// add reads one tool (of namespace ns, "" for a top-level one) named
// param in errors.
func (ts *respTools) add(raw json.RawMessage, ns, param string) error {
	if jsonwire.Kind(raw) != "object" {
		return frontend.WithPrefix(param, jsonwire.TypeError("", "a tool object", jsonwire.Kind(raw)))
	}
	var t struct {
		Type        *string           `json:"type"`
		Name        *string           `json:"name"`
		Description *string           `json:"description"`
		Parameters  json.RawMessage   `json:"parameters"`
		Tools       []json.RawMessage `json:"tools"`
		Format      json.RawMessage   `json:"format"`
	}
	if err := jsonwire.Decode(raw, &t); err != nil {
		return frontend.WithPrefix(param, err)
	}
	typ := jsonwire.Str(t.Type)
	switch {
	case typ == "function":
		if jsonwire.Str(t.Name) == "" {
			return frontend.Invalid(param+".name", "A function tool needs a name.")
		}
		if k := jsonwire.Kind(t.Parameters); !jsonwire.IsAbsent(t.Parameters) && k != "object" {
			err := jsonwire.TypeError("function.parameters", "a JSON Schema object", k)
			err.Param = param + ".parameters"
			return err
		}
		return ts.offer(param, modelName(ns, *t.Name), t.Description, t.Parameters, respToolInfo{namespace: ns, name: *t.Name})
	case typ == "namespace" && ns == "":
		if jsonwire.Str(t.Name) == "" {
			return frontend.Invalid(param+".name", "A namespace tool needs a name.")
		}
		for j, inner := range t.Tools {
			if err := ts.add(inner, *t.Name, fmt.Sprintf("%s.tools[%d]", param, j)); err != nil {
				return err
			}
		}
		return nil
	case typ == "custom":
		if jsonwire.Str(t.Name) == "" {
			return frontend.Invalid(param+".name", "A custom tool needs a name.")
		}
		g, err := customGrammar(t.Format, param+".format")
		if err != nil {
			return err
		}
		desc := jsonwire.Str(t.Description)
		if desc != "" {
			desc += " "
		}
		desc += "This is a freeform tool: put its whole input, as plain text, in \"input\"."
		params := json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The tool's freeform input."}},"required":["input"]}`)
		return ts.offer(param, modelName(ns, *t.Name), &desc, params, respToolInfo{namespace: ns, name: *t.Name, custom: true, grammar: g, param: param + ".format"})
	case hostedTools[typ] && ns == "":
		ts.hosted++
		return nil
	default:
		where := ""
		if ns != "" {
			where = " in a namespace"
		}
		return frontend.Invalid(param+".type", "Tools of type %q are not supported%s; use function, namespace or custom (hosted tools such as web_search are accepted and not offered to the model).", typ, where)
	}
}

// offer adds the function name to the offered tools.
func (ts *respTools) offer(param, name string, desc *string, params json.RawMessage, info respToolInfo) error {
	if _, dup := ts.byName[name]; dup {
		return frontend.Invalid(param+".name", "Two tools are named %q.", name)
	}
	t, err := frontend.NewFunctionTool(name, desc, params)
	if err != nil {
		return frontend.WithPrefix(param, err)
	}
	ts.offered = append(ts.offered, t)
	ts.byName[name] = info
	return nil
}

// customGrammar reads a custom tool's format: absent or {"type": "text"}
// is free text (""); {"type": "grammar", "syntax": "lark" or "regex",
// "definition"} is translated to GBNF.
func customGrammar(raw json.RawMessage, param string) (string, error) {
	if jsonwire.IsAbsent(raw) {
		return "", nil
	}
	var f struct {
		Type       *string `json:"type"`
		Syntax     *string `json:"syntax"`
		Definition *string `json:"definition"`
	}
	if err := jsonwire.Decode(raw, &f); err != nil {
		return "", frontend.WithPrefix(param, err)
	}
	switch jsonwire.Str(f.Type) {
	case "text":
		return "", nil
	case "grammar":
	default:
		return "", frontend.Invalid(param+".type", "A custom tool's format type must be \"text\" or \"grammar\", got %q.", jsonwire.Str(f.Type))
	}
	if f.Definition == nil || *f.Definition == "" {
		return "", frontend.Invalid(param+".definition", "A grammar format needs a definition.")
	}
	var (
		g   string
		err error
	)
	switch jsonwire.Str(f.Syntax) {
	case "lark":
		g, err = grammar.FromLark(*f.Definition)
	case "regex":
		g, err = grammar.FromRegex(*f.Definition)
	default:
		return "", frontend.Invalid(param+".syntax", "A grammar's syntax must be \"lark\" or \"regex\", got %q.", jsonwire.Str(f.Syntax))
	}
	if err != nil {
		return "", frontend.Invalid(param+".definition", "The grammar could not be used: %v", err)
	}
	return g, nil
}

// respToolChoiceOf reads tool_choice: "none", "auto", "required",
// {"type": "function", "name"} (with "namespace" for a function of a
// namespace), {"type": "custom", "name"}, or a hosted tool's
// {"type": "web_search", ...}, which is "auto" here (the hosted tool is
// not offered). A named custom tool is returned apart: its grammar holds
// the whole answer.
func respToolChoiceOf(raw json.RawMessage, ts *respTools) (frontend.ToolChoice, *respToolInfo, error) {
	var tc frontend.ToolChoice
	switch jsonwire.Kind(raw) {
	case "nothing", "null":
		return tc, nil, nil
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		mode, ok := frontend.ToolModeOf(s)
		if !ok {
			return tc, nil, frontend.Invalid("tool_choice", "Unknown tool_choice %q; use \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": ...}.", s)
		}
		tc.Mode = mode
	case "object":
		var named struct {
			Type      *string `json:"type"`
			Name      *string `json:"name"`
			Namespace *string `json:"namespace"`
		}
		if err := jsonwire.Decode(raw, &named); err != nil {
			return tc, nil, frontend.WithPrefix("tool_choice", err)
		}
		typ := jsonwire.Str(named.Type)
		switch {
		case typ == "function" || typ == "custom":
		case hostedTools[typ]:
			tc.Mode = frontend.ToolAuto
			tc.Text = frontend.ToolChoiceText(tc.Mode, "")
			return tc, nil, nil
		default:
			return tc, nil, frontend.Invalid("tool_choice.type", "tool_choice.type must be \"function\" or \"custom\", got %q.", typ)
		}
		if jsonwire.Str(named.Name) == "" {
			return tc, nil, frontend.Invalid("tool_choice.name", "A %s tool_choice needs a name.", typ)
		}
		name := modelName(jsonwire.Str(named.Namespace), *named.Name)
		info, ok := ts.byName[name]
		if ok && info.custom != (typ == "custom") {
			return tc, nil, frontend.Invalid("tool_choice.type", "tool_choice names %q as a %s tool; it is not one.", name, typ)
		}
		if ok && info.custom {
			return tc, &info, nil
		}
		tc.Mode, tc.Name = frontend.ToolNamed, name
	default:
		return tc, nil, jsonwire.TypeError("tool_choice", "a string or an object", jsonwire.Kind(raw))
	}
	tc.Text = frontend.ToolChoiceText(tc.Mode, tc.Name)
	return tc, nil, nil
}

// respCall is one tool call of an answer as a Responses output item
// tells it.
type respCall struct {
	tokenizer.ToolCall
	info respToolInfo
}

// itemOf is the output item of call i: a function_call (with its
// namespace) or a custom_tool_call (whose input is the "input" argument).
func (c respCall) itemOf(id, status string) respItem {
	if c.info.custom {
		return respItem{Type: "custom_tool_call", ID: id, Status: status, CallID: c.ID, Name: c.info.name, Input: customInput(c.Arguments)}
	}
	return respItem{Type: "function_call", ID: id, Status: status, CallID: c.ID, Name: c.info.name, Namespace: c.info.namespace, Arguments: c.Arguments}
}

// callOf names a parsed tool call by the tools it was offered from; a
// name the request did not offer (a model that made one up) is kept as
// a plain function call.
func (ts *respTools) callOf(c tokenizer.ToolCall) respCall {
	if ts != nil {
		if info, ok := ts.byName[c.Name]; ok {
			return respCall{ToolCall: c, info: info}
		}
	}
	return respCall{ToolCall: c, info: respToolInfo{name: c.Name}}
}

// customInput is a custom tool's input from the arguments of the function
// it was offered as: the "input" string, or the arguments themselves when
// they are not that object.
func customInput(args string) string {
	var a struct {
		Input *string `json:"input"`
	}
	if err := json.Unmarshal([]byte(args), &a); err == nil && a.Input != nil {
		return *a.Input
	}
	return args
}

// customArguments are the arguments of the function a custom tool call
// is offered as: {"input": input}.
func customArguments(input string) string {
	b, _ := json.Marshal(map[string]string{"input": input})
	return string(b)
}

// schemaNameRE is what OpenAI accepts as text.format's name.
var schemaNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkSchemaName checks a json_schema format's name.
func checkSchemaName(name string) error {
	switch {
	case name == "":
		return frontend.Invalid("text.format.name", "Missing required parameter: 'text.format.name'.")
	case !schemaNameRE.MatchString(name):
		return frontend.Invalid("text.format.name", "Invalid 'text.format.name': %q. It must contain only a-z, A-Z, 0-9, underscores and dashes, with a maximum length of 64.", name)
	}
	return nil
}

// includeValues are the include values OpenAI documents; those this
// server fills are marked true.
var includeValues = map[string]bool{
	"reasoning.encrypted_content":           true,
	"message.output_text.logprobs":          true,
	"web_search_call.action.sources":        false,
	"web_search_call.results":               false,
	"file_search_call.results":              false,
	"code_interpreter_call.outputs":         false,
	"computer_call_output.output.image_url": false,
	"message.input_image.image_url":         false,
}

// respInclude is a request's include list.
type respInclude struct {
	encryptedReasoning, logprobs bool
}

func decodeInclude(list []string) (respInclude, error) {
	var inc respInclude
	for i, v := range list {
		if _, ok := includeValues[v]; !ok {
			known := make([]string, 0, len(includeValues))
			for k := range includeValues {
				known = append(known, k)
			}
			return inc, frontend.Invalid(fmt.Sprintf("include[%d]", i), "Unknown include value %q; known: %s.", v, strings.Join(sortedStrings(known), ", "))
		}
		switch v {
		case "reasoning.encrypted_content":
			inc.encryptedReasoning = true
		case "message.output_text.logprobs":
			inc.logprobs = true
		}
	}
	return inc, nil
}

// reasoningBlobPrefix starts what encrypted_content holds.
const reasoningBlobPrefix = "llmserve-reasoning-v1:"

// encryptReasoning is a reasoning item's encrypted_content: the reasoning
// text, base64-encoded behind a version prefix. It is not encrypted (the
// text is the item's content already); it lets a client that does not
// store responses (store: false, Codex) send the reasoning back, so the
// next turn's prompt renders it as the model wrote it.
func encryptReasoning(text string) string {
	return base64.StdEncoding.EncodeToString([]byte(reasoningBlobPrefix + text))
}

// decryptReasoning reads encryptReasoning's blob; "" for anything else
// (another server's blob says nothing this one can read).
func decryptReasoning(blob string) string {
	if blob == "" {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(blob)
	if err != nil {
		return ""
	}
	text, ok := strings.CutPrefix(string(b), reasoningBlobPrefix)
	if !ok {
		return ""
	}
	return text
}
