package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
)

// validationError is bad client input: HTTP 400 naming the offending
// request field in param (a frontend.Error of kind BadRequest). Every
// check in this package that rejects a request returns one.
type validationError = frontend.Error

// invalid returns a validationError for param.
func invalid(param, format string, args ...any) *validationError {
	return frontend.Invalid(param, format, args...)
}

// withPrefix returns err with param prefixed by prefix when err is a
// validationError; other errors are returned unchanged.
func withPrefix(prefix string, err error) error {
	return frontend.WithPrefix(prefix, err)
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
// place that chooses a status code; doc.go has the table. The errors of
// this protocol's own lookups and body reading are mapped here; every
// other error is classified once by frontend.Classify, whose kinds map to
// statuses below. Errors nobody expected are 500s: bad input must never
// end up there.
func toAPIError(err error) *apiError {
	var (
		nf  *modelNotFoundError
		mb  *http.MaxBytesError
		syn *json.SyntaxError
		fe  *frontend.Error
	)
	switch {
	case errors.As(err, &fe):
		// Checked first: bad input found below a lookup keeps its field.
	case errors.As(err, &nf):
		return newAPIError(http.StatusNotFound, typeNotFound, nf.Error(), "model", "model_not_found")
	case errors.As(err, &mb):
		return newAPIError(http.StatusRequestEntityTooLarge, typeTooLarge,
			fmt.Sprintf("The request body is larger than the limit of %d bytes (--max-body-bytes); images and audio count in their base64 form.", mb.Limit), "", "request_too_large")
	case errors.As(err, &syn):
		return newAPIError(http.StatusBadRequest, typeBadRequest,
			fmt.Sprintf("The request body is not valid JSON: %v (at byte %d).", syn, syn.Offset), "", "")
	}
	e := frontend.Classify(err)
	var status int
	var typ string
	switch e.Kind {
	case frontend.BadRequest:
		status, typ = http.StatusBadRequest, typeBadRequest
	case frontend.NotFound:
		status, typ = http.StatusNotFound, typeNotFound
	case frontend.Overloaded:
		status, typ = http.StatusTooManyRequests, typeRateLimit
	case frontend.Unavailable:
		status, typ = http.StatusServiceUnavailable, typeServiceUnavailable
	case frontend.TimedOut:
		status, typ = http.StatusRequestTimeout, typeTimeout
	case frontend.Canceled:
		// The client went away: handlers answer nobody (isClientGone), so
		// one that gets here is this server's fault.
		return newAPIError(http.StatusInternalServerError, typeInternal,
			"The server had an error while processing your request.", "", "")
	default:
		status, typ = http.StatusInternalServerError, typeInternal
	}
	ae := newAPIError(status, typ, e.Message, e.Param, e.Code)
	ae.retryAfter = e.RetryAfter
	return ae
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
	b, err := jsonwire.Marshal(v)
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
