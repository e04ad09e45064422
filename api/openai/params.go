package openai

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

// Limits on request fields.
const (
	// maxN caps "n", as OpenAI does.
	maxN = 128
	// maxTopLogprobs caps top_logprobs (chat) and logprobs (completions),
	// as OpenAI's chat endpoint and vLLM's default max_logprobs do.
	maxTopLogprobs = 20
	// maxLogitBias is the largest bias magnitude OpenAI accepts.
	maxLogitBias = 100
)

// genParams is a validated request minus its prompts: everything that turns
// into scheduler.Requests and into the shape of the answer.
type genParams struct {
	// base is the scheduler request every prompt starts from; ID, Prompt,
	// MaxTokens and Arrival are filled per prompt.
	base scheduler.Request
	// maxTokens is the client's cap on generated tokens, 0 when absent (the
	// rest of the context is then the cap); maxTokensParam is the field
	// that set it.
	maxTokens      int
	maxTokensParam string
	// stops are the stop strings.
	stops []string
	// stream, includeUsage and continuousUsage shape the answer.
	stream          bool
	includeUsage    bool
	continuousUsage bool
	// logprobs asks for the chosen tokens' logprobs, topLogprobs for that
	// many alternatives.
	logprobs    bool
	topLogprobs int
	// tokensAsIDs names tokens in logprobs "token_id:<id>".
	tokensAsIDs bool
	// user is only logged.
	user string
}

// validateCommon checks the shared fields against a vocabulary of nVocab
// tokens. stopTokens are the model's end-of-generation tokens. randomSeed
// is used when the client sent no seed.
func validateCommon(c *commonRequest, nVocab int, stopTokens []int32, randomSeed uint32) (*genParams, error) {
	p := &genParams{base: scheduler.Request{N: 1, PromptLogprobs: -1, Sampling: engine.DefaultSampling()}}
	s := &p.base.Sampling
	s.Temperature = 1 // OpenAI's and vLLM's default

	if c.N != nil {
		if *c.N < 1 || *c.N > maxN {
			return nil, invalid("n", "n must be between 1 and %d, got %d.", maxN, *c.N)
		}
		p.base.N = *c.N
	}
	if c.MaxTokens != nil {
		if *c.MaxTokens < 1 {
			return nil, invalid("max_tokens", "max_tokens must be at least 1, got %d.", *c.MaxTokens)
		}
		p.maxTokens, p.maxTokensParam = *c.MaxTokens, "max_tokens"
	}
	if c.MinTokens != nil {
		if *c.MinTokens < 0 {
			return nil, invalid("min_tokens", "min_tokens must be at least 0, got %d.", *c.MinTokens)
		}
		p.base.MinTokens = *c.MinTokens
	}

	type floatCheck struct {
		param  string
		v      *float64
		dst    *float32
		ok     func(float64) bool
		bounds string
	}
	checks := []floatCheck{
		{"temperature", c.Temperature, &s.Temperature, func(v float64) bool { return v >= 0 && v <= math.MaxFloat32 }, "at least 0"},
		{"top_p", c.TopP, &s.TopP, func(v float64) bool { return v > 0 && v <= 1 }, "in (0, 1]"},
		{"min_p", c.MinP, &s.MinP, func(v float64) bool { return v >= 0 && v <= 1 }, "in [0, 1]"},
		{"presence_penalty", c.PresencePenalty, &s.PresencePenalty, func(v float64) bool { return v >= -2 && v <= 2 }, "in [-2, 2]"},
		{"frequency_penalty", c.FrequencyPenalty, &s.FrequencyPenalty, func(v float64) bool { return v >= -2 && v <= 2 }, "in [-2, 2]"},
		{"repetition_penalty", c.RepetitionPenalty, &s.RepetitionPenalty, func(v float64) bool { return v > 0 && v <= math.MaxFloat32 }, "greater than 0"},
	}
	for _, ch := range checks {
		if ch.v == nil {
			continue
		}
		if !ch.ok(*ch.v) {
			return nil, invalid(ch.param, "%s must be %s, got %v.", ch.param, ch.bounds, *ch.v)
		}
		*ch.dst = float32Of(*ch.v)
	}
	if c.TopK != nil {
		// vLLM: -1 or 0 disable top-k.
		if *c.TopK < -1 || *c.TopK > math.MaxInt32 {
			return nil, invalid("top_k", "top_k must be -1 or 0 (disabled) or a positive integer, got %d.", *c.TopK)
		}
		s.TopK = int32(max(*c.TopK, 0))
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
				return nil, invalid("logit_bias", "logit_bias keys must be token ids written as decimal strings; got %q.", k)
			}
			if tok < 0 || tok >= int64(nVocab) {
				return nil, invalid("logit_bias", "logit_bias token %d is outside the vocabulary [0, %d).", tok, nVocab)
			}
			if v < -maxLogitBias || v > maxLogitBias {
				return nil, invalid("logit_bias", "logit_bias values must be in [-100, 100]; token %d has %v.", tok, v)
			}
			s.LogitBias = append(s.LogitBias, engine.TokenBias{Token: int32(tok), Bias: float32(v)})
		}
		// Map order is random; the scheduler and its logs see a stable one.
		slices.SortFunc(s.LogitBias, func(a, b engine.TokenBias) int { return cmp.Compare(a.Token, b.Token) })
	}

	p.tokensAsIDs = c.ReturnTokensAsTokenIDs != nil && *c.ReturnTokensAsTokenIDs
	if c.IgnoreEOS != nil && *c.IgnoreEOS {
		p.base.IgnoreEOS = true
	} else {
		p.base.StopTokens = append(p.base.StopTokens, stopTokens...)
	}
	for i, id := range c.StopTokenIDs {
		if id < 0 || id >= int64(nVocab) {
			return nil, invalid("stop_token_ids", "stop_token_ids[%d] = %d is outside the vocabulary [0, %d).", i, id, nVocab)
		}
		p.base.StopTokens = append(p.base.StopTokens, int32(id))
	}
	slices.Sort(p.base.StopTokens)
	p.base.StopTokens = slices.Compact(p.base.StopTokens)

	for _, st := range c.Stop.list {
		if st != "" {
			p.stops = append(p.stops, st)
		}
	}

	p.stream = c.Stream != nil && *c.Stream
	if c.StreamOptions != nil {
		if !p.stream {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true.")
		}
		p.includeUsage = c.StreamOptions.IncludeUsage != nil && *c.StreamOptions.IncludeUsage
		// As in vLLM, continuous_usage_stats only counts with include_usage.
		p.continuousUsage = p.includeUsage && c.StreamOptions.ContinuousUsageStats != nil && *c.StreamOptions.ContinuousUsageStats
	}

	if c.CacheSalt != nil {
		if *c.CacheSalt == "" {
			return nil, invalid("cache_salt", "cache_salt must be a non-empty string when given.")
		}
		p.base.CacheSalt = *c.CacheSalt
	}
	if c.Priority != nil {
		p.base.Priority = *c.Priority
	}
	if c.User != nil {
		p.user = *c.User
	}
	return p, nil
}

// setLogprobs records the logprobs request (already range-checked by the
// caller) in the sampling parameters.
func (p *genParams) setLogprobs(on bool, top int) {
	p.logprobs, p.topLogprobs = on, top
	p.base.Sampling.Logprobs, p.base.Sampling.TopLogprobs = on, top
}

// finish runs the last checks that need every field, including the
// engine's own range checks as a safety net.
func (p *genParams) finish(nVocab int) error {
	if p.maxTokens > 0 && p.base.MinTokens > p.maxTokens {
		return invalid("min_tokens", "min_tokens (%d) must not be greater than %s (%d).", p.base.MinTokens, p.maxTokensParam, p.maxTokens)
	}
	if err := p.base.Sampling.Validate(nVocab); err != nil {
		return invalid("", "%v", err)
	}
	return nil
}

// maxTokensFor returns the generation cap for a prompt of promptLen tokens
// on a model with context maxLen, or vLLM's error when it does not fit.
func (p *genParams) maxTokensFor(promptLen, maxLen int, param string) (int, error) {
	if promptLen >= maxLen {
		return 0, &validationError{Param: param, Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
				"Please reduce the length of the input messages.", maxLen, promptLen)}
	}
	if p.maxTokens == 0 {
		if p.base.MinTokens > maxLen-promptLen {
			return 0, invalid("min_tokens", "min_tokens (%d) is more than the %d tokens left in the context after the prompt.",
				p.base.MinTokens, maxLen-promptLen)
		}
		return maxLen - promptLen, nil
	}
	if promptLen+p.maxTokens > maxLen {
		if p.maxTokens >= maxLen {
			// No prompt could make room: the cap itself is what to fix.
			param = p.maxTokensParam
		}
		return 0, &validationError{Param: param, Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens "+
				"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			maxLen, promptLen+p.maxTokens, promptLen, p.maxTokens)}
	}
	return p.maxTokens, nil
}
