package tokenizer_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/tokenizer"
	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testVocab is a small vocabulary in the shape of a SentencePiece model with
// byte fallback: a few words, ChatML markers as control tokens.
func testVocab() *tokenizertest.Vocab {
	return tokenizertest.New(tokenizertest.Spec{
		Pieces:  []string{"Hello", " world", "!", " ", "é", "日本", "€"},
		Special: []string{"<|im_start|>", "<|im_end|>", "<|eot_id|>"},
		EOG:     []string{"<|im_end|>", "<|eot_id|>"},
		AddBOS:  true,
	})
}

func newTokenizer(t testing.TB, tmpl string) (*tokenizer.Tokenizer, *tokenizertest.Vocab) {
	t.Helper()
	v := testVocab()
	tk, err := tokenizer.New(v, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return tk, v
}

func bytesOf(s string) []int32 {
	var out []int32
	for i := 0; i < len(s); i++ {
		out = append(out, tokenizertest.ByteToken(s[i]))
	}
	return out
}

func TestNewRejectsNilVocab(t *testing.T) {
	if _, err := tokenizer.New(nil, ""); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}

func TestNewBadTemplate(t *testing.T) {
	_, err := tokenizer.New(testVocab(), "{% for %}")
	if !errors.Is(err, tokenizer.ErrChatTemplate) {
		t.Fatalf("err = %v, want ErrChatTemplate", err)
	}
}

func TestStopTokens(t *testing.T) {
	tk, v := newTokenizer(t, "")
	want := []int32{tokenizertest.EOS, v.Token("<|im_end|>"), v.Token("<|eot_id|>")}
	got := tk.StopTokens()
	if !slices.Equal(got, want) {
		t.Fatalf("StopTokens = %v, want %v", got, want)
	}
	got[0] = 99 // the caller's copy
	if tk.StopTokens()[0] != tokenizertest.EOS {
		t.Fatal("StopTokens returned internal state")
	}
}

func TestEncode(t *testing.T) {
	tk, v := newTokenizer(t, "")
	got, err := tk.Encode("<|im_start|>Hello world!", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{tokenizertest.BOS, v.Token("<|im_start|>"), v.Token("Hello"), v.Token(" world"), v.Token("!")}
	if !slices.Equal(got, want) {
		t.Fatalf("Encode = %v, want %v", got, want)
	}
}

func TestDecode(t *testing.T) {
	tk, v := newTokenizer(t, "")
	tok := v.Token
	tests := []struct {
		name string
		toks []int32
		want string
	}{
		{"empty", nil, ""},
		{"words", []int32{tok("Hello"), tok(" world"), tok("!")}, "Hello world!"},
		{"control tokens skipped", []int32{tokenizertest.BOS, tok("<|im_start|>"), tok("Hello"), tok("<|im_end|>"), tokenizertest.EOS}, "Hello"},
		{"byte fallback joins", bytesOf("€"), "€"},
		{"byte fallback mixed", append(append([]int32{tok("Hello")}, bytesOf("日")...), tok("!")), "Hello日!"},
		{"incomplete at end", bytesOf("\xe2\x82"), "\uFFFD"},
		{"broken sequence", bytesOf("\xe2\x82A"), "\uFFFDA"},
		{"invalid bytes", bytesOf("\xff\xfe"), "\uFFFD\uFFFD"},
		{"surrogate", bytesOf("\xed\xa0\x80"), "\uFFFD\uFFFD\uFFFD"},
		{"unknown token", []int32{-5, 1 << 30, tok("!")}, "!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tk.Decode(tt.toks); got != tt.want {
				t.Errorf("Decode = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTokenText(t *testing.T) {
	tk, v := newTokenizer(t, "")
	tests := []struct {
		tok  int32
		want string
	}{
		{v.Token("Hello"), "Hello"},
		{v.Token("€"), "€"},
		{tokenizertest.ByteToken('a'), "a"},
		{tokenizertest.ByteToken(0xE2), `bytes:\xe2`},
		{tokenizertest.ByteToken(0x80), `bytes:\x80`},
		{tokenizertest.EOS, "</s>"},
		{v.Token("<|im_end|>"), "<|im_end|>"},
	}
	for _, tt := range tests {
		if got := tk.TokenText(tt.tok); got != tt.want {
			t.Errorf("TokenText(%d) = %q, want %q", tt.tok, got, tt.want)
		}
	}
}

func TestApplyChatTemplateFallback(t *testing.T) {
	tk, _ := newTokenizer(t, "")
	if !tk.ChatTemplate().IsFallback() || tk.ChatTemplate().Source() != tokenizer.FallbackChatTemplate {
		t.Fatal("empty template did not select the fallback")
	}
	msgs := []tokenizer.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Hi\nthere", Name: "bob"},
		{Role: "assistant", Content: "Hello."},
		{Role: "user", Content: "日本?"},
	}
	// What llama.cpp's chatml template produces.
	want := "<|im_start|>system\nBe brief.<|im_end|>\n" +
		"<|im_start|>user\nHi\nthere<|im_end|>\n" +
		"<|im_start|>assistant\nHello.<|im_end|>\n" +
		"<|im_start|>user\n日本?<|im_end|>\n"
	got, err := tk.ApplyChatTemplate(msgs, tokenizer.ChatOptions{})
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	got, err = tk.ApplyChatTemplate(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if want += "<|im_start|>assistant\n"; err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	if got, _ := tk.ApplyChatTemplate(nil, tokenizer.ChatOptions{}); got != "" {
		t.Fatalf("no messages: %q", got)
	}
}

func TestApplyChatTemplateVariables(t *testing.T) {
	const tmpl = "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|" +
		"{{ strftime_now('%d %b %Y') }}|{{ enable_thinking }}|{{ messages[0].name }}|{{ messages[0].name is defined }}{{ messages[1].name is defined }}"
	tk, _ := newTokenizer(t, tmpl)
	msgs := []tokenizer.Message{{Role: "user", Content: "a", Name: "ann"}, {Role: "user", Content: "b"}}
	opts := tokenizer.ChatOptions{
		AddGenerationPrompt: true,
		Now:                 mustTime(t, "2024-07-26T10:00:00Z"),
		Kwargs:              map[string]any{"enable_thinking": false, "messages": "cannot replace"},
	}
	got, err := tk.ApplyChatTemplate(msgs, opts)
	want := "<s>|</s>|True|True|26 Jul 2024|False|ann|TrueFalse"
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
}

func TestRaiseExceptionMessage(t *testing.T) {
	tk, _ := newTokenizer(t, "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% endfor %}")
	_, err := tk.ApplyChatTemplate([]tokenizer.Message{{Role: "system", Content: "x"}}, tokenizer.ChatOptions{})
	if err == nil || err.Error() != "chat template: System role not supported" {
		t.Fatalf("err = %v", err)
	}
}

func TestApplyChatTemplateKwargsLists(t *testing.T) {
	tk, _ := newTokenizer(t, "{{ xs[-1] }}|{{ xs | length }}|{{ cfg.tags[-1] }}")
	got, err := tk.ApplyChatTemplate(nil, tokenizer.ChatOptions{Kwargs: map[string]any{
		"xs":  []any{"only"},
		"cfg": map[string]any{"tags": []string{"t"}},
	}})
	if err != nil || got != "only|1|t" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestApplyChatTemplateErrors(t *testing.T) {
	tests := []struct {
		name, tmpl, want string
	}{
		{"raise_exception", "{% if messages[0].role != 'system' %}{{ raise_exception('System message required!') }}{% endif %}", "System message required!"},
		{"format error", "{{ '%d' % 'x' }}", "a real number is required"},
		{"include", "{% include 'other.jinja' %}", "chat template"},
		{"bad call", "{{ strftime_now() }}", "strftime_now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, _ := newTokenizer(t, tt.tmpl)
			_, err := tk.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "x"}}, tokenizer.ChatOptions{})
			if err == nil || !errors.Is(err, tokenizer.ErrChatTemplate) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrChatTemplate containing %q", err, tt.want)
			}
		})
	}
}

// TestChatTemplateConcurrent renders one parsed template from many
// goroutines; run with -race.
func TestChatTemplateConcurrent(t *testing.T) {
	src := mustRead(t, "testdata/chat/templates/Qwen-Qwen3-0.6B.jinja")
	ct, err := tokenizer.NewChatTemplate(src, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []tokenizer.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}
	want, err := ct.Render(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 50 {
				got, err := ct.Render(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
				if err == nil && got != want {
					err = errors.New("different output: " + got)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkApplyChatTemplate(b *testing.B) {
	src := mustRead(b, "testdata/chat/templates/meta-llama-Llama-3.1-8B-Instruct.jinja")
	ct, err := tokenizer.NewChatTemplate(src, "<|begin_of_text|>", "<|eot_id|>")
	if err != nil {
		b.Fatal(err)
	}
	msgs := []tokenizer.Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Hello! Can you add 2 and 2?"},
		{Role: "assistant", Content: "2 + 2 = 4."},
		{Role: "user", Content: "And 3 and 3?"},
	}
	for b.Loop() {
		if _, err := ct.Render(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplyChatTemplateTools(t *testing.T) {
	const tmpl = "{{ tools | tojson }}|{% for m in messages %}{{ m | tojson }};{% endfor %}|{{ documents is none }}|{{ x is none }}{{ y is defined }}"
	tk, _ := newTokenizer(t, tmpl)
	msgs := []tokenizer.Message{
		{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{ID: "c1", Type: "function", Name: "f", Arguments: `{"b": 1, "a": [1.5, null]}`}}, ReasoningContent: "r"},
		{Role: "tool", Content: "ok", ToolCallID: "c1", Name: "f"},
	}
	got, err := tk.ApplyChatTemplate(msgs, tokenizer.ChatOptions{
		Tools:  []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}`)},
		Kwargs: map[string]any{"x": nil},
	})
	want := `[{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}]|` +
		`{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": [1.5, null]}}}], "reasoning_content": "r"};` +
		`{"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "f"};|True|TrueFalse`
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	for _, args := range []string{`{"a":`, `{} x`} {
		_, err = tk.ApplyChatTemplate([]tokenizer.Message{{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{Name: "f", Arguments: args}}}}, tokenizer.ChatOptions{})
		if !errors.Is(err, tokenizer.ErrChatTemplate) || !strings.Contains(err.Error(), "arguments") {
			t.Errorf("arguments %q: err = %v, want ErrChatTemplate naming arguments", args, err)
		}
	}
}
