package openai

import (
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// choice is one choice of a request on the wire: frontend.Output (the
// output processor every protocol shares: detokenization, stop strings,
// stop tokens, logprobs, the finish reason and the token count usage
// reports) with the choice's place in the request and what the OpenAI
// renderers remember of it.
type choice struct {
	index int // index on the wire: prompt*n + i
	sched int // index inside the prompt's scheduler.Stream
	out   *frontend.Output
	cfg   *frontend.OutputConfig
	// buf is reused for the deltas of one output.
	buf []frontend.Delta

	// tokens, final and done mirror out's Tokens, Final and Done after
	// each add.
	tokens      int
	final, done bool
	// stopString is the stop string that ended the choice, if one did
	// (the Messages API reports it as stop_sequence).
	stopString string
	// echoed is set once the echoed prompt was sent (completions).
	echoed bool
}

// delta is what one or more outputs added to a choice.
type delta struct {
	// text is the answer's text; reasoning the thinking split from it,
	// when the generation splits it (generation.splitReasoning).
	text, reasoning string
	// calls are the tool-call pieces split from the answer, merged per
	// call.
	calls []frontend.ToolCallDelta
	// lps has one entry per token that became part of the answer, when
	// logprobs were asked for.
	lps []tokenLogprob
	// finish is "stop" or "length" on the choice's last delta.
	finish string
	// stopped is set when a stop string ended the choice here; the caller
	// must call StopChoice.
	stopped bool
}

// tokenLogprob is one generated token's logprob entry, with the character
// offset of its text within the choice's text.
type tokenLogprob struct {
	lp     engine.Logprobs
	offset int
}

func (d *delta) empty() bool {
	return d.text == "" && d.reasoning == "" && len(d.calls) == 0 && len(d.lps) == 0 && d.finish == ""
}

func newChoice(tok *tokenizer.Tokenizer, index, sched int, p *genParams) *choice {
	cfg := &frontend.OutputConfig{
		Tokenizer:   tok,
		KeepSpecial: p.KeepSpecial,
		Stops:       p.Stops,
		StopTokens:  p.Base.StopTokens,
		MinTokens:   p.Base.MinTokens,
		Logprobs:    p.Logprobs,
		TopLogprobs: p.TopLogprobs,
	}
	out, _ := frontend.NewOutput(cfg) // fails only for an unknown reasoning parser; none is set
	return &choice{index: index, sched: sched, out: out, cfg: cfg}
}

// split makes the choice split the thinking of a model with the reasoning
// parser parser from its answer (prompt is the text the model saw, whose
// end says whether the answer starts inside thinking), and the tool calls
// of tp from the rest. It must be called before the choice's first output.
func (c *choice) split(parser, prompt string, tp *frontend.ToolPlan) error {
	cfg := *c.cfg
	cfg.Reasoning, cfg.Prompt, cfg.Tools = parser, prompt, tp
	out, err := frontend.NewOutput(&cfg)
	if err != nil {
		return err
	}
	c.cfg, c.out = &cfg, out
	return nil
}

// add applies out to the choice and appends what it produced to d. A non-nil
// error means the server ended the choice (deadline, engine failure).
func (c *choice) add(out *scheduler.Output, d *delta) error {
	ds, stopped, err := c.out.Add(out, c.buf[:0])
	c.buf = ds
	for i := range ds {
		x := &ds[i]
		d.text += x.Text
		d.reasoning += x.Reasoning
		d.calls = append(d.calls, x.ToolCalls...)
		// The stop token counts as generated but is not text, and has no
		// logprob entry.
		if x.HasLogprobs && !x.StopToken {
			d.lps = append(d.lps, tokenLogprob{lp: x.Logprobs, offset: x.Offset})
		}
		if x.Finish != frontend.FinishNone {
			d.finish = finishName(x.Finish)
		}
	}
	if len(d.calls) > 1 {
		d.calls = frontend.MergeToolCallDeltas(d.calls)
	}
	d.stopped = d.stopped || stopped
	c.tokens, c.final, c.done = c.out.Tokens(), c.out.Final(), c.out.Done()
	c.stopString = c.out.StopString()
	return err
}

// finishName is a finish reason on the OpenAI wire: a stop string is a
// "stop", as a stop token is.
func finishName(f frontend.Finish) string {
	switch f {
	case frontend.FinishLength:
		return "length"
	case frontend.FinishNone:
		return ""
	}
	return "stop"
}

// cutTop keeps the k most likely alternatives of l.
func cutTop(l engine.Logprobs, k int) engine.Logprobs {
	if len(l.Top) > k {
		l.Top = l.Top[:k]
	}
	return l
}
