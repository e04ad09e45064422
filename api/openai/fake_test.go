package openai

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPieces make up the fake vocabulary: words split so that stop strings
// and multi-token words cross token boundaries.
var testPieces = []string{
	"Hello", "Hel", "lo", " wo", "rld", " world", "!", " there", " Once", " upon", " a", " time",
	" ", "\n", "Hi", "Bye", "user", "assistant", "system", "END", "E", "ND", "a", "b", "c",
}

var (
	testVocab = tokenizertest.New(tokenizertest.Spec{
		Pieces:  testPieces,
		Special: []string{"<|im_start|>", "<|im_end|>"},
		EOG:     []string{"<|im_end|>"},
		AddBOS:  true,
	})
	imEnd = testVocab.Token("<|im_end|>")
)

// newTestTokenizer returns a tokenizer over testVocab with the given
// template ("" for ChatML).
func newTestTokenizer(t testing.TB, template string) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New(testVocab, template)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// toks tokenizes text with the fake vocabulary, without BOS.
func toks(s string) []int32 {
	ids, _ := testVocab.Tokenize(s, false, true)
	return ids
}

// tok is the single token for s; it panics when s is not one token.
func tok(s string) int32 {
	id := testVocab.Token(s)
	if id < 0 {
		panic("not a token: " + s)
	}
	return id
}

// fakeBatch is one Push of canned outputs.
type fakeBatch struct {
	outs []scheduler.Output
	// events is how many SSE content events the handler writes for this
	// batch; with a gate, the next batch is pushed only after them, so that
	// batches are never coalesced and golden streams are deterministic.
	events int
}

// fakeModel is a Model whose Submit replays a script.
type fakeModel struct {
	name       string
	maxLen     int
	maxSeqs    int
	maxWaiting int
	tok        *tokenizer.Tokenizer
	// submitErr, when set, is called with the number of earlier Submit
	// calls; a non-nil result is Submit's error.
	submitErr func(call int) error
	// script gives the batches to push for a request; nil means every
	// choice answers "Hello world!" and stops on <|im_end|>.
	script func(req *scheduler.Request) []fakeBatch
	// cached is reported as Usage.CachedTokens.
	cached int
	// gate, when set, receives one value per SSE content event written.
	gate chan struct{}
	// hold keeps the stream open after the script until Cancel.
	hold bool
	// onSubmit, when set, is called after a successful Submit.
	onSubmit func()

	mu      sync.Mutex
	calls   int
	reqs    []scheduler.Request
	cancels int
	stops   []int // choices ended by StopChoice
	// cancelled is closed on the first Cancel.
	cancelled  chan struct{}
	cancelOnce sync.Once
	wg         sync.WaitGroup
}

func newFakeModel(t testing.TB) *fakeModel {
	return &fakeModel{name: "test-model", maxLen: 64, maxSeqs: 16, maxWaiting: 64, tok: newTestTokenizer(t, ""), cancelled: make(chan struct{})}
}

func (m *fakeModel) Name() string                    { return m.name }
func (m *fakeModel) Created() int64                  { return 1700000000 }
func (m *fakeModel) MaxModelLen() int                { return m.maxLen }
func (m *fakeModel) RequestTimeout() time.Duration   { return 0 }
func (m *fakeModel) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Submit checks the requests as the engine core does (the scheduler's
// capacity checks are pure functions of its configuration), then replays
// the script for each.
func (m *fakeModel) Submit(ctx context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	limits := scheduler.Config{MaxNumSeqs: m.maxSeqs, MaxWaiting: m.maxWaiting, MaxModelLen: m.maxLen}
	for i, r := range reqs {
		if err := limits.CheckRequest(r); err != nil {
			return nil, &core.IndexError{Index: i, Err: err}
		}
	}
	if err := limits.CheckBatch(len(reqs)); err != nil {
		return nil, err
	}
	m.mu.Lock()
	call := m.calls
	m.calls++
	m.mu.Unlock()
	if m.submitErr != nil {
		if err := m.submitErr(call); err != nil {
			return nil, err
		}
	}
	var streams []*core.Stream
	for _, r := range reqs {
		streams = append(streams, m.submitOne(r))
	}
	return streams, nil
}

func (m *fakeModel) submitOne(req *scheduler.Request) *core.Stream {
	m.mu.Lock()
	m.reqs = append(m.reqs, *req)
	m.mu.Unlock()
	s := core.NewStream(req.ID, req.N, func(choice int, stopped bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if stopped {
			m.stops = append(m.stops, choice)
			return
		}
		if choice == 0 {
			m.cancels++
		}
		m.cancelOnce.Do(func() { close(m.cancelled) })
	})
	m.mu.Lock()
	script := m.script
	m.mu.Unlock()
	if script == nil {
		script = helloScript
	}
	batches := script(req)
	u := scheduler.Usage{PromptTokens: len(req.Prompt), CachedTokens: m.cached}
	if m.onSubmit != nil {
		defer m.onSubmit()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		// Reasoning tokens as the scheduler counts them, simplified: a
		// choice is inside the section until its output ends with End.
		thought := map[int][]int32{}
		ended := map[int]bool{}
		for k, b := range batches {
			for _, o := range b.outs {
				u.CompletionTokens += len(o.Tokens)
				if th := req.Thinking; th != nil && !th.Off {
					for _, t := range o.Tokens {
						if ended[o.Choice] {
							break
						}
						thought[o.Choice] = append(thought[o.Choice], t)
						if h := thought[o.Choice]; len(h) >= len(th.End) && slices.Equal(h[len(h)-len(th.End):], th.End) {
							ended[o.Choice] = true
							u.ReasoningTokens -= len(th.End) - 1
							continue
						}
						u.ReasoningTokens++
					}
				}
			}
			s.Push(b.outs, u)
			if m.gate == nil || k == len(batches)-1 {
				continue
			}
			for range b.events {
				select {
				case <-m.gate:
				case <-m.cancelled:
					return
				case <-time.After(10 * time.Second):
					panic("fake model: handler wrote no event")
				}
			}
		}
		if m.hold {
			select {
			case <-m.cancelled:
			case <-time.After(10 * time.Second):
				panic("fake model: never cancelled")
			}
		}
	}()
	return s
}

// setScript replaces the script between requests.
func (m *fakeModel) setScript(s func(*scheduler.Request) []fakeBatch) {
	m.mu.Lock()
	m.script = s
	m.mu.Unlock()
}

// wait waits for the feeder goroutines.
func (m *fakeModel) wait() { m.wg.Wait() }

func (m *fakeModel) requests() []scheduler.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]scheduler.Request(nil), m.reqs...)
}

// helloScript answers "Hello world!" in every choice, ending with the stop
// token.
func helloScript(req *scheduler.Request) []fakeBatch {
	var outs []scheduler.Output
	for i := range req.N {
		outs = append(outs, scheduler.Output{Choice: i, Tokens: append(toks("Hello world!"), imEnd), Finish: scheduler.FinishStop})
	}
	return []fakeBatch{{outs: outs}}
}

// fakeBackend serves its models.
type fakeBackend struct{ models []Model }

func (b *fakeBackend) Model(name string) (Model, bool) {
	for _, m := range b.models {
		if m.Name() == name {
			return m, true
		}
	}
	return nil, false
}

func (b *fakeBackend) Models() []Model { return b.models }

// testHandler returns the routes over models with deterministic ids,
// clock and seed.
func testHandler(models ...Model) http.Handler {
	r := chi.NewRouter()
	h := newHandler(&fakeBackend{models: models}, Options{RequestID: func(*http.Request) string { return "test" }})
	h.now = func() time.Time { return time.Unix(1700000123, 0) }
	h.seed = func() uint32 { return 1234 }
	r.Post("/v1/chat/completions", h.chatCompletions)
	r.Post("/v1/completions", h.completions)
	return r
}

// gateWriter signals gate once per SSE event that is not a role chunk.
type gateWriter struct {
	http.ResponseWriter
	gate chan struct{}
}

func (w *gateWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	// Responses API streams: one gate per delta event.
	respDelta := bytes.HasPrefix(b, []byte("event: ")) && bytes.Contains(b[:min(len(b), 64)], []byte(".delta\n"))
	if w.gate != nil && (respDelta || bytes.HasPrefix(b, []byte("data: ")) && !bytes.Contains(b, []byte(`"role":"assistant"`))) {
		w.gate <- struct{}{}
	}
	return n, err
}

func (w *gateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// do runs one request in-process and returns the recorder.
func do(t testing.TB, h http.Handler, m *fakeModel, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	var w http.ResponseWriter = rec
	if m != nil && m.gate != nil {
		w = &gateWriter{ResponseWriter: rec, gate: m.gate}
	}
	h.ServeHTTP(w, req)
	if m != nil {
		m.wait()
	}
	return rec
}

// lp is a logprob entry for tests.
func lp(chosen string, v float32, top ...engine.TokenLogprob) engine.Logprobs {
	return engine.Logprobs{Chosen: engine.TokenLogprob{Token: tok(chosen), Logprob: v}, Top: top}
}

func alt(s string, v float32) engine.TokenLogprob {
	return engine.TokenLogprob{Token: tok(s), Logprob: v}
}
