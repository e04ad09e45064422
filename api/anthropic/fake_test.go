package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/frontend"
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

// The fakes below are api/openai's (fake_test.go), whose chat path this
// package's routes run on.

// fakeBatch is one Push of canned outputs.
type fakeBatch struct {
	outs []scheduler.Output
	// events is how many SSE content events the handler writes for this
	// batch; with a gate, the next batch is pushed only after them, so that
	// batches are never coalesced and golden streams are deterministic.
	events int
}

// fakeModel is an openai.Model whose Submit replays a script.
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
	// release, when set, holds the first batch until it is closed (a
	// long prefill).
	release chan struct{}
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
		if m.release != nil {
			<-m.release
		}
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
type fakeBackend struct{ models []openai.Model }

func (b *fakeBackend) Model(name string) (openai.Model, bool) {
	for _, m := range b.models {
		if m.Name() == name {
			return m, true
		}
	}
	return nil, false
}

func (b *fakeBackend) Models() []openai.Model { return b.models }

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

// fuzzDecode checks the property every decoder's fuzz target shares:
// decoding and validating any body never panics, and every error is a
// 4xx (bad input, or a model that is not served).
func fuzzDecode(t *testing.T, body []byte, decode func([]byte) error) {
	err := decode(body)
	if err == nil {
		return
	}
	var ve *frontend.Error
	s := openai.ErrorOf(err).Status
	if !errors.As(err, &ve) && s != http.StatusNotFound {
		t.Fatalf("error is not a validation error: %T %v", err, err)
	}
	if s < 400 || s >= 500 {
		t.Fatalf("status %d for %v", s, err)
	}
}

// testServer is the chat path over models with deterministic ids, clock
// and seed; id gives the request ids (nil: "test").
func testServer(id func(*http.Request) string, models ...openai.Model) *openai.Server {
	if id == nil {
		id = func(*http.Request) string { return "test" }
	}
	return openai.New(&fakeBackend{models: models}, openai.Options{
		RequestID: id,
		Now:       func() time.Time { return time.Unix(1700000123, 0) },
		Seed:      func() uint32 { return 1234 },
	})
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// indentJSON pretty-prints a JSON body so golden files diff well.
func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func outsScript(batches ...[]scheduler.Output) func(*scheduler.Request) []fakeBatch {
	return func(*scheduler.Request) []fakeBatch {
		var bs []fakeBatch
		for _, b := range batches {
			bs = append(bs, fakeBatch{outs: b, events: 1})
		}
		return bs
	}
}

func out(finish scheduler.FinishReason, ts ...int32) scheduler.Output {
	return scheduler.Output{Tokens: ts, Finish: finish}
}

// reasoningFake is a fakeModel with a reasoning parser.
type reasoningFake struct {
	*fakeModel
	parser string
}

func (m *reasoningFake) ReasoningParser() string { return m.parser }

// thinkScript generates text one token at a time, each token in its own
// batch, so that the tags are cut across chunks.
func thinkScript(text string) func(*scheduler.Request) []fakeBatch {
	ids := toks(text)
	var batches [][]scheduler.Output
	for i, id := range ids {
		finish := scheduler.FinishReason("")
		if i == len(ids)-1 {
			finish = scheduler.FinishLength
		}
		batches = append(batches, []scheduler.Output{out(finish, id)})
	}
	return outsScript(batches...)
}
