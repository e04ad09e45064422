package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// reasoningFake is the fake model served with a reasoning parser.
type reasoningFake struct {
	*fakeModel
	parser string
}

func (m *reasoningFake) ReasoningParser() string { return m.parser }

// thinkScript generates text one token at a time, each token in its own
// batch, so that the tags are cut across chunks.
func thinkScript(text string) func(*scheduler.Request) []fakeBatch {
	ids := toks(text)
	var batches [][]scheduler.Output
	for i, id := range ids {
		finish := scheduler.FinishReason("")
		if i == len(ids)-1 {
			finish = scheduler.FinishLength
		}
		batches = append(batches, []scheduler.Output{out(finish, id)})
	}
	return outsScript(batches...)
}

func TestReasoningContent(t *testing.T) {
	tests := []struct {
		name, parser, template, text, reasoning, content string
	}{
		{"r1", tokenizer.ReasoningDeepSeekR1, "", "Hel lo</think>Hello world!", "Hel lo", "Hello world!"},
		{"r1 with <think>", tokenizer.ReasoningDeepSeekR1, "", "<think>a b</think>\n\nHello", "a b", "\n\nHello"},
		{"r1 cut off", tokenizer.ReasoningDeepSeekR1, "", "a b </thi", "a b </thi", ""},
		{"qwen3 no thinking", tokenizer.ReasoningQwen3, "", "Hello world!", "", "Hello world!"},
		{"qwen3 thinking", tokenizer.ReasoningQwen3, "", "<think>a</think>Hello", "a", "Hello"},
		{"qwen3 prompt opens <think>", tokenizer.ReasoningQwen3, "{{ messages[0].content }}<think>\n", "a</think>Hello", "a", "Hello"},
		{"no parser", "", "", "<think>a</think>Hello", "", "<think>a</think>Hello"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.name
			if stream {
				name += " stream"
			}
			t.Run(name, func(t *testing.T) {
				fm := newFakeModel(t)
				fm.maxLen = 256
				fm.setScript(thinkScript(tt.text))
				h := testHandler(&reasoningFake{fakeModel: fm, parser: tt.parser})
				body := `{"model":"test-model","messages":[{"role":"user","content":"Hi"}]`
				if tt.template != "" {
					body += `,"chat_template":` + jsonString(tt.template)
				}
				if stream {
					body += `,"stream":true`
				}
				rec := do(t, h, fm, http.MethodPost, "/v1/chat/completions", body+"}")
				if rec.Code != http.StatusOK {
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				var reasoning, content string
				hasReasoning := false
				if !stream {
					var resp struct {
						Choices []struct {
							Message map[string]json.RawMessage `json:"message"`
						} `json:"choices"`
					}
					if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
						t.Fatal(err)
					}
					msg := resp.Choices[0].Message
					_ = json.Unmarshal(msg["content"], &content)
					if raw, ok := msg["reasoning_content"]; ok {
						hasReasoning = true
						_ = json.Unmarshal(raw, &reasoning)
					}
				} else {
					evs := sseEvents(t, rec.Body.String())
					for _, ev := range evs[:len(evs)-1] {
						var c struct {
							Choices []struct {
								Delta struct {
									Content          *string `json:"content"`
									ReasoningContent *string `json:"reasoning_content"`
								} `json:"delta"`
							} `json:"choices"`
						}
						if err := json.Unmarshal([]byte(ev), &c); err != nil {
							t.Fatal(err)
						}
						for _, ch := range c.Choices {
							if ch.Delta.Content != nil {
								if tt.parser != "" && strings.Contains(*ch.Delta.Content, "think") {
									t.Errorf("a tag leaked into content: %s", ev)
								}
								content += *ch.Delta.Content
							}
							if ch.Delta.ReasoningContent != nil {
								hasReasoning = true
								reasoning += *ch.Delta.ReasoningContent
							}
						}
					}
				}
				if reasoning != tt.reasoning || content != tt.content {
					t.Errorf("reasoning %q content %q, want %q and %q", reasoning, content, tt.reasoning, tt.content)
				}
				if hasReasoning != (tt.reasoning != "") {
					t.Errorf("reasoning_content present: %v, want %v", hasReasoning, tt.reasoning != "")
				}
			})
		}
	}
}
