package openai

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// completions serves POST /v1/completions.
func (h *handler) completions(w http.ResponseWriter, r *http.Request) {
	arrival := h.now()
	id := "cmpl-" + h.id(r)
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	req, err := decodeCompletionRequest(body)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	m, err := h.model(r.Context(), req.Model)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	p, prompts, param, err := h.prepareCompletion(m, req)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	echo := req.Echo != nil && *req.Echo
	p.transfer = h.transfer
	g, err := submit(r.Context(), m, p, prompts, id, arrival, param)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	defer g.close()
	meta := respMeta{id: id, created: arrival.Unix(), model: m.Name(), user: p.user, arrival: arrival}
	if p.stream {
		h.streamCompletion(w, r, g, meta, echo)
		return
	}
	res, err := g.collect(r.Context())
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	u := g.usage()
	resp := completion{
		ID:      id,
		Object:  objectTextCompletion,
		Created: meta.created,
		Model:   meta.model,
		Choices: make([]completionChoice, len(res)),
		Usage:   usageOf(u),

		KVTransferParams: g.transferParams(r.Context(), h.transferFailed(r)),
	}
	for i := range res {
		c := g.choices[i]
		d := delta{text: res[i].text.String(), lps: res[i].lps, finish: res[i].finish}
		resp.Choices[i] = g.completionChoice(c, &d, echo)
		if k := p.promptLogprobs; k >= 0 {
			pi := i / p.base.N
			resp.Choices[i].PromptLogprobs = promptLogprobsList(tokenNames{g.tok, p.tokensAsIDs}, g.prompts[pi].tokens, g.promptLPs[pi], k)
		}
	}
	writeJSON(w, http.StatusOK, resp)
	h.logDone(r, meta, u)
}

// prepareCompletion validates a completion request for model m and
// tokenizes its prompts. It also returns the wire name of prompt i.
func (h *handler) prepareCompletion(m Model, req *completionRequest) (*genParams, []promptInput, func(int) string, error) {
	pf := &req.Prompt
	param := func(i int) string {
		if pf.single {
			return "prompt"
		}
		return fmt.Sprintf("prompt[%d]", i)
	}
	if !pf.set {
		return nil, nil, nil, invalid("prompt", "prompt is required.")
	}
	if len(pf.texts) == 0 && len(pf.tokens) == 0 {
		return nil, nil, nil, invalid("prompt", "prompt must not be empty.")
	}
	tok := m.Tokenizer()
	nVocab := tok.Vocab().NumTokens()
	p, err := validateCommon(req.request(), req.options(), nVocab, tok.StopTokens(), h.seed())
	if err != nil {
		return nil, nil, nil, err
	}
	p.topLogprobsParam = "logprobs"
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > maxTopLogprobs {
			return nil, nil, nil, invalid("logprobs", "logprobs must be between 0 and %d, got %d.", maxTopLogprobs, *req.Logprobs)
		}
		p.setLogprobs(true, *req.Logprobs)
	}
	if req.Echo != nil && *req.Echo && p.logprobs {
		// Echo with logprobs lists the prompt's tokens too.
		p.base.PromptLogprobs = p.topLogprobs
	}
	maxLen := m.MaxModelLen()
	p.ThinkingBudget = req.ThinkingTokenBudget
	ext := req.extensions()
	if err := p.applyExtras(&ext, tok, maxLen); err != nil {
		return nil, nil, nil, err
	}
	if err := p.finish(nVocab); err != nil {
		return nil, nil, nil, err
	}
	cs, err := req.constraints()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := p.setStructured(cs, m); err != nil {
		return nil, nil, nil, err
	}
	// Refuse text no context could hold before tokenizing it: tokenizing
	// megabytes costs seconds of CPU. With truncation the text may be
	// longer, within bounds.
	maxBytes := tok.MaxTextBytes(maxLen)
	if p.truncate > 0 {
		maxBytes *= 4
	}
	for i, text := range pf.texts {
		if len(text) > maxBytes {
			return nil, nil, nil, tooMuchText(param(i), len(text), maxLen, maxBytes)
		}
	}
	var fim *fimSuffix
	if req.Suffix != nil {
		if fim, err = newFIM(tok, *req.Suffix, maxBytes); err != nil {
			return nil, nil, nil, err
		}
		if len(pf.tokens) > 0 {
			return nil, nil, nil, invalid("suffix", "suffix needs the prompt as text, not token ids.")
		}
	}
	var prompts []promptInput
	for i, text := range pf.texts {
		if text == "" {
			return nil, nil, nil, invalid(param(i), "A prompt must not be empty.")
		}
		toks, err := tok.Encode(text, fim == nil)
		if err != nil {
			return nil, nil, nil, invalid(param(i), "The prompt could not be tokenized: %v", err)
		}
		if fim != nil {
			toks = fim.wrap(toks)
		}
		if len(toks) == 0 {
			return nil, nil, nil, invalid(param(i), "The prompt is empty after tokenization.")
		}
		in := promptInput{tokens: p.truncatePrompt(toks), text: text}
		if len(in.tokens) < len(toks) {
			in.text = tok.Decode(in.tokens) // echo shows what the model saw
		}
		prompts = append(prompts, in)
	}
	for i, ids := range pf.tokens {
		if len(ids) == 0 {
			return nil, nil, nil, invalid(param(i), "A prompt must not be empty.")
		}
		toks := make([]int32, len(ids))
		for j, id := range ids {
			if id < 0 || id >= int64(nVocab) {
				at := fmt.Sprintf("%s[%d]", param(i), j)
				return nil, nil, nil, invalid(at, "Token id %d is outside the vocabulary [0, %d).", id, nVocab)
			}
			toks[j] = int32(id)
		}
		in := promptInput{tokens: p.truncatePrompt(toks)}
		if req.Echo != nil && *req.Echo {
			in.text = tok.Decode(toks)
		}
		prompts = append(prompts, in)
	}
	return p, prompts, param, nil
}

// tooMuchText is the error for text longer than any prompt the context
// can hold.
func tooMuchText(param string, n, maxLen, maxBytes int) error {
	return frontend.TooMuchText(param, n, maxLen, maxBytes)
}

// completionChoice formats a choice's text, or a chunk of it. When echo is
// set, d is the first text of the choice and gets the prompt (and, with
// logprobs, the prompt's logprobs) in front. Offsets in text_offset count
// characters from the start of the choice's text, echoed prompt included.
func (g *generation) completionChoice(c *choice, d *delta, echo bool) completionChoice {
	pi := c.index / g.params.base.N
	out := completionChoice{Index: c.index, Text: d.text}
	var lb *completionLogprobsBuilder
	if g.params.logprobs {
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
				lps[k] = cutTop(l, g.params.topLogprobs)
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
func (h *handler) streamCompletion(w http.ResponseWriter, r *http.Request, g *generation, meta respMeta, echo bool) {
	p := g.params
	n := p.base.N
	sse := startSSE(w)
	waitForPromptLPs := echo && p.logprobs
	pending := make([]*delta, len(g.choices))
	send := func(c *choice, d *delta) error {
		if d.empty() && (!echo || c.echoed) {
			return nil
		}
		chunk := completion{
			ID: meta.id, Object: objectTextCompletion, Created: meta.created, Model: meta.model,
			Choices: []completionChoice{g.completionChoice(c, d, echo)}, Usage: chunkUsage(g),
		}
		return sse.event(chunk)
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
	h.endStream(r, sse, g, meta, err, func(u usage) any {
		return completion{
			ID: meta.id, Object: objectTextCompletion, Created: meta.created, Model: meta.model,
			Choices: []completionChoice{}, Usage: usageOf(u),
		}
	})
}

// merge appends next to d.
func (d *delta) merge(next *delta) {
	d.text += next.text
	d.lps = append(d.lps, next.lps...)
	if next.finish != "" {
		d.finish = next.finish
	}
}
