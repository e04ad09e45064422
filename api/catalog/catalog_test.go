package catalog

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
)

func TestModels(t *testing.T) {
	a := openaitest.NewModel(t)
	b := openaitest.NewModel(t)
	b.ModelName, b.MaxLen = "org/model-b", 4096
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
			rec := openaitest.Do(t, h, nil, http.MethodGet, tt.path, "")
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
	rec := openaitest.Do(t, testHandler(), nil, http.MethodGet, "/v1/models", "")
	if rec.Body.String() != `{"object":"list","data":[]}`+"\n" {
		t.Errorf("body %s", rec.Body)
	}
}

// An Anthropic client (anthropic-version) gets Anthropic's ModelInfo, with
// the context window as max_input_tokens.
func TestModelsAnthropic(t *testing.T) {
	a := openaitest.NewModel(t)
	b := openaitest.NewModel(t)
	b.ModelName, b.MaxLen = "org/model-b", 4096
	h := testHandler(a, b)
	for _, tt := range []struct{ path, body string }{
		{"/v1/models?limit=1000", `{"data":[{"type":"model","id":"test-model","display_name":"test-model","created_at":"2023-11-14T22:13:20Z","max_input_tokens":64,"max_tokens":64},` +
			`{"type":"model","id":"org/model-b","display_name":"org/model-b","created_at":"2023-11-14T22:13:20Z","max_input_tokens":4096,"max_tokens":4096}],"has_more":false,"first_id":"test-model","last_id":"org/model-b"}` + "\n"},
		{"/v1/models/org/model-b", `{"type":"model","id":"org/model-b","display_name":"org/model-b","created_at":"2023-11-14T22:13:20Z","max_input_tokens":4096,"max_tokens":4096}` + "\n"},
	} {
		req := httptest.NewRequest(http.MethodGet, tt.path, nil)
		req.Header.Set("anthropic-version", "2023-06-01")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Body.String() != tt.body {
			t.Errorf("%s: %d\n got %s\nwant %s", tt.path, rec.Code, rec.Body, tt.body)
		}
	}
}

// TestModelsCodexCatalog: GET /v1/models with Codex's client_version adds
// Codex's catalog of the same models (the fields Codex 0.171 requires,
// the context window from max_model_len); without it the list is OpenAI's.
func TestModelsCodexCatalog(t *testing.T) {
	a := openaitest.NewModel(t)
	rec := openaitest.Do(t, testHandler(a), nil, http.MethodGet, "/v1/models?client_version=0.171.0", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var got struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
		Models []map[string]any `json:"models"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "list" || len(got.Data) != 1 || len(got.Models) != 1 {
		t.Fatalf("catalog %s", rec.Body)
	}
	m := got.Models[0]
	for _, k := range []string{"slug", "display_name", "supported_reasoning_levels", "shell_type", "visibility", "supported_in_api",
		"priority", "model_messages", "support_verbosity", "truncation_policy", "experimental_supported_tools"} {
		if _, ok := m[k]; !ok {
			t.Errorf("catalog entry lacks %s, which Codex requires: %v", k, m)
		}
	}
	if m["slug"] != "test-model" || m["context_window"] != float64(64) {
		t.Errorf("slug %v, context_window %v; want test-model, 64", m["slug"], m["context_window"])
	}
	if tmpl, _ := m["model_messages"].(map[string]any)["instructions_template"].(string); tmpl == "" {
		t.Errorf("no instructions_template (Codex needs a string): %v", m["model_messages"])
	}
}

// A LoRA adapter is listed with vLLM's parent and root; a tensor model's
// document is KServe V1's status alone; a model with a reasoning parser
// offers Codex three reasoning levels.
func TestModelsAdapterTensorReasoning(t *testing.T) {
	base := openaitest.NewModel(t)
	lora := &fakeAdapter{Model: openaitest.NewModel(t), parent: "test-model", root: "/adapters/sql.gguf"}
	lora.ModelName = "sql-lora"
	r := chi.NewRouter()
	Mount(r, &tensorBackend{Backend: openaitest.NewBackend[openai.Model](base, lora), tensors: map[string]bool{"mlp": true, "cold": false}})
	for _, tt := range []struct{ path, body string }{
		{"/v1/models", `{"object":"list","data":[{"id":"test-model","object":"model","created":1700000000,"owned_by":"llmserve","max_model_len":64},` +
			`{"id":"sql-lora","object":"model","created":1700000000,"owned_by":"llmserve","max_model_len":64,"root":"/adapters/sql.gguf","parent":"test-model"}]}` + "\n"},
		{"/v1/models/mlp", `{"name":"mlp","ready":true}` + "\n"},
		{"/v1/models/cold", `{"name":"cold","ready":false}` + "\n"},
	} {
		if rec := openaitest.Do(t, r, nil, http.MethodGet, tt.path, ""); rec.Code != http.StatusOK || rec.Body.String() != tt.body {
			t.Errorf("%s: %d\n got %s\nwant %s", tt.path, rec.Code, rec.Body, tt.body)
		}
	}

	rec := openaitest.Do(t, testHandler(&openaitest.ReasoningModel{Model: base, Parser: "deepseek_r1"}), nil, http.MethodGet, "/v1/models?client_version=0.171.0", "")
	var got struct {
		Models []struct {
			Default *string `json:"default_reasoning_level"`
			Levels  []struct {
				Effort string `json:"effort"`
			} `json:"supported_reasoning_levels"`
		} `json:"models"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got.Models) != 1 {
		t.Fatalf("catalog %s: %v", rec.Body, err)
	}
	if m := got.Models[0]; m.Default == nil || *m.Default != "medium" || len(m.Levels) != 3 {
		t.Errorf("reasoning model's entry %s", rec.Body)
	}
}

// TestGoOpenAIClient: go-openai's client reads the list and one model.
func TestGoOpenAIClient(t *testing.T) {
	srv := httptest.NewServer(testHandler(openaitest.NewModel(t)))
	defer srv.Close()
	cfg := goopenai.DefaultConfig("sk-unused")
	cfg.BaseURL = srv.URL + "/v1"
	client := goopenai.NewClientWithConfig(cfg)
	list, err := client.ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 1 || list.Models[0].ID != "test-model" || list.Models[0].OwnedBy != "llmserve" {
		t.Errorf("models %+v", list)
	}
	got, err := client.GetModel(t.Context(), "test-model")
	if err != nil || got.ID != "test-model" {
		t.Errorf("model %+v %v", got, err)
	}
}
