package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

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
				fm := openaitest.NewModel(t)
				fm.MaxLen = 256
				fm.SetScript(openaitest.ThinkScript(tt.text))
				h := testHandler(&openaitest.ReasoningModel{Model: fm, Parser: tt.parser})
				body := `{"model":"test-model","messages":[{"role":"user","content":"Hi"}]`
				if tt.template != "" {
					body += `,"chat_template":` + jsonString(tt.template)
				}
				if stream {
					body += `,"stream":true`
				}
				rec := openaitest.Do(t, h, fm, http.MethodPost, "/v1/chat/completions", body+"}")
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

// frontend.Params.ThinkingFor is what submit calls after another API set
// the ThinkingBudget and ThinkingParam: errors name its own field,
// and the scheduler gets the markers, where the output starts and the
// budget.
func TestThinkingFor(t *testing.T) {
	plain := openaitest.NewModel(t)
	r1 := &openaitest.ReasoningModel{Model: openaitest.NewModel(t), Parser: tokenizer.ReasoningDeepSeekR1}
	qwen := &openaitest.ReasoningModel{Model: openaitest.NewModel(t), Parser: tokenizer.ReasoningQwen3}
	budget := func(n int) *frontend.Params {
		return &frontend.Params{ThinkingBudget: &n, ThinkingParam: "thinking.budget_tokens"}
	}
	for _, tc := range []struct {
		name   string
		m      Model
		p      *frontend.Params
		prompt string
		param  string // the error's, "" for none
		want   *scheduler.Thinking
	}{
		{"no parser, no budget", plain, &frontend.Params{}, "Hi", "", nil},
		{"no parser", plain, budget(5), "Hi", "thinking.budget_tokens", nil},
		{"negative", r1, budget(-1), "Hi", "thinking.budget_tokens", nil},
		{"default param", r1, &frontend.Params{ThinkingBudget: new(-2)}, "Hi", "thinking_token_budget", nil},
		{"r1 starts inside", r1, budget(3), "Hi", "", &scheduler.Thinking{StartInside: true, Budget: 3}},
		{"r1 thinking off", r1, budget(3), "Hi</think>\n", "", &scheduler.Thinking{Off: true, Budget: 3}},
		{"qwen3 waits", qwen, &frontend.Params{}, "Hi", "", &scheduler.Thinking{Budget: -1}},
		{"qwen3 opened", qwen, budget(0), "Hi<think>\n", "", &scheduler.Thinking{StartInside: true, Budget: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th, err := tc.p.ThinkingFor(tc.m, tc.prompt)
			var ve *frontend.Error
			switch {
			case tc.param != "":
				if !errors.As(err, &ve) || ve.Param != tc.param {
					t.Fatalf("err %v, want a 400 naming %s", err, tc.param)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.want == nil:
				if th != nil {
					t.Fatalf("%+v, want nil", th)
				}
				return
			}
			if th == nil || len(th.Start) == 0 || len(th.End) == 0 || th.StartInside != tc.want.StartInside || th.Off != tc.want.Off || th.Budget != tc.want.Budget {
				t.Fatalf("%+v, want %+v", th, tc.want)
			}
		})
	}
}
