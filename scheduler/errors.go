package scheduler

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrQueueFull means the waiting queue is at its bound right now; the
	// request may succeed later. The error is a *QueueFullError carrying a
	// retry hint.
	ErrQueueFull = errors.New("scheduler: waiting queue is full")

	// ErrClosed ends requests, and refuses new ones, when the engine core
	// stops (shutdown).
	ErrClosed = errors.New("scheduler: closed")

	// ErrNoWorker refuses, or ends, a request that a head (package
	// head/router) could not place because no healthy worker can
	// take it, after waiting for one: HTTP 503 with Retry-After. Unlike
	// ErrClosed, the server is not shutting down.
	ErrNoWorker = errors.New("scheduler: no healthy worker")

	// ErrDeadline ends a request whose deadline passed.
	ErrDeadline = errors.New("scheduler: request deadline exceeded")

	// ErrEngine ends a sequence the engine failed (its sampler or decode),
	// or every request when the engine core had to be restarted.
	ErrEngine = errors.New("scheduler: engine failure")

	// ErrTooLong means a prompt (with the tokens to generate) cannot fit
	// the model's context. It is always a *RequestError.
	ErrTooLong = errors.New("scheduler: request does not fit the model's context")

	// ErrLimit means a request exceeds a server limit it can never meet
	// (unlike ErrQueueFull, retrying cannot help). It is always a
	// *RequestError.
	ErrLimit = errors.New("scheduler: request exceeds a server limit")

	// ErrInvalid means a request field is out of its domain. It is always a
	// *RequestError.
	ErrInvalid = errors.New("scheduler: invalid request")
)

// Field names a Request field (or, for FieldRequests, the number of
// requests submitted together) in errors. Protocol packages map it to
// their wire names.
type Field string

// The fields a RequestError can name.
const (
	FieldPrompt    Field = "Prompt"
	FieldN         Field = "N"
	FieldMaxTokens Field = "MaxTokens"
	FieldMinTokens Field = "MinTokens"
	FieldRequests  Field = "Requests"
	// FieldThinking: a Thinking without its Start or End marker (Value
	// 0, Limit 1: the shortest marker), or whose Generated is not in
	// [0, len(Prompt)) or is set with N > 1 (Value Generated, Limit
	// len(Prompt)-1).
	FieldThinking Field = "Thinking"
)

// RequestError says why a request can never run and which field to fix.
type RequestError struct {
	Field Field
	// Err is ErrTooLong, ErrLimit or ErrInvalid.
	Err error
	// Value is the offending value and Limit the bound it breaks (for
	// ErrTooLong: the model's context length).
	Value, Limit int
	// PromptTokens and MaxTokens describe the request for ErrTooLong.
	PromptTokens, MaxTokens int
	// KVTokens, when not 0, says that the KV memory, not the model's
	// context, is the bound an ErrTooLong prompt breaks: it holds KVTokens
	// positions for all sequences together (Config.KVCapacityTokens, set
	// by --kv-cache-memory), which is then Limit.
	KVTokens int
}

func (e *RequestError) Error() string {
	switch {
	case errors.Is(e.Err, ErrTooLong) && e.KVTokens > 0:
		return fmt.Sprintf("%v: the prompt has %d tokens and the KV cache holds %d tokens in all, which leaves no room to generate; raise --kv-cache-memory to hold more than %d tokens, or shorten the prompt",
			e.Err, e.PromptTokens, e.KVTokens, e.PromptTokens)
	case errors.Is(e.Err, ErrTooLong) && e.Field == FieldPrompt && e.MaxTokens == 0:
		return fmt.Sprintf("%v: the prompt has %d tokens and the context holds %d, which leaves no room to generate", e.Err, e.PromptTokens, e.Limit)
	case errors.Is(e.Err, ErrTooLong):
		return fmt.Sprintf("%v: %d prompt tokens and %d to generate exceed the context of %d", e.Err, e.PromptTokens, e.MaxTokens, e.Limit)
	default:
		return fmt.Sprintf("%v: %s = %d, the limit is %d", e.Err, e.Field, e.Value, e.Limit)
	}
}

// Unwrap returns Err.
func (e *RequestError) Unwrap() error { return e.Err }

// QueueFullError is ErrQueueFull with a hint for the Retry-After header.
type QueueFullError struct {
	Waiting    int
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("%v (%d waiting); retry after %s", ErrQueueFull, e.Waiting, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }
