package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeServer is an OpenAI-compatible streaming server for tests. It streams
// max_tokens tokens of "w" per request, in the shape vLLM and llmserve use:
// (chat: a role chunk first), content chunks, a chunk with finish_reason,
// a usage chunk with no choices when asked for it, then [DONE].
type fakeServer struct {
	fakeOptions

	srv         *httptest.Server
	started     chan struct{} // receives once per generation request (buffered)
	gateOpen    chan struct{}
	gateOnce    sync.Once
	count       atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	modelsCalls atomic.Int64
	// Long requests (fakeOptions.longWords) in flight, their maximum, and
	// the short requests finished.
	longInFlight    atomic.Int64
	maxLongInFlight atomic.Int64
	shortDone       atomic.Int64
	shortsDone      chan struct{} // closed when longWaitsForShort shorts are done
	shortsOnce      sync.Once

	mu     sync.Mutex
	bodies []recordedRequest // guarded by mu
}

// fakeOptions say how a fakeServer behaves.
type fakeOptions struct {
	// usage makes the server honour stream_options.include_usage.
	usage bool
	// tokensPerChunk is how many tokens each content chunk carries (1 if 0).
	tokensPerChunk int
	// status, if set, returns an HTTP status to fail request n (1-based, in
	// arrival order) with, or 0 to serve it.
	status func(n int) int
	// errorAfter, if set, returns after how many content chunks request n
	// is cut by an error event, or -1 to serve it fully.
	errorAfter func(n int) int
	// gate, if > 0, holds requests 1..gate until gate requests are in
	// flight together, so the test knows the client reached that
	// concurrency, whatever the scheduling.
	gate int
	// hang makes every request send its headers and then wait until the
	// client goes away.
	hang bool
	// noContent makes every stream end without any content chunk.
	noContent bool
	// longWords, if > 0, makes prompts of at least that many words long:
	// the server counts them in flight apart (maxLongInFlight).
	longWords int
	// longWaitsForShort, if > 0, holds every long request until that many
	// short ones have finished.
	longWaitsForShort int
	// metrics, if set, serves GET /metrics with the text it returns.
	metrics func(f *fakeServer) string
	// slots, if set, serves GET /slots with the JSON it returns.
	slots func(f *fakeServer) string
}

type recordedRequest struct {
	Path          string
	Authorization string
	Body          map[string]any
}

// startFake starts a fakeServer and registers its shutdown with t.
func startFake(t *testing.T, opts fakeOptions) *fakeServer {
	t.Helper()
	f := &fakeServer{
		fakeOptions: opts,
		started:     make(chan struct{}, 1<<16),
		gateOpen:    make(chan struct{}),
		shortsDone:  make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		f.modelsCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"},{"id":"other"}]}`)
	})
	if opts.metrics != nil {
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, opts.metrics(f))
		})
	}
	if opts.slots != nil {
		mux.HandleFunc("GET /slots", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, opts.slots(f))
		})
	}
	mux.HandleFunc("POST /v1/completions", f.generate)
	mux.HandleFunc("POST /v1/chat/completions", f.generate)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) url() string { return f.srv.URL + "/v1" }

func (f *fakeServer) requests() []recordedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.bodies...)
}

func (f *fakeServer) generate(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, recordedRequest{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Body: body})
	f.mu.Unlock()

	n := int(f.count.Add(1))
	cur := f.inFlight.Add(1)
	for {
		m := f.maxInFlight.Load()
		if cur <= m || f.maxInFlight.CompareAndSwap(m, cur) {
			break
		}
	}
	// leave is called before the last write: once the client has read
	// that, it may send its next request, which must not find this one
	// still counted.
	var left atomic.Bool
	leave := func() {
		if left.CompareAndSwap(false, true) {
			f.inFlight.Add(-1)
		}
	}
	defer leave()
	f.started <- struct{}{}

	if f.gate > 0 && n <= f.gate {
		if cur >= int64(f.gate) {
			f.gateOnce.Do(func() { close(f.gateOpen) })
		}
		select {
		case <-f.gateOpen:
		case <-r.Context().Done():
			return
		}
	}
	if f.status != nil {
		if code := f.status(n); code != 0 {
			leave()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":"fake failure %d","type":"server_error","code":%d}}`, code, code)
			return
		}
	}

	if f.longWords > 0 {
		if p, _ := body["prompt"].(string); len(strings.Fields(p)) >= f.longWords {
			cur := f.longInFlight.Add(1)
			defer f.longInFlight.Add(-1)
			storeMax(&f.maxLongInFlight, cur)
			if f.longWaitsForShort > 0 {
				select {
				case <-f.shortsDone:
				case <-r.Context().Done():
					return
				}
			}
		} else {
			defer func() {
				if int(f.shortDone.Add(1)) >= f.longWaitsForShort {
					f.shortsOnce.Do(func() { close(f.shortsDone) })
				}
			}()
		}
	}

	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	maxTokens := int(body["max_tokens"].(float64))
	includeUsage := false
	if so, ok := body["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	promptWords := 0
	if chat {
		msgs := body["messages"].([]any)
		promptWords = len(strings.Fields(msgs[0].(map[string]any)["content"].(string)))
	} else {
		promptWords = len(strings.Fields(body["prompt"].(string)))
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	choice := func(text string, finish any) map[string]any {
		if chat {
			return map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": finish}
		}
		return map[string]any{"index": 0, "text": text, "finish_reason": finish}
	}
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
		send(map[string]any{"object": object, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}}}})
	}
	fmt.Fprint(w, ": keep-alive comment\n\n")
	if f.hang {
		fl.Flush()
		<-r.Context().Done()
		return
	}

	per := max(f.tokensPerChunk, 1)
	cut := -1
	if f.errorAfter != nil {
		cut = f.errorAfter(n)
	}
	chunks := 0
	for sent := 0; sent < maxTokens && !f.noContent; sent += per {
		if chunks == cut {
			break
		}
		k := min(per, maxTokens-sent)
		send(map[string]any{"object": object, "choices": []any{choice(strings.Repeat(" w", k), nil)}})
		chunks++
	}
	if cut >= 0 {
		leave()
		send(map[string]any{"error": map[string]any{"message": "fake engine error", "type": "server_error", "code": 500}})
		return
	}
	send(map[string]any{"object": object, "choices": []any{choice("", "length")}})
	if f.usage && includeUsage {
		send(map[string]any{"object": object, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": promptWords + 1, "completion_tokens": maxTokens, "total_tokens": promptWords + 1 + maxTokens}})
	}
	leave()
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// storeMax raises m to v if v is larger.
func storeMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}
