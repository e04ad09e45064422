package openai

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai/openaitest"
)

// BenchmarkChatFamilyRequest serves one chat request (decode, prepare,
// submit to the fake model, answer) with a few turns and a tool: the
// request side's cost, the same wire on main and the branch. The
// Responses and Messages cases are in api/responses and api/anthropic.
func BenchmarkChatFamilyRequest(b *testing.B) {
	tool := `{"type":"function","function":{"name":"get_weather","description":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`
	turns := strings.Repeat(`{"role":"user","content":"Hello there"},{"role":"assistant","content":"Hi"},`, 4)
	cases := []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"test-model","max_tokens":3,"tools":[` + tool + `],"messages":[` + turns + `{"role":"user","content":"Hi"}]}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m := openaitest.NewModel(b)
			m.MaxLen = 4096
			r := chi.NewRouter()
			Mount(r, openaitest.NewBackend[Model](m), Options{RequestID: func(*http.Request) string { return "test" }})
			b.ReportAllocs()
			for b.Loop() {
				if rec := openaitest.Do(b, r, nil, http.MethodPost, c.path, c.body); rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
