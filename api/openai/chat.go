package openai

import (
	"context"
	"net/http"
	"time"

	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// respMeta is what every response object and chunk of a request repeats.
type respMeta struct {
	id      string
	created int64
	model   string
	user    string
	arrival time.Time
}

// head is the start of the request's response objects of type object.
func (m respMeta) head(object string) objectHead {
	return objectHead{ID: m.id, Object: object, Created: m.created, Model: m.model}
}

// chatCompletions serves POST /v1/chat/completions.
func (h *handler) chatCompletions(w http.ResponseWriter, r *http.Request) {
	h.serveGeneration(w, r, "chatcmpl-", h.chatRoute)
}

// chatRoute is POST /v1/chat/completions's route of a body
// (serveGeneration): one prompt, its answer split into reasoning, text and
// tool calls.
func (h *handler) chatRoute(ctx context.Context, body []byte) (*generationRoute, error) {
	req, opts, err := decodeChat(body)
	if err != nil {
		return nil, err
	}
	run, err := h.prepareChat(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	gr := run.route()
	gr.stream, gr.answer = h.streamChat, h.chatAnswer
	return gr, nil
}

// chatAnswer is the whole answer of a chat request that is not streamed
// (a chatCompletion).
func (h *handler) chatAnswer(r *http.Request, g *generation, meta respMeta, res []result) any {
	p := g.params
	resp := chatCompletion{
		objectHead: meta.head(objectChatCompletion),
		Choices:    make([]chatChoice, len(res)),
		Usage:      g.usage(),

		KVTransferParams: g.transferParams(r.Context(), h.transferFailed(r)),
	}
	if k := g.params.PromptLogprobs; k >= 0 {
		resp.PromptLogprobs = promptLogprobsList(tokenNames{g.tok, g.params.tokensAsIDs}, g.prompts[0].tokens, g.promptLPs[0], k)
	}
	for i := range res {
		msg := chatMessageOf(res[i].reasoning.String(), res[i].text.String())
		finish := res[i].finish
		if calls := g.choices[i].out.ToolCalls(); len(calls) > 0 {
			msg.ToolCalls = wireToolCalls(calls)
			if res[i].text.Len() == 0 {
				msg.Content = nil
			}
			finish = toolFinish(finish, len(calls))
		}
		resp.Choices[i] = chatChoice{Index: i, Message: msg, FinishReason: finish}
		if p.Logprobs {
			resp.Choices[i].Logprobs = chatLogprobsOf(tokenNames{g.tok, g.params.tokensAsIDs}, res[i].lps)
		}
	}
	return resp
}

// chatRun is a chat-family request (chat, Responses, Messages) prepared
// for its model: validated, its tool plan decided and its prompt rendered.
type chatRun struct {
	m      Model
	cp     *chatPrompt
	tp     *frontend.ToolPlan
	p      *genParams
	prompt promptInput
}

// route is the run's generation: its one prompt, named by the protocol's
// messages field, and its answer split into reasoning, text and tool
// calls. Its stream and answer are the protocol's (chatRoute sets
// OpenAI's).
func (run *chatRun) route() *generationRoute {
	return &generationRoute{
		m: run.m, p: run.p, prompts: []promptInput{run.prompt}, param: func(int) string { return run.cp.Param },
		parser: frontend.ReasoningParserOf(run.m), tp: run.tp,
	}
}

// prepareChat is the one prepare sequence of the chat family: it finds
// req's model, decides the tool plan, validates the request for the model
// and renders its prompt (with its images and audio, when it has any:
// frontend.Prompt.PrepareMedia), applies the tools and the thinking
// budget. o holds the
// OpenAI-only options (nil for the other protocols). Errors name req's
// fields in its protocol's terms (req.Fields).
func (h *handler) prepareChat(ctx context.Context, req *frontend.Request, o *wireOptions) (*chatRun, error) {
	m, err := h.model(ctx, req.Model)
	if err != nil {
		return nil, err
	}
	cp := chatPromptOf(req)
	tp, err := frontend.NewToolPlan(req, cp.ToolTemplate(m.Tokenizer()))
	if err != nil {
		return nil, err
	}
	p, prompt, err := h.renderRequest(ctx, m, req, o, cp)
	if err != nil {
		return nil, err
	}
	if err := p.SetTools(tp, m, req.Extensions.SkipSpecialTokens != nil, frontend.Name(req.Fields.ToolParameters, "tools[%d].function.parameters")); err != nil {
		return nil, err
	}
	p.SetThinking(req, m)
	return &chatRun{m: m, cp: cp, tp: tp, p: p, prompt: prompt}, nil
}

// renderRequest validates req for model m and renders its prompt.
func (h *handler) renderRequest(ctx context.Context, m Model, req *frontend.Request, o *wireOptions, cp *chatPrompt) (*genParams, promptInput, error) {
	if len(req.Messages) == 0 {
		return nil, promptInput{}, invalid(cp.Param, "%s must contain at least one message.", cp.Param)
	}
	tok := m.Tokenizer()
	nVocab := tok.Vocab().NumTokens()
	p, err := validateCommon(req, o, nVocab, tok.StopTokens(), h.seed())
	if err != nil {
		return nil, promptInput{}, err
	}
	p.TopLogprobsParam = frontend.Name(req.Fields.TopLogprobs, "top_logprobs")
	top := 0
	if req.TopLogprobs != nil {
		if !req.Logprobs {
			return nil, promptInput{}, invalid(p.TopLogprobsParam, "top_logprobs requires logprobs to be true.")
		}
		if *req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogprobs {
			return nil, promptInput{}, invalid(p.TopLogprobsParam, "top_logprobs must be between 0 and %d, got %d.", maxTopLogprobs, *req.TopLogprobs)
		}
		top = *req.TopLogprobs
	}
	p.SetLogprobs(req.Logprobs, top)
	if err := p.ApplyExtras(&req.Extensions, tok, m.MaxModelLen()); err != nil {
		return nil, promptInput{}, err
	}
	if err := p.Finish(nVocab); err != nil {
		return nil, promptInput{}, err
	}
	if err := p.setStructured(req.Constraints, m); err != nil {
		return nil, promptInput{}, err
	}
	// Refuse text no context could hold before rendering and tokenizing
	// it.
	maxLen := m.MaxModelLen()
	maxBytes := tok.MaxTextBytes(maxLen)
	if err := cp.CheckSize(req.Messages, maxLen, maxBytes); err != nil {
		return nil, promptInput{}, err
	}
	if refs := frontend.MediaOf(req.Messages); len(refs) > 0 {
		toks, spans, text, err := cp.PrepareMedia(ctx, &h.media.res, m, p.Params, req.Messages, refs, maxBytes)
		cp.rendered = text
		if err != nil {
			return nil, promptInput{}, err
		}
		return p, promptInput{tokens: toks, rendered: text, media: spans}, nil
	}
	toks, text, err := cp.Render(tok, req.Messages, maxBytes)
	cp.rendered = text
	if err != nil {
		return nil, promptInput{}, err
	}
	return p, promptInput{tokens: p.TruncatePrompt(toks), rendered: cp.rendered}, nil
}

// streamChat streams a chat answer as server-sent events.
func (h *handler) streamChat(w http.ResponseWriter, r *http.Request, g *generation, meta respMeta) {
	p := g.params
	sse := StartSSE(w)
	chunk := func(choices []chatChunkChoice) chatChunk {
		return chatChunk{
			objectHead: meta.head(objectChatCompletionChunk),
			Choices:    choices, Usage: chunkUsage(g),
		}
	}
	// The role comes first, for every choice, before any text.
	for _, c := range g.choices {
		role := chatChunkChoice{Index: c.index, Delta: chatDelta{Role: "assistant", Content: contentOf("")}}
		if err := sse.event(chunk([]chatChunkChoice{role})); err != nil {
			h.endStream(r, sse, g, meta, err, nil)
			return
		}
	}
	// The tool calls are split from the content when the tool plan
	// changes the answer (generation.split).
	tools := g.tools.SplitsToolCalls()
	err := g.receive(r.Context(), func(pi int, outs []scheduler.Output) error {
		ds, err := g.apply(pi, outs)
		for _, cd := range ds {
			d := &cd.d
			if d.empty() {
				continue
			}
			ch := chatChunkChoice{Index: cd.c.index}
			said := setChatDelta(&ch.Delta, d.reasoning, d.text, len(d.lps) > 0)
			finish := d.finish
			if tools {
				ch.Delta.Content = nil
				if d.text != "" {
					ch.Delta.Content = contentOf(d.text)
				}
				if len(d.calls) > 0 {
					ch.Delta.ToolCalls = wireToolDeltas(d.calls)
				}
				said = ch.Delta.Content != nil || ch.Delta.ReasoningContent != nil || len(d.calls) > 0
				if d.finish != "" {
					finish = toolFinish(d.finish, len(cd.c.out.ToolCalls()))
				}
			}
			if p.Logprobs && len(d.lps) > 0 {
				ch.Logprobs = chatLogprobsOf(tokenNames{g.tok, g.params.tokensAsIDs}, d.lps)
				said = true
			}
			if finish != "" {
				ch.FinishReason = finishOf(finish)
			} else if !said {
				continue // all of it held back by the reasoning parser
			}
			if werr := sse.event(chunk([]chatChunkChoice{ch})); werr != nil {
				return werr
			}
		}
		return err
	})
	h.endStream(r, sse, g, meta, err, func(u Usage) any {
		return chatChunk{
			objectHead: meta.head(objectChatCompletionChunk),
			Choices:    []chatChunkChoice{}, Usage: usageOf(u),
		}
	})
}

// chunkUsage is the "usage" of a content chunk: absent by default, null
// with include_usage, the usage so far with continuous_usage_stats.
func chunkUsage(g *generation) usageField {
	switch {
	case g.params.continuousUsage:
		return usageOf(g.usage())
	case g.params.includeUsage:
		return usageNull()
	default:
		return usageField{}
	}
}

// endStream finishes a stream: an error event if the generation failed
// while the client was still there, the usage chunk when asked for, and
// [DONE].
func (h *handler) endStream(r *http.Request, sse *SSE, g *generation, meta respMeta, err error, usageChunk func(Usage) any) {
	if err != nil {
		if isClientGone(err) || sse.err != nil {
			h.log.Debug("client went away", "id", meta.id, "path", r.URL.Path)
			return
		}
		e := toAPIError(err)
		h.logError(r, meta.id, e, err)
		_ = sse.errorEvent(e)
		_ = sse.done()
		return
	}
	u := g.usage()
	if g.params.includeUsage && usageChunk != nil {
		if sse.event(usageChunk(u)) != nil {
			return
		}
	}
	_ = sse.done()
	h.logDone(r, meta, u)
}

// logDone logs a finished request.
func (h *handler) logDone(r *http.Request, meta respMeta, u Usage) {
	h.log.Debug("request done", "id", meta.id, "path", r.URL.Path, "model", meta.model, "user", meta.user,
		"prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens,
		"cached_tokens", u.PromptTokensDetails.CachedTokens, "duration", h.now().Sub(meta.arrival))
}
