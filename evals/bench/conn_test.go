package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
)

// closingServer mimics servers that advertise keep-alive but close the
// connection after a streamed response, as llama.cpp's llama-server does.
type closingServer struct {
	srv *httptest.Server
	// answered counts the requests that got a full response; dropped those
	// closed without any response; cut those whose stream was broken off.
	answered, dropped, cut atomic.Int64
	// received counts every request the handler saw.
	received atomic.Int64
}

// closeMode says what a closingServer does with request n (1-based, in
// arrival order) that is the k-th (1-based) on its connection.
// r is the request: a retry comes with r.Close set (no keep-alive).
type closeMode func(n, k int, r *http.Request) closeAction

type closeAction int

const (
	// answerThenClose writes the whole stream, advertising keep-alive, and
	// closes the connection right after it: the client's next request may go
	// out on the dead connection before it notices.
	answerThenClose closeAction = iota
	// answerKeepAlive serves the stream and keeps the connection.
	answerKeepAlive
	// drop closes the connection without a byte of response. On a reused
	// connection it is the loss of the race above, made certain: the server
	// is gone by the time the request arrives.
	drop
	// cutMidStream sends the headers and two content chunks, then closes.
	cutMidStream
)

type connCountKey struct{}

func startClosingServer(t *testing.T, mode closeMode) *closingServer {
	t.Helper()
	cs := &closingServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		n := int(cs.received.Add(1))
		k := int(r.Context().Value(connCountKey{}).(*atomic.Int64).Add(1))
		_, _ = io.Copy(io.Discard, r.Body)
		action := mode(n, k, r)
		if action == answerKeepAlive {
			// Counted before the client can see the answer, so that the
			// count is final when Run returns.
			cs.answered.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, sseStream(4))
			return
		}
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		switch action {
		case drop:
			cs.dropped.Add(1)
		case answerThenClose:
			cs.answered.Add(1)
			writeChunkedStream(buf.Writer, sseStream(4))
		case cutMidStream:
			cs.cut.Add(1)
			writeChunkedStream(buf.Writer, sseStream(4)[:2*len(sseChunk)])
		}
	})
	cs.srv = httptest.NewUnstartedServer(mux)
	cs.srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connCountKey{}, new(atomic.Int64))
	}
	cs.srv.Start()
	t.Cleanup(cs.srv.Close)
	return cs
}

const sseChunk = "data: {\"choices\":[{\"text\":\" w\"}]}\n\n"

// sseStream is a completions stream of n one-token chunks.
func sseStream(n int) string {
	return strings.Repeat(sseChunk, n) + "data: [DONE]\n\n"
}

// writeChunkedStream writes a 200 event-stream response by hand, as a
// server that keeps the connection would (keep-alive advertised, chunked
// body), with body as the content. When body is a whole stream the body is
// terminated; else it breaks off after body.
func writeChunkedStream(w *bufio.Writer, body string) {
	fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n")
	cw := httputil.NewChunkedWriter(w)
	for chunk := range strings.SplitAfterSeq(body, "\n\n") {
		if chunk != "" {
			fmt.Fprint(cw, chunk)
		}
	}
	if strings.HasSuffix(body, "[DONE]\n\n") {
		cw.Close()            // the last-chunk line "0\r\n"
		fmt.Fprint(w, "\r\n") // no trailers
	}
	w.Flush()
}

func TestRunRetriesClosedKeptAliveConnections(t *testing.T) {
	tests := []struct {
		name string
		mode closeMode
		// exact: every request that finds its connection reused is dropped,
		// so the client must retry exactly the dropped ones.
		exact bool
	}{
		{
			name: "closes after every stream",
			mode: func(int, int, *http.Request) closeAction { return answerThenClose },
		},
		{
			name: "closes when the next request arrives",
			mode: func(_, k int, _ *http.Request) closeAction {
				if k > 1 {
					return drop
				}
				return answerKeepAlive
			},
			exact: true,
		},
	}
	for _, tt := range tests {
		for _, conc := range []int{1, 8} {
			t.Run(fmt.Sprintf("%s/concurrency %d", tt.name, conc), func(t *testing.T) {
				cs := startClosingServer(t, tt.mode)
				cfg := testConfig(cs.srv.URL + "/v1")
				cfg.Model, cfg.NumPrompts, cfg.MaxConcurrency = "m", 50, conc
				rep, err := Run(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Failed != 0 || rep.Completed != 50 || rep.TotalOutputTokens != 4*50 {
					t.Errorf("completed %d, failed %d, %d tokens; want 50, 0, 200; errors %v",
						rep.Completed, rep.Failed, rep.TotalOutputTokens, rep.ErrorSamples)
				}
				if got := cs.answered.Load(); got != 50 {
					t.Errorf("server answered %d requests, want 50: each once", got)
				}
				t.Logf("retries %d, server dropped %d", rep.Retries, cs.dropped.Load())
				if tt.exact {
					// Each dropped request was retried once. Some must have
					// been: 50 requests on at most 8 connections reuse them.
					if rep.Retries != int(cs.dropped.Load()) || rep.Retries == 0 {
						t.Errorf("retries %d, server dropped %d: want equal and above 0",
							rep.Retries, cs.dropped.Load())
					}
				}
			})
		}
	}
}

func TestRunNeverRetriesAfterResponseBytes(t *testing.T) {
	// Odd requests are cut after two chunks; even ones are served on a
	// connection that stays open, so later requests go out on reused
	// connections and are cut there too.
	cs := startClosingServer(t, func(n, _ int, _ *http.Request) closeAction {
		if n%2 == 1 {
			return cutMidStream
		}
		return answerKeepAlive
	})
	cfg := testConfig(cs.srv.URL + "/v1")
	cfg.Model, cfg.NumPrompts, cfg.MaxConcurrency = "m", 10, 1
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 5 || rep.Completed != 5 || rep.Retries != 0 {
		t.Errorf("completed %d, failed %d, retries %d; want 5, 5, 0; errors %v", rep.Completed, rep.Failed, rep.Retries, rep.ErrorSamples)
	}
	if got := cs.received.Load(); got != 10 {
		t.Errorf("server received %d requests, want 10: a cut stream must not be sent again", got)
	}
	if len(rep.ErrorSamples) != 1 || !strings.Contains(rep.ErrorSamples[0].Message, "unexpected EOF") {
		t.Errorf("error samples %v, want the cut streams' unexpected EOF", rep.ErrorSamples)
	}
}

func TestRunReportsFailedRetries(t *testing.T) {
	// Every reused connection and every retry is dropped: requests after
	// the first on a connection fail twice and are failures, with both
	// attempts in the message.
	cs := startClosingServer(t, func(_, k int, r *http.Request) closeAction {
		if k > 1 || r.Close {
			return drop
		}
		return answerKeepAlive
	})
	cfg := testConfig(cs.srv.URL + "/v1")
	cfg.Model, cfg.NumPrompts, cfg.MaxConcurrency = "m", 20, 1
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed+rep.Failed != 20 || rep.Failed == 0 || rep.Retries != rep.Failed {
		t.Errorf("completed %d, failed %d, retries %d: want 20 in all, every failure retried once", rep.Completed, rep.Failed, rep.Retries)
	}
	if int(cs.answered.Load()) != rep.Completed || int(cs.dropped.Load()) != 2*rep.Failed {
		t.Errorf("server answered %d and dropped %d; want %d and 2 × %d", cs.answered.Load(), cs.dropped.Load(), rep.Completed, rep.Failed)
	}
	if len(rep.ErrorSamples) != 1 || !strings.HasPrefix(rep.ErrorSamples[0].Message, "retry on a new connection: ") {
		t.Errorf("error samples %v, want one message about the failed retry", rep.ErrorSamples)
	}
}
