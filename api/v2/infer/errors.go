package infer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

// Code is the kind of a V2 error, which each protocol maps to its own
// status in one place: the REST protocols through HTTPStatus, gRPC to a
// status code (api/v2/grpc).
type Code int

// The error kinds.
const (
	// Invalid is bad client input: HTTP 400, INVALID_ARGUMENT.
	Invalid Code = iota + 1
	// NotFound is an unknown model or version: HTTP 404, NOT_FOUND.
	NotFound
	// Unavailable is a model that is not ready or a server shutting down:
	// HTTP 503, UNAVAILABLE.
	Unavailable
	// Exhausted is a full waiting queue: HTTP 429, RESOURCE_EXHAUSTED.
	Exhausted
	// Deadline is a request that did not finish in time: HTTP 504,
	// DEADLINE_EXCEEDED.
	Deadline
	// Canceled is a request whose client went away: nobody reads the
	// answer (gRPC CANCELLED; REST writes nothing).
	Canceled
	// Internal is a server failure: HTTP 500, INTERNAL.
	Internal
)

// httpStatus is each kind's HTTP status, for the REST protocols (V2 and
// KServe V1) alike.
var httpStatus = map[Code]int{
	Invalid:     http.StatusBadRequest,
	NotFound:    http.StatusNotFound,
	Unavailable: http.StatusServiceUnavailable,
	Exhausted:   http.StatusTooManyRequests,
	Deadline:    http.StatusGatewayTimeout,
	Canceled:    499, // nobody reads it
	Internal:    http.StatusInternalServerError,
}

// HTTPStatus is the HTTP status of an error of kind c: 500 for Internal
// and for a kind it does not know.
func (c Code) HTTPStatus() int {
	if s, ok := httpStatus[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is a V2 error: a kind and a message for the client that says what
// to fix. Every error this package returns to a protocol is an *Error
// (through AsError).
type Error struct {
	Code Code
	Msg  string
	// RetryAfter, for Exhausted (and Unavailable when no worker is
	// healthy), hints when to retry.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Msg }

// Errorf returns an *Error of the given kind.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// AsError maps any error to an *Error: the package's own pass through,
// the scheduler's, the engine core's and the context's are given their
// kind and a message for clients; anything else is Internal with a
// generic message (internals go to the log, not to clients).
func AsError(err error) *Error {
	var (
		e  *Error
		re *scheduler.RequestError
		qf *scheduler.QueueFullError
		rg *engine.RangeError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return e
	case errors.As(err, &rg):
		// Mapped with its parameter name by the caller; a fallback.
		return Errorf(Invalid, "sampling parameter %s must be %s", rg.Field, rg.Want)
	case errors.As(err, &qf):
		return &Error{Code: Exhausted, Msg: "the server is busy: too many requests are waiting; retry later", RetryAfter: qf.RetryAfter}
	case errors.Is(err, scheduler.ErrQueueFull):
		return &Error{Code: Exhausted, Msg: "the server is busy: too many requests are waiting; retry later", RetryAfter: time.Second}
	case errors.As(err, &re):
		return requestError(re)
	case errors.Is(err, scheduler.ErrTooLong), errors.Is(err, scheduler.ErrLimit), errors.Is(err, scheduler.ErrInvalid):
		return Errorf(Invalid, "%v", err)
	case errors.Is(err, engine.ErrInvalidBatch), errors.Is(err, core.ErrCannotEmbed):
		return Errorf(Invalid, "the model could not process this input: %v", err)
	case errors.Is(err, scheduler.ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		return Errorf(Deadline, "the request did not finish before its deadline")
	case errors.Is(err, context.Canceled):
		return Errorf(Canceled, "the request was cancelled")
	case errors.Is(err, scheduler.ErrNoWorker):
		return &Error{Code: Unavailable, Msg: "no healthy worker can take this request: the server's workers are down or starting; retry it", RetryAfter: time.Second}
	case errors.Is(err, scheduler.ErrClosed):
		return Errorf(Unavailable, "the server is shutting down: this request was not finished; retry it on another replica")
	case errors.Is(err, scheduler.ErrEngine):
		return Errorf(Internal, "the engine failed while generating this request; other requests are not affected; retry it")
	}
	return Errorf(Internal, "the server had an error while processing the request")
}

// requestError maps the scheduler's capacity checks to V2 parameter names.
func requestError(re *scheduler.RequestError) *Error {
	switch {
	case errors.Is(re, scheduler.ErrTooLong) && re.KVTokens > 0:
		return Errorf(Invalid, "text_input has %d tokens and the server's KV cache holds %d tokens in all, which leaves no room to generate; shorten it, or raise the server's --kv-cache-memory", re.PromptTokens, re.KVTokens)
	case errors.Is(re, scheduler.ErrTooLong) && re.MaxTokens == 0:
		return Errorf(Invalid, "text_input has %d tokens and the model's context holds %d, which leaves no room to generate; shorten it", re.PromptTokens, re.Limit)
	case errors.Is(re, scheduler.ErrTooLong):
		return Errorf(Invalid, "text_input has %d tokens and max_tokens is %d: together they exceed the model's context of %d tokens; lower max_tokens or shorten text_input", re.PromptTokens, re.MaxTokens, re.Limit)
	}
	switch re.Field {
	case scheduler.FieldMaxTokens:
		return Errorf(Invalid, "max_tokens must be at least 1, got %d", re.Value)
	case scheduler.FieldMinTokens:
		return Errorf(Invalid, "min_tokens (%d) must be between 0 and max_tokens (%d)", re.Value, re.Limit)
	case scheduler.FieldRequests:
		return Errorf(Invalid, "the request has %d prompts; this server queues at most %d requests; send fewer", re.Value, re.Limit)
	case scheduler.FieldPrompt:
		return Errorf(Invalid, "text_input must not be empty")
	}
	return Errorf(Invalid, "%v", re)
}
