package v2

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/v2/infer/infertest"
	"github.com/llmserve/llmserve/scheduler"
)

// serve mounts the V2 routes over one scripted model.
func serve(t *testing.T, m *infertest.Scripted) *httptest.Server {
	t.Helper()
	r := chi.NewRouter()
	Mount(r, infertest.Backend{M: m}, Options{})
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
	srv := serve(t, infertest.New(t, "", true, []scheduler.Output{
		{Tokens: []int32{0}}, {Tokens: []int32{1}},
		{Finish: scheduler.FinishAbort, Err: scheduler.ErrEngine},
	}...))
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
	srv := serve(t, infertest.New(t, "", false))
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
	srv := serve(t, infertest.New(t, "org/model", true, scheduler.Output{Tokens: []int32{0}, Finish: scheduler.FinishLength}))
	code, _, body := post(t, srv.URL+"/v2/models/org%2Fmodel/versions/1/generate", `{"text_input":"hi"}`)
	if code != 200 || body != `{"model_name":"org/model","model_version":"1","text_output":"a"}`+"\n" {
		t.Fatalf("%d %s", code, body)
	}
}
