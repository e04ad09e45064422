package openai

import (
	"context"
	"net/http"
	"unicode/utf8"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// completions serves POST /v1/completions.
func (h *handler) completions(w http.ResponseWriter, r *http.Request) {
	h.serveGeneration(w, r, "cmpl-", h.completionRoute)
}

// completionRoute is POST /v1/completions's route of a body
// (serveGeneration): its prompts, answered as raw text.
func (h *handler) completionRoute(ctx context.Context, body []byte) (*generationRoute, error) {
	req, opts, copts, err := decodeCompletion(body)
	if err != nil {
		return nil, err
	}
	m, err := h.model(ctx, req.Model)
	if err != nil {
		return nil, err
	}
	p, prompts, param, err := h.prepareCompletion(m, req, opts, copts)
	if err != nil {
		return nil, err
	}
	return &generationRoute{m: m, p: p, prompts: prompts, param: param, stream: h.streamCompletion, answer: h.completionAnswer}, nil
}

// completionAnswer is the whole answer of a completion request that is
// not streamed (a completion).
func (h *handler) completionAnswer(r *http.Request, g *generation, meta respMeta, res []result) any {
	p := g.params
	resp := textCompletion(meta, make([]completionChoice, len(res)), usageOf(g.usage()))
	resp.KVTransferParams = g.transferParams(r.Context(), h.transferFailed(r))
	for i := range res {
		c := g.choices[i]
		d := delta{text: res[i].text.String(), lps: res[i].lps, finish: res[i].finish}
		resp.Choices[i] = g.completionChoice(c, &d)
		if k := p.PromptLogprobs; k >= 0 {
			pi := i / p.Base.N
			resp.Choices[i].PromptLogprobs = promptLogprobsList(tokenNames{g.tok, p.tokensAsIDs}, g.prompts[pi].tokens, g.promptLPs[pi], k)
		}
	}
	return resp
}

// prepareCompletion validates a completion request for model m and
// tokenizes its prompts (frontend.RenderRaw). It also returns the wire
// name of prompt i.
func (h *handler) prepareCompletion(m Model, req *frontend.Request, o *wireOptions, c *completionOptions) (*genParams, []promptInput, func(int) string, error) {
	rp := req.Prompt
	if rp == nil {
		return nil, nil, nil, invalid("prompt", "prompt is required.")
	}
	if len(rp.Texts) == 0 && len(rp.Tokens) == 0 {
		return nil, nil, nil, invalid("prompt", "prompt must not be empty.")
	}
	tok := m.Tokenizer()
	nVocab := tok.Vocab().NumTokens()
	p, err := validateCommon(req, o, nVocab, tok.StopTokens(), h.seed())
	if err != nil {
		return nil, nil, nil, err
	}
	p.TopLogprobsParam = "logprobs"
	if c.logprobs != nil {
		if *c.logprobs < 0 || *c.logprobs > maxTopLogprobs {
			return nil, nil, nil, invalid("logprobs", "logprobs must be between 0 and %d, got %d.", maxTopLogprobs, *c.logprobs)
		}
		p.SetLogprobs(true, *c.logprobs)
	}
	p.echo = c.echo
	if c.echo && p.Logprobs {
		// Echo with logprobs lists the prompt's tokens too.
		p.Base.PromptLogprobs = p.TopLogprobs
	}
	maxLen := m.MaxModelLen()
	p.ThinkingBudget = req.ThinkingBudget
	if err := p.ApplyExtras(&req.Extensions, tok, maxLen); err != nil {
		return nil, nil, nil, err
	}
	if err := p.Finish(nVocab); err != nil {
		return nil, nil, nil, err
	}
	if err := p.setStructured(req.Constraints, m); err != nil {
		return nil, nil, nil, err
	}
	inputs, err := frontend.RenderRaw(tok, rp, req.Suffix, maxLen, p.Truncate, c.echo)
	if err != nil {
		return nil, nil, nil, err
	}
	prompts := make([]promptInput, len(inputs))
	for i, in := range inputs {
		prompts[i] = promptInput{tokens: in.Tokens, text: in.Text}
	}
	return p, prompts, rp.Param, nil
}

// tooMuchText is the error for text longer than any prompt the context
// can hold.
func tooMuchText(param string, n, maxLen, maxBytes int) error {
	return frontend.TooMuchText(param, n, maxLen, maxBytes)
}

// completionChoice formats a choice's text, or a chunk of it. With echo
// (genParams.echo), the choice's first text gets the prompt (and, with
// logprobs, the prompt's logprobs) in front. Offsets in text_offset count
// characters from the start of the choice's text, echoed prompt included.
func (g *generation) completionChoice(c *choice, d *delta) completionChoice {
	echo := g.params.echo
	pi := c.index / g.params.Base.N
	out := completionChoice{Index: c.index, Text: d.text}
	var lb *completionLogprobsBuilder
	if g.params.Logprobs {
		lb = newCompletionLogprobs(tokenNames{g.tok, g.params.tokensAsIDs})
	}
	base := 0
	if echo {
		base = utf8.RuneCountInString(g.prompts[pi].text)
	}
	if echo && !c.echoed {
		c.echoed = true
		out.Text = g.prompts[pi].text + d.text
		if lb != nil {
			lps := make([]engine.Logprobs, len(g.promptLPs[pi]))
			for k, l := range g.promptLPs[pi] {
				lps[k] = cutTop(l, g.params.TopLogprobs)
			}
			lb.addPrompt(g.prompts[pi].tokens, lps)
		}
	}
	if lb != nil {
		lb.addGenerated(d.lps, base)
		out.Logprobs = lb.result()
	}
	if d.finish != "" {
		out.FinishReason = finishOf(d.finish)
	}
	return out
}

// streamCompletion streams a completion answer as server-sent events. With
// echo, a choice's first chunk carries the prompt; with echo and logprobs it
// also carries the prompt's logprobs, which arrive with choice 0's first
// output, so other choices' chunks wait for them.
func (h *handler) streamCompletion(w http.ResponseWriter, r *http.Request, g *generation, meta respMeta) {
	p := g.params
	echo := p.echo
	n := p.Base.N
	sse := StartSSE(w)
	waitForPromptLPs := echo && p.Logprobs
	pending := make([]*delta, len(g.choices))
	send := func(c *choice, d *delta) error {
		if d.empty() && (!echo || c.echoed) {
			return nil
		}
		return sse.event(textCompletion(meta, []completionChoice{g.completionChoice(c, d)}, chunkUsage(g)))
	}
	// flush sends the held deltas of prompt pi's choices.
	flush := func(pi int) error {
		for _, c := range g.choices[pi*n : (pi+1)*n] {
			if d := pending[c.index]; d != nil {
				pending[c.index] = nil
				if err := send(c, d); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := g.receive(r.Context(), func(pi int, outs []scheduler.Output) error {
		ds, err := g.apply(pi, outs)
		for k := range ds {
			c, d := ds[k].c, &ds[k].d
			if pd := pending[c.index]; pd != nil {
				pd.merge(d)
				d = pd
			}
			if waitForPromptLPs && !c.echoed && !g.promptLPKnown[pi] {
				pending[c.index] = d
				continue
			}
			pending[c.index] = nil
			if werr := send(c, d); werr != nil {
				return werr
			}
		}
		if g.promptLPKnown[pi] {
			if werr := flush(pi); werr != nil {
				return werr
			}
		}
		return err
	})
	if err == nil {
		for pi := range g.prompts {
			if err = flush(pi); err != nil {
				break
			}
		}
	}
	h.endStream(r, sse, g, meta, err, func(u Usage) any {
		return textCompletion(meta, []completionChoice{}, usageOf(u))
	})
}

// textCompletion is a completion (or a chunk of one) of these choices.
func textCompletion(meta respMeta, choices []completionChoice, usage usageField) completion {
	return completion{choiceList: choiceList[completionChoice]{
		objectHead: meta.head(objectTextCompletion), Choices: choices, Usage: usage,
	}}
}

// merge appends next to d.
func (d *delta) merge(next *delta) {
	d.text += next.text
	d.lps = append(d.lps, next.lps...)
	if next.finish != "" {
		d.finish = next.finish
	}
}
