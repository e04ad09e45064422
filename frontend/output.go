package frontend

import (
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Finish says why a choice ended, in the frontend's words; each protocol
// names it on its wire once (OpenAI "stop"/"length", V2
// "eos_token"/"length"/"stop_sequence").
type Finish int

const (
	// FinishNone: the choice has not ended.
	FinishNone Finish = iota
	// FinishStop: the model generated a stop token (or the scheduler
	// stopped the choice for another reason it calls a stop).
	FinishStop
	// FinishLength: the generation cap or the context length was reached.
	FinishLength
	// FinishStopString: a stop string ended the answer (Output.StopString
	// names it); the text ends before it.
	FinishStopString
)

// ErrAborted ends a choice that the scheduler aborted without a reason.
var ErrAborted = errors.New("generation aborted")

// OutputConfig is how one choice's tokens become an answer. The slices in
// it are read, never written.
type OutputConfig struct {
	// Tokenizer decodes the tokens.
	Tokenizer *tokenizer.Tokenizer
	// KeepSpecial shows control tokens as text (OpenAI's
	// skip_special_tokens false); they are dropped otherwise.
	KeepSpecial bool
	// Stops are the stop strings; the answer ends before the first one.
	Stops []string
	// StopTokens, sorted, are the tokens that end the answer; the one that
	// ended it counts as generated but is not text.
	StopTokens []int32
	// MinTokens is how many tokens are generated before stop strings are
	// looked for, as in vLLM.
	MinTokens int
	// Logprobs asks for each token's logprob (Delta.Logprobs); TopLogprobs
	// is how many alternatives are kept per token (the engine may list
	// more, for prompt logprobs).
	Logprobs    bool
	TopLogprobs int
	// Reasoning is the model's reasoning parser (one of
	// tokenizer.ReasoningParsers), "" for none: with one, the answer is
	// split into Delta.Reasoning and Delta.Text, the thinking tags dropped.
	// Prompt is the prompt's text as the model saw it (a chat prompt as the
	// template rendered it), whose end says whether the output starts
	// inside thinking.
	Reasoning string
	Prompt    string
	// Tools is the request's tool handling (nil: none): with a plan that
	// splits tool calls (ToolPlan.SplitsToolCalls), the answer's calls are
	// taken out of Delta.Text into Delta.ToolCalls.
	Tools *ToolPlan
}

// Delta is what one generated token added to a choice; the choice's last
// delta has Finish set and may carry no token (text held back until the
// end: an incomplete character, a possible stop string or thinking tag).
type Delta struct {
	// Token is the generated token when HasToken.
	Token    int32
	HasToken bool
	// StopToken is set when Token is the stop token that ended the answer:
	// it counts as generated but is not text.
	StopToken bool
	// Text is the answer text the delta settled (without the reasoning when
	// the choice has a reasoning parser).
	Text string
	// Reasoning is the reasoning text it settled (reasoning parser only).
	Reasoning string
	// ToolCalls are the pieces of tool calls it settled (OutputConfig.Tools
	// only).
	ToolCalls []ToolCallDelta
	// Logprobs is the token's logprob with at most TopLogprobs
	// alternatives, when HasLogprobs (asked for and known). It is a value,
	// not a pointer, so that a token costs no allocation.
	Logprobs    engine.Logprobs
	HasLogprobs bool
	// Offset is the number of characters the choice's decoded text had
	// before this token's (OpenAI's text_offset).
	Offset int
	// Finish is set on the choice's last delta.
	Finish Finish
}

// Output turns one choice's scheduler outputs into deltas: incremental
// detokenization that never splits a character, stop strings held back
// until they can no longer match, the stop token dropped from the text,
// reasoning split from the answer, logprobs, the finish reason and the
// count of tokens that usage reports. Every protocol uses it, for
// streaming and non-streaming answers alike. An Output is used by one
// goroutine.
type Output struct {
	cfg       *OutputConfig
	dec       *tokenizer.Decoder
	stops     *tokenizer.StopMatcher
	reasoning *tokenizer.ReasoningParser
	tools     *toolSplitter

	tokens     int // generated tokens up to the end of the visible answer
	runes      int // characters decoded so far
	cumLogprob float64
	final      bool // the scheduler sent the last output
	done       bool // the answer ended for the client
	finish     Finish
	stopString string
}

// NewOutput returns the processor of one choice. cfg must outlive it. A
// reasoning parser name that is not known is an error.
func NewOutput(cfg *OutputConfig) (*Output, error) {
	c := &Output{cfg: cfg, stops: tokenizer.NewStopMatcher(cfg.Stops)}
	if cfg.KeepSpecial {
		c.dec = cfg.Tokenizer.NewSpecialDecoder()
	} else {
		c.dec = cfg.Tokenizer.NewDecoder()
	}
	c.tools = newToolSplitter(cfg.Tools)
	if cfg.Reasoning != "" {
		var err error
		if c.reasoning, err = tokenizer.NewReasoningParser(cfg.Reasoning, cfg.Prompt); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Tokens is the number of generated tokens up to the end of the answer: a
// stop token counts, tokens after a stop string do not (a client sees the
// answer end at the stop string).
func (c *Output) Tokens() int { return c.tokens }

// CumLogprob is the sum of the logprobs of the tokens so far (0 unless
// logprobs were asked for).
func (c *Output) CumLogprob() float64 { return c.cumLogprob }

// Final reports whether the scheduler sent the choice's last output;
// until then the caller must cancel or stop its sequence when it gives up.
func (c *Output) Final() bool { return c.final }

// Done reports whether the answer ended for the client; later outputs
// are discarded.
func (c *Output) Done() bool { return c.done }

// Finish is why the answer ended (FinishNone while it runs).
func (c *Output) Finish() Finish { return c.finish }

// StopString is the stop string that ended the answer, if one did.
func (c *Output) StopString() string { return c.stopString }

// ToolCalls are the tool calls the answer made so far (their arguments
// complete once the answer ended).
func (c *Output) ToolCalls() []tokenizer.ToolCall {
	if c.tools == nil {
		return nil
	}
	return c.tools.calls
}

// Add applies out to the choice and appends its deltas, one per token, to
// ds. stopped reports that a stop string ended the answer before the
// scheduler did: the caller must stop the choice's sequence
// (core.Stream.StopChoice). A non-nil error means the server ended the
// choice (deadline, engine failure); it wraps out.Err, or is ErrAborted.
func (c *Output) Add(out *scheduler.Output, ds []Delta) (_ []Delta, stopped bool, err error) {
	if out.Finish != scheduler.FinishNone {
		c.final = true
	}
	if c.done {
		return ds, false, nil
	}
	start, last := len(ds), len(out.Tokens)-1
	for j, t := range out.Tokens {
		c.tokens++
		ds = append(ds, Delta{Token: t, HasToken: true, Offset: c.runes})
		d := &ds[len(ds)-1] // filled in place: a Delta is not small
		if c.cfg.Logprobs && j < len(out.Logprobs) {
			lp := out.Logprobs[j]
			if len(lp.Top) > c.cfg.TopLogprobs {
				lp.Top = lp.Top[:c.cfg.TopLogprobs]
			}
			d.Logprobs, d.HasLogprobs = lp, true
			c.cumLogprob += float64(lp.Chosen.Logprob)
		}
		if j == last && out.Finish == scheduler.FinishStop {
			_, d.StopToken = slices.BinarySearch(c.cfg.StopTokens, t)
		}
		if !d.StopToken {
			piece := c.dec.Add(t)
			c.runes += utf8.RuneCountInString(piece)
			if c.push(piece, d) {
				return ds, !c.final, nil
			}
		}
	}
	switch out.Finish {
	case scheduler.FinishNone:
		return ds, false, nil
	case scheduler.FinishStop, scheduler.FinishLength:
		if len(ds) == start {
			ds = append(ds, Delta{Offset: c.runes})
		}
		d := &ds[len(ds)-1]
		piece := c.dec.Flush()
		c.runes += utf8.RuneCountInString(piece)
		if c.push(piece, d) {
			return ds, false, nil
		}
		c.emit(c.stops.Flush(), d)
		f := FinishLength
		if out.Finish == scheduler.FinishStop {
			f = FinishStop
		}
		c.end(f, d)
		return ds, false, nil
	default: // FinishAbort
		c.done = true
		if out.Err != nil {
			return ds, false, out.Err
		}
		return ds, false, ErrAborted
	}
}

// push feeds decoded text through the stop matcher into d and reports
// whether a stop string ended the answer. The first MinTokens tokens are
// not checked for stop strings, as in vLLM.
func (c *Output) push(piece string, d *Delta) bool {
	if piece == "" {
		return false
	}
	if c.tokens <= c.cfg.MinTokens {
		c.emit(piece, d)
		return false
	}
	text, matched, stopped := c.stops.Push(piece)
	c.emit(text, d)
	if stopped {
		c.stopString = matched
		c.end(FinishStopString, d)
	}
	return stopped
}

// emit adds settled answer text to d: the reasoning split from it, then
// tool calls split from the rest.
func (c *Output) emit(text string, d *Delta) {
	if c.reasoning != nil {
		var r string
		r, text = c.reasoning.Push(text)
		d.Reasoning += r
	}
	c.content(text, d)
}

// content adds answer text, the reasoning taken out, to d.
func (c *Output) content(text string, d *Delta) {
	if c.tools == nil {
		d.Text += text
		return
	}
	t, calls := c.tools.push(text)
	d.Text += t
	d.ToolCalls = append(d.ToolCalls, calls...)
}

// end ends the answer in d: what the reasoning and tool-call splitters
// held back is released, and the auto mode's calls are found.
func (c *Output) end(f Finish, d *Delta) {
	c.done, c.finish, d.Finish = true, f, f
	text := ""
	if c.reasoning != nil {
		var r string
		r, text = c.reasoning.Flush()
		d.Reasoning += r
	}
	if c.tools == nil {
		d.Text += text
		return
	}
	t, calls := c.tools.push(text)
	t2, calls2 := c.tools.flush()
	d.Text += t + t2
	d.ToolCalls = append(append(d.ToolCalls, calls...), calls2...)
}
