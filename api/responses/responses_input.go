package responses

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/tokenizer"
)

// This file decodes the Responses API request (POST /v1/responses) and
// turns its input items into chat messages. The Responses API goes
// through the chat path: the items (a stored conversation's first) become
// the messages of a frontend.Request, which prepareChat and submit take
// as they take any chat request. So templates, tools,
// structured output, stop, limits and cancellation are the chat path's,
// and a conversation continued with previous_response_id renders to a
// prompt that starts with the previous turn's prompt and answer: the
// prefix cache serves it.

// responsesRequest is a decoded POST /v1/responses body, not yet
// validated beyond JSON types.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Text               *responsesText    `json:"text"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Metadata           map[string]string `json:"metadata"`
	User               *string           `json:"user"`
	Store              *bool             `json:"store"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Background         *bool             `json:"background"`
	Stream             *bool             `json:"stream"`
	Reasoning          *responsesReason  `json:"reasoning"`
	Truncation         *string           `json:"truncation"`
	// Include asks for more in the output (reasoning.encrypted_content,
	// message.output_text.logprobs); TopLogprobs is the number of
	// alternatives per token (0 to 20).
	Include     []string `json:"include"`
	TopLogprobs *int     `json:"top_logprobs"`
	// PromptCacheKey groups requests that share a prefix: the head routes
	// them to one worker (scheduler.Request.RouteKey).
	PromptCacheKey *string `json:"prompt_cache_key"`
	// ClientMetadata (Codex's turn ids) is accepted and not used.
	ClientMetadata json.RawMessage `json:"client_metadata"`
	// Conversation (OpenAI's Conversations API) is refused: conversations
	// here are chains of stored responses (previous_response_id).
	Conversation json.RawMessage `json:"conversation"`
}

// responsesReason is "reasoning". Effort is kept for the reasoning budget
// (see doc.go: low, medium and high are proposed to cap reasoning at a
// quarter, half and all of max_output_tokens); it does not change
// generation yet.
type responsesReason struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// responsesText is "text": the output's format.
type responsesText struct {
	Format *responsesFormat `json:"format"`
}

// responsesFormat is text.format: {"type": "text"}, {"type":
// "json_object"} or {"type": "json_schema", "name", "schema", "strict",
// "description"} (flat, unlike chat's response_format).
type responsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	Description string          `json:"description,omitempty"`
}

// Item is one Responses API item, as an input item and as an output item:
// the union of the fields of the types served here. Type says which are
// set.
type respItem struct {
	Type   string `json:"type"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status,omitempty"`
	// message
	Role    string        `json:"role,omitempty"`
	Content []respContent `json:"content,omitempty"`
	// function_call, function_call_output, custom_tool_call,
	// custom_tool_call_output; Namespace is a namespaced function's
	// namespace, Input a custom tool call's text.
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Input     string `json:"input,omitempty"`
	Output    string `json:"output,omitempty"`
	// reasoning; EncryptedContent is set when the request included
	// reasoning.encrypted_content (encryptReasoning).
	Summary          []respContent `json:"summary,omitempty"`
	EncryptedContent string        `json:"encrypted_content,omitempty"`
}

// respContent is a content part: input_text, input_image, input_audio,
// output_text
// (with annotations), reasoning_text, summary_text.
type respContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations *[]any `json:"annotations,omitempty"`
	Logprobs    *[]any `json:"logprobs,omitempty"`
	// ImageURL and Detail are an input_image's: a data: or http(s) URL,
	// and auto, low or high ("" when not sent).
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	// InputAudio is an input_audio's clip.
	InputAudio *respAudio `json:"input_audio,omitempty"`
}

// respAudio is an input_audio part's clip: base64 data, wav or mp3.
type respAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// MarshalJSON writes an input_image or input_audio without text.
func (c respContent) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case "input_image":
		m := map[string]any{"type": c.Type, "image_url": c.ImageURL}
		if c.Detail != "" {
			m["detail"] = c.Detail
		}
		return json.Marshal(m)
	case "input_audio":
		return json.Marshal(map[string]any{"type": c.Type, "input_audio": c.InputAudio})
	}
	type plain respContent
	return json.Marshal(plain(c))
}

// MarshalJSON writes the fields a type has, and its empty required ones
// (a message's content, a function call's arguments, a reasoning item's
// summary).
func (it respItem) MarshalJSON() ([]byte, error) {
	m := map[string]any{"type": it.Type}
	if it.ID != "" {
		m["id"] = it.ID
	}
	if it.Status != "" {
		m["status"] = it.Status
	}
	content := it.Content
	if content == nil {
		content = []respContent{}
	}
	switch it.Type {
	case "message":
		m["role"], m["content"] = it.Role, content
	case "function_call":
		m["call_id"], m["name"], m["arguments"] = it.CallID, it.Name, it.Arguments
		if it.Namespace != "" {
			m["namespace"] = it.Namespace
		}
	case "custom_tool_call":
		m["call_id"], m["name"], m["input"] = it.CallID, it.Name, it.Input
	case "function_call_output", "custom_tool_call_output":
		m["call_id"], m["output"] = it.CallID, it.Output
	case "reasoning":
		summary := it.Summary
		if summary == nil {
			summary = []respContent{}
		}
		m["summary"] = summary
		if len(it.Content) > 0 {
			m["content"] = it.Content
		}
		if it.EncryptedContent != "" {
			m["encrypted_content"] = it.EncryptedContent
		}
	}
	return json.Marshal(m)
}

// Input roles and the content part types each accepts.
var respRoles = map[string]bool{"user": true, "system": true, "developer": true, "assistant": true}

// decodeInput reads "input": a string (one user message) or an array of
// items. Every error is a *frontend.Error naming input[i]....
func decodeInput(raw json.RawMessage) ([]respItem, error) {
	switch jsonwire.Kind(raw) {
	case "nothing", "null":
		return nil, frontend.Invalid("input", "input is required: a string or an array of input items.")
	case "string":
		s, err := jsonwire.String(raw, "input", "a string or an array of input items")
		if err != nil {
			return nil, err
		}
		return []respItem{{Type: "message", Role: "user", Content: []respContent{{Type: "input_text", Text: s}}}}, nil
	}
	elems, err := jsonwire.Array(raw, "input", "a string or an array of input items")
	if err != nil {
		return nil, err
	}
	items := make([]respItem, len(elems))
	for i, e := range elems {
		it, err := decodeItem(e)
		if err != nil {
			return nil, frontend.WithPrefix(fmt.Sprintf("input[%d]", i), err)
		}
		items[i] = it
	}
	return items, nil
}

// wireItem is an input item as sent; content and output may be strings
// or arrays.
type wireItem struct {
	Type      *string         `json:"type"`
	ID        *string         `json:"id"`
	Role      *string         `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Namespace *string         `json:"namespace"`
	Arguments *string         `json:"arguments"`
	Input     *string         `json:"input"`
	Output    json.RawMessage `json:"output"`
	Summary   json.RawMessage `json:"summary"`
	Encrypted *string         `json:"encrypted_content"`
}

// decodeItem reads one input item. An item without a type that has a role
// is a message (EasyInputMessage).
func decodeItem(raw json.RawMessage) (respItem, error) {
	var w wireItem
	if err := jsonwire.Object(raw, "", "an input item object", &w); err != nil {
		return respItem{}, err
	}
	typ := jsonwire.Str(w.Type)
	if typ == "" && w.Role != nil {
		typ = "message"
	}
	it := respItem{Type: typ, ID: jsonwire.Str(w.ID)}
	switch typ {
	case "":
		return it, frontend.Invalid("type", "Each input item needs a type (message, function_call, function_call_output, custom_tool_call, custom_tool_call_output or reasoning).")
	case "message":
		if w.Role == nil || !respRoles[*w.Role] {
			return it, frontend.Invalid("role", "A message item needs a role: user, system, developer or assistant; got %q.", jsonwire.Str(w.Role))
		}
		it.Role = *w.Role
		parts, err := decodeParts(w.Content, it.Role)
		if err != nil {
			return it, err
		}
		it.Content = parts
	case "function_call", "custom_tool_call":
		if w.CallID == nil || *w.CallID == "" {
			return it, frontend.Invalid("call_id", "A %s item needs a call_id.", typ)
		}
		if w.Name == nil || *w.Name == "" {
			return it, frontend.Invalid("name", "A %s item needs a name.", typ)
		}
		it.CallID, it.Name, it.Namespace = *w.CallID, *w.Name, jsonwire.Str(w.Namespace)
		if typ == "custom_tool_call" {
			it.Input = jsonwire.Str(w.Input)
		} else {
			it.Arguments = cmp.Or(jsonwire.Str(w.Arguments), "{}")
		}
	case "function_call_output", "custom_tool_call_output":
		if w.CallID == nil || *w.CallID == "" {
			return it, frontend.Invalid("call_id", "A %s item needs the call_id of the call it answers.", typ)
		}
		it.CallID = *w.CallID
		switch jsonwire.Kind(w.Output) {
		case "string":
			_ = json.Unmarshal(w.Output, &it.Output)
		case "array":
			parts, err := decodeParts(w.Output, "user")
			if err != nil {
				return it, frontend.WithPrefix("output", err)
			}
			for j, p := range parts {
				if p.Type != "input_text" {
					return it, frontend.Invalid(fmt.Sprintf("output[%d].type", j), "A function_call_output's output takes input_text parts only, got %q; put images in a user message.", p.Type)
				}
			}
			it.Output = joinParts(parts)
		default:
			return it, jsonwire.TypeError("output", "a string or an array of input_text parts", jsonwire.Kind(w.Output))
		}
	case "reasoning":
		it.EncryptedContent = jsonwire.Str(w.Encrypted)
		switch jsonwire.Kind(w.Summary) {
		case "nothing", "null":
		case "array":
			var parts []struct {
				Type *string `json:"type"`
				Text *string `json:"text"`
			}
			if err := jsonwire.Decode(w.Summary, &parts); err != nil {
				return it, frontend.WithPrefix("summary", err)
			}
			for j, p := range parts {
				if jsonwire.Str(p.Type) != "summary_text" {
					return it, frontend.Invalid(fmt.Sprintf("summary[%d].type", j), "Reasoning summary parts must have type \"summary_text\", got %q.", jsonwire.Str(p.Type))
				}
				it.Summary = append(it.Summary, respContent{Type: "summary_text", Text: jsonwire.Str(p.Text)})
			}
		default:
			return it, jsonwire.TypeError("summary", "an array of summary_text parts", jsonwire.Kind(w.Summary))
		}
		if jsonwire.Kind(w.Content) == "array" {
			parts, err := decodeParts(w.Content, "reasoning")
			if err != nil {
				return it, err
			}
			it.Content = parts
		}
	default:
		if hostedCalls[typ] {
			// A hosted tool's call (web_search_call, ...) that an earlier
			// answer elsewhere made: there is nothing to show the model.
			it.Type = hostedCall
			return it, nil
		}
		return it, frontend.Invalid("type", "Input items of type %q are not supported; use message, function_call, function_call_output, custom_tool_call, custom_tool_call_output or reasoning.", typ)
	}
	return it, nil
}

// hostedCalls are the items of hosted tools' calls, accepted in input and
// not shown to the model (hostedCall).
var hostedCalls = map[string]bool{
	"web_search_call": true, "file_search_call": true, "code_interpreter_call": true, "image_generation_call": true,
	"computer_call": true, "computer_call_output": true, "mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true,
	"mcp_approval_response": true, "local_shell_call": true, "local_shell_call_output": true, "tool_search_call": true,
	"tool_search_output": true,
}

// hostedCall is the type decodeItem gives a hosted tool's call item.
const hostedCall = "hosted_call"

// partTypes are the content part types each role's message takes.
var partTypes = map[string]map[string]bool{
	"user":      {"input_text": true, "input_image": true, "input_audio": true},
	"system":    {"input_text": true, "input_image": true, "input_audio": true},
	"developer": {"input_text": true, "input_image": true, "input_audio": true},
	"assistant": {"output_text": true, "input_text": true, "refusal": true},
	"reasoning": {"reasoning_text": true},
}

// decodeParts reads a message's content: a string or an array of parts.
func decodeParts(raw json.RawMessage, role string) ([]respContent, error) {
	switch jsonwire.Kind(raw) {
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		typ := "input_text"
		if role == "assistant" {
			typ = "output_text"
		}
		return []respContent{{Type: typ, Text: s}}, nil
	}
	elems, err := jsonwire.Array(raw, "content", "a string or an array of content parts")
	if err != nil {
		return nil, err
	}
	parts := make([]respContent, len(elems))
	for j, e := range elems {
		prefix := fmt.Sprintf("content[%d]", j)
		var p struct {
			Type     *string            `json:"type"`
			Text     *string            `json:"text"`
			Refusal  *string            `json:"refusal"`
			ImageURL *string            `json:"image_url"`
			Detail   *string            `json:"detail"`
			FileID   *string            `json:"file_id"`
			Audio    *openai.InputAudio `json:"input_audio"`
		}
		if err := jsonwire.Object(e, prefix, "a content part object", &p); err != nil {
			return nil, err
		}
		typ := jsonwire.Str(p.Type)
		if typ == "input_image" && partTypes[role][typ] {
			part, err := inputImage(p.ImageURL, p.Detail, p.FileID)
			if err != nil {
				return nil, frontend.WithPrefix(prefix, err)
			}
			parts[j] = part
			continue
		}
		if typ == "input_audio" && partTypes[role][typ] {
			a := p.Audio
			if err := a.Check(prefix + ".input_audio"); err != nil {
				return nil, err
			}
			parts[j] = respContent{Type: typ, InputAudio: &respAudio{Data: *a.Data, Format: *a.Format}}
			continue
		}
		if !partTypes[role][typ] {
			allowed := make([]string, 0, 3)
			for t := range partTypes[role] {
				allowed = append(allowed, t)
			}
			return nil, frontend.Invalid(prefix+".type", "Content parts of type %q are not supported in a %s item (files are not served here); use %s.", typ, role, strings.Join(sortedStrings(allowed), " or "))
		}
		text := p.Text
		if typ == "refusal" {
			text = p.Refusal
		}
		if text == nil {
			return nil, frontend.Invalid(prefix+".text", "A %s content part needs text.", typ)
		}
		parts[j] = respContent{Type: typ, Text: *text}
	}
	return parts, nil
}

// inputImage checks an input_image part: image_url a data: or http(s)
// URL (its bytes are checked with the chat path's image_url parts), no
// file_id (the Files API is not served).
func inputImage(u, detail, fileID *string) (respContent, error) {
	part := respContent{Type: "input_image"}
	switch {
	case fileID != nil:
		return part, frontend.Invalid("file_id", "input_image.file_id is not supported: this server has no Files API; send the image as image_url (a data: URL, or an http(s) URL with --allowed-media-domains).")
	case u == nil:
		return part, frontend.Invalid("image_url", "An input_image part needs image_url: a data: URL (data:image/png;base64,...) or an http(s) URL.")
	}
	if err := frontend.CheckImageURL(*u, "image_url"); err != nil {
		return part, err
	}
	part.ImageURL = *u
	if err := frontend.CheckDetail(detail, "detail", "detail"); err != nil {
		return part, err
	}
	if detail != nil {
		part.Detail = *detail
	}
	return part, nil
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func joinParts(parts []respContent) string {
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	return strings.Join(texts, "\n")
}

// chatMessagesOf turns a conversation's items into chat messages, as the
// chat template takes them: consecutive function_call items become one
// assistant message's tool calls (joined to the assistant message right
// before them), a function_call_output a tool message, a reasoning item
// the next assistant message's reasoning content, a message with
// input_image or input_audio parts content with media. A
// function_call_output must answer a function_call of the conversation;
// errors name the item as input[i] counting from first (the items before
// it come from previous_response_id), and media are named so.
func chatMessagesOf(instructions *string, items []respItem, first int) ([]frontend.Message, error) {
	var (
		mt     frontend.MarkerText // a text that holds media.Marker
		msgs   []frontend.Message
		nMedia int
	)
	if instructions != nil && *instructions != "" {
		mt.See("instructions", *instructions)
		msgs = append(msgs, frontend.Message{Role: "system", Content: *instructions, HasContent: true})
	}
	calls := map[string]bool{}
	reasoning := ""
	lastAssistant := -1 // the message function calls join
	for i, it := range items {
		switch it.Type {
		case "message":
			msg := frontend.Message{Role: it.Role, Content: joinParts(it.Content), HasContent: true}
			if content, refs := mediaContent(it.Content, i, first); refs != nil {
				msg.Content, msg.Media = content, refs
				nMedia += len(refs)
			}
			for j, c := range it.Content {
				p := "previous_response_id"
				if i >= first {
					p = fmt.Sprintf("input[%d].content[%d]", i-first, j)
				}
				mt.See(p, c.Text)
			}
			lastAssistant = -1
			if it.Role == "assistant" {
				msg.ReasoningContent, reasoning = reasoning, ""
				lastAssistant = len(msgs)
			}
			msgs = append(msgs, msg)
		case "function_call", "custom_tool_call":
			calls[it.CallID] = true
			if lastAssistant < 0 {
				msgs = append(msgs, frontend.Message{Role: "assistant", ReasoningContent: reasoning})
				reasoning, lastAssistant = "", len(msgs)-1
			}
			a := &msgs[lastAssistant]
			if it.Arguments != "" && !json.Valid([]byte(it.Arguments)) {
				// Named as the chat message and call it became.
				return nil, frontend.Invalid(fmt.Sprintf("input[%d].tool_calls[%d].function.arguments", lastAssistant, len(a.ToolCalls)),
					"The arguments of a tool call must be a JSON object encoded as a string; this string is not valid JSON.")
			}
			args := it.Arguments
			if it.Type == "custom_tool_call" {
				args = customArguments(it.Input)
			}
			a.ToolCalls = append(a.ToolCalls, tokenizer.ToolCall{ID: it.CallID, Type: "function", Name: modelName(it.Namespace, it.Name), Arguments: args})
		case "function_call_output", "custom_tool_call_output":
			if !calls[it.CallID] {
				param := "previous_response_id"
				if i >= first {
					param = fmt.Sprintf("input[%d].call_id", i-first)
				}
				return nil, frontend.Invalid(param, "No tool call found for function call output with call_id %s.", it.CallID)
			}
			msgs = append(msgs, frontend.Message{Role: "tool", ToolCallID: it.CallID, Content: it.Output, HasContent: true})
			lastAssistant = -1
		case "reasoning":
			var b strings.Builder
			for _, p := range it.Content {
				b.WriteString(p.Text)
			}
			if b.Len() == 0 {
				b.WriteString(decryptReasoning(it.EncryptedContent))
			}
			if b.Len() == 0 {
				for _, p := range it.Summary {
					b.WriteString(p.Text)
				}
			}
			reasoning += b.String()
		}
	}
	if len(msgs) == 0 {
		return nil, frontend.Invalid("input", "input must contain at least one item.")
	}
	if err := mt.Check(nMedia > 0); err != nil {
		return nil, err
	}
	return msgs, nil
}

// mediaContent returns a message's content and media when it has
// input_image or input_audio parts (nil refs when it has none): the parts
// joined with "\n", each item written as media.Marker in its place, as
// chat content parts are. Items are named input[i].content[j] for the
// request's item i counting from first, previous_response_id for the
// stored conversation's.
func mediaContent(content []respContent, i, first int) (string, []frontend.MediaRef) {
	var (
		texts = make([]string, len(content))
		refs  []frontend.MediaRef
	)
	for j, c := range content {
		var ref frontend.MediaRef
		switch c.Type {
		case "input_image":
			ref = frontend.MediaRef{Kind: media.Image, Field: ".image_url", URL: c.ImageURL}
		case "input_audio":
			ref = frontend.MediaRef{Kind: media.Audio, Field: ".input_audio.data"}
			if c.InputAudio != nil {
				ref.Data, ref.Format = c.InputAudio.Data, c.InputAudio.Format
			}
		default:
			texts[j] = c.Text
			continue
		}
		texts[j] = media.Marker
		if i >= first {
			p := fmt.Sprintf("input[%d].content[%d]", i-first, j)
			ref.Param, ref.Field = p, p+ref.Field
		} else {
			ref.Param, ref.Field = "previous_response_id", "previous_response_id"
		}
		refs = append(refs, ref)
	}
	return strings.Join(texts, "\n"), refs
}
