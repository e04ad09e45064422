package frontend

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Limits on request fields.
const (
	// MaxN caps n, as OpenAI does.
	MaxN = 128
	// MaxTopLogprobs caps the alternatives per token (top_logprobs,
	// completions' logprobs, prompt_logprobs), as OpenAI's chat endpoint
	// and vLLM's default max_logprobs do.
	MaxTopLogprobs = 20
	// MaxTemperature is OpenAI's upper bound on temperature, which its
	// SDKs and clients assume.
	MaxTemperature = 2
)

// Apply validates the sampling and scheduling fields into base, the
// scheduler request every prompt starts from, and returns the stop
// strings. It checks what the request's own business is (n, OpenAI's
// temperature range, top_k, logit_bias keys, stop tokens, cache_salt);
// ranges where sampling is defined are the engine's (Finish) and capacity
// the scheduler's (RequestError). stopTokens are the model's
// end-of-generation tokens; randomSeed is used when the client sent no
// seed.
func (c *Sampling) Apply(base *scheduler.Request, nVocab int, stopTokens []int32, randomSeed uint32) ([]string, error) {
	s := &base.Sampling
	// OpenAI's range, which its SDKs and clients assume; the engine's own
	// range (engine.Sampling.Validate) is wider and checked later.
	if t := c.Temperature; t != nil && !(*t >= 0 && *t <= MaxTemperature) {
		return nil, Invalid("temperature", "temperature must be between 0 and %d, got %s.", MaxTemperature, strconv.FormatFloat(*t, 'g', -1, 64))
	}
	if c.N != nil {
		if *c.N < 1 || *c.N > MaxN {
			return nil, Invalid("n", "n must be between 1 and %d, got %d.", MaxN, *c.N)
		}
		base.N = *c.N
	}
	if c.MinTokens != nil {
		base.MinTokens = *c.MinTokens
	}
	for _, f := range c.floatParams(s) {
		if f.sent != nil {
			*f.dst = Float32(*f.sent)
		}
	}
	if c.TopK != nil {
		// vLLM: -1 or 0 disable top-k. A top_k above the vocabulary keeps
		// every token, as does any value beyond int32.
		switch k := *c.TopK; {
		case k == -1:
			s.TopK = 0
		case k > math.MaxInt32:
			s.TopK = math.MaxInt32
		case k < -1:
			return nil, Invalid("top_k", "top_k must be -1 or 0 (disabled) or a positive integer, got %d.", k)
		default:
			s.TopK = int32(k)
		}
	}

	// The scheduler gives choice i the seed Seed+i. Seeds are int64 on the
	// wire and uint32 in the sampler: the low 32 bits are used.
	s.Seed = randomSeed
	if c.Seed != nil {
		s.Seed = uint32(*c.Seed)
	}

	if len(c.LogitBias) > 0 {
		s.LogitBias = make([]engine.TokenBias, 0, len(c.LogitBias))
		for k, v := range c.LogitBias {
			tok, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return nil, Invalid("logit_bias", "logit_bias keys must be token ids written as decimal strings; got %q.", k)
			}
			s.LogitBias = append(s.LogitBias, engine.TokenBias{Token: int32(tok), Bias: Float32(v)})
		}
		// Map order is random; the scheduler and its logs see a stable one.
		slices.SortFunc(s.LogitBias, func(a, b engine.TokenBias) int { return cmp.Compare(a.Token, b.Token) })
	}

	if c.IgnoreEOS {
		base.IgnoreEOS = true
	} else {
		base.StopTokens = append(base.StopTokens, stopTokens...)
	}
	for i, id := range c.StopTokenIDs {
		if id < 0 || id >= int64(nVocab) {
			return nil, Invalid("stop_token_ids", "stop_token_ids[%d] = %d is outside the vocabulary [0, %d).", i, id, nVocab)
		}
		base.StopTokens = append(base.StopTokens, int32(id))
	}
	slices.Sort(base.StopTokens)
	base.StopTokens = slices.Compact(base.StopTokens)
	if base.MinTokens > 0 && len(base.StopTokens) >= nVocab {
		return nil, Invalid("stop_token_ids", "With min_tokens, the stop tokens are banned until min_tokens are generated, and these stop tokens cover the whole vocabulary of %d tokens.", nVocab)
	}

	var stops []string
	for _, st := range c.Stop {
		if st != "" {
			stops = append(stops, st)
		}
	}

	if c.CacheSalt != nil {
		if *c.CacheSalt == "" {
			return nil, Invalid("cache_salt", "cache_salt must be a non-empty string when given.")
		}
		base.CacheSalt = *c.CacheSalt
	}
	if c.Priority != nil {
		base.Priority = *c.Priority
	}
	return stops, nil
}

// Float32 converts a request value to the engine's float32 without
// changing what it means to the range checks: beyond float32's range it
// becomes infinite, and a value too small for float32 becomes the smallest
// float32 of its sign rather than 0 (a temperature of 1e-46 must be refused
// as out of range, not served as greedy).
func Float32(v float64) float32 {
	f := float32(v)
	if f == 0 && v != 0 {
		return float32(math.Copysign(math.SmallestNonzeroFloat32, v))
	}
	return f
}

// Finish checks base's sampling parameters where the engine defines them
// (engine.Sampling.Validate), errors named as RangeError names them.
func (c *Sampling) Finish(base *scheduler.Request, nVocab int, topLogprobsParam string) error {
	if err := base.Sampling.Validate(nVocab); err != nil {
		return c.RangeError(err, topLogprobsParam)
	}
	return nil
}

// RangeError maps the engine's *engine.RangeError to the request field,
// with the value the client sent; topLogprobsParam names the number of
// alternatives.
func (c *Sampling) RangeError(err error, topLogprobsParam string) error {
	var re *engine.RangeError
	if !errors.As(err, &re) {
		return err
	}
	param, got := string(re.Field), re.Value
	switch re.Field {
	case engine.FieldTopK:
		param = "top_k"
	case engine.FieldAllowedTokens:
		param = "allowed_token_ids"
	case engine.FieldLogitBiasToken:
		return Invalid("logit_bias", "logit_bias keys must be token ids %s; got %v.", re.Want, re.Value)
	case engine.FieldLogitBiasValue:
		return Invalid("logit_bias", "logit_bias values must be %s; got %v.", re.Want, re.Value)
	case engine.FieldTopLogprobs:
		param = topLogprobsParam
	}
	// The float fields answer with the value sent rather than the
	// engine's float32 one. (Only names and values are read here, not
	// the destinations.)
	for _, f := range c.floatParams(new(engine.Sampling)) {
		if f.field == re.Field {
			param = f.param
			if f.sent != nil {
				got = *f.sent
			}
		}
	}
	return Invalid(param, "%s must be %s; got %v.", param, re.Want, got)
}

// floatParam is one of the float sampling fields: its name on the wire
// and in the engine, the value the client sent (nil: none) and where Apply
// writes it.
type floatParam struct {
	param string
	field engine.Field
	sent  *float64
	dst   *float32
}

// floatParams lists c's float sampling fields, with their places in s.
func (c *Sampling) floatParams(s *engine.Sampling) []floatParam {
	return []floatParam{
		{"temperature", engine.FieldTemperature, c.Temperature, &s.Temperature},
		{"top_p", engine.FieldTopP, c.TopP, &s.TopP},
		{"min_p", engine.FieldMinP, c.MinP, &s.MinP},
		{"presence_penalty", engine.FieldPresencePenalty, c.PresencePenalty, &s.PresencePenalty},
		{"frequency_penalty", engine.FieldFrequencyPenalty, c.FrequencyPenalty, &s.FrequencyPenalty},
		{"repetition_penalty", engine.FieldRepetitionPenalty, c.RepetitionPenalty, &s.RepetitionPenalty},
	}
}

// Extended is what the extensions decide beside base.
type Extended struct {
	// KeepSpecial shows control tokens in the text (skip_special_tokens
	// false).
	KeepSpecial bool
	// Truncate keeps a prompt's last tokens (0: off).
	Truncate int
	// PromptLogprobs lists that many alternatives per prompt token (-1:
	// off).
	PromptLogprobs int
}

// Apply validates vLLM's extensions into base, tokenizing bad words with
// tok. maxLen is the model's length (truncate_prompt_tokens -1); stream
// says whether the answer is streamed (no prompt logprobs then).
func (e *Extensions) Apply(base *scheduler.Request, tok *tokenizer.Tokenizer, maxLen int, stream bool) (Extended, error) {
	x := Extended{PromptLogprobs: -1}
	nVocab := tok.Vocab().NumTokens()
	if e.BestOf != nil && *e.BestOf != base.N {
		return x, Invalid("best_of", "best_of is not supported (as in vLLM's V1 engine): leave it out, or set it equal to n (%d), and rank the n choices by their logprobs yourself.", base.N)
	}
	for i, id := range e.AllowedTokenIDs {
		if id < 0 || id >= int64(nVocab) {
			return x, Invalid(fmt.Sprintf("allowed_token_ids[%d]", i), "Token id %d is outside the vocabulary [0, %d).", id, nVocab)
		}
		base.Sampling.AllowedTokens = append(base.Sampling.AllowedTokens, int32(id))
	}
	if e.AllowedTokenIDs != nil && len(e.AllowedTokenIDs) == 0 {
		return x, Invalid("allowed_token_ids", "allowed_token_ids must not be empty: no token could be generated.")
	}
	for i, w := range e.BadWords {
		if w == "" {
			return x, Invalid(fmt.Sprintf("bad_words[%d]", i), "A bad word must not be empty.")
		}
		// As vLLM: the word as it would start the text and after a space.
		for _, text := range []string{w, " " + w} {
			ids, err := tok.Encode(text, false)
			if err != nil {
				return x, Invalid(fmt.Sprintf("bad_words[%d]", i), "The word could not be tokenized: %v", err)
			}
			if len(ids) > 0 {
				base.BadWords = append(base.BadWords, ids)
			}
		}
	}
	x.KeepSpecial = e.SkipSpecialTokens != nil && !*e.SkipSpecialTokens
	if t := e.TruncatePromptTokens; t != nil {
		switch {
		case *t == -1:
			x.Truncate = maxLen
		case *t >= 1 && *t <= maxLen:
			x.Truncate = *t
		default:
			return x, Invalid("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 (the model's length) or in [1, %d], got %d.", maxLen, *t)
		}
	}
	if k := e.PromptLogprobs; k != nil {
		if *k < 0 || *k > MaxTopLogprobs {
			return x, Invalid("prompt_logprobs", "prompt_logprobs must be between 0 and %d, got %d.", MaxTopLogprobs, *k)
		}
		if stream {
			return x, Invalid("prompt_logprobs", "prompt_logprobs is only returned in non-streamed answers; set stream to false.")
		}
		x.PromptLogprobs = *k
		// The engine lists one number of alternatives for prompt and
		// output tokens; the answer cuts each list to what was asked.
		base.PromptLogprobs = max(base.PromptLogprobs, *k)
		base.Sampling.TopLogprobs = max(base.Sampling.TopLogprobs, *k)
	}
	return x, nil
}

// RequestError maps the scheduler's capacity checks to the request's
// fields, in its protocol's names (maxParam names the generation cap,
// maxSet says whether the client set it, promptParam names prompt i), and
// says what to do about it.
func RequestError(err error, maxParam string, maxSet bool, promptParam func(int) string) error {
	i := 0
	var ie *core.IndexError
	if errors.As(err, &ie) {
		i = ie.Index
	}
	var re *scheduler.RequestError
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case errors.Is(re, scheduler.ErrTooLong) && re.KVTokens > 0:
		return &Error{Param: promptParam(i), Code: "context_length_exceeded", Message: fmt.Sprintf(
			"Your request has %d input tokens, and this server's KV cache holds %d tokens in all, which leaves no room to generate. "+
				"Please reduce the length of the input, or ask the operator to raise --kv-cache-memory.", re.PromptTokens, re.KVTokens)}
	case errors.Is(re, scheduler.ErrTooLong) && re.Field == scheduler.FieldMaxTokens:
		return &Error{Param: maxParam, Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens "+
				"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			re.Limit, re.PromptTokens+re.MaxTokens, re.PromptTokens, re.MaxTokens)}
	case errors.Is(re, scheduler.ErrTooLong) && !maxSet:
		return &Error{Param: promptParam(i), Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
				"Please reduce the length of the input messages.", re.Limit, re.PromptTokens)}
	case errors.Is(re, scheduler.ErrTooLong):
		return &Error{Param: promptParam(i), Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens "+
				"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			re.Limit, re.PromptTokens+re.MaxTokens, re.PromptTokens, re.MaxTokens)}
	}
	switch re.Field {
	case scheduler.FieldN:
		return Invalid("n", "n = %d exceeds this server's limit of %d sequences running at once (its --max-num-seqs); ask for fewer choices.", re.Value, re.Limit)
	case scheduler.FieldMaxTokens:
		return Invalid(maxParam, "%s must be at least 1, got %d.", maxParam, re.Value)
	case scheduler.FieldMinTokens:
		if re.Value < 0 {
			return Invalid("min_tokens", "min_tokens must be at least 0, got %d.", re.Value)
		}
		if !maxSet {
			return Invalid("min_tokens", "min_tokens (%d) is more than the %d tokens left in the context after the prompt.", re.Value, re.Limit)
		}
		return Invalid("min_tokens", "min_tokens (%d) must not be greater than %s (%d).", re.Value, maxParam, re.Limit)
	case scheduler.FieldRequests:
		return Invalid("prompt", "The request has %d prompts; this server queues at most %d requests (its --max-waiting). Send fewer prompts per request.", re.Value, re.Limit)
	case scheduler.FieldPrompt:
		return Invalid(promptParam(i), "A prompt must not be empty.")
	}
	return Invalid("", "%v", re)
}
