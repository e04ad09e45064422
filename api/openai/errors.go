package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
)

// validationError is bad client input: HTTP 400 naming the offending
// request field in param. Every check in this package that rejects a
// request returns one.
type validationError struct {
	// Param is the request field at fault ("max_tokens",
	// "messages[2].content"), or "" when no single field is.
	Param string
	// Message says what is wrong and how to fix it.
	Message string
	// Code is OpenAI's machine-readable code, such as
	// "context_length_exceeded", or "" for none.
	Code string
}

func (e *validationError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

// invalid returns a validationError for param.
func invalid(param, format string, args ...any) *validationError {
	return &validationError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// withPrefix returns err with param prefixed by prefix when err is a
// validationError; other errors are returned unchanged.
func withPrefix(prefix string, err error) error {
	var v *validationError
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
	return &validationError{Param: p, Message: v.Message, Code: v.Code}
}

// modelNotFoundError is a request for a model this server does not serve.
type modelNotFoundError struct{ name string }

func (e *modelNotFoundError) Error() string {
	return fmt.Sprintf("The model `%s` does not exist.", e.name)
}

// apiError is an error as it goes on the wire, with its HTTP status.
type apiError struct {
	status     int
	body       errorObject
	retryAfter int // seconds; 0 means no Retry-After header
}

// errorObject is OpenAI's error object, the value of "error".
type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// errorResponse is OpenAI's error envelope.
type errorResponse struct {
	Error errorObject `json:"error"`
}

// Error types, named after the OpenAI SDK exception for the status, as vLLM
// names them.
const (
	typeBadRequest         = "BadRequestError"
	typeNotFound           = "NotFoundError"
	typeTimeout            = "TimeoutError"
	typeTooLarge           = "RequestEntityTooLargeError"
	typeRateLimit          = "RateLimitError"
	typeInternal           = "InternalServerError"
	typeServiceUnavailable = "ServiceUnavailableError"
)

// toAPIError maps any error a handler meets to its wire form. It is the only
// place that chooses a status code; doc.go has the table. Errors it does not
// know are 500s: bad input must never end up there.
func toAPIError(err error) *apiError {
	var (
		ve  *validationError
		nf  *modelNotFoundError
		rnf *responseNotFoundError
		mb  *http.MaxBytesError
		qf  *scheduler.QueueFullError
		syn *json.SyntaxError
		me  *media.Error
	)
	switch {
	case errors.As(err, &ve):
		return newAPIError(http.StatusBadRequest, typeBadRequest, ve.Message, ve.Param, ve.Code)
	case errors.As(err, &me):
		// The model could not read an item: the client's bytes.
		return newAPIError(http.StatusBadRequest, typeBadRequest, me.Error(), me.Param, "")
	case errors.Is(err, media.ErrNoProjector):
		return newAPIError(http.StatusBadRequest, typeBadRequest,
			"This model reads text only: "+media.ErrNoProjector.Error()+".", "messages", "")
	case errors.As(err, &nf):
		return newAPIError(http.StatusNotFound, typeNotFound, nf.Error(), "model", "model_not_found")
	case errors.As(err, &rnf):
		param := ""
		if rnf.previous {
			param = "previous_response_id"
		}
		return newAPIError(http.StatusNotFound, typeNotFound, rnf.Error(), param, "")
	case errors.As(err, &mb):
		return newAPIError(http.StatusRequestEntityTooLarge, typeTooLarge,
			fmt.Sprintf("The request body is larger than the limit of %d bytes (--max-body-bytes); images and audio count in their base64 form.", mb.Limit), "", "request_too_large")
	case errors.As(err, &syn):
		return newAPIError(http.StatusBadRequest, typeBadRequest,
			fmt.Sprintf("The request body is not valid JSON: %v (at byte %d).", syn, syn.Offset), "", "")
	case errors.Is(err, scheduler.ErrQueueFull):
		e := newAPIError(http.StatusTooManyRequests, typeRateLimit,
			"The server is busy: too many requests are waiting. Please retry later.", "", "rate_limit_exceeded")
		e.retryAfter = 1
		if errors.As(err, &qf) && qf.RetryAfter > 0 {
			e.retryAfter = int(math.Ceil(qf.RetryAfter.Seconds()))
		}
		return e
	case errors.Is(err, scheduler.ErrTooLong):
		return newAPIError(http.StatusBadRequest, typeBadRequest,
			"The prompt does not fit the model's context. Please reduce the length of the prompt.",
			"", "context_length_exceeded")
	case errors.Is(err, scheduler.ErrLimit), errors.Is(err, scheduler.ErrInvalid):
		// Mapped with their field by genParams.requestError; this is the
		// fallback for a path that did not.
		return newAPIError(http.StatusBadRequest, typeBadRequest, err.Error(), "", "")
	case errors.Is(err, engine.ErrInvalidBatch), errors.Is(err, core.ErrCannotEmbed):
		// Inputs are checked before they reach the engine; this is the
		// engine's own refusal of one (an embedding input it cannot take).
		return newAPIError(http.StatusBadRequest, typeBadRequest,
			"The model could not process this input: "+err.Error(), "", "")
	case errors.Is(err, scheduler.ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		return newAPIError(http.StatusRequestTimeout, typeTimeout,
			"The request did not finish before its deadline.", "", "")
	case errors.Is(err, scheduler.ErrNoWorker):
		e := newAPIError(http.StatusServiceUnavailable, typeServiceUnavailable,
			"No healthy worker can take this request: the server's workers are down or starting. Please retry it.", "", "no_healthy_worker")
		e.retryAfter = 1
		return e
	case errors.Is(err, scheduler.ErrClosed):
		return newAPIError(http.StatusServiceUnavailable, typeServiceUnavailable,
			"The server is shutting down: this request was not finished. Please retry it on another replica.", "", "")
	case errors.Is(err, scheduler.ErrEngine):
		return newAPIError(http.StatusInternalServerError, typeInternal,
			"The engine failed while generating this request; other requests are not affected. Please retry it.", "", "")
	default:
		// scheduler.ErrEngine and anything unexpected. The message stays
		// generic: internals go to the log, not to the client.
		return newAPIError(http.StatusInternalServerError, typeInternal,
			"The server had an error while processing your request.", "", "")
	}
}

// maxParam bounds the length of "param": it can name a key the client
// sent, and an error should not echo kilobytes of it.
const maxParam = 200

func newAPIError(status int, typ, msg, param, code string) *apiError {
	e := &apiError{status: status, body: errorObject{Message: msg, Type: typ}}
	if len(param) > maxParam {
		param = strings.ToValidUTF8(param[:maxParam], "") + "…"
	}
	if param != "" {
		e.body.Param = &param
	}
	if code != "" {
		e.body.Code = &code
	}
	return e
}

// writeError writes e as a complete JSON response.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.status, errorResponse{Error: e.body})
}

// writeJSON writes v as the whole response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		// Our own types always marshal; this is a programming error.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"The server failed to encode its response.","type":"InternalServerError","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// isClientGone reports whether err only says that the client went away, in
// which case there is nobody left to answer.
func isClientGone(err error) bool {
	return errors.Is(err, context.Canceled)
}
