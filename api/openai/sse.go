package openai

import (
	"errors"
	"fmt"
	"net/http"
)

// errClientGone is returned by sseWriter after a write failed: the client
// is gone and nothing more will reach it.
var errClientGone = errors.New("openai: client connection lost")

// sseWriter writes server-sent events, one "data: <json>\n\n" per event,
// flushing after each so that every chunk leaves as soon as it exists.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	err error // first write error; every later write returns it
}

// startSSE writes the stream's headers. After it, errors can only be sent as
// events.
func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = s.flush() // a failure is kept in s.err and returned by the next write
	return s
}

// event writes v as one event.
func (s *sseWriter) event(v any) error {
	if s.err != nil {
		return s.err
	}
	b, err := marshal(v)
	if err != nil {
		// Our own types always marshal; report it as a server error.
		return fmt.Errorf("openai: encode stream chunk: %w", err)
	}
	return s.raw(b)
}

// errorEvent writes e as {"error":{...}}.
func (s *sseWriter) errorEvent(e *apiError) error {
	return s.event(errorResponse{Error: e.body})
}

// done writes the terminating "data: [DONE]".
func (s *sseWriter) done() error {
	return s.raw([]byte("[DONE]"))
}

func (s *sseWriter) raw(payload []byte) error {
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

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = fmt.Errorf("%w: %w", errClientGone, err)
		return s.err
	}
	return nil
}
