package openai

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
)

func TestModels(t *testing.T) {
	a := newFakeModel(t)
	b := newFakeModel(t)
	b.name, b.maxLen = "org/model-b", 4096
	h := testHandler(a, b)
	tests := []struct {
		name   string
		path   string
		status int
		body   string
	}{
		{"list", "/v1/models", 200,
			`{"object":"list","data":[{"id":"test-model","object":"model","created":1700000000,"owned_by":"llmserve","max_model_len":64},{"id":"org/model-b","object":"model","created":1700000000,"owned_by":"llmserve","max_model_len":4096}]}` + "\n"},
		{"get", "/v1/models/test-model", 200,
			`{"id":"test-model","object":"model","created":1700000000,"owned_by":"llmserve","max_model_len":64,"name":"test-model","ready":true}` + "\n"},
		{"get with slash", "/v1/models/org/model-b", 200,
			`{"id":"org/model-b","object":"model","created":1700000000,"owned_by":"llmserve","max_model_len":4096,"name":"org/model-b","ready":true}` + "\n"},
		{"get with escaped slash", "/v1/models/org%2Fmodel-b", 200,
			`{"id":"org/model-b","object":"model","created":1700000000,"owned_by":"llmserve","max_model_len":4096,"name":"org/model-b","ready":true}` + "\n"},
		{"unknown", "/v1/models/gpt-4", 404,
			`{"error":{"message":"The model ` + "`gpt-4`" + ` does not exist.","type":"NotFoundError","param":"model","code":"model_not_found"}}` + "\n"},
		{"empty id", "/v1/models/", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, h, nil, http.MethodGet, tt.path, "")
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.body != "" && rec.Body.String() != tt.body {
				t.Errorf("body\n got %s\nwant %s", rec.Body, tt.body)
			}
		})
	}
}

func TestModelsEmpty(t *testing.T) {
	rec := do(t, testHandler(), nil, http.MethodGet, "/v1/models", "")
	if rec.Body.String() != `{"object":"list","data":[]}`+"\n" {
		t.Errorf("body %s", rec.Body)
	}
	rec = do(t, testHandler(), nil, http.MethodPost, "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"Hi"}]}`)
	if rec.Code != http.StatusNotFound {
		t.Errorf("no models: status %d", rec.Code)
	}
}

func TestMount(t *testing.T) {
	m := newFakeModel(t)
	r := chi.NewRouter()
	Mount(r, &fakeBackend{models: []Model{m}}, Options{})
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/models", ""},
		{http.MethodGet, "/v1/models/test-model", ""},
		{http.MethodPost, "/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":"Hi"}]}`},
		{http.MethodPost, "/v1/completions", `{"model":"test-model","prompt":"Hi"}`},
	} {
		if rec := do(t, r, m, tc.method, tc.path, tc.body); rec.Code != http.StatusOK {
			t.Errorf("%s %s: status %d: %s", tc.method, tc.path, rec.Code, rec.Body)
		}
	}
}
