package responses

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is the chat path over models with deterministic ids, clock
// and seed; id gives the request ids (nil: "test").
func testServer(id func(*http.Request) string, models ...openai.Model) *openai.Server {
	if id == nil {
		id = openaitest.RequestID
	}
	return openai.New(openaitest.NewBackend(models...), openai.Options{RequestID: id, Now: openaitest.Now, Seed: openaitest.Seed})
}
