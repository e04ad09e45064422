package scheduler

// Pacing of long prompts (Config.LongPrefillTokens).
//
// A prompt of more than LongPrefillTokens tokens is long. In a step where
// other sequences decode, the long prompts together compute at most the
// step's limit: the budget the engine core last set from measured step
// times (SetLongPrefillBudget), and never more than LongPrefillTokens,
// whatever the measurements say (before the first one, the threshold
// alone). So, on any machine:
//
//   - every sequence that decodes gets its token in every step where a
//     long prompt computes (decodes are scheduled first, prompts never
//     take their place);
//   - a long prompt computes at most LongPrefillTokens tokens a step
//     beside them, hence in two chunks at least;
//   - it progresses every such step (the engine core's budget is 2 at
//     least), unless an earlier long prompt took the whole limit.
//
// In a step where nothing decodes there is no one to pace for: a long
// prompt then takes what the token budget allows. Short prompts are never
// held back.

// Pacing is what the long-prefill limit did in one step: the engine core
// sizes the next budget from it and reports it to the metrics.
type Pacing struct {
	// Limit is the most tokens long prompts could compute together in the
	// step; 0 when they were not paced (pacing is off, or no sequence
	// decoded in the step).
	Limit int
	// Tokens is how many they computed (at most Limit).
	Tokens int
}

// SetLongPrefillBudget sets how many tokens long prompts (see
// Config.LongPrefillTokens) may compute together in a step where other
// sequences decode, at most LongPrefillTokens; 0 leaves LongPrefillTokens
// as the only limit.
func (s *Scheduler) SetLongPrefillBudget(n int) { s.longBudget = max(n, 0) }

// Pacing reports what the long-prefill limit did in the step the last
// Schedule made.
func (s *Scheduler) Pacing() Pacing { return s.pacing }

// longPrefillLimit is the long prompts' limit in a step: 0 (none) when
// nothing decodes in it or pacing is off.
func (s *Scheduler) longPrefillLimit(decoding bool) int {
	if !decoding || s.cfg.LongPrefillTokens <= 0 {
		return 0
	}
	if s.longBudget > 0 {
		return min(s.longBudget, s.cfg.LongPrefillTokens)
	}
	return s.cfg.LongPrefillTokens
}

// promptChunk counts a step that computes the sequence's prompt.
func (sq *sequence) promptChunk() {
	sq.promptChunks++
	sq.req.promptChunks = max(sq.req.promptChunks, sq.promptChunks)
}
