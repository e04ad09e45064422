package scheduler

import "slices"

// Thinking describes a reasoning model's thinking section for one request,
// in tokens of the model's vocabulary, and bounds it. The scheduler counts
// the tokens each choice generates inside the section (Usage.ReasoningTokens)
// and, once a choice has generated Budget of them, forces End and then
// After, one token per step, through engine.Chunk.Only; the answer then
// follows as the model writes it.
//
// The count is a function of the tokens generated (thinkState.advance, one
// token at a time), so it survives preemption and recompute unchanged and
// is the same for the same output, whatever the batching.
type Thinking struct {
	// Start is the marker that opens the section (<think>). A choice
	// that starts outside the section (StartInside false) enters it when
	// its output ends with Start; starting inside, a Start written as the
	// very first tokens is dropped from the count (the deepseek_r1
	// parser drops it from the reasoning too). Not empty.
	Start []int32
	// End is the marker that closes the section (</think>): written by
	// the model, or forced when the budget is spent. Not empty.
	End []int32
	// After are the tokens forced after a forced End (the template's
	// newlines after </think>); may be empty. They are not forced when the
	// model writes End itself.
	After []int32
	// StartInside is set when the prompt ends inside an open section (a
	// generation prompt that ends with <think>): the count starts at the
	// first generated token.
	StartInside bool
	// Off is set when the prompt has closed the section already (a
	// template that switched thinking off): nothing is counted or forced.
	Off bool
	// Budget is the most tokens a choice may generate inside the section
	// (markers not counted); 0 forces End at once; negative is no limit
	// (the section is only counted).
	Budget int
	// UTF8, when not nil, says for each token id how its bytes leave
	// UTF-8 text (tokenizer.Tokenizer.UTF8Tails): 0 on a character
	// boundary; 1 to 3 inside a character, that many bytes short of it;
	// -n for n continuation bytes only, which complete (part of) the
	// character the text before left open. A forced End never cuts a
	// character: once
	// the budget is spent, End waits until the thinking text ends on a
	// whole character (at most 3 more tokens, counted as reasoning). Ids
	// past its end are whole characters. The frontend builds it from the
	// vocabulary once per model; nil forces End as soon as the budget is
	// spent.
	UTF8 []int8
	// Generated is how many of the prompt's last tokens the choice
	// generated before this request (a continuation: the llmserve head
	// moves a choice to another worker with prompt = prompt + the tokens
	// delivered; N must be 1). The state starts from them, so the budget
	// and the markers span the whole choice; Usage.ReasoningTokens counts
	// only the tokens this request generates. 0 for a new request.
	Generated int
}

// thinkPhase is where a choice stands in its thinking section.
type thinkPhase uint8

const (
	// thinkBefore: outside, waiting for Start.
	thinkBefore thinkPhase = iota
	// thinkInside: inside, counting.
	thinkInside
	// thinkForcing: the budget is spent; End then After are forced.
	thinkForcing
	// thinkDone: the section ended (or was off); nothing more to do.
	thinkDone
)

// thinkState is one choice's thinking state; the zero value is not valid
// (see newThinkState).
type thinkState struct {
	phase thinkPhase
	// n is the tokens generated since the section opened (End's own
	// tokens included while it is being written), or in thinkForcing the
	// forced tokens emitted so far.
	n int
	// reasoning is the tokens counted inside the section, final once
	// phase is thinkForcing or thinkDone.
	reasoning int
	// forced is set when the budget ended the section.
	forced bool
	// partial is how many bytes the thinking text lacks to end on a whole
	// character (Thinking.UTF8); a forced End waits for 0.
	partial int8
}

// utf8After is partial once tok is written.
func (st *thinkState) utf8After(t *Thinking, tok int32) int8 {
	if tok < 0 || int(tok) >= len(t.UTF8) {
		return 0
	}
	if v := t.UTF8[tok]; v >= 0 {
		return v
	} else if st.partial+v > 0 {
		return st.partial + v
	}
	return 0
}

func newThinkState(t *Thinking) thinkState {
	switch {
	case t == nil || t.Off:
		return thinkState{phase: thinkDone}
	case t.StartInside:
		return thinkState{phase: thinkInside}
	}
	return thinkState{phase: thinkBefore}
}

// thinkStateAfter is the state once the prompt's last t.Generated tokens
// were generated (newThinkState when none).
func thinkStateAfter(t *Thinking, prompt []int32) thinkState {
	st := newThinkState(t)
	if t == nil || t.Generated <= 0 || t.Generated > len(prompt) {
		return st
	}
	gen := prompt[len(prompt)-t.Generated:]
	for i := 1; i <= len(gen) && st.phase != thinkDone; i++ {
		st.advance(t, gen[:i])
	}
	return st
}

// ThinkingCount counts one choice's reasoning tokens from its generated
// tokens, as the scheduler does (the llmserve head counts the tokens it
// delivered, whichever workers generated them). The zero value is not
// valid: see NewThinkingCount.
type ThinkingCount struct {
	t  *Thinking
	st thinkState
}

// NewThinkingCount returns a count for a choice of a request with t
// (nil: nothing is counted). t.Generated is ignored: the count starts at
// the choice's first token.
func NewThinkingCount(t *Thinking) *ThinkingCount {
	if t != nil {
		c := *t
		c.Generated = 0
		t = &c
	}
	return &ThinkingCount{t: t, st: newThinkState(t)}
}

// Advance takes the choice's generated tokens so far, the newest last
// (each call one token more than the previous).
func (c *ThinkingCount) Advance(output []int32) {
	if c.t != nil && c.st.phase != thinkDone {
		c.st.advance(c.t, output)
	}
}

// Reasoning is the reasoning tokens counted so far.
func (c *ThinkingCount) Reasoning() int { return c.st.reasoning }

// force returns the token the next step must produce, if any.
func (st *thinkState) force(t *Thinking) (int32, bool) {
	switch {
	case st.phase == thinkForcing:
		return forcedAt(t, st.n), true
	case st.phase == thinkInside && t.Budget >= 0 && st.n >= t.Budget && st.partial == 0:
		return t.End[0], true
	}
	return 0, false
}

func forcedAt(t *Thinking, i int) int32 {
	if i < len(t.End) {
		return t.End[i]
	}
	return t.After[i-len(t.End)]
}

// advance takes the token just appended to output (the choice's generated
// tokens, that one included).
func (st *thinkState) advance(t *Thinking, output []int32) {
	switch st.phase {
	case thinkBefore:
		if hasSuffix(output, t.Start) {
			st.phase, st.n = thinkInside, 0
		}
	case thinkInside:
		if t.Budget >= 0 && st.n >= t.Budget && st.partial == 0 {
			// The forced End[0]: the scheduler asked for it with Only.
			st.phase, st.reasoning, st.forced, st.n = thinkForcing, st.n, true, 1
			st.finishForcing(t)
			return
		}
		if hasSuffix(output, t.End) {
			st.phase, st.reasoning = thinkDone, st.n-(len(t.End)-1)
			return
		}
		st.partial = st.utf8After(t, output[len(output)-1])
		st.n++
		if st.n == len(t.Start) && len(output) == len(t.Start) && slices.Equal(output, t.Start) {
			st.n = 0 // a leading <think> written inside the section
		}
		st.reasoning = st.n
	case thinkForcing:
		st.n++
		st.finishForcing(t)
	}
}

func (st *thinkState) finishForcing(t *Thinking) {
	if st.n >= len(t.End)+len(t.After) {
		st.phase = thinkDone
	}
}

func hasSuffix(s, suffix []int32) bool {
	return len(suffix) > 0 && len(suffix) <= len(s) && slices.Equal(s[len(s)-len(suffix):], suffix)
}
