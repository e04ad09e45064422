package frontend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
)

// Kind is what went wrong with a request, in the terms every protocol maps
// to its wire once (api/openai toAPIError: an HTTP status and OpenAI's
// error type; Anthropic's Messages rename those).
type Kind int

const (
	// BadRequest is the client's input: Param names the field at fault
	// ("" when no single field is), Code may say more
	// ("context_length_exceeded": too long for the model's context).
	BadRequest Kind = iota
	// NotFound is a model or stored object the server does not have.
	NotFound
	// Overloaded is a server that has no room for the request now
	// (too many waiting); RetryAfter says when to try again.
	Overloaded
	// Unavailable is a server that cannot serve it at all now: no healthy
	// worker, or shutting down.
	Unavailable
	// TimedOut is a request whose deadline passed.
	TimedOut
	// Canceled is a request whose client went away.
	Canceled
	// Internal is the server's fault: the engine failed, or an error
	// nobody expected. Its message stays generic.
	Internal
)

// Error is a request's failure as the frontend classifies it. Every check
// that refuses a request's input returns one of Kind BadRequest (Invalid).
type Error struct {
	Kind Kind
	// Param is the request field at fault ("max_tokens",
	// "messages[2].content"), or "" when no single field is.
	Param string
	// Message says what is wrong and how to fix it.
	Message string
	// Code is a machine-readable code such as "context_length_exceeded"
	// (OpenAI's names), or "" for none.
	Code string
	// RetryAfter is how many seconds a client should wait before trying
	// again (Overloaded, Unavailable), 0 for no advice.
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

// Invalid returns a BadRequest for param.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

// WithPrefix returns err with its param prefixed by prefix when err is an
// *Error ("content[1]" in "messages[0]" is "messages[0].content[1]");
// other errors are returned unchanged.
func WithPrefix(prefix string, err error) error {
	var v *Error
	if !errors.As(err, &v) {
		return err
	}
	p := prefix
	switch {
	case v.Param == "":
	case v.Param[0] == '[':
		p += v.Param
	default:
		p += "." + v.Param
	}
	out := *v
	out.Param = p
	return &out
}

// Truncate cuts s to at most n bytes, for echoing client text in errors.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Classify is the one classification of the errors a request meets below
// the protocols (the scheduler's, the core's, the engine's, media's, the
// context's), with the message a client sees. An *Error is returned as it
// is. Errors nobody expected are Internal, with a generic message: bad
// input must never end up there.
func Classify(err error) *Error {
	var (
		fe *Error
		me *media.Error
		qf *scheduler.QueueFullError
	)
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.As(err, &me):
		// The model could not read an item: the client's bytes.
		return &Error{Param: me.Param, Message: me.Error()}
	case errors.Is(err, media.ErrNoProjector):
		return &Error{Param: "messages", Message: "This model reads text only: " + media.ErrNoProjector.Error() + "."}
	case errors.Is(err, scheduler.ErrQueueFull):
		e := &Error{Kind: Overloaded, Code: "rate_limit_exceeded", RetryAfter: 1,
			Message: "The server is busy: too many requests are waiting. Please retry later."}
		if errors.As(err, &qf) && qf.RetryAfter > 0 {
			e.RetryAfter = int(math.Ceil(qf.RetryAfter.Seconds()))
		}
		return e
	case errors.Is(err, scheduler.ErrTooLong):
		return &Error{Code: "context_length_exceeded",
			Message: "The prompt does not fit the model's context. Please reduce the length of the prompt."}
	case errors.Is(err, scheduler.ErrLimit), errors.Is(err, scheduler.ErrInvalid):
		// Mapped with their field where the request was submitted; this is
		// the fallback for a path that did not.
		return &Error{Message: err.Error()}
	case errors.Is(err, engine.ErrInvalidBatch), errors.Is(err, core.ErrCannotEmbed):
		// Inputs are checked before they reach the engine; this is the
		// engine's own refusal of one (an embedding input it cannot take).
		return &Error{Message: "The model could not process this input: " + err.Error()}
	case errors.Is(err, scheduler.ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: TimedOut, Message: "The request did not finish before its deadline."}
	case errors.Is(err, scheduler.ErrNoWorker):
		return &Error{Kind: Unavailable, Code: "no_healthy_worker", RetryAfter: 1,
			Message: "No healthy worker can take this request: the server's workers are down or starting. Please retry it."}
	case errors.Is(err, scheduler.ErrClosed):
		return &Error{Kind: Unavailable,
			Message: "The server is shutting down: this request was not finished. Please retry it on another replica."}
	case errors.Is(err, scheduler.ErrEngine):
		return &Error{Kind: Internal,
			Message: "The engine failed while generating this request; other requests are not affected. Please retry it."}
	case errors.Is(err, context.Canceled):
		return &Error{Kind: Canceled, Message: "The request was canceled."}
	default:
		// The message stays generic: internals go to the log, not to the
		// client.
		return &Error{Kind: Internal, Message: "The server had an error while processing your request."}
	}
}
