package openaitest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// RequestID, Now and Seed are the deterministic request id, clock and
// sampling seed the golden files were written with (openai.Options'
// RequestID, Now and Seed).
func RequestID(*http.Request) string { return "test" }

// Now is 2023-11-14 22:15:23 UTC (Unix 1700000123), always.
func Now() time.Time { return time.Unix(1700000123, 0) }

// Seed is 1234, always.
func Seed() uint32 { return 1234 }

// GateWriter signals Gate once per SSE event it writes that is not a role
// chunk: a "data: " event of chat completions, or a Responses API
// ".delta" event.
type GateWriter struct {
	http.ResponseWriter
	Gate chan struct{}
}

// Write writes b, then signals Gate when b is such an event.
func (w *GateWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	// Responses API streams: one gate per delta event.
	respDelta := bytes.HasPrefix(b, []byte("event: ")) && bytes.Contains(b[:min(len(b), 64)], []byte(".delta\n"))
	if w.Gate != nil && (respDelta || bytes.HasPrefix(b, []byte("data: ")) && !bytes.Contains(b, []byte(`"role":"assistant"`))) {
		w.Gate <- struct{}{}
	}
	return n, err
}

// Unwrap returns the ResponseWriter (for http.ResponseController).
func (w *GateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Do runs one request in-process and returns the recorder. With m's Gate
// set, the handler writes through a GateWriter; with m set, Do waits for
// m's goroutines before it returns.
func Do(t testing.TB, h http.Handler, m *Model, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	var w http.ResponseWriter = rec
	if m != nil && m.Gate != nil {
		w = &GateWriter{ResponseWriter: rec, Gate: m.Gate}
	}
	h.ServeHTTP(w, req)
	if m != nil {
		m.Wait()
	}
	return rec
}
