package tokenizer_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/llmserve/llmserve/tokenizer"
)

// refSplit is the one-shot reference the incremental parser must agree
// with, written from the rules in ReasoningParser's doc.
func refSplit(name, prompt, text string) (reasoning, content string) {
	tail := strings.TrimRightFunc(prompt, unicode.IsSpace)
	var before string
	switch {
	case name == tokenizer.ReasoningDeepSeekR1 && strings.HasSuffix(tail, "</think>"):
		return "", text
	case name == tokenizer.ReasoningDeepSeekR1 || strings.HasSuffix(tail, "<think>"):
		text = strings.TrimPrefix(text, "<think>")
	default: // qwen3 waiting for <think>
		var found bool
		before, text, found = strings.Cut(text, "<think>")
		if !found {
			return "", before
		}
	}
	r, c, _ := strings.Cut(text, "</think>")
	return r, before + c
}

func TestReasoningParser(t *testing.T) {
	const (
		r1   = tokenizer.ReasoningDeepSeekR1
		qwen = tokenizer.ReasoningQwen3
		// Real prompt endings.
		r1Prompt     = "<｜User｜>Hi<｜Assistant｜><think>\n"
		r1OldPrompt  = "<｜User｜>Hi<｜Assistant｜>"
		v31NoThink   = "<｜User｜>Hi<｜Assistant｜></think>"
		qwenPrompt   = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
		qwenNoThink  = qwenPrompt + "<think>\n\n</think>\n\n"
		qwqPrompt    = qwenPrompt + "<think>\n"
		reasonAnswer = "Okay, 2 + 2 is 4.\n</think>\n\nThe answer is 4."
	)
	tests := []struct {
		name, parser, prompt, text, reasoning, content string
	}{
		{"r1 opened in prompt", r1, r1Prompt, reasonAnswer, "Okay, 2 + 2 is 4.\n", "\n\nThe answer is 4."},
		{"r1 writes <think> itself", r1, r1OldPrompt, "<think>\n" + reasonAnswer, "\nOkay, 2 + 2 is 4.\n", "\n\nThe answer is 4."},
		{"r1 without <think>", r1, r1OldPrompt, reasonAnswer, "Okay, 2 + 2 is 4.\n", "\n\nThe answer is 4."},
		{"r1 cut off while reasoning", r1, r1Prompt, "Okay, let me think", "Okay, let me think", ""},
		{"r1 partial tag at the end", r1, r1Prompt, "Hmm </thi", "Hmm </thi", ""},
		{"r1 thinking off in prompt", r1, v31NoThink, "The answer is 4.", "", "The answer is 4."},
		{"r1 later tags are content", r1, r1Prompt, "a</think>b<think>c</think>d", "a", "b<think>c</think>d"},
		{"qwen3 thinks", qwen, qwenPrompt, "<think>\n" + reasonAnswer, "\nOkay, 2 + 2 is 4.\n", "\n\nThe answer is 4."},
		{"qwen3 thinking off", qwen, qwenNoThink, "The answer is 4.", "", "The answer is 4."},
		{"qwen3 no tags", qwen, qwenPrompt, "The answer is 4.", "", "The answer is 4."},
		{"qwq opened in prompt", qwen, qwqPrompt, reasonAnswer, "Okay, 2 + 2 is 4.\n", "\n\nThe answer is 4."},
		{"qwen3 text before <think>", qwen, qwenPrompt, "x<think>y</think>z", "y", "xz"},
		{"qwen3 partial open tag at the end", qwen, qwenPrompt, "a <thin", "", "a <thin"},
		{"qwen3 unclosed", qwen, qwenPrompt, "<think>still going", "still going", ""},
		{"empty", r1, r1Prompt, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c, err := tokenizer.SplitReasoning(tt.parser, tt.prompt, tt.text)
			if err != nil || r != tt.reasoning || c != tt.content {
				t.Fatalf("SplitReasoning = %q, %q, %v; want %q, %q", r, c, err, tt.reasoning, tt.content)
			}
			if rr, rc := refSplit(tt.parser, tt.prompt, tt.text); rr != r || rc != c {
				t.Fatalf("reference = %q, %q", rr, rc)
			}
			// One byte at a time, nothing of a tag ever leaks.
			p, _ := tokenizer.NewReasoningParser(tt.parser, tt.prompt)
			var gotR, gotC strings.Builder
			for i := range len(tt.text) {
				r, c := p.Push(tt.text[i : i+1])
				if strings.Contains(c, "<think") && !strings.Contains(tt.content, "<think") {
					t.Fatalf("content leaked a tag: %q", c)
				}
				gotR.WriteString(r)
				gotC.WriteString(c)
			}
			r, c = p.Flush()
			gotR.WriteString(r)
			gotC.WriteString(c)
			if gotR.String() != tt.reasoning || gotC.String() != tt.content {
				t.Fatalf("byte by byte = %q, %q", gotR.String(), gotC.String())
			}
		})
	}
	if _, err := tokenizer.NewReasoningParser("granite", ""); err == nil {
		t.Fatal("unknown parser accepted")
	}
}

// FuzzReasoningParser checks that pushing a text in any pieces gives what
// the one-shot reference gives, and that content never holds reasoning.
func FuzzReasoningParser(f *testing.F) {
	f.Add(true, "<think>\n", "<think>a</think>b", []byte{1, 3, 7})
	f.Add(false, "assistant\n", "x<thi<think>y</th</think>z", []byte{2, 2, 2, 2})
	f.Add(false, "</think>\n\n", "<think>", []byte{})
	f.Fuzz(func(t *testing.T, r1 bool, prompt, text string, cuts []byte) {
		name := tokenizer.ReasoningQwen3
		if r1 {
			name = tokenizer.ReasoningDeepSeekR1
		}
		wantR, wantC := refSplit(name, prompt, text)
		p, err := tokenizer.NewReasoningParser(name, prompt)
		if err != nil {
			t.Fatal(err)
		}
		var gotR, gotC strings.Builder
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			r, c := p.Push(rest[:n])
			gotR.WriteString(r)
			gotC.WriteString(c)
			if !strings.HasPrefix(wantR, gotR.String()) || !strings.HasPrefix(wantC, gotC.String()) {
				t.Fatalf("emitted %q, %q: not a prefix of %q, %q", gotR.String(), gotC.String(), wantR, wantC)
			}
			rest = rest[n:]
		}
		r, c := p.Push(rest)
		gotR.WriteString(r)
		gotC.WriteString(c)
		r, c = p.Flush()
		gotR.WriteString(r)
		gotC.WriteString(c)
		if gotR.String() != wantR || gotC.String() != wantC {
			t.Fatalf("got %q, %q; want %q, %q", gotR.String(), gotC.String(), wantR, wantC)
		}
	})
}
