package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// promptInput is one prompt of a request, ready to submit.
type promptInput struct {
	tokens []int32
	// text is the prompt as the client wrote it, for echo; for token-id
	// prompts it is the decoded tokens.
	text string
	// rendered is a chat prompt's text as the template rendered it (""
	// for completions: text is the prompt then). The reasoning parser
	// reads its end to know whether the output starts inside thinking.
	rendered string
	// media are the encoded images and audio clips of a chat prompt
	// (scheduler.Request.Media), whose placeholders tokens holds.
	media []scheduler.Media
}

// thinkingText is the prompt's text as the reasoning parser reads it: as
// rendered, or as written (completions).
func (pr *promptInput) thinkingText() string {
	if pr.rendered != "" {
		return pr.rendered
	}
	return pr.text
}

// generation is one HTTP request's work in the engine: one core.Stream per
// prompt, n choices each. It is used by one goroutine,
// the handler's.
type generation struct {
	tok     *tokenizer.Tokenizer
	params  *genParams
	prompts []promptInput
	streams []*core.Stream
	// choices are in wire order: choice i of prompt p is choices[p*n+i].
	choices []*choice
	// promptLPs[p] are the prompt logprobs of prompt p (nil until they
	// arrived); promptLPKnown[p] is set once they can no longer arrive
	// later (they come with choice 0's first output).
	promptLPs     [][]engine.Logprobs
	promptLPKnown []bool
	open          int // choices not done
	// reasoning[p] is set when prompt p's request counts its thinking
	// section (the model has a reasoning parser).
	reasoning []bool
	// kvParams, for a prefill whose KV a remote decode pulls, returns the
	// response's kv_transfer_params once the generation ended.
	kvParams func(context.Context) (map[string]any, error)
	// tools is the tool plan split's answers follow (nil for none).
	tools *frontend.ToolPlan
}

// choiceDelta pairs a choice with what one batch added to it.
type choiceDelta struct {
	c *choice
	d delta
}

// generationRoute is a chat or completion request prepared for its model
// (chatRoute, completionRoute; chatRun.route for every chat-family API)
// and what its route writes of the answer; start submits it, and
// serveGeneration does the rest for chat and completions, once for both.
type generationRoute struct {
	m       Model
	p       *genParams
	prompts []promptInput
	// param names prompt i on the wire, for capacity errors.
	param func(int) string
	// parser and tp split the answer as the chat-shaped APIs do
	// (generation.split); "" and nil for completions' raw text.
	parser string
	tp     *frontend.ToolPlan
	// stream writes the answer as server-sent events (p.Stream); stream
	// and answer are OpenAI's writers, nil for the other chat-family
	// APIs, which write their own (Run.Start).
	stream func(w http.ResponseWriter, r *http.Request, g *generation, meta respMeta)
	// answer is the whole answer of the collected results.
	answer func(r *http.Request, g *generation, meta respMeta, res []result) any
}

// serveGeneration serves chat or completions: it reads the body, makes
// its route with prepare, starts the generation and streams it, or
// collects it and writes the answer. Every failure before the answer's
// first byte is answered by fail under the response id (prefix and the
// request's id); a stream's own are its error event (endStream).
func (h *handler) serveGeneration(w http.ResponseWriter, r *http.Request, prefix string, prepare func(ctx context.Context, body []byte) (*generationRoute, error)) {
	arrival := h.now()
	id := prefix + h.id(r)
	gr, g, meta, err := h.startRoute(w, r, id, arrival, prepare)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	defer g.close()
	if gr.p.Stream {
		gr.stream(w, r, g, meta)
		return
	}
	res, err := g.collect(r.Context())
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, gr.answer(r, g, meta, res))
	h.logDone(r, meta, g.usage())
}

// startRoute reads the body, makes its route and starts the route's
// generation, split as the route asks. The caller must close the
// generation when err is nil.
func (h *handler) startRoute(w http.ResponseWriter, r *http.Request, id string, arrival time.Time, prepare func(context.Context, []byte) (*generationRoute, error)) (*generationRoute, *generation, respMeta, error) {
	body, err := h.readBody(w, r)
	if err != nil {
		return nil, nil, respMeta{}, err
	}
	gr, err := prepare(r.Context(), body)
	if err != nil {
		return nil, nil, respMeta{}, err
	}
	// Chat and completions take kv_transfer_params (the other chat-family
	// APIs do not: Run.Start).
	gr.p.transfer = h.transfer
	g, err := gr.start(r.Context(), id, arrival)
	if err != nil {
		return nil, nil, respMeta{}, err
	}
	return gr, g, respMeta{id: id, created: arrival.Unix(), model: gr.m.Name(), user: gr.p.User, arrival: arrival}, nil
}

// start submits the route's prompts as request id, arrived at arrival,
// and splits their answers as the route asks. The caller must close the
// generation when err is nil.
func (gr *generationRoute) start(ctx context.Context, id string, arrival time.Time) (*generation, error) {
	g, err := submit(ctx, gr.m, gr.p, gr.prompts, id, arrival, gr.param)
	if err != nil {
		return nil, err
	}
	if err := g.split(gr.parser, gr.tp); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// submit turns the prompts into scheduler requests and submits them, all
// or none. A request's defaults are set once, by frontend.Submission:
// arrival, the deadline (the sooner of the client's context and the
// model's request timeout) and the generation cap. promptParam names
// prompt i on the wire, for capacity errors. The caller must call close
// when done with the generation.
func submit(ctx context.Context, m Model, p *genParams, prompts []promptInput, id string, arrival time.Time, promptParam func(int) string) (*generation, error) {
	n := p.Base.N
	g := &generation{
		tok:           m.Tokenizer(),
		params:        p,
		prompts:       prompts,
		promptLPs:     make([][]engine.Logprobs, len(prompts)),
		promptLPKnown: make([]bool, len(prompts)),
		open:          len(prompts) * n,
	}
	sub := frontend.Submission{
		Base: p.Base, ID: id, Arrival: arrival, Deadline: frontend.Deadline(ctx, arrival, m.RequestTimeout()),
		MaxTokens: p.MaxTokens, MaxTokensSet: p.MaxTokensSet, MaxModelLen: m.MaxModelLen(),
	}
	inputs := make([]frontend.Input, len(prompts))
	for i := range prompts {
		th, err := p.ThinkingFor(m, prompts[i].thinkingText())
		if err != nil {
			return nil, err
		}
		g.reasoning = append(g.reasoning, th != nil)
		inputs[i] = frontend.Input{Tokens: prompts[i].tokens, Media: prompts[i].media, Thinking: th}
	}
	streams, err := g.submitTo(ctx, m, p, sub.Requests(inputs))
	if err != nil {
		return nil, p.RequestError(err, promptParam)
	}
	g.streams = streams
	for i := range prompts {
		for j := range n {
			g.choices = append(g.choices, newChoice(g.tok, i*n+j, j, p))
		}
	}
	return g, nil
}

// submitTo submits the requests: to the model, or through the KV transfer
// for kv_transfer_params.
func (g *generation) submitTo(ctx context.Context, m Model, p *genParams, reqs []*scheduler.Request) ([]*core.Stream, error) {
	kv := p.wire.KVTransferParams
	if !kv.active() {
		return m.Submit(ctx, reqs)
	}
	if nt, ok := m.(interface{ NoKVTransfer() string }); ok && p.transfer == nil {
		return nil, invalid("kv_transfer_params", "%s", nt.NoKVTransfer())
	}
	if p.transfer == nil {
		return nil, invalid("kv_transfer_params", "This server does not transfer KV (it serves several models, or has no gRPC port).")
	}
	if len(reqs) != 1 {
		return nil, invalid("kv_transfer_params", "kv_transfer_params needs exactly one prompt.")
	}
	if err := kv.check(p.Stream, p.Base.N); err != nil {
		return nil, err
	}
	var (
		st  *core.Stream
		err error
	)
	if kv.DoRemoteDecode {
		st, g.kvParams, err = p.transfer.SubmitPrefill(ctx, m.Name(), reqs[0])
	} else {
		st, err = p.transfer.SubmitRemote(ctx, m.Name(), reqs[0], kv.addr(), *kv.TransferID)
	}
	if err != nil {
		return nil, err
	}
	return []*core.Stream{st}, nil
}

// transferParams returns the response's kv_transfer_params of a prefill
// for a remote decode (nil otherwise, or when its KV could not be kept:
// the router's decode then computes the prompt itself).
func (g *generation) transferParams(ctx context.Context, log func(error)) map[string]any {
	if g.kvParams == nil {
		return nil
	}
	params, err := g.kvParams(ctx)
	if err != nil {
		log(err)
		return nil
	}
	return params
}

// close cancels every stream that still has running choices: the client
// went away, a stop string ended a choice early, or the request failed.
func (g *generation) close() {
	n := g.params.Base.N
	for p, s := range g.streams {
		for _, c := range g.choices[p*n : (p+1)*n] {
			if !c.final {
				s.Cancel()
				break
			}
		}
	}
}

// apply applies a batch of outputs of prompt p. It returns one delta per
// choice that changed, in order of first appearance, and the first error
// that ended a choice (deltas before it are valid and should be sent).
func (g *generation) apply(p int, outs []scheduler.Output) ([]choiceDelta, error) {
	n := g.params.Base.N
	var (
		ds       []choiceDelta
		firstErr error
	)
	for k := range outs {
		out := &outs[k]
		if out.Choice < 0 || out.Choice >= n {
			return ds, fmt.Errorf("%w: output for choice %d of a request with n=%d", scheduler.ErrEngine, out.Choice, n)
		}
		if out.PromptLogprobs != nil {
			g.promptLPs[p] = out.PromptLogprobs
			g.promptLPKnown[p] = true
		}
		if out.Choice == 0 {
			g.promptLPKnown[p] = true
		}
		c := g.choices[p*n+out.Choice]
		if c.done {
			var discard delta
			_ = c.add(out, &discard) // notes the final output; adds nothing
			continue
		}
		i := len(ds) - 1
		for i >= 0 && ds[i].c != c {
			i--
		}
		if i < 0 {
			ds = append(ds, choiceDelta{c: c})
			i = len(ds) - 1
		}
		d := &ds[i].d
		err := c.add(out, d)
		if c.done {
			g.open--
		}
		if d.stopped {
			d.stopped = false
			g.streams[p].StopChoice(c.sched)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return ds, firstErr
}

// receive hands every batch of outputs to fn until every choice is done,
// fn fails, or ctx ends. Prompts' streams are read concurrently, so a slow
// prompt does not hold back the others' chunks.
func (g *generation) receive(ctx context.Context, fn func(p int, outs []scheduler.Output) error) error {
	if g.open == 0 {
		return nil
	}
	return core.Receive(ctx, g.streams, func(p int, outs []scheduler.Output, err error) (bool, error) {
		if err != nil {
			return false, g.recvError(p, err)
		}
		if err := fn(p, outs); err != nil {
			return false, err
		}
		return g.open == 0, nil
	})
}

// recvError interprets an error from prompt p's Stream.Recv. io.EOF means
// the stream ended, which is fine once all its choices are done; anything
// else (the context ended) is returned.
func (g *generation) recvError(p int, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	n := g.params.Base.N
	for _, c := range g.choices[p*n : (p+1)*n] {
		if !c.done {
			return fmt.Errorf("%w: stream %s ended before choice %d finished", scheduler.ErrEngine, g.streams[p].ID(), c.sched)
		}
	}
	return nil
}

// usage is the request's token count: the prompts once each (not once per
// choice, as in vLLM), the tokens of every choice up to its end (see
// choice.tokens), and the prefix-cache hits the scheduler reported.
func (g *generation) usage() Usage {
	var u Usage
	for i := range g.prompts {
		u.PromptTokens += len(g.prompts[i].tokens)
	}
	for _, c := range g.choices {
		u.CompletionTokens += c.tokens
	}
	reasoning := false
	for i, s := range g.streams {
		su := s.Usage()
		u.PromptTokensDetails.CachedTokens += su.CachedTokens
		if g.reasoning[i] {
			reasoning = true
			u.addReasoning(su.ReasoningTokens)
		}
	}
	if reasoning && u.CompletionTokensDetails == nil {
		u.addReasoning(0)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// split makes every choice answer as the chat-shaped APIs do: the
// thinking of a model with the reasoning parser parser split from the
// answer (delta.reasoning, result.reasoning; parser "" for none), and the
// tool calls of tp split from the rest (delta.calls, choice.out.ToolCalls;
// tp nil for none). Completions keep the raw text. It must be called
// before the first output is applied.
func (g *generation) split(parser string, tp *frontend.ToolPlan) error {
	g.tools = tp
	if parser == "" && !tp.SplitsToolCalls() {
		return nil
	}
	n := g.params.Base.N
	for _, c := range g.choices {
		if err := c.split(parser, g.prompts[c.index/n].thinkingText(), tp); err != nil {
			return err
		}
	}
	return nil
}

// result is a choice's complete answer for a non-streaming response.
type result struct {
	// text is the answer; reasoning the thinking split from it.
	text, reasoning strings.Builder
	lps             []tokenLogprob
	finish          string
}

// collect runs the generation to the end and returns every choice's answer.
func (g *generation) collect(ctx context.Context) ([]result, error) {
	res := make([]result, len(g.choices))
	err := g.receive(ctx, func(p int, outs []scheduler.Output) error {
		ds, err := g.apply(p, outs)
		for _, cd := range ds {
			r := &res[cd.c.index]
			r.text.WriteString(cd.d.text)
			r.reasoning.WriteString(cd.d.reasoning)
			r.lps = append(r.lps, cd.d.lps...)
			if cd.d.finish != "" {
				r.finish = cd.d.finish
			}
		}
		return err
	})
	return res, err
}
