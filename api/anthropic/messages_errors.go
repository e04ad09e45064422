package anthropic

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/frontend"
)

// Errors of the Messages API are Anthropic's:
//
//	{"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}
//
// messagesErrorOf is the one place that maps an error to them. It starts
// from openai.ErrorOf's status (the frontend.Error kind, mapped once), so both
// APIs agree on what is whose fault, and renames it by Anthropic's table:
//
//	400 invalid_request_error   401 authentication_error
//	403 permission_error        404 not_found_error
//	413 request_too_large       429 rate_limit_error
//	500 api_error               529 overloaded_error (our 503s)
//	504 timeout_error (our 408: the request's deadline passed)

// messagesErrorBody is Anthropic's error envelope.
type messagesErrorBody struct {
	Type  string            `json:"type"`
	Error messagesErrorInfo `json:"error"`
}

type messagesErrorInfo struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// statusOverloaded is Anthropic's 529 Overloaded.
const statusOverloaded = 529

// messagesStatuses is Anthropic's status and error type for each status
// openai.ErrorOf gives; any other status is a 500 api_error.
var messagesStatuses = map[int]struct {
	status int
	typ    string
}{
	http.StatusBadRequest:            {http.StatusBadRequest, "invalid_request_error"},
	http.StatusUnauthorized:          {http.StatusUnauthorized, "authentication_error"},
	http.StatusForbidden:             {http.StatusForbidden, "permission_error"},
	http.StatusNotFound:              {http.StatusNotFound, "not_found_error"},
	http.StatusRequestEntityTooLarge: {http.StatusRequestEntityTooLarge, "request_too_large"},
	http.StatusTooManyRequests:       {http.StatusTooManyRequests, "rate_limit_error"},
	http.StatusRequestTimeout:        {http.StatusGatewayTimeout, "timeout_error"},
	http.StatusServiceUnavailable:    {statusOverloaded, "overloaded_error"},
}

// messagesStatus maps an HTTP status of openai.ErrorOf to Anthropic's status
// and error type (messagesStatuses).
func messagesStatus(status int) (int, string) {
	if m, ok := messagesStatuses[status]; ok {
		return m.status, m.typ
	}
	return http.StatusInternalServerError, "api_error"
}

// messagesErrorOf maps err to its status and Anthropic error body. A
// validation error's message names its field, as Anthropic's do.
func messagesErrorOf(err error) (int, messagesErrorBody) {
	e := openai.ErrorOf(err)
	msg := e.Message
	var ve *frontend.Error
	if errors.As(err, &ve) && ve.Kind == frontend.BadRequest && ve.Code == "context_length_exceeded" {
		if m, ok := tooLongMessage(ve.Message); ok {
			msg = m
		}
	} else if errors.As(err, &ve) && ve.Kind == frontend.BadRequest && ve.Param != "" && !strings.HasPrefix(msg, ve.Param) {
		msg = ve.Param + ": " + msg
	}
	status, typ := messagesStatus(e.Status)
	return status, messagesErrorBody{Type: "error", Error: messagesErrorInfo{Type: typ, Message: msg}}
}

// The frontend's context-length messages (frontend/sampling.go), whose
// numbers tooLongMessage reads.
var (
	promptTooLong = regexp.MustCompile(`maximum context length is (\d+) tokens\. However, your request has (\d+) input tokens`)
	inputTooLong  = regexp.MustCompile(`maximum context length is (\d+) tokens\. However, you requested \d+ tokens \((\d+) in the messages, (\d+) in the completion\)`)
)

// tooLongMessage words a context-length error as Anthropic does, which is
// what Claude Code reads to learn the model's context window: "prompt is
// too long: N tokens > M maximum" starts its compaction, and "input
// length and `max_tokens` exceed context limit: P + X > M" makes it retry
// with a smaller max_tokens. ok is false for a message of another form.
func tooLongMessage(msg string) (string, bool) {
	if m := promptTooLong.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("prompt is too long: %s tokens > %s maximum", m[2], m[1]), true
	}
	if m := inputTooLong.FindStringSubmatch(msg); m != nil {
		if m[3] == "0" {
			return fmt.Sprintf("prompt is too long: %s tokens > %s maximum", m[2], m[1]), true
		}
		return fmt.Sprintf("input length and `max_tokens` exceed context limit: %s + %s > %s, decrease input length or `max_tokens` and try again", m[2], m[3], m[1]), true
	}
	return "", false
}

// failMessages answers a Messages request that failed before any response
// was written.
func (h *handler) failMessages(w http.ResponseWriter, r *http.Request, id string, err error) {
	if openai.IsClientGone(err) {
		h.s.Log().Debug("client went away", "id", id, "path", r.URL.Path)
		return
	}
	status, body := messagesErrorOf(err)
	h.s.LogError(r, id, status, err)
	if ra := openai.ErrorOf(err).RetryAfter; ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ra))
	}
	openai.WriteJSON(w, status, body)
}

// WriteAuthError writes a 401 in the Messages API's shape, for the
// router's API-key check.
func WriteAuthError(w http.ResponseWriter, msg string) {
	// It answers before the routes, so before withRequestID: its own id.
	w.Header().Set("request-id", "req_"+rand.Text())
	openai.WriteJSON(w, http.StatusUnauthorized, messagesErrorBody{Type: "error", Error: messagesErrorInfo{Type: "authentication_error", Message: msg}})
}
