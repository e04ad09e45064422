package responses

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/api/responses/store"
)

// BenchmarkResponsesRequest serves one Responses request (decode, prepare, submit to
// the fake model, answer) with a few turns and a tool: the request side's
// cost, as api/openai's BenchmarkChatFamilyRequest measures chat's.
func BenchmarkResponsesRequest(b *testing.B) {
	turns := strings.Repeat(`{"role":"user","content":"Hello there"},{"role":"assistant","content":"Hi"},`, 4)
	c := struct{ name, path, body string }{"responses", "/v1/responses", `{"model":"test-model","max_output_tokens":3,"store":false,"tools":[{"type":"function","name":"get_weather","description":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],"input":[` + turns + `{"role":"user","content":"Hi"}]}`}
	m := openaitest.NewModel(b)
	m.MaxLen = 4096
	st, _ := store.Open(store.Config{Size: 100})
	r := chi.NewRouter()
	Mount(r, openai.New(openaitest.NewBackend[openai.Model](m), openai.Options{RequestID: func(*http.Request) string { return "test" }}), Options{Store: st})
	b.ReportAllocs()
	for b.Loop() {
		if rec := openaitest.Do(b, r, nil, http.MethodPost, c.path, c.body); rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
