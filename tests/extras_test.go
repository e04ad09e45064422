package tests

import (
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models"
)

type lpCompletion struct {
	Choices []struct {
		Text     string
		Logprobs *struct {
			Tokens        []string
			TokenLogprobs []*float64 `json:"token_logprobs"`
		}
		PromptLogprobs []map[string]struct {
			Logprob      float64
			Rank         int
			DecodedToken string `json:"decoded_token"`
		} `json:"prompt_logprobs"`
	}
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	}
	PromptLogprobs []map[string]struct {
		Logprob float64
		Rank    int
	} `json:"prompt_logprobs"`
}

// ids reads the generated token ids from logprobs listed as token ids.
func (c *lpCompletion) ids(t *testing.T) []int32 {
	t.Helper()
	var out []int32
	for _, tok := range c.Choices[0].Logprobs.Tokens {
		id, err := strconv.Atoi(strings.TrimPrefix(tok, "token_id:"))
		if err != nil {
			t.Fatalf("token %q", tok)
		}
		out = append(out, int32(id))
	}
	return out
}

func contains(hay, needle []int32) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		if slices.Equal(hay[i:i+len(needle)], needle) {
			return true
		}
	}
	return false
}

func TestCompletionExtras(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	tok := s.model.Tokenizer()
	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0,
			"logprobs": 0, "return_tokens_as_token_ids": true}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	var plain lpCompletion
	if code, _ := s.post(t, "/v1/completions", base(nil), &plain); code != 200 {
		t.Fatal(code)
	}

	t.Run("allowed_token_ids", func(t *testing.T) {
		allowed := plain.ids(t)[:3]
		allowed = append(allowed, 13)
		var c lpCompletion
		if code, _ := s.post(t, "/v1/completions", base(map[string]any{"allowed_token_ids": allowed}), &c); code != 200 {
			t.Fatal(code)
		}
		for _, id := range c.ids(t) {
			if !slices.Contains(allowed, id) {
				t.Errorf("token %d generated, allowed only %v", id, allowed)
			}
		}
	})

	t.Run("bad_words", func(t *testing.T) {
		if !strings.Contains(plain.Choices[0].Text, "Lily") {
			t.Fatalf("reference %q lacks the word to ban", plain.Choices[0].Text)
		}
		var c lpCompletion
		if code, _ := s.post(t, "/v1/completions", base(map[string]any{"bad_words": []string{"Lily"}}), &c); code != 200 {
			t.Fatal(code)
		}
		for _, w := range []string{"Lily", " Lily"} {
			seq, _ := tok.Encode(w, false)
			if contains(c.ids(t), seq) {
				t.Errorf("banned %q (%v) generated: %q", w, seq, c.Choices[0].Text)
			}
		}
		if c.Choices[0].Text == plain.Choices[0].Text {
			t.Errorf("bad_words changed nothing: %q", c.Choices[0].Text)
		}
	})

	t.Run("skip_special_tokens", func(t *testing.T) {
		eos := strconv.Itoa(int(tok.Vocab().EOS()))
		force := map[string]any{"ignore_eos": true, "logit_bias": map[string]float64{eos: 100}, "max_tokens": 3}
		var skipped, kept lpCompletion
		s.post(t, "/v1/completions", base(force), &skipped)
		force["skip_special_tokens"] = false
		s.post(t, "/v1/completions", base(force), &kept)
		eosText := string(tok.Vocab().Piece(tok.Vocab().EOS(), true))
		if skipped.Choices[0].Text != "" || kept.Choices[0].Text != strings.Repeat(eosText, 3) {
			t.Errorf("EOS ×3: skipped %q, kept %q (want %q)", skipped.Choices[0].Text, kept.Choices[0].Text, strings.Repeat(eosText, 3))
		}
	})

	t.Run("truncate_prompt_tokens", func(t *testing.T) {
		long := "Lily and Ben went to the park. They played on the swings and then they ate a big cake."
		ids, _ := tok.Encode(long, true)
		var cut, direct lpCompletion
		if code, _ := s.post(t, "/v1/completions", base(map[string]any{"prompt": long, "truncate_prompt_tokens": 6}), &cut); code != 200 {
			t.Fatal(code)
		}
		s.post(t, "/v1/completions", base(map[string]any{"prompt": ids[len(ids)-6:]}), &direct)
		if cut.Usage.PromptTokens != 6 || cut.Choices[0].Text != direct.Choices[0].Text {
			t.Errorf("truncated: %d prompt tokens, %q; the last 6 tokens directly: %q", cut.Usage.PromptTokens, cut.Choices[0].Text, direct.Choices[0].Text)
		}
	})

	t.Run("prompt_logprobs", func(t *testing.T) {
		var c, echo lpCompletion
		if code, _ := s.post(t, "/v1/completions", base(map[string]any{"prompt_logprobs": 2, "max_tokens": 1}), &c); code != 200 {
			t.Fatal(code)
		}
		s.post(t, "/v1/completions", base(map[string]any{"echo": true, "max_tokens": 1, "return_tokens_as_token_ids": false}), &echo)
		ids, _ := tok.Encode("Once upon a time", true)
		pl := c.Choices[0].PromptLogprobs
		if len(pl) != len(ids) || pl[0] != nil {
			t.Fatalf("prompt_logprobs %v for %d prompt tokens", pl, len(ids))
		}
		for i := 1; i < len(ids); i++ {
			e, ok := pl[i][strconv.Itoa(int(ids[i]))]
			if !ok || e.Rank < 1 || len(pl[i]) < 2 || len(pl[i]) > 3 {
				t.Fatalf("position %d: %v", i, pl[i])
			}
			// The same value as echo's logprobs (log-softmax of the raw logits).
			if want := *echo.Choices[0].Logprobs.TokenLogprobs[i]; math.Abs(e.Logprob-want) > 1e-5 {
				t.Errorf("position %d: %g, echo says %g", i, e.Logprob, want)
			}
		}
		var chat lpCompletion
		if code, _ := s.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "messages": []map[string]string{{"role": "user", "content": "Hi"}}, "max_tokens": 1, "prompt_logprobs": 0}, &chat); code != 200 || len(chat.PromptLogprobs) < 2 || chat.PromptLogprobs[0] != nil {
			t.Errorf("chat prompt_logprobs: %d %v", code, chat.PromptLogprobs)
		}
	})

	bad := []struct {
		name  string
		body  map[string]any
		param string
	}{
		{"best_of above n", base(map[string]any{"best_of": 3}), "best_of"},
		{"suffix without FIM tokens", base(map[string]any{"suffix": "The end."}), "suffix"},
		{"allowed token outside the vocabulary", base(map[string]any{"allowed_token_ids": []int{1, 512}}), "allowed_token_ids[1]"},
		{"empty allowed_token_ids", base(map[string]any{"allowed_token_ids": []int{}}), "allowed_token_ids"},
		{"empty bad word", base(map[string]any{"bad_words": []string{""}}), "bad_words[0]"},
		{"truncate 0", base(map[string]any{"truncate_prompt_tokens": 0}), "truncate_prompt_tokens"},
		{"prompt_logprobs streamed", base(map[string]any{"prompt_logprobs": 1, "stream": true}), "prompt_logprobs"},
		{"prompt_logprobs 21", base(map[string]any{"prompt_logprobs": 21}), "prompt_logprobs"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var e errBody
			if code, _ := s.post(t, "/v1/completions", tt.body, &e); code != http.StatusBadRequest || e.Error.Param != tt.param {
				t.Errorf("%d %+v, want 400 naming %s", code, e, tt.param)
			}
		})
	}
	var ok lpCompletion
	if code, _ := s.post(t, "/v1/completions", base(map[string]any{"best_of": 1}), &ok); code != 200 {
		t.Errorf("best_of equal to n: %d", code)
	}
}

// suffix fills in the middle with the vocabulary's FIM tokens: a model with
// DeepSeek Coder's vocabulary (dummy weights) gets
// [BOS] FIM_PRE prompt FIM_SUF suffix FIM_MID.
func TestCompletionSuffixFIM(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "coder.gguf")
	shape := synth.Shape{Name: "tiny-coder", Of: "a test", Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, FF: 128, Context: 512, RopeTheta: 10000, RMSEps: 1e-5}
	if _, err := synth.Write(path, synth.Options{Shape: shape, DType: synth.DType("f32"), VocabPath: "../engine/llamacpp/testdata/vocabs/ggml-vocab-deepseek-coder.gguf", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, models.GenerativeConfig{Name: "coder", Path: path})
	tok := s.model.Tokenizer()
	prefix, _ := tok.Encode("def add(a, b):\n    return ", false)
	suffix, _ := tok.Encode("\n\nprint(add(1, 2))", false)
	var c lpCompletion
	code, _ := s.post(t, "/v1/completions", map[string]any{"model": "coder", "prompt": "def add(a, b):\n    return ", "suffix": "\n\nprint(add(1, 2))", "max_tokens": 4, "temperature": 0}, &c)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	if want := len(prefix) + len(suffix) + 4; c.Usage.PromptTokens != want && c.Usage.PromptTokens != want-1 {
		t.Errorf("prompt tokens %d, want %d (FIM layout)", c.Usage.PromptTokens, want)
	}
}
