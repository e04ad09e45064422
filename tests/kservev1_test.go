package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/models"
)

// TestKServeV1ModelAndPredict: GET /v1/models/{m} is KServe's status and
// OpenAI's model object in one; :predict embeds texts as /v1/embeddings
// does (normalized); bad input is a 400 {"error"} that says what to fix.
func TestKServeV1ModelAndPredict(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{Pooling: "mean"}, models.GenerativeConfig{Name: "gen", Pooling: "none"})

	resp, err := http.Get(s.URL + "/v1/models/stories260K")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k, want := range map[string]any{"name": "stories260K", "ready": true, "id": "stories260K", "object": "model", "owned_by": "llmserve"} {
		if doc[k] != want {
			t.Errorf("GET /v1/models/stories260K %s = %v, want %v (%v)", k, doc[k], want, doc)
		}
	}
	if doc["max_model_len"] == nil || doc["created"] == nil {
		t.Errorf("model document lacks max_model_len or created: %v", doc)
	}

	var pred struct {
		Predictions [][]float64 `json:"predictions"`
	}
	code, _ := s.post(t, "/v1/models/stories260K:predict", map[string]any{"instances": []any{"Once upon a time", map[string]any{"text": "a cat"}}}, &pred)
	if code != 200 || len(pred.Predictions) != 2 {
		t.Fatalf("predict: %d %v", code, pred)
	}
	var emb struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if code, _ := s.post(t, "/v1/embeddings", map[string]any{"model": "stories260K", "input": []string{"Once upon a time", "a cat"}}, &emb); code != 200 {
		t.Fatalf("embeddings: %d", code)
	}
	for i, p := range pred.Predictions {
		var norm float64
		for j, x := range p {
			norm += x * x
			if math.Abs(x-emb.Data[i].Embedding[j]) > 1e-5 {
				t.Fatalf("prediction %d[%d] = %v, /v1/embeddings has %v", i, j, x, emb.Data[i].Embedding[j])
			}
		}
		if math.Abs(norm-1) > 1e-4 {
			t.Errorf("prediction %d has norm² %v, want 1", i, norm)
		}
	}

	for _, tt := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"no instances", "/v1/models/stories260K:predict", `{}`, 400, "instances is required"},
		{"empty instances", "/v1/models/stories260K:predict", `{"instances":[]}`, 400, "instances is empty"},
		{"tensor instance", "/v1/models/stories260K:predict", `{"instances":[[1,2]]}`, 400, "instances[0]"},
		{"empty text", "/v1/models/stories260K:predict", `{"instances":["a",""]}`, 400, "instances[1] is empty"},
		{"not json", "/v1/models/stories260K:predict", `{`, 400, "not a JSON object"},
		{"unknown model", "/v1/models/nosuch:predict", `{"instances":["a"]}`, 404, "nosuch"},
		{"generator", "/v1/models/gen:predict", `{"instances":["a"]}`, 400, "does not embed"},
		{"explain", "/v1/models/stories260K:explain", `{"instances":["a"]}`, 405, "not allowed"},
		{"no verb", "/v1/models/stories260K", `{"instances":["a"]}`, 405, "not allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out map[string]any
			code, _ := s.postRaw(t, tt.path, []byte(tt.body), &out)
			msg, _ := out["error"].(string)
			if code == 405 { // the path is OpenAI's: its error object
				e, _ := out["error"].(map[string]any)
				msg, _ = e["message"].(string)
			}
			if code != tt.code || !strings.Contains(msg, tt.want) {
				t.Fatalf("%d %v, want %d with an error naming %q", code, out, tt.code, tt.want)
			}
		})
	}
}

// TestV2EmbedTaskAndInferStream: a repository model with task embed
// answers V2 infer with FP32 [n, dim] rows equal to KServe V1's
// predictions, and refuses generate; a generator's infer_stream deltas
// concatenate to generate's text.
func TestV2EmbedTaskAndInferStream(t *testing.T) {
	dir := t.TempDir()
	writeRepoModel(t, dir, "emb", "1", map[string]any{"pooling": "mean", "parameters": map[string]any{"task": "embed"}})
	writeRepoModel(t, dir, "gen", "1", nil)
	s := startRepoServer(t, dir, false)

	var meta struct {
		Outputs []struct {
			Name, Datatype string
			Shape          []int
		}
	}
	if code, body := s.get(t, "/v2/models/emb"); code != 200 || json.Unmarshal([]byte(body), &meta) != nil || meta.Outputs[0].Name != "embedding" || meta.Outputs[0].Datatype != "FP32" {
		t.Fatalf("embed metadata: %d %s", code, body)
	}
	var out struct {
		Outputs []struct {
			Name     string    `json:"name"`
			Datatype string    `json:"datatype"`
			Shape    []int     `json:"shape"`
			Data     []float64 `json:"data"`
		} `json:"outputs"`
	}
	code, _ := s.post(t, "/v2/models/emb/infer", map[string]any{"inputs": []any{map[string]any{"name": "text_input", "datatype": "BYTES", "shape": []int{2}, "data": []string{"Once upon a time", "a cat"}}}}, &out)
	if code != 200 || len(out.Outputs) != 1 || out.Outputs[0].Datatype != "FP32" || len(out.Outputs[0].Shape) != 2 || out.Outputs[0].Shape[0] != 2 {
		t.Fatalf("embed infer: %d %+v", code, out)
	}
	dim := out.Outputs[0].Shape[1]
	var pred struct {
		Predictions [][]float64 `json:"predictions"`
	}
	if code, _ := s.post(t, "/v1/models/emb:predict", map[string]any{"instances": []string{"Once upon a time", "a cat"}}, &pred); code != 200 {
		t.Fatalf("predict: %d", code)
	}
	for i := range 2 {
		for j := range dim {
			if math.Abs(out.Outputs[0].Data[i*dim+j]-pred.Predictions[i][j]) > 1e-5 {
				t.Fatalf("infer row %d differs from predict at %d", i, j)
			}
		}
	}
	var e map[string]string
	if code, _ := s.post(t, "/v2/models/emb/generate", map[string]any{"text_input": "a"}, &e); code != 400 || !strings.Contains(e["error"], "embedding model") {
		t.Fatalf("generate on an embedding model: %d %v", code, e)
	}
	if code, _ := s.post(t, "/v2/models/emb/infer", map[string]any{"inputs": []any{map[string]any{"name": "max_tokens", "datatype": "INT32", "shape": []int{1}, "data": []int{1}}}}, &e); code != 400 || !strings.Contains(e["error"], "max_tokens") {
		t.Fatalf("embed infer with an LLM input: %d %v", code, e)
	}

	code, want := s.generate(t, "gen")
	if code != 200 {
		t.Fatalf("generate: %d", code)
	}
	b, _ := json.Marshal(map[string]any{"id": "s1", "parameters": map[string]any{"max_tokens": 4, "temperature": 0},
		"inputs": []any{map[string]any{"name": "text_input", "datatype": "BYTES", "shape": []int{1}, "data": []string{"Once upon a time"}}}})
	resp, err := http.Post(s.URL+"/v2/models/gen/infer_stream", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("infer_stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got strings.Builder
	finish := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			ID         string         `json:"id"`
			Parameters map[string]any `json:"parameters"`
			Outputs    []struct {
				Name string   `json:"name"`
				Data []string `json:"data"`
			} `json:"outputs"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil || ev.ID != "s1" || len(ev.Outputs) != 1 || ev.Outputs[0].Name != "text_output" {
			t.Fatalf("infer_stream event %s: %v", d, err)
		}
		got.WriteString(ev.Outputs[0].Data[0])
		if f, ok := ev.Parameters["finish_reason"].(string); ok {
			finish = f
		}
	}
	if got.String() != want || finish != "length" {
		t.Fatalf("infer_stream text %q (finish %q), generate's %q", got.String(), finish, want)
	}
}
