package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/media"
)

// This file holds the request side of the wire format and its decoding
// into a frontend.Request (decodeChat; completions keep their prompt
// forms beside it).
//
// A body is decoded in parts: once into commonRequest (the fields chat and
// completions share) and once into the endpoint's own fields. Two flat
// structs instead of one with an embedded struct keep the field paths that
// encoding/json puts in type errors equal to the JSON names, which become
// "param". Unknown fields are ignored: OpenAI SDKs send new fields before
// servers know them. A JSON null is the same as an absent field.

// commonRequest is what both POST /v1/chat/completions and POST
// /v1/completions accept.
type commonRequest struct {
	Model             string             `json:"model"`
	MaxTokens         *int               `json:"max_tokens"`
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	TopK              *int               `json:"top_k"`
	MinP              *float64           `json:"min_p"`
	Seed              *int64             `json:"seed"`
	Stop              stopField          `json:"stop"`
	StopTokenIDs      []int64            `json:"stop_token_ids"`
	N                 *int               `json:"n"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	Stream            *bool              `json:"stream"`
	StreamOptions     *streamOptions     `json:"stream_options"`
	IgnoreEOS         *bool              `json:"ignore_eos"`
	MinTokens         *int               `json:"min_tokens"`
	CacheSalt         *string            `json:"cache_salt"`
	Priority          *int               `json:"priority"`
	User              *string            `json:"user"`
	// ReturnTokensAsTokenIDs (vLLM) names tokens in logprobs as
	// "token_id:<id>", for clients that need the exact ids.
	ReturnTokensAsTokenIDs *bool `json:"return_tokens_as_token_ids"`
	// KVTransferParams (vLLM) asks for a prefill whose KV a remote decode
	// pulls, or a decode that pulls a remote prefill's KV (kvtransfer.go).
	KVTransferParams *kvTransferParams `json:"kv_transfer_params"`
	// ThinkingTokenBudget is vLLM's thinking_token_budget
	// (frontend.Params.ThinkingBudget).
	ThinkingTokenBudget *int `json:"thinking_token_budget"`
}

type streamOptions struct {
	IncludeUsage *bool `json:"include_usage"`
	// ContinuousUsageStats (vLLM) puts the usage so far on every chunk.
	ContinuousUsageStats *bool `json:"continuous_usage_stats"`
}

// chatFields are the fields only chat accepts.
type chatFields struct {
	Messages            messageList `json:"messages"`
	MaxCompletionTokens *int        `json:"max_completion_tokens"`
	Logprobs            *bool       `json:"logprobs"`
	TopLogprobs         *int        `json:"top_logprobs"`
}

// completionFields are the fields only completions accepts.
type completionFields struct {
	Prompt   promptField `json:"prompt"`
	Logprobs *int        `json:"logprobs"`
	Echo     *bool       `json:"echo"`
	Suffix   *string     `json:"suffix"`
}

// chatRequest is a decoded chat request, not yet validated.
type chatRequest struct {
	commonRequest
	extraFields
	chatFields
	structuredFields
}

// completionRequest is a decoded completion request, not yet validated.
type completionRequest struct {
	commonRequest
	extraFields
	completionFields
	structuredFields
}

// decodeChatRequest decodes a chat request body. Every error it returns is
// a *frontend.Error.
func decodeChatRequest(body []byte) (*chatRequest, error) {
	var r chatRequest
	if err := jsonwire.DecodeBody(body, &r.commonRequest, &r.extraFields, &r.chatFields, &r.structuredFields); err != nil {
		return nil, err
	}
	return &r, nil
}

// decodeCompletionRequest decodes a completion request body. Every error it
// returns is a *frontend.Error.
func decodeCompletionRequest(body []byte) (*completionRequest, error) {
	var r completionRequest
	if err := jsonwire.DecodeBody(body, &r.commonRequest, &r.extraFields, &r.completionFields, &r.structuredFields); err != nil {
		return nil, err
	}
	return &r, nil
}

// decodeChat decodes a chat request body into the typed request and the
// OpenAI-only options, once: the common, chat and structured-output fields,
// the prompt-shaping fields (decodePromptFields) and the tool choice. Every
// error it returns is a *frontend.Error naming the field.
func decodeChat(body []byte) (*frontend.Request, *wireOptions, error) {
	w, err := decodeChatRequest(body)
	if err != nil {
		return nil, nil, err
	}
	req := w.request()
	req.Messages = w.Messages.msgs
	req.Extensions = w.extensions()
	if w.MaxCompletionTokens != nil {
		// It supersedes max_tokens, as in OpenAI and vLLM.
		req.MaxTokens, req.Fields.MaxTokens = w.MaxCompletionTokens, "max_completion_tokens"
	}
	req.Logprobs = w.Logprobs != nil && *w.Logprobs
	req.TopLogprobs = w.TopLogprobs
	if err := decodePromptFields(body, req); err != nil {
		return nil, nil, err
	}
	if req.Constraints, err = w.constraints(); err != nil {
		return nil, nil, err
	}
	if err := decodeToolChoice(body, req); err != nil {
		return nil, nil, err
	}
	return req, w.options(), nil
}

// completionOptions are the completion fields that shape only the
// answer: logprobs (completions' number of alternatives) and echo.
type completionOptions struct {
	logprobs *int
	echo     bool
}

// decodeCompletion decodes a completion request body into the typed
// request (its raw prompts, RenderRaw's), the OpenAI-only options and the
// completion's answer options, once. Every error it returns is a
// *frontend.Error naming the field.
func decodeCompletion(body []byte) (*frontend.Request, *wireOptions, *completionOptions, error) {
	w, err := decodeCompletionRequest(body)
	if err != nil {
		return nil, nil, nil, err
	}
	req := w.request()
	req.Extensions = w.extensions()
	req.Suffix = w.Suffix
	if pf := &w.Prompt; pf.set {
		req.Prompt = &frontend.RawPrompt{Field: "prompt", Single: pf.single, Texts: pf.texts, Tokens: pf.tokens}
	}
	if req.Constraints, err = w.constraints(); err != nil {
		return nil, nil, nil, err
	}
	return req, w.options(), &completionOptions{logprobs: w.Logprobs, echo: w.Echo != nil && *w.Echo}, nil
}

// request is the typed request of the fields both chat and completions
// accept.
func (c *commonRequest) request() *frontend.Request {
	return &frontend.Request{
		Model: c.Model,
		Sampling: frontend.Sampling{
			Temperature: c.Temperature, TopP: c.TopP, MinP: c.MinP, TopK: c.TopK, Seed: c.Seed, N: c.N,
			PresencePenalty: c.PresencePenalty, FrequencyPenalty: c.FrequencyPenalty, RepetitionPenalty: c.RepetitionPenalty,
			LogitBias: c.LogitBias, Stop: c.Stop.list, StopTokenIDs: c.StopTokenIDs,
			IgnoreEOS: c.IgnoreEOS != nil && *c.IgnoreEOS, MinTokens: c.MinTokens,
			CacheSalt: c.CacheSalt, Priority: c.Priority,
		},
		MaxTokens:      c.MaxTokens,
		Stream:         c.Stream != nil && *c.Stream,
		User:           c.User,
		ThinkingBudget: c.ThinkingTokenBudget,
	}
}

// wireOptions are the OpenAI-only fields of chat and completions that
// shape the answer, beside the typed request (nil fields for the other
// protocols).
type wireOptions struct {
	StreamOptions          *streamOptions
	ReturnTokensAsTokenIDs *bool
	KVTransferParams       *kvTransferParams
}

func (c *commonRequest) options() *wireOptions {
	return &wireOptions{StreamOptions: c.StreamOptions, ReturnTokensAsTokenIDs: c.ReturnTokensAsTokenIDs, KVTransferParams: c.KVTransferParams}
}

// stopField is "stop": a string or an array of strings. Unlike OpenAI (at
// most 4) and like vLLM, any number of stop strings is accepted; the body
// size limit bounds them.
type stopField struct {
	list []string
}

func (s *stopField) UnmarshalJSON(raw []byte) error {
	list, err := parseStringList(raw, "stop")
	s.list = list
	return err
}

// parseStringList parses a field that is a string or an array of strings
// (null: nil); errors name param, or param[i] for an element.
func parseStringList(raw []byte, param string) ([]string, error) {
	const want = "a string or an array of strings"
	switch jsonwire.Kind(raw) {
	case "null", "nothing":
		return nil, nil
	case "string":
		str, err := jsonwire.String(raw, param, want)
		if err != nil {
			return nil, err
		}
		return []string{str}, nil
	}
	elems, err := jsonwire.Array(raw, param, want)
	if err != nil {
		return nil, err
	}
	list := make([]string, 0, len(elems))
	for i, e := range elems {
		str, err := jsonwire.String(e, fmt.Sprintf("%s[%d]", param, i), "a string")
		if err != nil {
			return nil, err
		}
		list = append(list, str)
	}
	return list, nil
}

// promptField is the completions "prompt": a string, an array of strings,
// an array of token ids, or an array of arrays of token ids. Each string
// or token array is one prompt. Token ids are range-checked against the
// vocabulary later, when the model is known.
type promptField struct {
	set bool
	// single is set for the forms that hold one prompt (a string, a flat
	// array of token ids); errors then name "prompt", not "prompt[i]".
	single bool
	texts  []string  // string forms
	tokens [][]int64 // token-id forms
}

const promptTypes = "a string, an array of strings, an array of token ids or an array of arrays of token ids"

func (p *promptField) UnmarshalJSON(raw []byte) error {
	*p = promptField{}
	switch jsonwire.Kind(raw) {
	case "null":
		return nil
	case "string":
		s, err := jsonwire.String(raw, "prompt", promptTypes)
		if err != nil {
			return err
		}
		*p = promptField{set: true, single: true, texts: []string{s}}
		return nil
	}
	elems, err := jsonwire.Array(raw, "prompt", promptTypes)
	if err != nil {
		return err
	}
	p.set = true
	if len(elems) == 0 {
		return nil // rejected as empty by validation
	}
	switch first := jsonwire.Kind(elems[0]); first {
	case "string":
		for i, e := range elems {
			if jsonwire.Kind(e) != "string" {
				return jsonwire.TypeError(fmt.Sprintf("prompt[%d]", i), "a string like the other elements", jsonwire.Kind(e))
			}
			var s string
			if err := json.Unmarshal(e, &s); err != nil {
				return jsonwire.TypeError(fmt.Sprintf("prompt[%d]", i), "a string", "string")
			}
			p.texts = append(p.texts, s)
		}
	case "number":
		ids, err := parseTokenIDs("prompt", elems)
		if err != nil {
			return err
		}
		p.tokens = [][]int64{ids}
		p.single = true
	case "array":
		for i, e := range elems {
			param := fmt.Sprintf("prompt[%d]", i)
			inner, err := jsonwire.Array(e, param, "an array of token ids like the other elements")
			if err != nil {
				return err
			}
			ids, err := parseTokenIDs(param, inner)
			if err != nil {
				return err
			}
			p.tokens = append(p.tokens, ids)
		}
	default:
		return jsonwire.TypeError("prompt[0]", "a string, a token id or an array of token ids", first)
	}
	return nil
}

// parseTokenIDs parses an array of JSON integers. Non-integers ("1.5",
// "1e3") are type errors; range checks come later.
func parseTokenIDs(param string, elems []json.RawMessage) ([]int64, error) {
	ids := make([]int64, len(elems))
	for i, e := range elems {
		e = bytes.TrimSpace(e)
		if jsonwire.Kind(e) != "number" {
			return nil, jsonwire.TypeError(fmt.Sprintf("%s[%d]", param, i), "an integer token id", jsonwire.Kind(e))
		}
		v, err := strconv.ParseInt(string(e), 10, 64)
		if err != nil {
			return nil, invalid(fmt.Sprintf("%s[%d]", param, i), "Token ids must be integers in the vocabulary's range; got %s.", e)
		}
		ids[i] = v
	}
	return ids, nil
}

// messageList is the chat "messages" array.
type messageList struct {
	set bool
	// msgs are the messages checked for type. Content holds the text
	// parts joined with "\n" (as vLLM and llama.cpp's server join them),
	// each image or audio part written as media.Marker in its place. The
	// fields beyond role, content and name are decodePromptFields'.
	msgs []frontend.Message
}

// Roles a message may have. "developer" is OpenAI's newer name for
// "system"; chat templates know only "system", so it is rendered as that.
var chatRoles = map[string]bool{"system": true, "user": true, "assistant": true, "developer": true, "tool": true}

func (m *messageList) UnmarshalJSON(raw []byte) error {
	elems, set, err := jsonwire.OptionalArray(raw, "messages", "an array of message objects")
	*m = messageList{set: set, msgs: make([]frontend.Message, len(elems))}
	if err != nil {
		return err
	}
	for i, e := range elems {
		if m.msgs[i], err = decodeMessage(e, fmt.Sprintf("messages[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// decodeMessage reads one message of "messages", at prefix: its role,
// content and name.
func decodeMessage(raw json.RawMessage, prefix string) (frontend.Message, error) {
	var wm struct {
		Role    *string        `json:"role"`
		Content messageContent `json:"content"`
		Name    *string        `json:"name"`
	}
	var msg frontend.Message
	if err := jsonwire.Object(raw, prefix, "a message object", &wm); err != nil {
		return msg, err
	}
	if wm.Role == nil {
		return msg, invalid(prefix+".role", "Each message needs a role.")
	}
	if !chatRoles[*wm.Role] {
		return msg, invalid(prefix+".role", "Unknown role %q; use one of system, developer, user, assistant or tool.", *wm.Role)
	}
	msg.Role = *wm.Role
	if !wm.Content.set && msg.Role != "assistant" {
		return msg, invalid(prefix+".content", "A %s message needs content.", msg.Role)
	}
	msg.Content, msg.HasContent = wm.Content.text, wm.Content.set
	msg.Media = wm.Content.media
	for k := range msg.Media {
		msg.Media[k].Param = prefix + "." + msg.Media[k].Param
		msg.Media[k].Field = prefix + "." + msg.Media[k].Field
	}
	if wm.Content.marker != "" {
		msg.MarkerParam = prefix + "." + wm.Content.marker
	}
	if wm.Name != nil {
		msg.Name = *wm.Name
	}
	return msg, nil
}

// messageContent is a message's "content": a string or an array of
// parts: {"type":"text","text":...}, {"type":"image_url","image_url":
// {"url":...,"detail":...}} and {"type":"input_audio","input_audio":
// {"data":...,"format":"wav"|"mp3"}}. A media part becomes media.Marker
// in the text, where llama.cpp's server puts it (the part is replaced by
// a text part holding the marker), and a frontend.MediaRef. Other part types
// (files, refusals) are rejected.
type messageContent struct {
	set   bool
	text  string
	media []frontend.MediaRef
	// marker names the first text that holds media.Marker ("content" or
	// "content[j]"), or "".
	marker string
}

func (c *messageContent) UnmarshalJSON(raw []byte) error {
	*c = messageContent{}
	switch jsonwire.Kind(raw) {
	case "null":
		return nil
	case "string":
		text, err := jsonwire.String(raw, "content", "a string or an array of content parts")
		if err != nil {
			return err
		}
		c.text, c.set = text, true
		if strings.Contains(c.text, media.Marker) {
			c.marker = "content"
		}
		return nil
	}
	parts, err := jsonwire.Array(raw, "content", "a string or an array of content parts")
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return invalid("content", "An array of content parts must not be empty.")
	}
	texts := make([]string, len(parts))
	for j, p := range parts {
		prefix := fmt.Sprintf("content[%d]", j)
		var part struct {
			Type *string `json:"type"`
			Text *string `json:"text"`
		}
		if err := jsonwire.Object(p, prefix, "a content part object", &part); err != nil {
			return err
		}
		switch {
		case part.Type == nil:
			return invalid(prefix+".type", "Each content part needs a type.")
		case *part.Type == "image_url" || *part.Type == "input_audio":
			ref, err := parseMediaPart(p, *part.Type, prefix)
			if err != nil {
				return err
			}
			c.media = append(c.media, ref)
			texts[j] = media.Marker
			continue
		case *part.Type != "text":
			return invalid(prefix+".type", "Content parts of type %q are not supported; use text, image_url or input_audio.", *part.Type)
		case part.Text == nil:
			return invalid(prefix+".text", "A text content part needs text.")
		}
		texts[j] = *part.Text
		if c.marker == "" && strings.Contains(*part.Text, media.Marker) {
			c.marker = prefix
		}
	}
	c.set, c.text = true, strings.Join(texts, "\n")
	return nil
}
