package openai

import (
	"strconv"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
)

// This file holds vLLM's sampling extensions that both chat and
// completions take: bad_words, allowed_token_ids, skip_special_tokens,
// truncate_prompt_tokens and prompt_logprobs; and the refusal of best_of.

// extraFields are decoded with commonRequest's.
type extraFields struct {
	BadWords             []string `json:"bad_words"`
	AllowedTokenIDs      []int64  `json:"allowed_token_ids"`
	SkipSpecialTokens    *bool    `json:"skip_special_tokens"`
	TruncatePromptTokens *int     `json:"truncate_prompt_tokens"`
	PromptLogprobs       *int     `json:"prompt_logprobs"`
	BestOf               *int     `json:"best_of"`
}

// extensions are the typed request's extensions.
func (e *extraFields) extensions() frontend.Extensions {
	return frontend.Extensions{BadWords: e.BadWords, AllowedTokenIDs: e.AllowedTokenIDs, SkipSpecialTokens: e.SkipSpecialTokens,
		TruncatePromptTokens: e.TruncatePromptTokens, PromptLogprobs: e.PromptLogprobs, BestOf: e.BestOf}
}

// promptLogprobEntry is vLLM's prompt_logprobs value for one token.
type promptLogprobEntry struct {
	Logprob      logprob `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// promptLogprobsList is vLLM's prompt_logprobs: null for the first prompt
// token (nothing predicts it), then per token a map from token id to its
// entry: the prompt's own token and the k most likely ones.
func promptLogprobsList(tok tokenNames, prompt []int32, lps []engine.Logprobs, k int) []map[string]promptLogprobEntry {
	out := make([]map[string]promptLogprobEntry, len(prompt))
	for i := 1; i < len(prompt) && i-1 < len(lps); i++ {
		l := lps[i-1]
		m := make(map[string]promptLogprobEntry, k+1)
		for r, t := range l.Top[:min(k, len(l.Top))] {
			m[strconv.Itoa(int(t.Token))] = promptLogprobEntry{Logprob: logprob(t.Logprob), Rank: r + 1, DecodedToken: tok.TokenText(t.Token)}
		}
		m[strconv.Itoa(int(l.Chosen.Token))] = promptLogprobEntry{Logprob: logprob(l.Chosen.Logprob), Rank: l.Rank, DecodedToken: tok.TokenText(l.Chosen.Token)}
		out[i] = m
	}
	return out
}

// FIMVocab is a vocabulary that knows its fill-in-the-middle tokens
// (frontend.RenderRaw builds the infill prompt with them).
type FIMVocab = frontend.FIMVocab
