package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// This file holds the request side of Anthropic's Messages API
// (POST /v1/messages, POST /v1/messages/count_tokens): its decoding, its
// own checks, and its translation into a chat completions request body,
// which then goes through the chat path's decoders (decodeChatRequest,
// decodeChatPrompt, decodeToolPlan), prepareChat and submit like any chat
// request. The Messages API is thus one more wire format over the same
// generation: templates, tools, stop strings, limits and metrics are the
// chat path's.

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
}

// messagesMetadata is "metadata": user_id becomes the chat path's user.
type messagesMetadata struct {
	UserID *string `json:"user_id"`
}

// messagesThinking is "thinking": {"type": "enabled", "budget_tokens": n}
// or {"type": "disabled"}. BudgetTokens is validated here; the sampler's
// reasoning budget that enforces it is wired by the lead (issue 19, item 3).
type messagesThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

// minThinkingBudget is Anthropic's smallest budget_tokens.
const minThinkingBudget = 1024

// messagesBlock is one content block of a message, any type; which fields
// matter depends on Type.
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID *string         `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  *string         `json:"thinking"`
	Source    json.RawMessage `json:"source"`
}

// decodeMessagesRequest decodes a Messages request. count is set for
// count_tokens, which needs no max_tokens.
func decodeMessagesRequest(body []byte, count bool) (*messagesRequest, error) {
	if err := checkText(body); err != nil {
		return nil, err
	}
	var req messagesRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if !count {
		if req.MaxTokens == nil {
			return nil, invalid("max_tokens", "max_tokens: Field required")
		}
		if *req.MaxTokens < 1 {
			return nil, invalid("max_tokens", "max_tokens: must be greater than or equal to 1, got %d", *req.MaxTokens)
		}
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 1) {
		return nil, invalid("temperature", "temperature: must be between 0 and 1, got %g", *t)
	}
	if t := req.Thinking; t != nil {
		switch t.Type {
		case "disabled":
		case "enabled":
			if t.BudgetTokens == nil {
				return nil, invalid("thinking.budget_tokens", "thinking.budget_tokens: Field required")
			}
			if *t.BudgetTokens < minThinkingBudget {
				return nil, invalid("thinking.budget_tokens", "thinking.budget_tokens: must be greater than or equal to %d, got %d", minThinkingBudget, *t.BudgetTokens)
			}
			if req.MaxTokens != nil && *t.BudgetTokens >= *req.MaxTokens {
				return nil, invalid("thinking.budget_tokens", "`max_tokens` must be greater than `thinking.budget_tokens` (%d >= %d)", *t.BudgetTokens, *req.MaxTokens)
			}
		default:
			return nil, invalid("thinking.type", "thinking.type: must be \"enabled\" or \"disabled\", got %q", t.Type)
		}
	}
	return &req, nil
}

// chatBody translates the request into a chat completions request body,
// and names the body's image parts, in order, by the Messages blocks they
// came from (for nameMedia). Every error is a *validationError naming the
// Messages field at fault.
func (req *messagesRequest) chatBody() ([]byte, []mediaName, error) {
	var (
		msgs []map[string]any
		mt   markerText // a text that holds media.Marker
	)
	if len(req.System) > 0 && jsonKind(req.System) != "null" {
		sys, err := blocksText(req.System, "system")
		if err != nil {
			return nil, nil, err
		}
		mt.see("system", sys)
		msgs = append(msgs, map[string]any{"role": "system", "content": sys})
	}
	conv, mediaParams, err := convertMessages(req.Messages, &mt)
	if err != nil {
		return nil, nil, err
	}
	if err := mt.check(len(mediaParams) > 0); err != nil {
		return nil, nil, err
	}
	msgs = append(msgs, conv...)
	body := map[string]any{"model": req.Model, "messages": msgs}
	if last := msgs[len(msgs)-1]; last["role"] == "assistant" && last["tool_calls"] == nil {
		// A final assistant turn is a prefill: the answer continues it,
		// as Anthropic's does.
		body["add_generation_prompt"] = false
		body["continue_final_message"] = true
	}
	if req.MaxTokens != nil {
		body["max_tokens"] = *req.MaxTokens
	}
	if len(req.StopSequences) > 0 {
		body["stop"] = req.StopSequences
	}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		body["top_p"] = *req.TopP
	}
	if req.TopK != nil {
		body["top_k"] = *req.TopK
	}
	if req.Stream != nil {
		body["stream"] = *req.Stream
	}
	if req.Metadata != nil && req.Metadata.UserID != nil {
		body["user"] = *req.Metadata.UserID
	}
	if len(req.Tools) > 0 {
		tools, err := convertTools(req.Tools)
		if err != nil {
			return nil, nil, err
		}
		body["tools"] = tools
	}
	if t := req.Thinking; t != nil {
		// Templates that can switch thinking (Qwen3's and its kin) read
		// enable_thinking; the others ignore it.
		body["chat_template_kwargs"] = map[string]any{"enable_thinking": t.Type == "enabled"}
	}
	if err := convertToolChoice(req.ToolChoice, body); err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(body)
	return b, mediaParams, err
}

// blocksText reads a string or an array of text blocks (system, a
// tool_result's content) as one string, the blocks joined with "\n".
func blocksText(raw json.RawMessage, param string) (string, error) {
	switch jsonKind(raw) {
	case "string":
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case "array":
	default:
		return "", typeError(param, "a string or an array of text blocks", jsonKind(raw))
	}
	var blocks []messagesBlock
	if err := decodeJSON(raw, &blocks); err != nil {
		return "", withPrefix(param, err)
	}
	texts := make([]string, len(blocks))
	for i, b := range blocks {
		p := fmt.Sprintf("%s[%d]", param, i)
		switch {
		case isMediaBlock(b.Type):
			return "", mediaError(p, b.Type)
		case b.Type != "text":
			return "", invalid(p+".type", "%s.type: only text blocks are accepted here, got %q", p, b.Type)
		case b.Text == nil:
			return "", invalid(p+".text", "%s.text: Field required", p)
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
		return invalid(param+".type", "%s: image blocks are accepted only in a user message's content, not here.", param)
	}
	return invalid(param+".type", "%s: %s blocks are not supported: only text and image blocks are read.", param, typ)
}

// imagePart turns an image block into a chat image_url part: a base64
// source becomes a data: URL (its media type and bytes are checked with
// the chat path's image_url parts), a url source its URL. field names the
// block's field that holds the data.
func imagePart(b messagesBlock, param string) (part map[string]any, field string, err error) {
	p := param + ".source"
	if jsonKind(b.Source) != "object" {
		return nil, "", invalid(p, "%s: Field required (an object: {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": ...} or {\"type\": \"url\", \"url\": ...})", p)
	}
	var src struct {
		Type      string  `json:"type"`
		MediaType *string `json:"media_type"`
		Data      *string `json:"data"`
		URL       *string `json:"url"`
	}
	if err := decodeJSON(b.Source, &src); err != nil {
		return nil, "", withPrefix(p, err)
	}
	var u string
	switch src.Type {
	case "base64":
		switch {
		case src.MediaType == nil:
			return nil, "", invalid(p+".media_type", "%s.media_type: Field required", p)
		case !strings.HasPrefix(*src.MediaType, "image/") || strings.ContainsAny(*src.MediaType, ";,"):
			return nil, "", invalid(p+".media_type", "%s.media_type: Input should be 'image/jpeg', 'image/png' or 'image/webp', got %q", p, truncate(*src.MediaType, 40))
		case src.Data == nil || *src.Data == "":
			return nil, "", invalid(p+".data", "%s.data: Field required", p)
		}
		u, field = "data:"+*src.MediaType+";base64,"+*src.Data, p+".data"
	case "url":
		if src.URL == nil || *src.URL == "" {
			return nil, "", invalid(p+".url", "%s.url: Field required", p)
		}
		if err := checkImageURL(*src.URL, p+".url"); err != nil {
			return nil, "", err
		}
		u, field = *src.URL, p+".url"
	default:
		return nil, "", invalid(p+".type", "%s.type: image sources of type %q are not supported; use base64 or url.", p, truncate(src.Type, 40))
	}
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}}, field, nil
}

// convertMessages turns Messages turns into chat messages: a user turn's
// tool_result blocks become tool messages (before its text), an assistant
// turn's tool_use blocks its tool_calls and its thinking blocks its
// reasoning_content. A user turn with image blocks gets content parts
// (text and image_url) in block order; mediaParams names each image part
// by its block, in prompt order; mt sees every text. Consecutive turns of
// one role are merged, as Anthropic merges them; the first turn must be
// the user's.
func convertMessages(raws []json.RawMessage, mt *markerText) (msgs []map[string]any, mediaParams []mediaName, err error) {
	if len(raws) == 0 {
		return nil, nil, invalid("messages", "messages: at least one message is required")
	}
	toolUses := map[string]bool{}
	var out []map[string]any
	lastRole := ""
	for i, raw := range raws {
		p := fmt.Sprintf("messages[%d]", i)
		if jsonKind(raw) != "object" {
			return nil, nil, typeError(p, "a message object", jsonKind(raw))
		}
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := decodeJSON(raw, &m); err != nil {
			return nil, nil, withPrefix(p, err)
		}
		switch m.Role {
		case "user", "assistant":
		case "system":
			return nil, nil, invalid(p+".role", "%s.role: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role.", p)
		case "":
			return nil, nil, invalid(p+".role", "%s.role: Field required", p)
		default:
			return nil, nil, invalid(p+".role", "%s.role: Input should be 'user' or 'assistant', got %q", p, m.Role)
		}
		if i == 0 && m.Role != "user" {
			return nil, nil, invalid(p+".role", "%s.role: the first message must use the \"user\" role", p)
		}
		blocks, err := decodeBlocks(m.Content, p+".content")
		if err != nil {
			return nil, nil, err
		}
		var (
			texts    []string
			parts    []any // texts and images, when there are images
			images   int
			calls    []map[string]any
			thinking []string
			results  []map[string]any
		)
		for j, b := range blocks {
			bp := fmt.Sprintf("%s.content[%d]", p, j)
			switch {
			case b.Type == "text":
				if b.Text == nil {
					return nil, nil, invalid(bp+".text", "%s.text: Field required", bp)
				}
				texts = append(texts, *b.Text)
				parts = append(parts, map[string]any{"type": "text", "text": *b.Text})
				mt.see(bp+".text", *b.Text)
			case b.Type == "image" && m.Role == "user":
				part, field, err := imagePart(b, bp)
				if err != nil {
					return nil, nil, err
				}
				parts = append(parts, part)
				images++
				mediaParams = append(mediaParams, mediaName{bp, field})
			case isMediaBlock(b.Type):
				return nil, nil, mediaError(bp, b.Type)
			case b.Type == "tool_use" && m.Role == "assistant":
				if b.ID == "" || b.Name == "" {
					return nil, nil, invalid(bp, "%s: a tool_use block needs an id and a name", bp)
				}
				input := b.Input
				if k := jsonKind(input); k == "nothing" || k == "null" {
					input = json.RawMessage("{}")
				} else if k != "object" {
					return nil, nil, typeError(bp+".input", "an object", k)
				}
				toolUses[b.ID] = true
				calls = append(calls, map[string]any{"id": b.ID, "type": "function",
					"function": map[string]any{"name": b.Name, "arguments": string(input)}})
			case b.Type == "tool_result" && m.Role == "user":
				if b.ToolUseID == nil {
					return nil, nil, invalid(bp+".tool_use_id", "%s.tool_use_id: Field required", bp)
				}
				if !toolUses[*b.ToolUseID] {
					return nil, nil, invalid(bp+".tool_use_id", "%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", bp, *b.ToolUseID)
				}
				content := ""
				if k := jsonKind(b.Content); k != "nothing" && k != "null" {
					if content, err = blocksText(b.Content, bp+".content"); err != nil {
						return nil, nil, err
					}
				}
				mt.see(bp+".content", content)
				if b.IsError {
					content = "Error: " + content
				}
				results = append(results, map[string]any{"role": "tool", "tool_call_id": *b.ToolUseID, "content": content})
			case (b.Type == "thinking" || b.Type == "redacted_thinking") && m.Role == "assistant":
				if b.Thinking != nil {
					thinking = append(thinking, *b.Thinking)
				}
			default:
				return nil, nil, invalid(bp+".type", "%s.type: blocks of type %q are not accepted in a %s message", bp, b.Type, m.Role)
			}
		}
		out = append(out, results...)
		if m.Role == "user" && len(texts) == 0 && images == 0 && len(results) > 0 {
			lastRole = "tool"
			continue
		}
		msg := map[string]any{"role": m.Role, "content": strings.Join(texts, "\n")}
		if images > 0 {
			msg["content"] = parts
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		if len(thinking) > 0 {
			msg["reasoning_content"] = strings.Join(thinking, "\n")
		}
		if m.Role == lastRole && len(out) > 0 {
			mergeTurn(out[len(out)-1], msg)
			continue
		}
		out = append(out, msg)
		lastRole = m.Role
	}
	return out, mediaParams, nil
}

// mergeTurn appends turn next to prev, of the same role.
func mergeTurn(prev, next map[string]any) {
	a, aText := prev["content"].(string)
	b, bText := next["content"].(string)
	switch {
	case !aText || !bText:
		// Content parts (a turn with images): the parts of both, which
		// the chat path joins with "\n" as the strings below are.
		prev["content"] = append(contentParts(prev["content"]), contentParts(next["content"])...)
	case a == "":
		prev["content"] = b
	case b != "":
		prev["content"] = a + "\n" + b
	}
	if c, ok := next["tool_calls"].([]map[string]any); ok {
		old, _ := prev["tool_calls"].([]map[string]any)
		prev["tool_calls"] = append(old, c...)
	}
	if r, ok := next["reasoning_content"].(string); ok {
		old, _ := prev["reasoning_content"].(string)
		prev["reasoning_content"] = old + r
	}
}

// contentParts returns a chat message's content as parts: a string is one
// text part ("" none).
func contentParts(c any) []any {
	switch c := c.(type) {
	case []any:
		return c
	case string:
		if c != "" {
			return []any{map[string]any{"type": "text", "text": c}}
		}
	}
	return nil
}

// decodeBlocks reads a message's content: a string (one text block) or
// an array of blocks.
func decodeBlocks(raw json.RawMessage, param string) ([]messagesBlock, error) {
	switch jsonKind(raw) {
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, typeError(param, "a string or an array of content blocks", "string")
		}
		return []messagesBlock{{Type: "text", Text: &s}}, nil
	case "array":
	case "nothing":
		return nil, invalid(param, "%s: Field required", param)
	default:
		return nil, typeError(param, "a string or an array of content blocks", jsonKind(raw))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, typeError(param, "an array of content blocks", "array")
	}
	blocks := make([]messagesBlock, len(elems))
	for i, e := range elems {
		p := fmt.Sprintf("%s[%d]", param, i)
		if jsonKind(e) != "object" {
			return nil, typeError(p, "a content block object", jsonKind(e))
		}
		if err := decodeJSON(e, &blocks[i]); err != nil {
			return nil, withPrefix(p, err)
		}
		if blocks[i].Type == "" {
			return nil, invalid(p+".type", "%s.type: Field required", p)
		}
	}
	return blocks, nil
}

// convertTools turns Messages tools ({name, description, input_schema})
// into chat function tools.
func convertTools(raws []json.RawMessage) ([]map[string]any, error) {
	out := make([]map[string]any, len(raws))
	for i, raw := range raws {
		p := fmt.Sprintf("tools[%d]", i)
		if jsonKind(raw) != "object" {
			return nil, typeError(p, "a tool object", jsonKind(raw))
		}
		var t struct {
			Type        *string         `json:"type"`
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := decodeJSON(raw, &t); err != nil {
			return nil, withPrefix(p, err)
		}
		if t.Type != nil && *t.Type != "custom" {
			return nil, invalid(p+".type", "%s.type: tools of type %q (server tools) are not supported; only custom tools with an input_schema are.", p, *t.Type)
		}
		if t.Name == "" {
			return nil, invalid(p+".name", "%s.name: Field required", p)
		}
		if k := jsonKind(t.InputSchema); k != "object" {
			return nil, invalid(p+".input_schema", "%s.input_schema: a JSON Schema object is required", p)
		}
		fn := map[string]any{"name": t.Name, "parameters": t.InputSchema}
		if t.Description != nil {
			fn["description"] = *t.Description
		}
		out[i] = map[string]any{"type": "function", "function": fn}
	}
	return out, nil
}

// convertToolChoice sets the chat body's tool_choice and
// parallel_tool_calls from the Messages tool_choice.
func convertToolChoice(raw json.RawMessage, body map[string]any) error {
	if k := jsonKind(raw); k == "nothing" || k == "null" {
		return nil
	} else if k != "object" {
		return typeError("tool_choice", "an object", k)
	}
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if err := decodeJSON(raw, &tc); err != nil {
		return withPrefix("tool_choice", err)
	}
	switch tc.Type {
	case "auto":
		body["tool_choice"] = "auto"
	case "any":
		body["tool_choice"] = "required"
	case "none":
		body["tool_choice"] = "none"
	case "tool":
		if tc.Name == "" {
			return invalid("tool_choice.name", "tool_choice.name: Field required")
		}
		body["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tc.Name}}
	default:
		return invalid("tool_choice.type", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none', got %q", tc.Type)
	}
	if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
		body["parallel_tool_calls"] = false
	}
	return nil
}
