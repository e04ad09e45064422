package scheduler

import (
	"fmt"
	"slices"

	"github.com/llmserve/llmserve/engine"
)

// Speculative decoding methods (Speculative.Method).
const (
	// SpecNone turns speculative decoding off.
	SpecNone = ""
	// SpecNgram proposes by prompt lookup: the tokens that followed the
	// latest earlier occurrence of the sequence's last tokens.
	SpecNgram = "ngram"
	// SpecDraft proposes with a smaller draft model that the executor
	// owns: the scheduler decides how many draft tokens each decode chunk
	// may carry (engine.Chunk.DraftLimit) and reserves their KV; the
	// executor proposes them.
	SpecDraft = "draft"
)

// MaxSpeculativeTokens is the most draft tokens per sequence and step
// (num_speculative_tokens).
const MaxSpeculativeTokens = 16

// MaxPromptLookup is the longest n-gram prompt lookup matches.
const MaxPromptLookup = 64

// Defaults of the n-gram proposer: vLLM requires num_speculative_tokens,
// and matches 5-grams by default (prompt_lookup_min = max = 5) when
// neither bound is given.
const (
	DefaultSpeculativeTokens = 5
	DefaultPromptLookup      = 5
)

// WithDefaults fills what is left zero as vLLM does: NumTokens
// DefaultSpeculativeTokens; without either lookup bound both are
// DefaultPromptLookup, with one the other equals it. Method "" is
// returned as it is.
func (sp Speculative) WithDefaults() Speculative {
	if sp.Method == SpecNone {
		return sp
	}
	if sp.NumTokens == 0 {
		sp.NumTokens = DefaultSpeculativeTokens
	}
	if sp.Method != SpecNgram {
		return sp
	}
	switch {
	case sp.PromptLookupMin == 0 && sp.PromptLookupMax == 0:
		sp.PromptLookupMin, sp.PromptLookupMax = DefaultPromptLookup, DefaultPromptLookup
	case sp.PromptLookupMin == 0:
		sp.PromptLookupMin = sp.PromptLookupMax
	case sp.PromptLookupMax == 0:
		sp.PromptLookupMax = sp.PromptLookupMin
	}
	return sp
}

// Validate reports a configuration that cannot work, naming the setting
// in vLLM's terms (--speculative-config keys).
func (sp *Speculative) Validate() error {
	switch sp.Method {
	case SpecNone:
		return nil
	case SpecNgram:
	case SpecDraft:
		switch {
		case sp.Model == "":
			return fmt.Errorf("speculative method %q needs a draft model (model)", sp.Method)
		case sp.NumTokens < 1 || sp.NumTokens > MaxSpeculativeTokens:
			return fmt.Errorf("num_speculative_tokens %d is outside [1, %d]", sp.NumTokens, MaxSpeculativeTokens)
		case sp.DisableByBatchSize < 0:
			return fmt.Errorf("disable_by_batch_size %d is negative (0: never)", sp.DisableByBatchSize)
		}
		return nil
	default:
		return fmt.Errorf("speculative method %q is unknown (want %q or %q)", sp.Method, SpecNgram, SpecDraft)
	}
	switch {
	case sp.Model != "":
		return fmt.Errorf("speculative model %q with method %q: a draft model goes with method %q", sp.Model, sp.Method, SpecDraft)
	case sp.NumTokens < 1 || sp.NumTokens > MaxSpeculativeTokens:
		return fmt.Errorf("num_speculative_tokens %d is outside [1, %d]", sp.NumTokens, MaxSpeculativeTokens)
	case sp.PromptLookupMin < 1 || sp.PromptLookupMin > MaxPromptLookup:
		return fmt.Errorf("prompt_lookup_min %d is outside [1, %d]", sp.PromptLookupMin, MaxPromptLookup)
	case sp.PromptLookupMax < sp.PromptLookupMin || sp.PromptLookupMax > MaxPromptLookup:
		return fmt.Errorf("prompt_lookup_max %d is outside [prompt_lookup_min %d, %d]", sp.PromptLookupMax, sp.PromptLookupMin, MaxPromptLookup)
	case sp.DisableByBatchSize < 0:
		return fmt.Errorf("disable_by_batch_size %d is negative (0: never)", sp.DisableByBatchSize)
	}
	return nil
}

// SpecStats count speculative decoding's work since the scheduler started,
// as vLLM's vllm:spec_decode_* counters do.
type SpecStats struct {
	// Drafts is the decode steps of sequences that carried a draft;
	// DraftTokens their draft tokens and AcceptedTokens those the engine
	// accepted.
	Drafts, DraftTokens, AcceptedTokens uint64
	// AcceptedPerPos[i] counts accepted draft tokens at position i of
	// their draft (NumTokens entries).
	AcceptedPerPos []uint64
}

// promptLookup proposes up to k tokens to follow tokens: the tokens after
// the latest earlier occurrence of its last n tokens, for the largest n in
// [minN, maxN] that occurs (vLLM's n-gram proposer, which also prefers
// the longest match). The result shares tokens' backing array, capped so
// that appending to it cannot write there.
func promptLookup(tokens []int32, minN, maxN, k int) []int32 {
	l := len(tokens)
	if k < 1 || l < minN+1 {
		return nil
	}
	last := tokens[l-1]
	bestLen, bestEnd := 0, -1
	// e is where an earlier occurrence ends; scanning down finds the
	// latest one first, so only a longer match replaces it.
	for e := l - 2; e >= 0; e-- {
		if tokens[e] != last {
			continue
		}
		n := 1
		for n < maxN && n <= e && tokens[e-n] == tokens[l-1-n] {
			n++
		}
		if n >= minN && n > bestLen {
			bestLen, bestEnd = n, e
			if n == maxN {
				break
			}
		}
	}
	if bestEnd < 0 {
		return nil
	}
	end := min(bestEnd+1+k, l)
	return tokens[bestEnd+1 : end : end]
}

// draftLimit is how many draft tokens sq may carry with its decode chunk
// ch this step, given budget tokens left in the step: 0 where speculation
// would not be exact. Drafts are positions of one step, so whatever the
// scheduler derives per position must be the same for all of them:
//
//   - no drafts with Only (a forced token) or bad words (the bans change
//     with every token), nor in a thinking section with a budget, whose
//     forced end must come at its position;
//   - while min_tokens holds stop tokens back, only as many as keep every
//     position under it (Ban applies to all of them);
//   - never past max_tokens or the sequence's length limit: a step's
//     tokens (accepted drafts and the sampled one) never exceed them;
//   - no longer than adaptDraft's length for the sequence;
//   - grammars, logit bias, allowed tokens and penalties need nothing:
//     the engine samples every position with the sequence's chain, which
//     (and whose grammar) accepts the drawn tokens in order, as one step
//     per token would.
func (s *Scheduler) draftLimit(sq *sequence, ch *engine.Chunk, budget int) int {
	r := sq.req.req
	if len(ch.Only) > 0 || len(r.BadWords) > 0 {
		return 0
	}
	if r.Thinking != nil && r.Thinking.Budget >= 0 && sq.think.phase != thinkDone {
		return 0
	}
	out := sq.numOutput()
	k := min(s.cfg.Speculative.NumTokens, budget, r.MaxTokens-out-1, s.maxLen-len(sq.tokens)-1)
	if sq.draftLen > 0 {
		k = min(k, sq.draftLen)
	}
	if out < r.MinTokens {
		k = min(k, r.MinTokens-out-1)
	}
	return max(k, 0)
}

// addDrafts gives the decode chunks of batch their drafts, within budget,
// and returns the budget left. A draft's positions are reserved in the
// KV tokens first; a draft that does not fit is shortened, never the
// cause of a preemption. With method "draft" the scheduler cannot
// propose: it sets the chunk's DraftLimit to the number of positions it
// reserved, and the executor's draft model proposes up to that many.
func (s *Scheduler) addDrafts(batch []engine.Chunk, budget int) int {
	sp := &s.cfg.Speculative
	for i := range batch {
		ch := &batch[i]
		if budget <= 0 {
			break
		}
		sq := s.byID[ch.Seq]
		k := s.draftLimit(sq, ch, budget)
		if k == 0 {
			continue
		}
		if sp.Method == SpecDraft {
			for k > 0 && !s.kv.Grow(sq.id, sq.computed+1+k) {
				k--
			}
			ch.DraftLimit = k
			budget -= k
			continue
		}
		d := promptLookup(sq.tokens, sp.PromptLookupMin, sp.PromptLookupMax, k)
		if i := slices.IndexFunc(d, func(t int32) bool { return t < 0 }); i >= 0 {
			d = d[:i] // a media placeholder is not a token to propose
		}
		for len(d) > 0 && !s.kv.Grow(sq.id, sq.computed+1+len(d)) {
			d = d[:len(d)-1]
		}
		if len(d) == 0 {
			continue
		}
		ch.Draft = d
		budget -= len(d)
	}
	return budget
}

// adaptDraft sets the length of the sequence's next draft from how its
// last one fared: after a draft accepted whole, one token more (up to
// limit); after a rejection, one more than was accepted. Every draft token
// is a row the model computes, rejected or not, so a sequence whose
// drafts miss drafts little (one token: on models whose one-row steps are
// padded to two rows, decode.go, it takes the padding's place and costs
// nothing); one whose drafts hit drafts long. Outputs do not depend on
// it: a draft decides only how many positions a step computes.
func (sq *sequence) adaptDraft(drafted, accepted, limit int) {
	switch {
	case drafted == 0:
	case accepted == drafted:
		sq.draftLen = min(drafted+1, limit)
	default:
		sq.draftLen = accepted + 1
	}
}

// countDrafts records a step's draft and what the engine accepted of it.
func (s *Scheduler) countDrafts(drafted, accepted int) {
	if drafted == 0 {
		return
	}
	st := &s.spec
	st.Drafts++
	st.DraftTokens += uint64(drafted)
	st.AcceptedTokens += uint64(accepted)
	for i := range min(accepted, len(st.AcceptedPerPos)) {
		st.AcceptedPerPos[i]++
	}
}
