package openai

import (
	"github.com/llmserve/llmserve/frontend"
)

// Limits on request fields (frontend's).
const (
	maxN           = frontend.MaxN
	maxTopLogprobs = frontend.MaxTopLogprobs
	maxTemperature = frontend.MaxTemperature
)

// genParams is a validated request minus its prompts (frontend.Params)
// with the OpenAI-only options that shape the answer.
type genParams struct {
	*frontend.Params
	// includeUsage and continuousUsage are stream_options'.
	includeUsage    bool
	continuousUsage bool
	// tokensAsIDs names tokens in logprobs "token_id:<id>".
	tokensAsIDs bool
	// wire are the OpenAI-only options (kv_transfer_params).
	wire *wireOptions
	// transfer serves kv_transfer_params (nil: refused).
	transfer KVTransfer
	// echo (completions) starts each choice's text with its prompt.
	echo bool
}

// validateCommon validates the typed request's sampling and scheduling
// fields into the parameters every prompt starts from
// (frontend.NewParams) and the OpenAI-only options o (nil for the other
// protocols): stream_options and return_tokens_as_token_ids. stopTokens
// are the model's end-of-generation tokens. randomSeed is used when the
// client sent no seed.
func validateCommon(r *frontend.Request, o *wireOptions, nVocab int, stopTokens []int32, randomSeed uint32) (*genParams, error) {
	if o == nil {
		o = &wireOptions{}
	}
	fp, err := frontend.NewParams(r, nVocab, stopTokens, randomSeed)
	if err != nil {
		return nil, err
	}
	p := &genParams{Params: fp, wire: o}
	p.tokensAsIDs = o.ReturnTokensAsTokenIDs != nil && *o.ReturnTokensAsTokenIDs
	if so := o.StreamOptions; so != nil {
		if !p.Stream {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true.")
		}
		p.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
		// As in vLLM, continuous_usage_stats only counts with include_usage.
		p.continuousUsage = p.includeUsage && so.ContinuousUsageStats != nil && *so.ContinuousUsageStats
	}
	return p, nil
}
