package infer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Finish reasons, as the Open Inference Protocol's generate extension
// names them.
const (
	FinishLength       = "length"
	FinishEOS          = "eos_token"
	FinishStopSequence = "stop_sequence"
)

// Token is one generated token, for generate's details.
type Token struct {
	ID      int32   `json:"id"`
	Text    string  `json:"text"`
	Logprob float32 `json:"logprob"`
	Special bool    `json:"special"`
	// TopLogprobs are the most likely tokens at this position, most likely
	// first, when top_logprobs asked for them.
	TopLogprobs []TopToken `json:"top_logprobs,omitempty"`
}

// TopToken is one alternative at a generated token's position.
type TopToken struct {
	ID      int32   `json:"id"`
	Text    string  `json:"text"`
	Logprob float32 `json:"logprob"`
}

// Delta is what one generated token added to prompt Index's answer. The
// last delta of a prompt has Finish set (and may carry no token: text
// held back until the end). With a reasoning parser, Text is the answer
// and Reasoning the thinking, the tags dropped.
type Delta struct {
	Index     int
	Text      string
	Reasoning string
	Token     *Token
	Finish    string
}

// Result is one prompt's complete answer.
type Result struct {
	Text string
	// Reasoning is the thinking of a model with a reasoning parser.
	Reasoning    string
	Finish       string
	Tokens       []Token
	PromptTokens int
	OutputTokens int
	CumLogprob   float64
}

// Generation is one request's work in the engine: one core.Stream per
// prompt. It is used by one goroutine.
type Generation struct {
	params  *GenParams
	prompts []string
	seqs    []*seq
	streams []*core.Stream
	open    int
}

// seq is one prompt's answer: frontend.Output (the output processor every
// protocol shares) with the prompt's index and token count.
type seq struct {
	index        int
	tok          *tokenizer.Tokenizer
	out          *frontend.Output
	buf          []frontend.Delta // reused for one output's deltas
	promptTokens int
}

// Start tokenizes the prompts and submits them, all or none, with the
// request defaults set once here: arrival, the deadline (the sooner of
// ctx's and the model's request timeout). The caller must Close the
// generation.
func Start(ctx context.Context, m LLM, p *GenParams, prompts []string, id string, arrival time.Time) (*Generation, error) {
	tok := m.Tokenizer()
	maxLen := m.MaxModelLen()
	maxBytes := tok.MaxTextBytes(maxLen)
	deadline, _ := ctx.Deadline()
	if t := m.RequestTimeout(); t > 0 && (deadline.IsZero() || arrival.Add(t).Before(deadline)) {
		deadline = arrival.Add(t)
	}
	g := &Generation{params: p, prompts: prompts}
	reqs := make([]*scheduler.Request, len(prompts))
	for i, text := range prompts {
		name := InputText
		if len(prompts) > 1 {
			name = fmt.Sprintf("%s[%d]", InputText, i)
		}
		if text == "" {
			return nil, invalidf("%s must not be empty", name)
		}
		if len(text) > maxBytes {
			return nil, invalidf("%s has %d bytes, more than the model's context of %d tokens can hold; shorten it", name, len(text), maxLen)
		}
		var (
			toks  []int32
			spans []scheduler.Media
			err   error
		)
		if len(p.Images) > 0 {
			if len(prompts) > 1 {
				return nil, invalidf("%s goes with one prompt; %s has %d", InputImage, InputText, len(prompts))
			}
			if text, toks, spans, err = prepareImages(ctx, m, text, p.Images); err != nil {
				return nil, err
			}
		} else if toks, err = tok.Encode(text, true); err != nil {
			return nil, invalidf("%s could not be tokenized: %v", name, err)
		}
		if len(toks) == 0 {
			return nil, invalidf("%s is empty after tokenization", name)
		}
		req := p.base // slices shared read-only
		req.Media = spans
		req.ID = id
		if len(prompts) > 1 {
			req.ID = fmt.Sprintf("%s-%d", id, i)
		}
		req.Prompt = toks
		if p.Reasoning != "" {
			if req.Thinking, err = frontend.Thinking(tok, p.Reasoning, text, p.ThinkingBudget); err != nil {
				return nil, err
			}
		}
		req.Arrival = arrival
		req.Deadline = deadline
		reqs[i] = &req
		out, err := frontend.NewOutput(&frontend.OutputConfig{
			Tokenizer: tok, Stops: p.stops, StopTokens: p.base.StopTokens, MinTokens: p.base.MinTokens,
			Logprobs: p.base.Sampling.Logprobs, TopLogprobs: p.TopLogprobs,
			Reasoning: p.Reasoning, Prompt: text,
		})
		if err != nil {
			return nil, err
		}
		g.seqs = append(g.seqs, &seq{index: i, tok: tok, out: out, promptTokens: len(toks)})
	}
	streams, err := m.Submit(ctx, reqs)
	if err != nil {
		var ie *core.IndexError
		if errors.As(err, &ie) && len(prompts) > 1 {
			return nil, Errorf(AsError(err).Code, "%s[%d]: %s", InputText, ie.Index, AsError(err).Msg)
		}
		return nil, AsError(err)
	}
	g.streams = streams
	g.open = len(prompts)
	return g, nil
}

// Close cancels the streams of prompts still running (the client went
// away, a stop string ended one, or the request failed), which frees
// their sequences within one engine step.
func (g *Generation) Close() {
	for i, s := range g.seqs {
		if !s.out.Final() {
			g.streams[i].Cancel()
		}
	}
}

// CumLogprob is the sum of prompt i's generated tokens' logprobs so far
// (0 unless logprobs were asked for: details or return_cumulative_logprob).
func (g *Generation) CumLogprob(i int) float64 { return g.seqs[i].out.CumLogprob() }

// Usage returns prompt i's token counts.
func (g *Generation) Usage(i int) (prompt, output int) {
	return g.seqs[i].promptTokens, g.seqs[i].out.Tokens()
}

// Run hands every delta to fn, in order per prompt, until every prompt is
// done, fn fails, a prompt fails (an *Error), or ctx ends.
func (g *Generation) Run(ctx context.Context, fn func(Delta) error) error {
	if g.open == 0 {
		return nil
	}
	apply := func(p int, outs []scheduler.Output) error {
		s := g.seqs[p]
		for k := range outs {
			wasDone := s.out.Done()
			ds, stopped, err := s.add(&outs[k], g.params.base.Sampling.Logprobs)
			for _, d := range ds {
				if ferr := fn(d); ferr != nil {
					return ferr
				}
			}
			if s.out.Done() && !wasDone {
				g.open--
			}
			if stopped {
				g.streams[p].StopChoice(0)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	err := core.Receive(ctx, g.streams, func(p int, outs []scheduler.Output, err error) (bool, error) {
		if err != nil {
			return false, g.recvError(p, err)
		}
		if err := apply(p, outs); err != nil {
			return false, err
		}
		return g.open == 0, nil
	})
	if err != nil {
		return AsError(err)
	}
	return nil
}

// recvError interprets an error from a Stream.Recv: io.EOF is fine once
// the prompt is done; anything else ends the request.
func (g *Generation) recvError(p int, err error) error {
	if errors.Is(err, io.EOF) {
		if g.seqs[p].out.Done() {
			return nil
		}
		return AsError(fmt.Errorf("%w: stream %s ended early", scheduler.ErrEngine, g.streams[p].ID()))
	}
	return AsError(err)
}

// Collect runs the generation to the end and returns every prompt's
// answer (with the prompt in front when ExcludeInput is false).
func (g *Generation) Collect(ctx context.Context) ([]Result, error) {
	res := make([]Result, len(g.seqs))
	texts := make([]strings.Builder, len(g.seqs))
	reasoning := make([]strings.Builder, len(g.seqs))
	if !g.params.ExcludeInput {
		for i := range texts {
			texts[i].WriteString(g.prompts[i])
		}
	}
	err := g.Run(ctx, func(d Delta) error {
		texts[d.Index].WriteString(d.Text)
		reasoning[d.Index].WriteString(d.Reasoning)
		if d.Token != nil && g.params.Details {
			res[d.Index].Tokens = append(res[d.Index].Tokens, *d.Token)
		}
		if d.Finish != "" {
			res[d.Index].Finish = d.Finish
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range res {
		res[i].Text = texts[i].String()
		res[i].Reasoning = reasoning[i].String()
		res[i].PromptTokens, res[i].OutputTokens = g.Usage(i)
		res[i].CumLogprob = g.CumLogprob(i)
	}
	return res, nil
}

// add applies one output and returns the deltas it made, one per token
// (with its details when details is set), whether a stop string ended the
// answer (the caller must stop the choice), and the error that ended it on
// the server's side.
func (s *seq) add(out *scheduler.Output, details bool) (ds []Delta, stopped bool, err error) {
	fds, stopped, err := s.out.Add(out, s.buf[:0])
	s.buf = fds
	for i := range fds {
		x := &fds[i]
		d := Delta{Index: s.index, Text: x.Text, Reasoning: x.Reasoning, Finish: finishName(x.Finish)}
		if details && x.HasToken {
			d.Token = &Token{ID: x.Token, Text: s.tok.TokenText(x.Token), Special: s.tok.Vocab().IsControl(x.Token)}
			if x.HasLogprobs {
				d.Token.Logprob = x.Logprobs.Chosen.Logprob
				for _, t := range x.Logprobs.Top {
					d.Token.TopLogprobs = append(d.Token.TopLogprobs, TopToken{ID: t.Token, Text: s.tok.TokenText(t.Token), Logprob: t.Logprob})
				}
			}
		}
		ds = append(ds, d)
	}
	if err != nil {
		return ds, stopped, AsError(err)
	}
	return ds, stopped, nil
}

// finishName is a finish reason as the generate extension names it.
func finishName(f frontend.Finish) string {
	switch f {
	case frontend.FinishStop:
		return FinishEOS
	case frontend.FinishLength:
		return FinishLength
	case frontend.FinishStopString:
		return FinishStopSequence
	}
	return ""
}

// NewRequestID returns a scheduler request id unique among live requests
// (the client's "id" is echoed, never used for this: clients reuse ids).
func NewRequestID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
