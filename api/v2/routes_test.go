package v2

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// letters is a vocabulary of one token per lower-case letter and EOS (26).
type letters struct{}

func (letters) Tokenize(text string, _, _ bool) ([]int32, error) {
	var out []int32
	for _, r := range text {
		if r >= 'a' && r <= 'z' {
			out = append(out, r-'a')
		}
	}
	return out, nil
}

func (letters) Piece(tok int32, _ bool) []byte {
	if tok == 26 {
		return nil
	}
	return []byte{byte('a' + tok)}
}
func (letters) NumTokens() int           { return 27 }
func (letters) BOS() int32               { return -1 }
func (letters) EOS() int32               { return 26 }
func (letters) IsEOG(tok int32) bool     { return tok == 26 }
func (letters) IsControl(tok int32) bool { return tok == 26 }

// scripted answers every request with outs; ready says whether it is.
type scripted struct {
	name  string
	tok   *tokenizer.Tokenizer
	outs  []scheduler.Output
	ready bool
}

func (m *scripted) Name() string                    { return m.name }
func (m *scripted) Ready() bool                     { return m.ready }
func (m *scripted) MaxModelLen() int                { return 64 }
func (m *scripted) RequestTimeout() time.Duration   { return 0 }
func (m *scripted) Tokenizer() *tokenizer.Tokenizer { return m.tok }
func (m *scripted) Submit(_ context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	s := core.NewStream(reqs[0].ID, 1, func(int, bool) {})
	for _, o := range m.outs {
		s.Push([]scheduler.Output{o}, scheduler.Usage{})
	}
	return []*core.Stream{s}, nil
}

type oneModel struct{ m *scripted }

func (b oneModel) Model(name string) (infer.Model, bool) { return b.m, name == b.m.name }
func (b oneModel) Models() []infer.Model                 { return []infer.Model{b.m} }
func (b oneModel) Ready() bool                           { return b.m.ready }

func serve(t *testing.T, m *scripted) *httptest.Server {
	tok, err := tokenizer.New(letters{}, "")
	if err != nil {
		t.Fatal(err)
	}
	m.tok = tok
	if m.name == "" {
		m.name = "m"
	}
	r := chi.NewRouter()
	Mount(r, oneModel{m}, Options{})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, body string) (int, string, string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestGenerateStreamErrorAfterHeaders: an engine failure in the middle of
// a stream is a data: {"error": ...} event after the deltas, no [DONE].
func TestGenerateStreamErrorAfterHeaders(t *testing.T) {
	srv := serve(t, &scripted{ready: true, outs: []scheduler.Output{
		{Tokens: []int32{0}}, {Tokens: []int32{1}},
		{Finish: scheduler.FinishAbort, Err: scheduler.ErrEngine},
	}})
	code, ctype, body := post(t, srv.URL+"/v2/models/m/generate_stream", `{"text_input":"hi"}`)
	want := `data: {"model_name":"m","model_version":"1","text_output":"a"}` + "\n\n" +
		`data: {"model_name":"m","model_version":"1","text_output":"b"}` + "\n\n" +
		`data: {"error":"the engine failed while generating this request; other requests are not affected; retry it"}` + "\n\n"
	if code != 200 || ctype != "text/event-stream; charset=utf-8" || body != want {
		t.Fatalf("%d %s\n%s", code, ctype, body)
	}
	// The same failure without streaming is a 500 with the message.
	code, _, body = post(t, srv.URL+"/v2/models/m/generate", `{"text_input":"hi"}`)
	if code != 500 || !strings.HasPrefix(body, `{"error":"the engine failed`) {
		t.Fatalf("%d %s", code, body)
	}
}

// TestNotReady: a model that is not ready answers 503 to inference and to
// its readiness probe.
func TestNotReady(t *testing.T) {
	srv := serve(t, &scripted{})
	for _, path := range []string{"/v2/models/m/infer", "/v2/models/m/generate", "/v2/models/m/generate_stream"} {
		if code, _, body := post(t, srv.URL+path, `{"text_input":"hi"}`); code != 503 || !strings.Contains(body, "not ready") {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	resp, err := http.Get(srv.URL + "/v2/models/m/ready")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(b) != `{"name":"m","ready":false}`+"\n" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestSlashInModelName: a model called org/model is addressed as
// org%2Fmodel.
func TestSlashInModelName(t *testing.T) {
	srv := serve(t, &scripted{name: "org/model", ready: true, outs: []scheduler.Output{{Tokens: []int32{0}, Finish: scheduler.FinishLength}}})
	code, _, body := post(t, srv.URL+"/v2/models/org%2Fmodel/versions/1/generate", `{"text_input":"hi"}`)
	if code != 200 || body != `{"model_name":"org/model","model_version":"1","text_output":"a"}`+"\n" {
		t.Fatalf("%d %s", code, body)
	}
}
