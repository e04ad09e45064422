package openai

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llmserve/llmserve/tokenizer"
)

// This file holds what a chat request adds to its messages to shape the
// prompt, as vLLM accepts it: the tools and documents the template sees,
// the template itself (chat_template) and its variables
// (chat_template_kwargs), add_generation_prompt and continue_final_message,
// and the message fields chat templates read beyond role, content and name
// (an assistant's tool_calls and reasoning_content, a tool message's
// tool_call_id). They are decoded from the body on their own, next to the
// common and chat fields.

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

// chatPrompt is what renderChat needs besides the messages' text.
type chatPrompt struct {
	opts     tokenizer.ChatOptions
	template string // the client's template; "" for the model's
	// rendered is the prompt text, once rendered (a reasoning parser
	// looks at how it ends).
	rendered string
	// extra holds, per message, the fields beyond role, content and name.
	extra []messageExtra
	// size is the bytes of prompt text the fields add (tools, documents,
	// tool call arguments), for the early length check.
	size int
}

type messageExtra struct {
	toolCalls        []tokenizer.ToolCall
	toolCallID       string
	reasoningContent string
}

// decodeChatPrompt decodes and checks the prompt-shaping fields of a chat
// request body whose messages decoded as msgs. Every error is a
// *validationError naming the field.
func decodeChatPrompt(body []byte, msgs []chatInputMessage) (*chatPrompt, error) {
	var f chatPromptFields
	if err := decodeJSON(body, &f); err != nil {
		return nil, err
	}
	p := &chatPrompt{opts: tokenizer.ChatOptions{AddGenerationPrompt: true}}
	if f.AddGenerationPrompt != nil {
		p.opts.AddGenerationPrompt = *f.AddGenerationPrompt
	}
	if f.ContinueFinalMessage != nil && *f.ContinueFinalMessage {
		if p.opts.AddGenerationPrompt {
			return nil, invalid("continue_final_message",
				"continue_final_message and add_generation_prompt cannot both be true; set add_generation_prompt to false to continue the final message.")
		}
		p.opts.ContinueFinalMessage = true
	}
	if f.ChatTemplate != nil {
		if *f.ChatTemplate == "" {
			return nil, invalid("chat_template", "chat_template must not be empty; leave it out to use the model's template.")
		}
		if len(*f.ChatTemplate) > tokenizer.MaxChatTemplateBytes {
			return nil, invalid("chat_template", "chat_template has %d bytes; at most %d are accepted.", len(*f.ChatTemplate), tokenizer.MaxChatTemplateBytes)
		}
		p.template = *f.ChatTemplate
	}
	if f.ChatTemplateKwargs != nil {
		p.opts.Kwargs = make(map[string]any, len(f.ChatTemplateKwargs))
		for k, v := range f.ChatTemplateKwargs {
			p.opts.Kwargs[k] = v
		}
	}
	if f.Tools != nil {
		p.opts.Tools = make([]json.RawMessage, len(f.Tools))
		for i, t := range f.Tools {
			if err := checkTool(t); err != nil {
				return nil, withPrefix(fmt.Sprintf("tools[%d]", i), err)
			}
			p.opts.Tools[i] = t
			p.size += len(t)
		}
	}
	if f.Documents != nil {
		p.opts.Documents = make([]json.RawMessage, len(f.Documents))
		for i, d := range f.Documents {
			if jsonKind(d) != "object" {
				return nil, typeError(fmt.Sprintf("documents[%d]", i), "a document object", jsonKind(d))
			}
			p.opts.Documents[i] = d
			p.size += len(d)
		}
	}
	p.extra = make([]messageExtra, len(msgs))
	for i, raw := range f.Messages {
		if i >= len(msgs) {
			break
		}
		x, err := decodeMessageExtra(raw, msgs[i].Role)
		if err != nil {
			return nil, withPrefix(fmt.Sprintf("messages[%d]", i), err)
		}
		p.extra[i] = x
		for _, c := range x.toolCalls {
			p.size += len(c.Arguments) + len(c.Name)
		}
		p.size += len(x.reasoningContent)
	}
	return p, nil
}

// checkTool checks one tool definition as vLLM's does: an object with
// type "function" (the default) and a function object with a name, an
// optional description and optional JSON Schema parameters. The template
// gets the object as the client sent it.
func checkTool(raw json.RawMessage) error {
	if jsonKind(raw) != "object" {
		return typeError("", "a tool object", jsonKind(raw))
	}
	var t struct {
		Type     *string         `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if err := decodeJSON(raw, &t); err != nil {
		return err
	}
	if t.Type != nil && *t.Type != "function" {
		return invalid("type", "Tools of type %q are not supported; only \"function\" is.", *t.Type)
	}
	if len(t.Function) == 0 || jsonKind(t.Function) == "null" {
		return invalid("function", "A tool needs a function object.")
	}
	if jsonKind(t.Function) != "object" {
		return typeError("function", "a function object", jsonKind(t.Function))
	}
	var fn struct {
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := decodeJSON(t.Function, &fn); err != nil {
		return withPrefix("function", err)
	}
	if fn.Name == nil || *fn.Name == "" {
		return invalid("function.name", "A function needs a name.")
	}
	if k := jsonKind(fn.Parameters); len(fn.Parameters) > 0 && k != "object" && k != "null" {
		return typeError("function.parameters", "a JSON Schema object", k)
	}
	return nil
}

// decodeMessageExtra reads the fields of one message that templates use
// beyond role, content and name.
func decodeMessageExtra(raw json.RawMessage, role string) (messageExtra, error) {
	var m struct {
		ToolCalls        []json.RawMessage `json:"tool_calls"`
		ToolCallID       *string           `json:"tool_call_id"`
		ReasoningContent *string           `json:"reasoning_content"`
		Reasoning        *string           `json:"reasoning"`
	}
	var x messageExtra
	if err := decodeJSON(raw, &m); err != nil {
		return x, err
	}
	switch role {
	case "assistant":
		for j, c := range m.ToolCalls {
			call, err := decodeToolCall(c)
			if err != nil {
				return x, withPrefix(fmt.Sprintf("tool_calls[%d]", j), err)
			}
			x.toolCalls = append(x.toolCalls, call)
		}
		switch {
		case m.ReasoningContent != nil:
			x.reasoningContent = *m.ReasoningContent
		case m.Reasoning != nil:
			x.reasoningContent = *m.Reasoning
		}
	case "tool":
		if m.ToolCallID != nil {
			x.toolCallID = *m.ToolCallID
		}
	}
	return x, nil
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
	if jsonKind(raw) != "object" {
		return call, typeError("", "a tool call object", jsonKind(raw))
	}
	if err := decodeJSON(raw, &c); err != nil {
		return call, err
	}
	if c.Type != nil && *c.Type != "function" {
		return call, invalid("type", "Tool calls of type %q are not supported; only \"function\" is.", *c.Type)
	}
	if jsonKind(c.Function) != "object" {
		return call, invalid("function", "A tool call needs a function object with a name and arguments.")
	}
	var fn struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := decodeJSON(c.Function, &fn); err != nil {
		return call, withPrefix("function", err)
	}
	if fn.Name == nil || *fn.Name == "" {
		return call, invalid("function.name", "A tool call needs the name of the function it calls.")
	}
	call.Name, call.Type = *fn.Name, "function"
	if c.ID != nil {
		call.ID = *c.ID
	}
	switch jsonKind(fn.Arguments) {
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
		return call, typeError("function.arguments", "a JSON string", jsonKind(fn.Arguments))
	}
	return call, nil
}

// templateMessages builds the messages the chat template sees.
func templateMessages(msgs []chatInputMessage, p *chatPrompt) []tokenizer.Message {
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		tm[i] = tokenizer.Message{Role: role, Content: m.Content, Name: m.Name}
		if i < len(p.extra) {
			x := p.extra[i]
			tm[i].ToolCalls, tm[i].ToolCallID, tm[i].ReasoningContent = x.toolCalls, x.toolCallID, x.reasoningContent
		}
	}
	return tm
}

// applyTemplate renders the messages with the request's template (the
// client's when it sent one, else the model's).
func applyTemplate(tok *tokenizer.Tokenizer, msgs []chatInputMessage, p *chatPrompt) (string, error) {
	tm := templateMessages(msgs, p)
	if p.template == "" {
		text, err := tok.ApplyChatTemplate(tm, p.opts)
		if errors.Is(err, tokenizer.ErrContinueFinalMessage) {
			return "", invalid("continue_final_message", "%v", err)
		}
		if err != nil {
			return "", invalid("messages", "The model's chat template could not render these messages: %v", err)
		}
		return text, nil
	}
	ct, err := tok.ParseChatTemplate(p.template)
	if err != nil {
		return "", invalid("chat_template", "chat_template is not a valid Jinja chat template: %v", err)
	}
	text, err := ct.Render(tm, p.opts)
	if errors.Is(err, tokenizer.ErrContinueFinalMessage) {
		return "", invalid("continue_final_message", "%v", err)
	}
	if err != nil {
		return "", invalid("chat_template", "chat_template could not render these messages: %v", err)
	}
	return text, nil
}
