package openai

import (
	"encoding/json"
	"fmt"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/tokenizer"
)

// This file holds what a chat request adds to its messages to shape the
// prompt, as vLLM accepts it: the tools and documents the template sees,
// the template itself (chat_template) and its variables
// (chat_template_kwargs), add_generation_prompt and continue_final_message,
// and the message fields chat templates read beyond role, content and name
// (an assistant's tool_calls and reasoning_content, a tool message's
// tool_call_id). They are decoded from the body on their own, next to the
// common and chat fields, into the frontend.Request.

// chatPromptFields are the chat request fields that shape the prompt.
type chatPromptFields struct {
	Tools                []json.RawMessage          `json:"tools"`
	Documents            []json.RawMessage          `json:"documents"`
	ChatTemplate         *string                    `json:"chat_template"`
	ChatTemplateKwargs   map[string]json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt  *bool                      `json:"add_generation_prompt"`
	ContinueFinalMessage *bool                      `json:"continue_final_message"`
	Messages             []json.RawMessage          `json:"messages"`
}

// decodePromptFields decodes and checks the prompt-shaping fields of a
// chat request body into req, whose messages are decoded: the template
// and its options, the tools and documents, and each message's fields
// beyond role, content and name. Every error is a *frontend.Error naming
// the field.
func decodePromptFields(body []byte, req *frontend.Request) error {
	var f chatPromptFields
	if err := jsonwire.Decode(body, &f); err != nil {
		return err
	}
	t := frontend.Template{AddGenerationPrompt: true}
	if f.AddGenerationPrompt != nil {
		t.AddGenerationPrompt = *f.AddGenerationPrompt
	}
	if f.ContinueFinalMessage != nil && *f.ContinueFinalMessage {
		if t.AddGenerationPrompt {
			return invalid("continue_final_message",
				"continue_final_message and add_generation_prompt cannot both be true; set add_generation_prompt to false to continue the final message.")
		}
		t.ContinueFinalMessage = true
	}
	if f.ChatTemplate != nil {
		if *f.ChatTemplate == "" {
			return invalid("chat_template", "chat_template must not be empty; leave it out to use the model's template.")
		}
		if len(*f.ChatTemplate) > tokenizer.MaxChatTemplateBytes {
			return invalid("chat_template", "chat_template has %d bytes; at most %d are accepted.", len(*f.ChatTemplate), tokenizer.MaxChatTemplateBytes)
		}
		t.Source = *f.ChatTemplate
	}
	if f.ChatTemplateKwargs != nil {
		t.Kwargs = make(map[string]any, len(f.ChatTemplateKwargs))
		for k, v := range f.ChatTemplateKwargs {
			t.Kwargs[k] = v
		}
	}
	if f.Tools != nil {
		req.Tools = make([]frontend.Tool, len(f.Tools))
		for i, raw := range f.Tools {
			tool, err := decodeTool(raw)
			if err != nil {
				return withPrefix(fmt.Sprintf("tools[%d]", i), err)
			}
			req.Tools[i] = tool
		}
	}
	if f.Documents != nil {
		t.Documents = make([]json.RawMessage, len(f.Documents))
		for i, d := range f.Documents {
			if jsonwire.Kind(d) != "object" {
				return jsonwire.TypeError(fmt.Sprintf("documents[%d]", i), "a document object", jsonwire.Kind(d))
			}
			t.Documents[i] = d
		}
	}
	req.Template = t
	for i, raw := range f.Messages {
		if i >= len(req.Messages) {
			break
		}
		if err := decodeMessageExtra(raw, &req.Messages[i]); err != nil {
			return withPrefix(fmt.Sprintf("messages[%d]", i), err)
		}
	}
	return nil
}

// chatPrompt is a request's frontend.Prompt and, once rendered, its text
// (a reasoning parser looks at how it ends).
type chatPrompt struct {
	*frontend.Prompt
	rendered string
}

// chatPromptOf gathers what the template needs of req besides the
// messages.
func chatPromptOf(req *frontend.Request) *chatPrompt {
	return &chatPrompt{Prompt: frontend.NewPrompt(req)}
}

// decodeTool checks one tool definition (checkTool) and reads its
// function's name and parameters.
func decodeTool(raw json.RawMessage) (frontend.Tool, error) {
	if err := checkTool(raw); err != nil {
		return frontend.Tool{}, err
	}
	var t struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return frontend.Tool{}, invalid("", "A tool could not be read: %v", err)
	}
	tool := frontend.Tool{Name: t.Function.Name, Definition: raw}
	if k := jsonwire.Kind(t.Function.Parameters); k != "nothing" && k != "null" {
		tool.Parameters = t.Function.Parameters
	}
	return tool, nil
}

// checkTool checks one tool definition as vLLM's does: an object with
// type "function" (the default) and a function object with a name, an
// optional description and optional JSON Schema parameters. The template
// gets the object as the client sent it.
func checkTool(raw json.RawMessage) error {
	var t struct {
		Type     *string         `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if err := jsonwire.Object(raw, "", "a tool object", &t); err != nil {
		return err
	}
	if t.Type != nil && *t.Type != "function" {
		return invalid("type", "Tools of type %q are not supported; only \"function\" is.", *t.Type)
	}
	if len(t.Function) == 0 || jsonwire.Kind(t.Function) == "null" {
		return invalid("function", "A tool needs a function object.")
	}
	if jsonwire.Kind(t.Function) != "object" {
		return jsonwire.TypeError("function", "a function object", jsonwire.Kind(t.Function))
	}
	var fn struct {
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := jsonwire.Decode(t.Function, &fn); err != nil {
		return withPrefix("function", err)
	}
	if fn.Name == nil || *fn.Name == "" {
		return invalid("function.name", "A function needs a name.")
	}
	if k := jsonwire.Kind(fn.Parameters); len(fn.Parameters) > 0 && k != "object" && k != "null" {
		return jsonwire.TypeError("function.parameters", "a JSON Schema object", k)
	}
	return nil
}

// decodeMessageExtra reads the fields of one message that templates use
// beyond role, content and name into msg.
func decodeMessageExtra(raw json.RawMessage, msg *frontend.Message) error {
	var m struct {
		ToolCalls        []json.RawMessage `json:"tool_calls"`
		ToolCallID       *string           `json:"tool_call_id"`
		ReasoningContent *string           `json:"reasoning_content"`
		Reasoning        *string           `json:"reasoning"`
	}
	if err := jsonwire.Decode(raw, &m); err != nil {
		return err
	}
	switch msg.Role {
	case "assistant":
		for j, c := range m.ToolCalls {
			call, err := decodeToolCall(c)
			if err != nil {
				return withPrefix(fmt.Sprintf("tool_calls[%d]", j), err)
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
		switch {
		case m.ReasoningContent != nil:
			msg.ReasoningContent = *m.ReasoningContent
		case m.Reasoning != nil:
			msg.ReasoningContent = *m.Reasoning
		}
	case "tool":
		if m.ToolCallID != nil {
			msg.ToolCallID = *m.ToolCallID
		}
	}
	return nil
}

// decodeToolCall reads one of an assistant's tool calls. The OpenAI API
// sends function.arguments as a JSON string; some clients send the object
// itself, which vLLM accepts too. Either way it must be JSON the template
// can see as an object.
func decodeToolCall(raw json.RawMessage) (tokenizer.ToolCall, error) {
	var c struct {
		ID       *string         `json:"id"`
		Type     *string         `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	var call tokenizer.ToolCall
	if err := jsonwire.Object(raw, "", "a tool call object", &c); err != nil {
		return call, err
	}
	if c.Type != nil && *c.Type != "function" {
		return call, invalid("type", "Tool calls of type %q are not supported; only \"function\" is.", *c.Type)
	}
	if jsonwire.Kind(c.Function) != "object" {
		return call, invalid("function", "A tool call needs a function object with a name and arguments.")
	}
	var fn struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := jsonwire.Decode(c.Function, &fn); err != nil {
		return call, withPrefix("function", err)
	}
	if fn.Name == nil || *fn.Name == "" {
		return call, invalid("function.name", "A tool call needs the name of the function it calls.")
	}
	call.Name, call.Type = *fn.Name, "function"
	if c.ID != nil {
		call.ID = *c.ID
	}
	switch jsonwire.Kind(fn.Arguments) {
	case "null", "":
	case "string":
		var s string
		_ = json.Unmarshal(fn.Arguments, &s)
		if s != "" && !json.Valid([]byte(s)) {
			return call, invalid("function.arguments", "The arguments of a tool call must be a JSON object encoded as a string; this string is not valid JSON.")
		}
		call.Arguments = s
	case "object":
		call.Arguments = string(fn.Arguments)
	default:
		return call, jsonwire.TypeError("function.arguments", "a JSON string", jsonwire.Kind(fn.Arguments))
	}
	return call, nil
}
