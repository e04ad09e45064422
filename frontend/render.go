package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Prompt is how a chat-family request's messages become its prompt: the
// template and its options, gathered once from the Request (NewPrompt).
// Render and RenderMedia turn the messages into tokens; every error is a
// BadRequest naming the request's fields in its protocol's terms.
type Prompt struct {
	// Options are the template's options: tools, documents, kwargs,
	// add_generation_prompt, continue_final_message.
	Options tokenizer.ChatOptions
	// Template is the client's template ("" for the model's).
	Template string
	// Size is the bytes of prompt text the fields besides the messages'
	// content add (tools, documents, tool call arguments), for the early
	// length check (CheckSize).
	Size int
	// Param names the messages in the request's protocol ("messages";
	// Responses: "input").
	Param string
	// generic is how the tools are rendered when the template does not
	// render them (tools_generic.go); nil without tools or with
	// tool_choice "none".
	generic *genericTools
}

// NewPrompt gathers what the template needs of req besides the messages.
func NewPrompt(req *Request) *Prompt {
	t := &req.Template
	p := &Prompt{
		Options: tokenizer.ChatOptions{
			AddGenerationPrompt: t.AddGenerationPrompt, ContinueFinalMessage: t.ContinueFinalMessage,
			Kwargs: t.Kwargs, Documents: t.Documents,
		},
		Template: t.Source,
		Param:    Name(req.Fields.Messages, "messages"),
	}
	if len(req.Tools) > 0 && req.ToolChoice.Mode != ToolNone {
		p.generic = &genericTools{tools: req.Tools, mode: req.ToolChoice.Mode, named: req.ToolChoice.Name}
	}
	if req.Tools != nil {
		p.Options.Tools = make([]json.RawMessage, len(req.Tools))
		for i, tool := range req.Tools {
			p.Options.Tools[i] = tool.Definition
			p.Size += len(tool.Definition)
		}
	}
	for _, d := range t.Documents {
		p.Size += len(d)
	}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			p.Size += len(c.Arguments) + len(c.Name)
		}
		p.Size += len(m.ReasoningContent)
	}
	return p
}

// ToolTemplate is the template that renders the request's tools: the
// client's, else the model's (for the tool-call parser of its family).
func (p *Prompt) ToolTemplate(tok *tokenizer.Tokenizer) string {
	if p.Template != "" {
		return p.Template
	}
	return tok.ChatTemplate().Source()
}

// CheckSize refuses text no context could hold before it is rendered and
// tokenized: the rendered prompt holds every message's content and Size
// more. maxLen is the model's context, maxBytes the most text it holds
// (tokenizer.MaxTextBytes).
func (p *Prompt) CheckSize(msgs []Message, maxLen, maxBytes int) error {
	total := p.Size
	for _, m := range msgs {
		total += len(m.Content)
	}
	if total > maxBytes {
		return TooMuchText(p.Param, total, maxLen, maxBytes)
	}
	return nil
}

// TooMuchText is the error for text longer than any prompt the context
// could hold.
func TooMuchText(param string, n, maxLen, maxBytes int) error {
	return &Error{Param: param, Code: "context_length_exceeded", Message: fmt.Sprintf(
		"This model's maximum context length is %d tokens, which no text longer than %d bytes fits; "+
			"the %s is %d bytes. Please reduce the length of the input.", maxLen, maxBytes, param, n)}
}

// TemplateMessages are the messages as the chat template sees them
// ("developer" is rendered as "system": templates know only that).
func TemplateMessages(msgs []Message) []tokenizer.Message {
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		tm[i] = tokenizer.Message{Role: role, Content: m.Content, Name: m.Name,
			ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
	}
	return tm
}

// Apply renders the messages with the request's template (the client's
// when it sent one, else the model's). The request's tools go to the
// template; one that does not render them gets them in the generic
// format (tools_generic.go).
func (p *Prompt) Apply(tok *tokenizer.Tokenizer, msgs []Message) (string, error) {
	tm := TemplateMessages(msgs)
	if p.Template == "" {
		text, err := p.render(tok.ChatTemplate(), tm)
		if errors.Is(err, tokenizer.ErrContinueFinalMessage) {
			return "", Invalid("continue_final_message", "%v", err)
		}
		if err != nil {
			return "", Invalid(p.Param, "The model's chat template could not render these messages: %v", err)
		}
		return text, nil
	}
	ct, err := tok.ParseChatTemplate(p.Template)
	if err != nil {
		return "", Invalid("chat_template", "chat_template is not a valid Jinja chat template: %v", err)
	}
	text, err := p.render(ct, tm)
	if errors.Is(err, tokenizer.ErrContinueFinalMessage) {
		return "", Invalid("continue_final_message", "%v", err)
	}
	if err != nil {
		return "", Invalid("chat_template", "chat_template could not render these messages: %v", err)
	}
	return text, nil
}

// render renders tm with ct and the request's options, the tools in the
// generic format when ct does not render them: in a system turn, or, for
// a template that refuses one (Gemma's, say), in the first turn.
func (p *Prompt) render(ct *tokenizer.ChatTemplate, tm []tokenizer.Message) (string, error) {
	if p.generic == nil || RendersTools(ct) {
		return ct.Render(tm, p.Options)
	}
	text, err := ct.Render(p.generic.messages(tm, true), p.Options)
	if err != nil && !errors.Is(err, tokenizer.ErrContinueFinalMessage) && len(tm) > 0 && tm[0].Role != "system" {
		if text, err2 := ct.Render(p.generic.messages(tm, false), p.Options); err2 == nil {
			return text, nil
		}
	}
	return text, err
}

// RenderText renders the messages (Apply) and checks the text's length
// against maxBytes. The text is returned with a length error too.
func (p *Prompt) RenderText(tok *tokenizer.Tokenizer, msgs []Message, maxBytes int) (string, error) {
	text, err := p.Apply(tok, msgs)
	if err != nil {
		return "", err
	}
	if len(text) > maxBytes {
		return text, &Error{Param: p.Param, Code: "context_length_exceeded", Message: fmt.Sprintf(
			"The messages render to a prompt of %d bytes, longer than any prompt this model's context can hold (%d bytes). "+
				"Please reduce the length of the messages.", len(text), maxBytes)}
	}
	return text, nil
}

// Render renders the messages with the chat template as the request's
// options ask (by default ending with the assistant's turn opener) and
// tokenizes the text, which it returns too.
//
// BOS rule: Hugging Face templates write the BOS token's text themselves
// ("{{ bos_token }}..."). When the rendered text starts with the BOS text it
// is encoded without adding special tokens, else the tokenizer adds BOS as
// the model is configured to. Either way the prompt starts with exactly one
// BOS (or none, for models without one). Special-token text inside messages
// becomes special tokens, as with Hugging Face and vLLM.
func (p *Prompt) Render(tok *tokenizer.Tokenizer, msgs []Message, maxBytes int) ([]int32, string, error) {
	text, err := p.RenderText(tok, msgs, maxBytes)
	if err != nil {
		return nil, text, err
	}
	toks, err := tok.Encode(text, !StartsWithBOS(tok, text))
	if err != nil {
		return nil, text, Invalid(p.Param, "The rendered prompt could not be tokenized: %v", err)
	}
	if len(toks) == 0 {
		return nil, text, Invalid(p.Param, "The messages render to an empty prompt.")
	}
	return toks, text, nil
}

// StartsWithBOS reports whether text begins with the text of the model's
// BOS token.
func StartsWithBOS(tok *tokenizer.Tokenizer, text string) bool {
	v := tok.Vocab()
	bos := v.BOS()
	if bos < 0 {
		return false
	}
	piece := v.Piece(bos, true)
	return len(piece) > 0 && strings.HasPrefix(text, string(piece))
}

// MediaOf lists the media of the messages, in prompt order.
func MediaOf(msgs []Message) []MediaRef {
	var refs []MediaRef
	for _, m := range msgs {
		refs = append(refs, m.Media...)
	}
	return refs
}

// MediaModelFor returns m as a MediaModel that reads every kind of refs,
// or a BadRequest naming the first item it cannot read.
func MediaModelFor(m Model, refs []MediaRef) (MediaModel, error) {
	mm, ok := m.(MediaModel)
	if !ok || (!mm.ReadsMedia(media.Image) && !mm.ReadsMedia(media.Audio)) {
		return nil, Invalid(refs[0].Param, "%s: the model `%s` reads text only: %v.", refs[0].Param, m.Name(), media.ErrNoProjector)
	}
	for _, ref := range refs {
		if !mm.ReadsMedia(ref.Kind) {
			return nil, Invalid(ref.Param, "%s: this model's projector does not read %s.", ref.Param, ref.Kind)
		}
	}
	return mm, nil
}

// MarkerError is the error for a text, named param, that holds
// media.Marker itself: with media in the request it would take an item's
// place.
func MarkerError(param string) error {
	return Invalid(param, "%s holds the text %q, which marks where an image or audio clip goes: with images or audio in the request it would take one's place. Remove it from the text.", param, media.Marker)
}

// CheckMarkers refuses messages whose text holds media.Marker itself
// (Message.MarkerParam), for a request with media.
func CheckMarkers(msgs []Message) error {
	for _, m := range msgs {
		if m.MarkerParam != "" {
			return MarkerError(m.MarkerParam)
		}
	}
	return nil
}

// RenderMedia renders messages that carry images or audio, whose items
// (resolved: decoded or fetched, in prompt order) mm encodes: the text
// must hold one media.Marker per item, and mm tokenizes it by the BOS
// rule. It returns the tokens, media positions included (what the context
// length and usage count), the spans for scheduler.Request.Media, and the
// text.
func (p *Prompt) RenderMedia(ctx context.Context, mm MediaModel, msgs []Message, items []media.Item, maxBytes int) ([]int32, []scheduler.Media, string, error) {
	tok := mm.Tokenizer()
	text, err := p.RenderText(tok, msgs, maxBytes)
	if err != nil {
		return nil, nil, text, err
	}
	if n := strings.Count(text, media.Marker); n != len(items) {
		// The template dropped or repeated a message, or another field
		// (tools, documents, chat_template) holds the marker.
		return nil, nil, text, Invalid(p.Param, "The chat template rendered %d places for images and audio, not the %d the messages hold: it drops or repeats messages with media, or another field holds the text %q.", n, len(items), media.Marker)
	}
	toks, spans, err := mm.PrepareMedia(ctx, text, !StartsWithBOS(tok, text), items)
	if err != nil {
		return nil, nil, text, err
	}
	if len(toks) == 0 {
		return nil, nil, text, Invalid(p.Param, "The messages render to an empty prompt.")
	}
	return toks, spans, text, nil
}
