package openai

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// Limits on request fields.
const (
	// maxN caps "n", as OpenAI does.
	maxN = 128
	// maxTopLogprobs caps top_logprobs (chat) and logprobs (completions),
	// as OpenAI's chat endpoint and vLLM's default max_logprobs do.
	maxTopLogprobs = 20
	// maxTemperature is OpenAI's upper bound on temperature.
	maxTemperature = 2
)

// genParams is a validated request minus its prompts: everything that turns
// into scheduler.Requests and into the shape of the answer.
type genParams struct {
	// base is the scheduler request every prompt starts from; ID, Prompt,
	// MaxTokens and Arrival are filled per prompt.
	base scheduler.Request
	// maxTokens is the client's cap on generated tokens when maxTokensSet
	// (else the rest of the context is the cap); maxTokensParam is the
	// field that sets it.
	maxTokens      int
	maxTokensSet   bool
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
	// topLogprobsParam names the field that set TopLogprobs.
	topLogprobsParam string
	// wire are the OpenAI-only options (kv_transfer_params); sampling
	// the request's sampling fields, for error messages.
	wire     *wireOptions
	sampling *frontend.Sampling
	// transfer serves kv_transfer_params (nil: refused).
	transfer KVTransfer
	// keepSpecial shows control tokens in the text (skip_special_tokens
	// false); truncate keeps a prompt's last tokens (truncate_prompt_tokens;
	// 0: off); promptLogprobs lists that many alternatives per prompt token
	// (prompt_logprobs; -1: off).
	keepSpecial    bool
	truncate       int
	promptLogprobs int

	// ThinkingBudget bounds the tokens each choice may generate inside the
	// model's thinking section (<think> ... </think>, by the model's
	// reasoning parser): once a choice has written that many, the engine
	// forces the end-of-thinking tokens (</think> and the newlines the
	// template puts after it) and the answer follows. nil is no limit; 0
	// is no thinking (the end is forced at once when the prompt opens the
	// section, or right after the model opens it). The markers are not
	// counted. prepareChat sets it from thinking_token_budget; another API
	// sets it after prepareChat and before submit (Anthropic Messages:
	// thinking.budget_tokens; Responses: a budget for reasoning.effort),
	// with ThinkingParam naming its wire field. submit refuses a negative
	// budget, and any budget when the model has no reasoning parser, with
	// a 400 naming ThinkingParam. Whether or not it is set, a model with a
	// reasoning parser reports the reasoning tokens in
	// usage.completion_tokens_details.reasoning_tokens.
	ThinkingBudget *int
	// ThinkingParam is the wire name of ThinkingBudget, for errors
	// ("thinking_token_budget" when empty).
	ThinkingParam string
}

// validateCommon decodes the shared fields into sampling and scheduling
// parameters. It checks only what is the wire's own business (types, n,
// logit_bias keys, stream_options); ranges where sampling is defined are
// the engine's (engine.Sampling.Validate, through finish) and capacity is
// the scheduler's (mapped by requestError). stopTokens are the model's
// end-of-generation tokens. randomSeed is used when the client sent no
// seed.
func validateCommon(r *frontend.Request, o *wireOptions, nVocab int, stopTokens []int32, randomSeed uint32) (*genParams, error) {
	if o == nil {
		o = &wireOptions{}
	}
	c := &r.Sampling
	p := &genParams{base: scheduler.Request{N: 1, PromptLogprobs: -1, Sampling: engine.DefaultSampling()}, wire: o, sampling: c, promptLogprobs: -1}
	s := &p.base.Sampling
	s.Temperature = 1 // OpenAI's and vLLM's default

	// OpenAI's range, which its SDKs and clients assume; the engine's own
	// range (engine.Sampling.Validate) is wider and checked later.
	if t := c.Temperature; t != nil && !(*t >= 0 && *t <= maxTemperature) {
		return nil, invalid("temperature", "temperature must be between 0 and %d, got %s.", maxTemperature, strconv.FormatFloat(*t, 'g', -1, 64))
	}
	if c.N != nil {
		if *c.N < 1 || *c.N > maxN {
			return nil, invalid("n", "n must be between 1 and %d, got %d.", maxN, *c.N)
		}
		p.base.N = *c.N
	}
	p.maxTokensParam = frontend.Name(r.Fields.MaxTokens, "max_tokens")
	if r.MaxTokens != nil {
		p.maxTokens, p.maxTokensSet = *r.MaxTokens, true
	}
	if c.MinTokens != nil {
		p.base.MinTokens = *c.MinTokens
	}
	for _, f := range []struct {
		v   *float64
		dst *float32
	}{
		{c.Temperature, &s.Temperature}, {c.TopP, &s.TopP}, {c.MinP, &s.MinP},
		{c.PresencePenalty, &s.PresencePenalty}, {c.FrequencyPenalty, &s.FrequencyPenalty}, {c.RepetitionPenalty, &s.RepetitionPenalty},
	} {
		if f.v != nil {
			*f.dst = float32Of(*f.v)
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
			return nil, invalid("top_k", "top_k must be -1 or 0 (disabled) or a positive integer, got %d.", k)
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
				return nil, invalid("logit_bias", "logit_bias keys must be token ids written as decimal strings; got %q.", k)
			}
			s.LogitBias = append(s.LogitBias, engine.TokenBias{Token: int32(tok), Bias: float32Of(v)})
		}
		// Map order is random; the scheduler and its logs see a stable one.
		slices.SortFunc(s.LogitBias, func(a, b engine.TokenBias) int { return cmp.Compare(a.Token, b.Token) })
	}

	p.tokensAsIDs = o.ReturnTokensAsTokenIDs != nil && *o.ReturnTokensAsTokenIDs
	if c.IgnoreEOS {
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
	if p.base.MinTokens > 0 && len(p.base.StopTokens) >= nVocab {
		return nil, invalid("stop_token_ids", "With min_tokens, the stop tokens are banned until min_tokens are generated, and these stop tokens cover the whole vocabulary of %d tokens.", nVocab)
	}

	for _, st := range c.Stop {
		if st != "" {
			p.stops = append(p.stops, st)
		}
	}

	p.stream = r.Stream
	if so := o.StreamOptions; so != nil {
		if !p.stream {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true.")
		}
		p.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
		// As in vLLM, continuous_usage_stats only counts with include_usage.
		p.continuousUsage = p.includeUsage && so.ContinuousUsageStats != nil && *so.ContinuousUsageStats
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
	if r.User != nil {
		p.user = *r.User
	}
	return p, nil
}

// setLogprobs records the logprobs request (already range-checked by the
// caller) in the sampling parameters.
func (p *genParams) setLogprobs(on bool, top int) {
	p.logprobs, p.topLogprobs = on, top
	p.base.Sampling.Logprobs, p.base.Sampling.TopLogprobs = on, top
}

// finish checks the sampling parameters where the engine defines them.
func (p *genParams) finish(nVocab int) error {
	if err := p.base.Sampling.Validate(nVocab); err != nil {
		return p.rangeError(err)
	}
	return nil
}

// rangeError maps the engine's *engine.RangeError to the wire field, with
// the value the client sent.
func (p *genParams) rangeError(err error) error {
	var re *engine.RangeError
	if !errors.As(err, &re) {
		return err
	}
	c := p.sampling
	sent := func(v *float64) any {
		if v == nil {
			return re.Value
		}
		return *v
	}
	var param string
	var got any
	switch re.Field {
	case engine.FieldTemperature:
		param, got = "temperature", sent(c.Temperature)
	case engine.FieldTopP:
		param, got = "top_p", sent(c.TopP)
	case engine.FieldMinP:
		param, got = "min_p", sent(c.MinP)
	case engine.FieldRepetitionPenalty:
		param, got = "repetition_penalty", sent(c.RepetitionPenalty)
	case engine.FieldPresencePenalty:
		param, got = "presence_penalty", sent(c.PresencePenalty)
	case engine.FieldFrequencyPenalty:
		param, got = "frequency_penalty", sent(c.FrequencyPenalty)
	case engine.FieldTopK:
		param, got = "top_k", re.Value
	case engine.FieldAllowedTokens:
		param, got = "allowed_token_ids", re.Value
	case engine.FieldLogitBiasToken:
		return invalid("logit_bias", "logit_bias keys must be token ids %s; got %v.", re.Want, re.Value)
	case engine.FieldLogitBiasValue:
		return invalid("logit_bias", "logit_bias values must be %s; got %v.", re.Want, re.Value)
	case engine.FieldTopLogprobs:
		param, got = p.topLogprobsParam, re.Value
	default:
		param, got = string(re.Field), re.Value
	}
	return invalid(param, "%s must be %s; got %v.", param, re.Want, got)
}

// requestError maps the scheduler's capacity checks to the wire: which
// field, in this endpoint's names (promptParam names prompt i), and what
// to do about it.
func (p *genParams) requestError(err error, promptParam func(int) string) error {
	i := 0
	var ie *core.IndexError
	if errors.As(err, &ie) {
		i = ie.Index
	}
	var re *scheduler.RequestError
	if !errors.As(err, &re) {
		return err
	}
	maxParam := p.maxTokensParam
	switch {
	case errors.Is(re, scheduler.ErrTooLong) && re.KVTokens > 0:
		return &validationError{Param: promptParam(i), Code: "context_length_exceeded", Message: fmt.Sprintf(
			"Your request has %d input tokens, and this server's KV cache holds %d tokens in all, which leaves no room to generate. "+
				"Please reduce the length of the input, or ask the operator to raise --kv-cache-memory.", re.PromptTokens, re.KVTokens)}
	case errors.Is(re, scheduler.ErrTooLong) && re.Field == scheduler.FieldMaxTokens:
		return &validationError{Param: maxParam, Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens "+
				"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			re.Limit, re.PromptTokens+re.MaxTokens, re.PromptTokens, re.MaxTokens)}
	case errors.Is(re, scheduler.ErrTooLong) && !p.maxTokensSet:
		return &validationError{Param: promptParam(i), Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
				"Please reduce the length of the input messages.", re.Limit, re.PromptTokens)}
	case errors.Is(re, scheduler.ErrTooLong):
		return &validationError{Param: promptParam(i), Code: "context_length_exceeded", Message: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens "+
				"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			re.Limit, re.PromptTokens+re.MaxTokens, re.PromptTokens, re.MaxTokens)}
	}
	switch re.Field {
	case scheduler.FieldN:
		return invalid("n", "n = %d exceeds this server's limit of %d sequences running at once (its --max-num-seqs); ask for fewer choices.", re.Value, re.Limit)
	case scheduler.FieldMaxTokens:
		return invalid(maxParam, "%s must be at least 1, got %d.", maxParam, re.Value)
	case scheduler.FieldMinTokens:
		if re.Value < 0 {
			return invalid("min_tokens", "min_tokens must be at least 0, got %d.", re.Value)
		}
		if !p.maxTokensSet {
			return invalid("min_tokens", "min_tokens (%d) is more than the %d tokens left in the context after the prompt.", re.Value, re.Limit)
		}
		return invalid("min_tokens", "min_tokens (%d) must not be greater than %s (%d).", re.Value, maxParam, re.Limit)
	case scheduler.FieldRequests:
		return invalid("prompt", "The request has %d prompts; this server queues at most %d requests (its --max-waiting). Send fewer prompts per request.", re.Value, re.Limit)
	case scheduler.FieldPrompt:
		return invalid(promptParam(i), "A prompt must not be empty.")
	}
	return invalid("", "%v", re)
}
