package openai

import (
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// Limits on request fields (frontend's).
const (
	maxN           = frontend.MaxN
	maxTopLogprobs = frontend.MaxTopLogprobs
	maxTemperature = frontend.MaxTemperature
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
	// the request's sampling fields, for error messages (finish).
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

// validateCommon validates the typed request's sampling and scheduling
// fields into the parameters every prompt starts from (frontend's
// Sampling.Apply) and the OpenAI-only options o (nil for the other
// protocols): stream_options and return_tokens_as_token_ids. Ranges where
// sampling is defined are the engine's (finish) and capacity is the
// scheduler's (requestError). stopTokens are the model's
// end-of-generation tokens. randomSeed is used when the client sent no
// seed.
func validateCommon(r *frontend.Request, o *wireOptions, nVocab int, stopTokens []int32, randomSeed uint32) (*genParams, error) {
	if o == nil {
		o = &wireOptions{}
	}
	p := &genParams{base: scheduler.Request{N: 1, PromptLogprobs: -1, Sampling: engine.DefaultSampling()}, wire: o, sampling: &r.Sampling, promptLogprobs: -1}
	p.base.Sampling.Temperature = 1 // OpenAI's and vLLM's default
	p.maxTokensParam = frontend.Name(r.Fields.MaxTokens, "max_tokens")
	if r.MaxTokens != nil {
		p.maxTokens, p.maxTokensSet = *r.MaxTokens, true
	}
	stops, err := r.Sampling.Apply(&p.base, nVocab, stopTokens, randomSeed)
	if err != nil {
		return nil, err
	}
	p.stops = stops
	p.tokensAsIDs = o.ReturnTokensAsTokenIDs != nil && *o.ReturnTokensAsTokenIDs
	p.stream = r.Stream
	if so := o.StreamOptions; so != nil {
		if !p.stream {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true.")
		}
		p.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
		// As in vLLM, continuous_usage_stats only counts with include_usage.
		p.continuousUsage = p.includeUsage && so.ContinuousUsageStats != nil && *so.ContinuousUsageStats
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
	return p.sampling.Finish(&p.base, nVocab, p.topLogprobsParam)
}

// requestError maps the scheduler's capacity checks to the wire: which
// field, in this endpoint's names (promptParam names prompt i), and what
// to do about it.
func (p *genParams) requestError(err error, promptParam func(int) string) error {
	return frontend.RequestError(err, p.maxTokensParam, p.maxTokensSet, promptParam)
}
