package scheduler

import (
	"strconv"
	"strings"
	"time"

	"github.com/llmserve/llmserve/engine"
)

// Request is one generation request in the form every protocol is turned
// into. The api packages fill it, defaults included (this is the one place
// they are set); the scheduler and the engine core never change it.
type Request struct {
	// ID is unique among live requests; it appears in logs and outputs.
	ID string
	// Prompt is the tokenized prompt, special tokens included.
	Prompt []int32
	// Sampling applies to every choice. When N > 1, choice i uses Seed+i.
	Sampling engine.Sampling
	// N is the number of independent choices to generate (>= 1).
	N int
	// MaxTokens caps the generated tokens of each choice (>= 1; prompt
	// plus MaxTokens must fit MaxModelLen).
	MaxTokens int
	// MinTokens suppresses stop tokens until that many were generated.
	MinTokens int
	// StopTokens end a choice when generated (the model's end-of-generation
	// tokens, plus any the client asked for). The stop token is reported in
	// Output.Tokens but is not part of the visible text.
	StopTokens []int32
	// BadWords are token sequences a choice must not generate: the last
	// token of one is banned whenever the output so far ends with the
	// rest of it (vLLM's bad_words).
	BadWords [][]int32
	// Thinking, when not nil, counts each choice's thinking section
	// (Usage.ReasoningTokens) and bounds it by its Budget. The api
	// packages set it for every request to a model with a reasoning
	// parser.
	Thinking *Thinking
	// IgnoreEOS keeps generating past the model's end-of-generation tokens;
	// StopTokens are then only the client's.
	IgnoreEOS bool
	// Priority orders the waiting queue: lower values run first; ties go by
	// arrival. 0 is the default.
	Priority int
	// Arrival is when the request reached the server (required).
	Arrival time.Time
	// Deadline, when not zero, aborts the request with ErrDeadline.
	Deadline time.Time
	// CacheSalt separates prefix-cache namespaces: requests share cached
	// blocks only when their salts are equal.
	CacheSalt string
	// RouteKey is a routing hint (OpenAI's prompt_cache_key): a head
	// sends requests with the same key to the same worker while it can
	// take them, so that they find their prefix cached there. The
	// scheduler does not read it.
	RouteKey string
	// PromptLogprobs, when >= 0, asks for the logprob of every prompt token
	// after the first, with that many alternatives. It disables the prefix
	// cache for this request, since cached tokens have no logits.
	PromptLogprobs int
	// KeepKV, when not empty, names a transfer (a prefill whose KV another
	// node pulls): when choice 0 is freed holding its whole prompt, the KV
	// manager exports the prompt's KV and keeps it under that name
	// (kvcache.AdmitOptions.Keep). Only with N == 1.
	KeepKV string
	// Adapter, when not nil, is the LoRA adapter the request runs with
	// (engine.NewSequence.Adapter). Requests with different adapters run
	// in the same steps; the prefix cache shares blocks only between
	// requests of the same adapter.
	Adapter engine.Adapter
	// Media are the prompt's embedded inputs (images, audio), in prompt
	// order: Prompt[m.Offset : m.Offset+m.Rows] are m's placeholders
	// (engine.MediaToken of its hash), and the scheduler hands the rows
	// to the engine with the chunks that cover them.
	Media []Media
}

// CacheKey is the prefix-cache namespace of the request: CacheSalt for
// the base model; for an adapter, a namespace of that adapter's (KV
// computed with an adapter is not the base model's), which no base salt
// can name.
func (r *Request) CacheKey() string {
	if r.Adapter == nil {
		if strings.HasPrefix(r.CacheSalt, "\x00") {
			return "\x00base\x00" + r.CacheSalt
		}
		return r.CacheSalt
	}
	name := r.Adapter.AdapterName()
	return "\x00lora\x00" + strconv.Itoa(len(name)) + "\x00" + name + r.CacheSalt
}

// adapterName is the name of the request's adapter, "" for the base model.
func (r *Request) adapterName() string {
	if r.Adapter == nil {
		return ""
	}
	return r.Adapter.AdapterName()
}

// Media is one encoded media item of a prompt.
type Media struct {
	// Offset is the index in Prompt of the item's first position.
	Offset int
	// Rows is the number of positions it takes.
	Rows int
	// Embd holds Rows rows of the model's embedding width, row-major.
	Embd []float32
}

// Speculative configures speculative decoding for every request of a
// model (vLLM's --speculative-config).
type Speculative struct {
	// Method is "" (off), "ngram" (prompt lookup: the draft continues the
	// latest earlier occurrence of the sequence's last tokens) or
	// "draft" (a smaller model proposes).
	Method string
	// NumTokens is the most draft tokens per sequence per step
	// (num_speculative_tokens).
	NumTokens int
	// PromptLookupMin and PromptLookupMax bound the n-gram matched for
	// "ngram" (vLLM's prompt_lookup_min/max).
	PromptLookupMin, PromptLookupMax int
	// Model is the draft model's GGUF file for "draft" (vLLM's "model"):
	// the executor loads and runs it; the scheduler only checks that it
	// is set.
	Model string
	// DisableByBatchSize, when positive, leaves out the drafts of a step
	// that decodes more sequences than it (vLLM's disable_by_batch_size):
	// in a full batch every rejected draft row is work the step did not
	// need, where a step of few sequences has room to spare.
	DisableByBatchSize int
}

// FinishReason says why a choice ended.
type FinishReason string

const (
	// FinishNone: the choice is still running.
	FinishNone FinishReason = ""
	// FinishStop: a stop token was generated (or the caller stopped the
	// choice after a stop string with StopChoice).
	FinishStop FinishReason = "stop"
	// FinishLength: MaxTokens or the model's context length was reached.
	FinishLength FinishReason = "length"
	// FinishAbort: the request was cancelled (client gone, deadline).
	FinishAbort FinishReason = "abort"
)

// Output is what one choice produced since the previous Output.
type Output struct {
	Choice int
	// Tokens are the new tokens, in order.
	Tokens []int32
	// Logprobs parallels Tokens when Sampling.Logprobs is set.
	Logprobs []engine.Logprobs
	// PromptLogprobs, in the first Output of choice 0 when asked for, holds
	// one entry per prompt token after the first.
	PromptLogprobs []engine.Logprobs
	// Finish is set on the choice's last Output.
	Finish FinishReason
	// Err explains FinishAbort when the server, not the client, ended the
	// choice (ErrDeadline, ErrEngine, ErrClosed).
	Err error
}

// Usage counts tokens for billing and metrics; it is exact.
type Usage struct {
	PromptTokens int
	// CachedTokens is how many prompt tokens came from the prefix cache
	// (the best over the request's choices' first admissions).
	CachedTokens     int
	CompletionTokens int
	// ReasoningTokens is how many of CompletionTokens were generated
	// inside a thinking section (Request.Thinking; markers not counted).
	ReasoningTokens int
}
