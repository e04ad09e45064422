package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// attemptTrace records, through net/http/httptrace, how far one attempt of a
// request got. The transport calls its hooks from its own goroutines, hence
// the atomics.
type attemptTrace struct {
	// reused is GotConnInfo.Reused of the connection the attempt went out
	// on: it had served an earlier request and was idle in the pool.
	reused atomic.Bool
	// responded is set at the first byte of a response (GotFirstResponseByte).
	responded atomic.Bool
}

func (a *attemptTrace) hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		// A transport that retries by itself (an idempotent request, or
		// nothing written yet) calls GotConn again: the last call describes
		// the attempt that failed or succeeded.
		GotConn:              func(info httptrace.GotConnInfo) { a.reused.Store(info.Reused) },
		GotFirstResponseByte: func() { a.responded.Store(true) },
	}
}

// retryable reports whether an attempt that failed with a transport error
// may be sent again: it went out on a reused connection, nothing of a
// response came back, so the server cannot have answered it, and the
// request's own time has not run out.
func (a *attemptTrace) retryable(ctx context.Context) bool {
	return a.reused.Load() && !a.responded.Load() && ctx.Err() == nil
}

// send posts payload to the generation route and returns the response, whose
// headers have arrived. retried reports that the first attempt failed on a
// reused connection before any response byte and a second one was made, on a
// connection of its own.
//
// Why: a server may close a kept-alive connection right after a response,
// though it advertised keep-alive (llama.cpp's llama-server does after
// streamed responses). The transport returns the connection to its pool
// before the close arrives, the next request goes out on it and fails with
// EOF or a reset. net/http replays such a request only when it is
// idempotent, and a POST is not. Here no byte of a response arrived, so the
// server did not answer, and the request is sent once more. A failure after
// the first response byte, or on a new connection, is never retried: the
// server may have done the work, and the run must show the failure.
func (s *session) send(ctx context.Context, payload []byte) (resp *http.Response, retried bool, err error) {
	var first attemptTrace
	resp, err = s.post(httptrace.WithClientTrace(ctx, first.hooks()), s.client, payload)
	if err == nil || !first.retryable(ctx) {
		return resp, false, err
	}
	resp, err = s.post(ctx, s.fresh, payload)
	if err != nil {
		err = fmt.Errorf("retry on a new connection: %w", err)
	}
	return resp, true, err
}

// post sends one attempt through client.
func (s *session) post(ctx context.Context, client *http.Client, payload []byte) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	s.setHeaders(hreq.Header)
	return client.Do(hreq)
}
