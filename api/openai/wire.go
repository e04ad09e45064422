package openai

import (
	"math"
	"strconv"

	"github.com/llmserve/llmserve/api/jsonwire"
)

// This file holds the response side of the wire format. Field order follows
// OpenAI's own responses so that golden files read like theirs.

// Object names.
const (
	objectChatCompletion      = "chat.completion"
	objectChatCompletionChunk = "chat.completion.chunk"
	objectTextCompletion      = "text_completion"
)

// Usage is CompletionUsage: a request's token count in OpenAI's shape,
// which the chat family's other APIs rename.
type Usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
	// CompletionTokensDetails is set for models with a reasoning parser.
	CompletionTokensDetails *completionTokensDetails `json:"completion_tokens_details,omitempty"`
}

type completionTokensDetails struct {
	// ReasoningTokens are the completion tokens generated inside the
	// thinking section (its markers not counted).
	ReasoningTokens int `json:"reasoning_tokens"`
}

func (u *Usage) addReasoning(n int) {
	if u.CompletionTokensDetails == nil {
		u.CompletionTokensDetails = &completionTokensDetails{}
	}
	u.CompletionTokensDetails.ReasoningTokens += n
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// usageField is a "usage" member that is either absent (the zero value,
// dropped by omitzero), null, or an object. Stream chunks carry
// "usage": null when the client asked for include_usage, as OpenAI's do.
type usageField struct {
	present bool
	u       *Usage
}

func (f usageField) IsZero() bool { return !f.present }

func (f usageField) MarshalJSON() ([]byte, error) {
	if f.u == nil {
		return []byte("null"), nil
	}
	return jsonwire.Marshal(f.u)
}

func usageNull() usageField      { return usageField{present: true} }
func usageOf(u Usage) usageField { return usageField{present: true, u: &u} }
func finishOf(s string) *string  { return &s }
func contentOf(s string) *string { return &s }

// objectHead is the members every response object and stream chunk
// starts with (respMeta.head).
type objectHead struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
}

// chatCompletion is CreateChatCompletionResponse.
type chatCompletion struct {
	objectHead
	Choices           []chatChoice `json:"choices"`
	Usage             Usage        `json:"usage"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	// PromptLogprobs is vLLM's, with prompt_logprobs.
	PromptLogprobs []map[string]promptLogprobEntry `json:"prompt_logprobs,omitempty"`
	// KVTransferParams (vLLM) tells a router where a prefill's KV is.
	KVTransferParams map[string]any `json:"kv_transfer_params,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatMessage   `json:"message"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

// chatMessage is ChatCompletionResponseMessage. Refusal is always null (the
// schema requires the member).
type chatMessage struct {
	Role string `json:"role"`
	// Content is null when the answer is only tool calls.
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
	// ReasoningContent is the reasoning of a model served with a
	// reasoning parser (vLLM's field); absent otherwise.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
	// ToolCalls are the calls the answer makes (tools.go).
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

// chatToolCall is a tool call in a message, or (with Index) a piece of
// one in a stream chunk: the first piece has the id, type and name, the
// following ones more arguments text.
type chatToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chatLogprobs is the chat form of logprobs. Refusal is always null: this
// server produces no refusals, but the schema requires the member.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
	Refusal []chatTokenLogprob `json:"refusal"`
}

// chatTokenLogprob is a generated token's entry and the most likely
// alternatives at its position, each an entry of the same shape.
type chatTokenLogprob struct {
	chatTopEntry
	TopLogprobs []chatTopEntry `json:"top_logprobs"`
}

// chatTopEntry is one token's text, log-probability and UTF-8 bytes.
type chatTopEntry struct {
	Token   string  `json:"token"`
	Logprob logprob `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// choiceList is the body a chat chunk and a completion share: the object
// head, the choices (of type C) and the usage.
type choiceList[C any] struct {
	objectHead
	SystemFingerprint string     `json:"system_fingerprint,omitempty"`
	Choices           []C        `json:"choices"`
	Usage             usageField `json:"usage,omitzero"`
}

// chatChunk is CreateChatCompletionStreamResponse.
type chatChunk = choiceList[chatChunkChoice]

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// chatDelta is the delta of a chunk: {"role":"assistant","content":""} first,
// then {"content":"..."}, and {} on a final chunk without text.
type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is the next reasoning text (see chatMessage).
	ReasoningContent *string `json:"reasoning_content,omitempty"`
	// ToolCalls are pieces of tool calls (see chatToolCall).
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

// completion is CreateCompletionResponse; stream chunks have the same shape.
type completion struct {
	choiceList[completionChoice]
	// KVTransferParams (vLLM) tells a router where a prefill's KV is.
	KVTransferParams map[string]any `json:"kv_transfer_params,omitempty"`
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	// PromptLogprobs is vLLM's, with prompt_logprobs.
	PromptLogprobs []map[string]promptLogprobEntry `json:"prompt_logprobs,omitempty"`
}

// completionLogprobs is the legacy logprobs form: parallel arrays. The first
// prompt token of an echoed prompt has null in TokenLogprobs and TopLogprobs.
type completionLogprobs struct {
	Tokens        []string     `json:"tokens"`
	TokenLogprobs []*logprob   `json:"token_logprobs"`
	TopLogprobs   []topLogprob `json:"top_logprobs"`
	TextOffset    []int        `json:"text_offset"`
}

// topLogprob is one position's {token: logprob} object, most likely first.
// Tokens with the same text keep the first (most likely) entry, since JSON
// object keys must be unique. A nil topLogprob is null.
type topLogprob []topEntry

type topEntry struct {
	token string
	lp    logprob
}

func (t topLogprob) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	seen := make(map[string]bool, len(t))
	for _, e := range t {
		if seen[e.token] {
			continue
		}
		seen[e.token] = true
		if len(seen) > 1 {
			b = append(b, ',')
		}
		k, err := jsonwire.Marshal(e.token)
		if err != nil {
			return nil, err
		}
		b = append(b, k...)
		b = append(b, ':')
		b = e.lp.appendJSON(b)
	}
	return append(b, '}'), nil
}

// logprob is a log-probability on the wire. -Inf and NaN, which JSON cannot
// carry, become -9999.0, OpenAI's value for "very unlikely".
type logprob float32

const unlikely = -9999.0

func (l logprob) MarshalJSON() ([]byte, error) { return l.appendJSON(nil), nil }

func (l logprob) appendJSON(b []byte) []byte {
	f := float64(l)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		f = unlikely
	}
	// Format as encoding/json formats a float32.
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 32)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
