package anthropic

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/tokenizer"
)

// This file holds the request side of Anthropic's Messages API
// (POST /v1/messages, POST /v1/messages/count_tokens): its decoding, its
// own checks, and its decoding straight into a frontend.Request, which
// then goes through prepareChat and submit like any chat request. The
// Messages API is thus one more wire format over the same generation:
// templates, tools, stop strings, limits and metrics are the chat path's.

// messagesRequest is a Messages API request body.
type messagesRequest struct {
	Model         string            `json:"model"`
	MaxTokens     *int              `json:"max_tokens"`
	System        json.RawMessage   `json:"system"`
	Messages      []json.RawMessage `json:"messages"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage   `json:"tool_choice"`
	StopSequences []string          `json:"stop_sequences"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	TopK          *int              `json:"top_k"`
	Metadata      *messagesMetadata `json:"metadata"`
	Thinking      *messagesThinking `json:"thinking"`
	Stream        *bool             `json:"stream"`
	// OutputConfig is {"effort", "format"}: effort bounds adaptive
	// thinking, format constrains the answer to a JSON schema.
	OutputConfig *messagesOutputConfig `json:"output_config"`
	// ContextManagement is read for its shape only: its edits (clearing
	// old thinking or tool results) change nothing here, where the
	// conversation is the one the client sends (docs/API.md).
	ContextManagement json.RawMessage `json:"context_management"`
}

// messagesOutputConfig is "output_config".
type messagesOutputConfig struct {
	Effort *string         `json:"effort"`
	Format json.RawMessage `json:"format"`
}

// efforts are output_config.effort's values, lowest first.
var efforts = []string{"low", "medium", "high", "xhigh", "max"}

// messagesMetadata is "metadata": user_id becomes the chat path's user.
type messagesMetadata struct {
	UserID *string `json:"user_id"`
}

// messagesThinking is "thinking": {"type": "enabled", "budget_tokens": n},
// {"type": "adaptive"} (the model decides how much to think, bounded by
// output_config.effort) or {"type": "disabled"}; enabled and adaptive
// take display: "summarized" (the thinking is returned) or "omitted"
// (thinking blocks come back empty, with their signature).
type messagesThinking struct {
	Type         string  `json:"type"`
	BudgetTokens *int    `json:"budget_tokens"`
	Display      *string `json:"display"`
}

// omitted reports whether the answer's thinking text is left out.
func (t *messagesThinking) omitted() bool {
	return t != nil && t.Display != nil && *t.Display == "omitted"
}

// minThinkingBudget is Anthropic's smallest budget_tokens.
const minThinkingBudget = 1024

// messagesBlock is one content block, any type; which fields matter
// depends on Type. A request's messages hold them, and so does an answer
// (text, tool_use or thinking, with only their own fields: the others are
// empty and omitted), as Anthropic's API has one ContentBlock for both.
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID *string         `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	// Signature is an answer's thinking block's (requests' are not read).
	Signature *string         `json:"signature,omitempty"`
	Source    json.RawMessage `json:"source,omitempty"`
	// CacheControl ({"type": "ephemeral", "ttl"}) marks a cache
	// breakpoint; the prefix cache needs none, so it is only checked.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	// ToolName is a tool_reference block's tool.
	ToolName string `json:"tool_name,omitempty"`
}

// decodeMessagesRequest decodes a Messages request. count is set for
// count_tokens, which needs no max_tokens.
func decodeMessagesRequest(body []byte, count bool) (*messagesRequest, error) {
	var req messagesRequest
	if err := jsonwire.DecodeBody(body, &req); err != nil {
		return nil, err
	}
	if !count {
		if req.MaxTokens == nil {
			return nil, frontend.Invalid("max_tokens", "max_tokens: Field required")
		}
		if *req.MaxTokens < 1 {
			return nil, frontend.Invalid("max_tokens", "max_tokens: must be greater than or equal to 1, got %d", *req.MaxTokens)
		}
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 1) {
		return nil, frontend.Invalid("temperature", "temperature: must be between 0 and 1, got %g", *t)
	}
	if t := req.Thinking; t != nil {
		switch t.Type {
		case "disabled":
		case "enabled":
			if t.BudgetTokens == nil {
				return nil, frontend.Invalid("thinking.budget_tokens", "thinking.budget_tokens: Field required")
			}
			if *t.BudgetTokens < minThinkingBudget {
				return nil, frontend.Invalid("thinking.budget_tokens", "thinking.budget_tokens: must be greater than or equal to %d, got %d", minThinkingBudget, *t.BudgetTokens)
			}
			if req.MaxTokens != nil && *t.BudgetTokens >= *req.MaxTokens {
				return nil, frontend.Invalid("thinking.budget_tokens", "`max_tokens` must be greater than `thinking.budget_tokens` (%d >= %d)", *t.BudgetTokens, *req.MaxTokens)
			}
		case "adaptive":
		case "":
			return nil, frontend.Invalid("thinking.type", "thinking.type: Field required")
		default:
			return nil, frontend.Invalid("thinking.type", "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive', got %q", t.Type)
		}
		if d := t.Display; d != nil && *d != "summarized" && *d != "omitted" {
			return nil, frontend.Invalid("thinking.display", "thinking.display: Input should be 'summarized' or 'omitted', got %q", *d)
		}
	}
	if oc := req.OutputConfig; oc != nil && oc.Effort != nil && !slices.Contains(efforts, *oc.Effort) {
		return nil, frontend.Invalid("output_config.effort", "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max', got %q", *oc.Effort)
	}
	if k := jsonwire.Kind(req.ContextManagement); k != "nothing" && k != "null" && k != "object" {
		return nil, jsonwire.TypeError("context_management", "an object", k)
	}
	return &req, nil
}

// request decodes the Messages request into the typed request, in the
// Messages API's own field names. Every error is a *frontend.Error
// naming the Messages field at fault.
func (req *messagesRequest) request() (*frontend.Request, error) {
	var (
		msgs []*turn
		mt   frontend.MarkerText // a text that holds media.Marker
	)
	if len(req.System) > 0 && jsonwire.Kind(req.System) != "null" {
		sys, err := blocksText(req.System, "system")
		if err != nil {
			return nil, err
		}
		mt.See("system", sys)
		msgs = append(msgs, &turn{msg: frontend.Message{Role: "system", Content: sys, HasContent: true}})
	}
	conv, images, err := convertMessages(req.Messages, &mt)
	if err != nil {
		return nil, err
	}
	if err := mt.Check(images > 0); err != nil {
		return nil, err
	}
	msgs = append(msgs, conv...)
	r := &frontend.Request{
		Model:     req.Model,
		Messages:  make([]frontend.Message, len(msgs)),
		Template:  frontend.Template{AddGenerationPrompt: true},
		Sampling:  frontend.Sampling{Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, Stop: req.StopSequences},
		MaxTokens: req.MaxTokens,
		Stream:    req.Stream != nil && *req.Stream,
		// A model without a reasoning parser has no thinking to bound:
		// Claude Code sends its thinking settings whatever the model.
		IgnoreThinkingWithoutParser: true,
	}
	for i, t := range msgs {
		r.Messages[i] = t.message()
	}
	if last := r.Messages[len(r.Messages)-1]; last.Role == "assistant" && len(last.ToolCalls) == 0 {
		// A final assistant turn is a prefill: the answer continues it,
		// as Anthropic's does, which refuses one that ends in whitespace.
		if strings.TrimRightFunc(last.Content, unicode.IsSpace) != last.Content {
			return nil, frontend.Invalid(fmt.Sprintf("messages[%d].content", len(req.Messages)-1),
				"messages: final assistant content cannot end with trailing whitespace")
		}
		r.Template.AddGenerationPrompt, r.Template.ContinueFinalMessage = false, true
	}
	if req.Metadata != nil {
		r.User = req.Metadata.UserID
	}
	if len(req.Tools) > 0 {
		if r.Tools, err = convertTools(req.Tools); err != nil {
			return nil, err
		}
	}
	if t := req.Thinking; t != nil {
		// Templates that can switch thinking (Qwen3's and its kin) read
		// enable_thinking; the others ignore it.
		r.Template.Kwargs = map[string]any{"enable_thinking": json.RawMessage(strconv.FormatBool(t.Type != "disabled"))}
		switch {
		case t.Type == "enabled" && t.BudgetTokens != nil:
			r.ThinkingBudget, r.Fields.Thinking = t.BudgetTokens, "thinking.budget_tokens"
		case t.Type == "adaptive" && req.OutputConfig != nil && req.OutputConfig.Effort != nil:
			// The model decides how much to think; effort bounds it as
			// the Responses API's reasoning.effort does (a share of
			// max_tokens), xhigh and max not at all.
			if e := *req.OutputConfig.Effort; e != "xhigh" && e != "max" {
				b := frontend.EffortBudget(e, req.MaxTokens)
				r.ThinkingBudget, r.Fields.Thinking = &b, "output_config.effort"
			}
		case t.Type == "disabled":
			r.ThinkingBudget, r.Fields.Thinking = new(int), "thinking"
		}
	}
	if oc := req.OutputConfig; oc != nil {
		if err := outputFormat(oc.Format, r); err != nil {
			return nil, err
		}
	}
	r.Fields.ToolChoiceName = "tool_choice.name"
	r.Fields.ToolParameters = "tools[%d].input_schema"
	if err := convertToolChoice(req.ToolChoice, r); err != nil {
		return nil, err
	}
	return r, nil
}

// outputFormat reads output_config.format, {"type": "json_schema",
// "schema": {...}}: the answer is held to the schema by a grammar, as
// chat's response_format is (a schema the grammar cannot express is a 400
// naming the keyword).
func outputFormat(raw json.RawMessage, r *frontend.Request) error {
	const p = "output_config.format"
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if ok, err := decodeObject(raw, p, &f); !ok {
		return err
	}
	if f.Type != "json_schema" {
		return frontend.Invalid(p+".type", "%s.type: Input should be 'json_schema', got %q", p, f.Type)
	}
	if k := jsonwire.Kind(f.Schema); k != "object" {
		return frontend.Invalid(p+".schema", "%s.schema: a JSON Schema object is required", p)
	}
	r.Constraints = append(r.Constraints, frontend.Constraint{Kind: frontend.JSONSchema, Param: p + ".schema", Schema: f.Schema})
	return nil
}

// decodeObject decodes raw, the optional object member p, into v. ok is
// false when there is nothing to read: raw is absent or null (err nil), or
// it is not an object or does not decode (err names p).
func decodeObject(raw json.RawMessage, p string, v any) (ok bool, err error) {
	switch k := jsonwire.Kind(raw); k {
	case "nothing", "null":
		return false, nil
	case "object":
	default:
		return false, jsonwire.TypeError(p, "an object", k)
	}
	if err := jsonwire.Decode(raw, v); err != nil {
		return false, frontend.WithPrefix(p, err)
	}
	return true, nil
}

// checkCacheControl checks a block's cache_control: {"type":
// "ephemeral"} with an optional ttl of "5m" or "1h". It is a hint only:
// the prefix cache keeps every prompt's blocks without being asked.
func checkCacheControl(raw json.RawMessage, param string) error {
	p := param + ".cache_control"
	var cc struct {
		Type string  `json:"type"`
		TTL  *string `json:"ttl"`
	}
	if ok, err := decodeObject(raw, p, &cc); !ok {
		return err
	}
	if cc.Type != "ephemeral" {
		return frontend.Invalid(p+".type", "%s.type: Input should be 'ephemeral', got %q", p, cc.Type)
	}
	if cc.TTL != nil && *cc.TTL != "5m" && *cc.TTL != "1h" {
		return frontend.Invalid(p+".ttl", "%s.ttl: Input should be '5m' or '1h', got %q", p, *cc.TTL)
	}
	return nil
}

// toolName is what Anthropic accepts as a tool's name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// turn is a chat message being built from Messages turns: its content is
// a string, or parts (texts and media) once it has media.
type turn struct {
	msg   frontend.Message
	parts []turnPart // set when the content is parts
}

// turnPart is a text, or a media item (media set).
type turnPart struct {
	text  string
	media *frontend.MediaRef
}

// message is the chat message: parts are joined with "\n", each media
// item written as media.Marker in its place, as chat content parts are.
func (t *turn) message() frontend.Message {
	m := t.msg
	if t.parts != nil {
		texts := make([]string, len(t.parts))
		m.Media = nil
		for i, p := range t.parts {
			texts[i] = p.text
			if p.media != nil {
				texts[i] = media.Marker
				m.Media = append(m.Media, *p.media)
			}
		}
		m.Content = strings.Join(texts, "\n")
	}
	return m
}

// contentParts returns the turn's content as parts: a string is one text
// part ("" none).
func (t *turn) contentParts() []turnPart {
	switch {
	case t.parts != nil:
		return t.parts
	case t.msg.Content != "":
		return []turnPart{{text: t.msg.Content}}
	}
	return nil
}

// blocksText reads a string or an array of text blocks (system, a
// tool_result's content) as one string, the blocks joined with "\n".
func blocksText(raw json.RawMessage, param string) (string, error) {
	switch jsonwire.Kind(raw) {
	case "string":
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case "array":
	default:
		return "", jsonwire.TypeError(param, "a string or an array of text blocks", jsonwire.Kind(raw))
	}
	var blocks []messagesBlock
	if err := jsonwire.Decode(raw, &blocks); err != nil {
		return "", frontend.WithPrefix(param, err)
	}
	texts := make([]string, len(blocks))
	for i, b := range blocks {
		p := fmt.Sprintf("%s[%d]", param, i)
		if err := checkCacheControl(b.CacheControl, p); err != nil {
			return "", err
		}
		switch {
		case isMediaBlock(b.Type):
			return "", mediaError(p, b.Type)
		case b.Type == "tool_reference" && b.ToolName != "":
			// A tool search's answer names a tool to load (Claude Code's
			// ToolSearch); every tool is offered already.
			texts[i] = "Tool " + b.ToolName + " is available."
			continue
		case b.Type != "text":
			return "", frontend.Invalid(p+".type", "%s.type: only text blocks are accepted here, got %q", p, b.Type)
		case b.Text == nil:
			return "", frontend.Invalid(p+".text", "%s.text: Field required", p)
		}
		texts[i] = *b.Text
	}
	return strings.Join(texts, "\n"), nil
}

// isMediaBlock reports whether a block type carries media: image blocks
// are read in a user message's content, the others nowhere.
func isMediaBlock(t string) bool {
	return t == "image" || t == "document" || t == "audio" || t == "file"
}

func mediaError(param, typ string) error {
	if typ == "image" {
		return frontend.Invalid(param+".type", "%s: image blocks are accepted only in a user message's content, not here.", param)
	}
	return frontend.Invalid(param+".type", "%s: %s blocks are not supported: only text and image blocks are read.", param, typ)
}

// imagePart reads an image block: a base64 source becomes a data: URL
// (its bytes are checked when they are read), a url source its URL. The
// item is named by the block, and by the block's field that holds the
// data.
func imagePart(b messagesBlock, param string) (frontend.MediaRef, error) {
	p := param + ".source"
	if jsonwire.Kind(b.Source) != "object" {
		return frontend.MediaRef{}, frontend.Invalid(p, "%s: Field required (an object: {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": ...} or {\"type\": \"url\", \"url\": ...})", p)
	}
	var src struct {
		Type      string  `json:"type"`
		MediaType *string `json:"media_type"`
		Data      *string `json:"data"`
		URL       *string `json:"url"`
	}
	if err := jsonwire.Decode(b.Source, &src); err != nil {
		return frontend.MediaRef{}, frontend.WithPrefix(p, err)
	}
	var u, field string
	switch src.Type {
	case "base64":
		switch {
		case src.MediaType == nil:
			return frontend.MediaRef{}, frontend.Invalid(p+".media_type", "%s.media_type: Field required", p)
		case !strings.HasPrefix(*src.MediaType, "image/") || strings.ContainsAny(*src.MediaType, ";,"):
			return frontend.MediaRef{}, frontend.Invalid(p+".media_type", "%s.media_type: Input should be 'image/jpeg', 'image/png' or 'image/webp', got %q", p, frontend.Truncate(*src.MediaType, 40))
		case src.Data == nil || *src.Data == "":
			return frontend.MediaRef{}, frontend.Invalid(p+".data", "%s.data: Field required", p)
		}
		u, field = "data:"+*src.MediaType+";base64,"+*src.Data, p+".data"
	case "url":
		if src.URL == nil || *src.URL == "" {
			return frontend.MediaRef{}, frontend.Invalid(p+".url", "%s.url: Field required", p)
		}
		if err := frontend.CheckImageURL(*src.URL, p+".url"); err != nil {
			return frontend.MediaRef{}, err
		}
		u, field = *src.URL, p+".url"
	default:
		return frontend.MediaRef{}, frontend.Invalid(p+".type", "%s.type: image sources of type %q are not supported; use base64 or url.", p, frontend.Truncate(src.Type, 40))
	}
	return frontend.MediaRef{Kind: media.Image, Param: param, Field: field, URL: u}, nil
}

// convertMessages turns Messages turns into chat messages: a user turn's
// tool_result blocks become tool messages (before its text), an assistant
// turn's tool_use blocks its tool calls and its thinking blocks its
// reasoning content. A user turn with image blocks gets content parts
// (text and images) in block order, each image named by its block; images
// counts them; mt sees every text. Consecutive turns of one role are
// merged, as Anthropic merges them; the first turn must be the user's.
func convertMessages(raws []json.RawMessage, mt *frontend.MarkerText) (out []*turn, images int, err error) {
	if len(raws) == 0 {
		return nil, 0, frontend.Invalid("messages", "messages: at least one message is required")
	}
	toolUses := map[string]bool{}
	lastRole := ""
	for i, raw := range raws {
		p := fmt.Sprintf("messages[%d]", i)
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := jsonwire.Object(raw, p, "a message object", &m); err != nil {
			return nil, 0, err
		}
		sys := false
		switch m.Role {
		case "user", "assistant":
		case "system":
			if i == 0 {
				return nil, 0, frontend.Invalid(p+".role", "%s.role: the first message must use the \"user\" role; put the system prompt in the top-level `system` parameter.", p)
			}
			// A system message in the conversation (Claude Code sends
			// them) is read as the user's text where it stands, so that
			// the prompt before it, and the prefix cache, stay as they
			// were: chat templates put a system message first or refuse
			// it.
			sys, m.Role = true, "user"
		case "":
			return nil, 0, frontend.Invalid(p+".role", "%s.role: Field required", p)
		default:
			return nil, 0, frontend.Invalid(p+".role", "%s.role: Input should be 'user' or 'assistant', got %q", p, m.Role)
		}
		if i == 0 && m.Role != "user" {
			return nil, 0, frontend.Invalid(p+".role", "%s.role: the first message must use the \"user\" role", p)
		}
		blocks, err := decodeBlocks(m.Content, p+".content")
		if err != nil {
			return nil, 0, err
		}
		var (
			texts    []string
			parts    []turnPart // texts and images, when there are images
			nImages  int
			calls    []tokenizer.ToolCall
			thinking []string
			results  []*turn
		)
		for j, b := range blocks {
			bp := fmt.Sprintf("%s.content[%d]", p, j)
			if err := checkCacheControl(b.CacheControl, bp); err != nil {
				return nil, 0, err
			}
			switch {
			case sys && b.Type != "text":
				return nil, 0, frontend.Invalid(bp+".type", "%s.type: only text blocks are accepted in a system message, got %q", bp, b.Type)
			case b.Type == "text":
				if b.Text == nil {
					return nil, 0, frontend.Invalid(bp+".text", "%s.text: Field required", bp)
				}
				texts = append(texts, *b.Text)
				parts = append(parts, turnPart{text: *b.Text})
				mt.See(bp+".text", *b.Text)
			case b.Type == "image" && m.Role == "user":
				ref, err := imagePart(b, bp)
				if err != nil {
					return nil, 0, err
				}
				parts = append(parts, turnPart{media: &ref})
				nImages++
			case isMediaBlock(b.Type):
				return nil, 0, mediaError(bp, b.Type)
			case b.Type == "tool_use" && m.Role == "assistant":
				if b.ID == "" || b.Name == "" {
					return nil, 0, frontend.Invalid(bp, "%s: a tool_use block needs an id and a name", bp)
				}
				input := b.Input
				if k := jsonwire.Kind(input); k == "nothing" || k == "null" {
					input = json.RawMessage("{}")
				} else if k != "object" {
					return nil, 0, jsonwire.TypeError(bp+".input", "an object", k)
				}
				toolUses[b.ID] = true
				calls = append(calls, tokenizer.ToolCall{ID: b.ID, Type: "function", Name: b.Name, Arguments: string(input)})
			case b.Type == "tool_result" && m.Role == "user":
				if b.ToolUseID == nil {
					return nil, 0, frontend.Invalid(bp+".tool_use_id", "%s.tool_use_id: Field required", bp)
				}
				if !toolUses[*b.ToolUseID] {
					return nil, 0, frontend.Invalid(bp+".tool_use_id", "%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", bp, *b.ToolUseID)
				}
				content := ""
				if k := jsonwire.Kind(b.Content); k != "nothing" && k != "null" {
					if content, err = blocksText(b.Content, bp+".content"); err != nil {
						return nil, 0, err
					}
				}
				mt.See(bp+".content", content)
				if b.IsError {
					content = "Error: " + content
				}
				results = append(results, &turn{msg: frontend.Message{Role: "tool", ToolCallID: *b.ToolUseID, Content: content, HasContent: true}})
			case (b.Type == "thinking" || b.Type == "redacted_thinking") && m.Role == "assistant":
				if b.Thinking != nil {
					thinking = append(thinking, *b.Thinking)
				}
			default:
				return nil, 0, frontend.Invalid(bp+".type", "%s.type: blocks of type %q are not accepted in a %s message", bp, b.Type, m.Role)
			}
		}
		images += nImages
		out = append(out, results...)
		if m.Role == "user" && len(texts) == 0 && nImages == 0 && len(results) > 0 {
			lastRole = "tool"
			continue
		}
		t := &turn{msg: frontend.Message{Role: m.Role, Content: strings.Join(texts, "\n"), HasContent: true, ToolCalls: calls}}
		if nImages > 0 {
			t.parts = parts
		}
		if len(thinking) > 0 {
			t.msg.ReasoningContent = strings.Join(thinking, "\n")
		}
		if m.Role == lastRole && len(out) > 0 {
			out[len(out)-1].merge(t)
			continue
		}
		out = append(out, t)
		lastRole = m.Role
	}
	return out, images, nil
}

// merge appends turn next to t, of the same role.
func (t *turn) merge(next *turn) {
	switch {
	case t.parts != nil || next.parts != nil:
		// Content parts (a turn with images): the parts of both, which
		// message joins with "\n" as the strings below are.
		t.parts = append(t.contentParts(), next.contentParts()...)
	case t.msg.Content == "":
		t.msg.Content = next.msg.Content
	case next.msg.Content != "":
		t.msg.Content += "\n" + next.msg.Content
	}
	t.msg.ToolCalls = append(t.msg.ToolCalls, next.msg.ToolCalls...)
	t.msg.ReasoningContent += next.msg.ReasoningContent
}

// decodeBlocks reads a message's content: a string (one text block) or
// an array of blocks.
func decodeBlocks(raw json.RawMessage, param string) ([]messagesBlock, error) {
	switch jsonwire.Kind(raw) {
	case "string":
		s, err := jsonwire.String(raw, param, "a string or an array of content blocks")
		if err != nil {
			return nil, err
		}
		return []messagesBlock{{Type: "text", Text: &s}}, nil
	case "nothing":
		return nil, frontend.Invalid(param, "%s: Field required", param)
	}
	elems, err := jsonwire.Array(raw, param, "a string or an array of content blocks")
	if err != nil {
		return nil, err
	}
	blocks := make([]messagesBlock, len(elems))
	for i, e := range elems {
		p := fmt.Sprintf("%s[%d]", param, i)
		if err := jsonwire.Object(e, p, "a content block object", &blocks[i]); err != nil {
			return nil, err
		}
		if blocks[i].Type == "" {
			return nil, frontend.Invalid(p+".type", "%s.type: Field required", p)
		}
	}
	return blocks, nil
}

// convertTools turns Messages tools ({name, description, input_schema})
// into function tools. Tools with defer_loading are offered like the
// others (there is no tool search here to load them later); cache_control
// is checked and needs nothing more. Server tools (a type other than
// "custom": web_search_..., code_execution_...) run on Anthropic's side:
// they are not offered to the model, rather than refused, so that an agent
// that lists one still runs (docs/API.md).
func convertTools(raws []json.RawMessage) ([]frontend.Tool, error) {
	out := make([]frontend.Tool, 0, len(raws))
	for i, raw := range raws {
		p := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type         *string         `json:"type"`
			Name         string          `json:"name"`
			Description  *string         `json:"description"`
			InputSchema  json.RawMessage `json:"input_schema"`
			CacheControl json.RawMessage `json:"cache_control"`
			DeferLoading *bool           `json:"defer_loading"`
		}
		if err := jsonwire.Object(raw, p, "a tool object", &t); err != nil {
			return nil, err
		}
		if err := checkCacheControl(t.CacheControl, p); err != nil {
			return nil, err
		}
		if t.Name == "" {
			return nil, frontend.Invalid(p+".name", "%s.name: Field required", p)
		}
		if !toolName.MatchString(t.Name) {
			return nil, frontend.Invalid(p+".name", "%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$', got %q", p, frontend.Truncate(t.Name, 140))
		}
		if t.Type != nil && *t.Type != "custom" {
			continue
		}
		if k := jsonwire.Kind(t.InputSchema); k != "object" {
			return nil, frontend.Invalid(p+".input_schema", "%s.input_schema: a JSON Schema object is required", p)
		}
		tool, err := frontend.NewFunctionTool(t.Name, t.Description, t.InputSchema)
		if err != nil {
			return nil, frontend.WithPrefix(p, err)
		}
		out = append(out, tool)
	}
	return out, nil
}

// convertToolChoice sets the request's tool choice and parallel tool calls
// from the Messages tool_choice.
func convertToolChoice(raw json.RawMessage, r *frontend.Request) error {
	if k := jsonwire.Kind(raw); k == "nothing" || k == "null" {
		return nil
	} else if k != "object" {
		return jsonwire.TypeError("tool_choice", "an object", k)
	}
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if err := jsonwire.Decode(raw, &tc); err != nil {
		return frontend.WithPrefix("tool_choice", err)
	}
	switch tc.Type {
	case "auto":
		r.ToolChoice.Mode = frontend.ToolAuto
	case "any":
		r.ToolChoice.Mode = frontend.ToolRequired
	case "none":
		r.ToolChoice.Mode = frontend.ToolNone
	case "tool":
		if tc.Name == "" {
			return frontend.Invalid("tool_choice.name", "tool_choice.name: Field required")
		}
		r.ToolChoice.Mode, r.ToolChoice.Name = frontend.ToolNamed, tc.Name
	default:
		return frontend.Invalid("tool_choice.type", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none', got %q", tc.Type)
	}
	r.ToolChoice.Text = frontend.ToolChoiceText(r.ToolChoice.Mode, r.ToolChoice.Name)
	if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
		r.ParallelToolCalls = new(bool)
	}
	return nil
}
