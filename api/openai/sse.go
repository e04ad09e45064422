package openai

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/llmserve/llmserve/api/jsonwire"
)

// errClientGone is returned by SSE after a write failed: the client
// is gone and nothing more will reach it.
var errClientGone = errors.New("openai: client connection lost")

// SSE writes server-sent events, one "data: <json>\n\n" per event (or
// "event: <name>\ndata: <json>\n\n", Named), flushing after each so that
// every chunk leaves as soon as it exists. api/anthropic and
// api/responses write their named events through it.
type SSE struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	err error // first write error; every later write returns it
}

// StartSSE writes the stream's headers. After it, errors can only be sent as
// events.
func StartSSE(w http.ResponseWriter) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := &SSE{w: w, rc: http.NewResponseController(w)}
	_ = s.flush() // a failure is kept in s.err and returned by the next write
	return s
}

// event writes v as one event.
func (s *SSE) event(v any) error {
	if s.err != nil {
		return s.err
	}
	b, err := jsonwire.Marshal(v)
	if err != nil {
		// Our own types always marshal; report it as a server error.
		return fmt.Errorf("openai: encode stream chunk: %w", err)
	}
	return s.raw(b)
}

// errorEvent writes e as {"error":{...}}.
func (s *SSE) errorEvent(e *apiError) error {
	return s.event(errorResponse{Error: e.body})
}

// done writes the terminating "data: [DONE]".
func (s *SSE) done() error {
	return s.raw([]byte("[DONE]"))
}

// Named writes v as one event with an event name: "event: <name>" then
// "data: <json>", as Anthropic's and the Responses API's streams are
// written.
func (s *SSE) Named(event string, v any) error {
	if s.err != nil {
		return s.err
	}
	b, err := jsonwire.Marshal(v)
	if err != nil {
		return fmt.Errorf("openai: encode stream event: %w", err)
	}
	s.buf = append(append(append(append(append(s.buf[:0], "event: "...), event...), "\ndata: "...), b...), "\n\n"...)
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = fmt.Errorf("%w: %w", errClientGone, err)
		return s.err
	}
	return s.flush()
}

// Err is the first write error (the client is gone), or nil.
func (s *SSE) Err() error { return s.err }

func (s *SSE) raw(payload []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(append(append(s.buf[:0], "data: "...), payload...), "\n\n"...)
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = fmt.Errorf("%w: %w", errClientGone, err)
		return s.err
	}
	return s.flush()
}

func (s *SSE) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = fmt.Errorf("%w: %w", errClientGone, err)
		return s.err
	}
	return nil
}
