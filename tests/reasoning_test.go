package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/tokenizer"
)

// With --reasoning-parser deepseek_r1, the real model's answer (stories260K
// writes no tags) is reasoning until a </think> that never comes, so it is
// all reasoning_content; a prompt that ends with </think> (a template that
// switched thinking off) makes it all content. Streamed and plain answers
// agree, and the same seed gives the same text either way.
func TestReasoningParserServed(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{ReasoningParser: tokenizer.ReasoningDeepSeekR1})
	base := map[string]any{
		"model": "stories260K", "max_tokens": 12, "temperature": 0,
		"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}},
	}
	thinkingOff := `{% for m in messages %}{{ m.content }}{% endfor %}</think>`
	for _, tc := range []struct {
		name        string
		template    string
		wantContent bool
	}{
		{"thinking", "", false},
		{"thinking off", thinkingOff, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{}
			for k, v := range base {
				body[k] = v
			}
			if tc.template != "" {
				body["chat_template"] = tc.template
			}
			var resp struct {
				Choices []struct {
					Message struct {
						Content          string  `json:"content"`
						ReasoningContent *string `json:"reasoning_content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if code, _ := s.post(t, "/v1/chat/completions", body, &resp); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			msg := resp.Choices[0].Message
			reasoning := ""
			if msg.ReasoningContent != nil {
				reasoning = *msg.ReasoningContent
			}
			if tc.wantContent != (msg.Content != "") || tc.wantContent == (reasoning != "") {
				t.Fatalf("content %q, reasoning %q", msg.Content, reasoning)
			}
			sr, sc := streamChat(t, s.URL, body)
			if sr != reasoning || sc != msg.Content {
				t.Errorf("streamed reasoning %q content %q; plain %q, %q", sr, sc, reasoning, msg.Content)
			}
		})
	}
}

// streamChat streams a chat completion and returns its reasoning and
// content.
func streamChat(t *testing.T, url string, body map[string]any) (reasoning, content string) {
	t.Helper()
	b := map[string]any{"stream": true}
	for k, v := range body {
		b[k] = v
	}
	raw, _ := json.Marshal(b)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r, c strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != nil {
				c.WriteString(*ch.Delta.Content)
			}
			if ch.Delta.ReasoningContent != nil {
				r.WriteString(*ch.Delta.ReasoningContent)
			}
		}
	}
	return r.String(), c.String()
}
