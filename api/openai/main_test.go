package openai

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api/openai/openaitest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testHandler returns the routes over models with deterministic ids,
// clock and seed.
func testHandler(models ...Model) http.Handler {
	r := chi.NewRouter()
	h := newHandler(openaitest.NewBackend(models...), Options{RequestID: openaitest.RequestID})
	h.now = openaitest.Now
	h.seed = openaitest.Seed
	r.Post("/v1/chat/completions", h.chatCompletions)
	r.Post("/v1/completions", h.completions)
	return r
}
