package openai

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// The chat path the chat family shares. api/anthropic (Messages) and
// api/responses (Responses) decode their own wire types once, into a
// frontend.Request, and hand it to the Server they hold: Prepare is the
// one prepare sequence (prepareChat: model, tool plan, validation,
// template, media, grammar, limits), Run.Start submits the prompt, and a
// Generation gives the answer as the output processor split it:
// reasoning, text and tool calls. What goes on the wire is theirs.
// ErrorOf is the error mapping they start from (the status and message
// OpenAI's clients get, which Anthropic's table renames).

// Now is the server's clock (Options.Now).
func (s *Server) Now() time.Time { return s.h.now() }

// RequestID is r's id (Options.RequestID), or a random one.
func (s *Server) RequestID(r *http.Request) string { return s.h.id(r) }

// Log is the server's logger (Options.Logger).
func (s *Server) Log() *slog.Logger { return s.h.log }

// ReadBody reads r's body within the size limit (Options.MaxBodyBytes).
func (s *Server) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return s.h.readBody(w, r)
}

// Fail answers a request that failed before any response was written,
// with OpenAI's error envelope (nothing, when the client went away).
func (s *Server) Fail(w http.ResponseWriter, r *http.Request, id string, err error) {
	s.h.fail(w, r, id, err)
}

// LogError logs a failed request: server errors (status >= 500) at Error,
// client errors at Debug.
func (s *Server) LogError(r *http.Request, id string, status int, err error) {
	s.h.logError(r, id, &apiError{status: status}, err)
}

// LogDone logs a finished request of model, started at arrival.
func (s *Server) LogDone(r *http.Request, id, model, user string, arrival time.Time, u Usage) {
	s.h.logDone(r, respMeta{id: id, model: model, user: user, arrival: arrival}, u)
}

// ErrorInfo is an error as OpenAI's wire carries it: the HTTP status and
// the error object's members.
type ErrorInfo struct {
	Status  int
	Message string
	// Param and Code are nil when the error names none.
	Param, Code *string
	// RetryAfter is the Retry-After header's seconds, 0 for none.
	RetryAfter int
}

// ErrorOf maps err to its wire form: the one mapping of this package
// (toAPIError), which the other APIs of the family start from.
func ErrorOf(err error) ErrorInfo {
	e := toAPIError(err)
	return ErrorInfo{Status: e.status, Message: e.body.Message, Param: e.body.Param, Code: e.body.Code, RetryAfter: e.retryAfter}
}

// IsClientGone reports whether err only says that the client went away, in
// which case there is nobody left to answer.
func IsClientGone(err error) bool { return isClientGone(err) }

// ModelNotFound is the error of a request for a model this server does
// not serve: a 404 with code "model_not_found" (api/catalog's GET
// /v1/models/{id}).
func ModelNotFound(name string) error { return &modelNotFoundError{name: name} }

// WriteError writes err as a complete response in OpenAI's error envelope,
// with the status ErrorOf gives it.
func WriteError(w http.ResponseWriter, err error) { writeError(w, toAPIError(err)) }

// WriteJSON writes v, JSON without HTML escaping, as the whole response
// with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// Run is a chat-family request prepared for its model: validated, its
// tool plan decided and its prompt rendered.
type Run struct{ r *chatRun }

// Prepare finds req's model, decides its tool plan, validates it and
// renders its prompt (with its images and audio). Errors name req's
// fields in its protocol's terms (req.Fields).
func (s *Server) Prepare(ctx context.Context, req *frontend.Request) (*Run, error) {
	r, err := s.h.prepareChat(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	return &Run{r: r}, nil
}

// Model is the model the request runs on.
func (r *Run) Model() Model { return r.r.m }

// PromptTokens is the length of the rendered prompt in tokens.
func (r *Run) PromptTokens() int { return len(r.r.prompt.tokens) }

// SetRouteKey gives the request a routing hint (scheduler.Request.RouteKey:
// the Responses API's prompt_cache_key), which a head uses to keep
// requests with the same key on one worker.
func (r *Run) SetRouteKey(key string) { r.r.p.Base.RouteKey = key }

// Stream reports whether the request asked for a streamed answer.
func (r *Run) Stream() bool { return r.r.p.Stream }

// User is the request's end-user id, for the log.
func (r *Run) User() string { return r.r.p.User }

// Start submits the prompt as request id, arrived at arrival, and splits
// its answer into reasoning, text and tool calls. The caller must Close
// the generation.
func (r *Run) Start(ctx context.Context, id string, arrival time.Time) (*Generation, error) {
	g, err := r.r.route().start(ctx, id, arrival)
	if err != nil {
		return nil, err
	}
	return &Generation{g: g}, nil
}

// Generation is a started chat-family request with one choice. It is
// used by one goroutine.
type Generation struct{ g *generation }

// Close cancels the generation if it still runs.
func (g *Generation) Close() { g.g.close() }

// Usage is the request's token count so far.
func (g *Generation) Usage() Usage { return g.g.usage() }

// PromptTokens is the length of the prompt in tokens.
func (g *Generation) PromptTokens() int { return len(g.g.prompts[0].tokens) }

// Answer is a finished choice.
type Answer struct {
	// Reasoning is the thinking split from the answer ("" for none);
	// Text the answer without it and without its tool calls.
	Reasoning, Text string
	// Calls are the tool calls the answer made.
	Calls []tokenizer.ToolCall
	// Finish is "stop" or "length".
	Finish string
	// StopString is the stop string that ended the answer, if one did.
	StopString string
	// Logprobs are the answer's tokens' logprobs when the request asked
	// for them (frontend.Request.Logprobs), else nil.
	Logprobs []TokenLogprob
}

// TokenLogprob is one generated token's logprob with its alternatives, in
// the shape OpenAI's chat and Responses share.
type TokenLogprob = chatTokenLogprob

// logprobsOf formats entries when the request asked for logprobs.
func (g *Generation) logprobsOf(entries []tokenLogprob) []TokenLogprob {
	if !g.g.params.Logprobs {
		return nil
	}
	return chatLogprobsOf(tokenNames{g.g.tok, g.g.params.tokensAsIDs}, entries).Content
}

// Collect runs the generation to its end and returns the answer.
func (g *Generation) Collect(ctx context.Context) (*Answer, error) {
	res, err := g.g.collect(ctx)
	if err != nil {
		return nil, err
	}
	c := g.g.choices[0]
	return &Answer{Reasoning: res[0].reasoning.String(), Text: res[0].text.String(), Calls: c.out.ToolCalls(),
		Finish: res[0].finish, StopString: c.stopString, Logprobs: g.logprobsOf(res[0].lps)}, nil
}

// Delta is what one batch of outputs added to the answer.
type Delta struct {
	Reasoning, Text string
	// Calls are the tool-call pieces, merged per call.
	Calls []frontend.ToolCallDelta
	// Finish is "stop" or "length" on the last delta, "" before.
	Finish string
	// Logprobs are the logprobs of the tokens of Text, when asked for.
	Logprobs []TokenLogprob
	d        *delta
	c        *choice
}

// Empty reports whether the delta adds nothing.
func (d *Delta) Empty() bool { return d.d.empty() }

// ToolCalls are the answer's tool calls so far.
func (d *Delta) ToolCalls() []tokenizer.ToolCall { return d.c.out.ToolCalls() }

// StopString is the stop string that ended the answer, if one did.
func (d *Delta) StopString() string { return d.c.stopString }

// Receive hands every delta to fn until the answer is done, fn fails, or
// ctx ends.
func (g *Generation) Receive(ctx context.Context, fn func(*Delta) error) error {
	return g.g.receive(ctx, func(pi int, outs []scheduler.Output) error {
		ds, err := g.g.apply(pi, outs)
		for i := range ds {
			cd := &ds[i]
			d := &Delta{Reasoning: cd.d.reasoning, Text: cd.d.text, Calls: cd.d.calls, Finish: cd.d.finish, Logprobs: g.logprobsOf(cd.d.lps), d: &cd.d, c: cd.c}
			if werr := fn(d); werr != nil {
				return werr
			}
		}
		return err
	})
}
