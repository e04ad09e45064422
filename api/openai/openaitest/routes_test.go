package openaitest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/frontend"
)

// The fakes are what the chat-family packages use them as.
var (
	_ openai.Backend          = openaitest.NewBackend[openai.Model]()
	_ openai.Model            = (*openaitest.Model)(nil)
	_ openai.MediaModel       = (*openaitest.MediaModel)(nil)
	_ frontend.ReasoningModel = (*openaitest.ReasoningModel)(nil)
)

// A chat completion through the OpenAI routes over the fake model answers
// with its script, and the prompt reaches the model.
func TestOpenAIRoutes(t *testing.T) {
	m := openaitest.NewModel(t)
	m.Script = openaitest.TextScript("Hello", " world")
	r := chi.NewRouter()
	openai.Mount(r, openaitest.NewBackend[openai.Model](m), openai.Options{RequestID: openaitest.RequestID})
	rec := openaitest.Do(t, r, m, http.MethodPost, "/v1/chat/completions",
		`{"model":"test-model","messages":[{"role":"user","content":"Hi"}],"max_tokens":5}`)
	var resp struct {
		ID      string
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("status %d, %v: %s", rec.Code, err, rec.Body)
	}
	if resp.ID != "chatcmpl-test" || len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "Hello world" || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("answer %s", rec.Body)
	}
	reqs := m.Requests()
	if len(reqs) != 1 || !slices.Contains(reqs[0].Prompt, openaitest.Token("Hi")) {
		t.Errorf("requests %+v, want one whose prompt holds Hi", reqs)
	}
}
