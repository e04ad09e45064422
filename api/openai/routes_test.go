package openai

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai/openaitest"
)

func TestNoModels(t *testing.T) {
	rec := openaitest.Do(t, testHandler(), nil, http.MethodPost, "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"Hi"}]}`)
	if rec.Code != http.StatusNotFound {
		t.Errorf("no models: status %d", rec.Code)
	}
}

// TestMount: Mount serves the OpenAI routes; the model list is
// api/catalog's, so GET /v1/models is not among them.
func TestMount(t *testing.T) {
	m := openaitest.NewModel(t)
	r := chi.NewRouter()
	Mount(r, openaitest.NewBackend[Model](m), Options{})
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":"Hi"}]}`},
		{http.MethodPost, "/v1/completions", `{"model":"test-model","prompt":"Hi"}`},
	} {
		if rec := openaitest.Do(t, r, m, tc.method, tc.path, tc.body); rec.Code != http.StatusOK {
			t.Errorf("%s %s: status %d: %s", tc.method, tc.path, rec.Code, rec.Body)
		}
	}
	if rec := openaitest.Do(t, r, nil, http.MethodGet, "/v1/models", ""); rec.Code != http.StatusNotFound {
		t.Errorf("GET /v1/models: status %d, want 404 (api/catalog serves it)", rec.Code)
	}
}

// TestModelNotFound: the error api/catalog writes for an unknown model is
// OpenAI's 404, as the chat routes write it.
func TestModelNotFound(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, ModelNotFound("gpt-4"))
	want := `{"error":{"message":"The model ` + "`gpt-4`" + ` does not exist.","type":"NotFoundError","param":"model","code":"model_not_found"}}` + "\n"
	if rec.Code != http.StatusNotFound || rec.Body.String() != want {
		t.Errorf("%d %s, want 404 %s", rec.Code, rec.Body, want)
	}
}
