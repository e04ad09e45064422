package enginetest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

// run decodes seq to its end on s, one step per token after the prompt,
// and returns the sampled tokens (at most limit), the sequence's failure
// if it failed.
func run(t *testing.T, s *enginetest.Scripted, seq engine.SeqID, prompt []int32, limit int) ([]int32, error) {
	t.Helper()
	step := &engine.Step{
		Added: []engine.NewSequence{{Seq: seq, History: prompt, Sampling: greedy()}},
		Batch: []engine.Chunk{{Seq: seq, Slot: 0, Pos: 0, Tokens: prompt, Sample: true}},
	}
	var out []int32
	for len(out) < limit {
		res, err := s.Execute(context.Background(), step)
		if err != nil {
			t.Fatal(err)
		}
		if step.Batch[0].Only != nil {
			t.Fatalf("the scheduler's step was changed: Only %v", step.Batch[0].Only)
		}
		if len(res.Failures) > 0 {
			return out, res.Failures[0].Err
		}
		tok := res.Samples[0].Token
		out = append(out, tok)
		if tok == s.Vocab.EOS() {
			break
		}
		pos := step.Batch[0].Pos + int32(len(step.Batch[0].Tokens))
		step = &engine.Step{Batch: []engine.Chunk{{Seq: seq, Slot: 0, Pos: pos, Tokens: []int32{tok}, Sample: true}}}
	}
	_, err := s.Execute(context.Background(), &engine.Step{Clears: []engine.Slot{0}, Removed: []engine.SeqID{seq}})
	return out, err
}

func TestScripted(t *testing.T) {
	v := tokenizertest.New(tokenizertest.Spec{
		Pieces:  []string{"{\"", "tool", "_call", "\":", " {", "}", "name", "Paris", "weather"},
		Special: []string{"<|im_start|>", "<|im_end|>"},
	})
	fake := &enginetest.Fake{Slots: 1, SlotTokens: 256, Vocab: v.NumTokens()}
	var prompts []string
	s := &enginetest.Scripted{Executor: fake, Vocab: v, Script: func(prompt string) (string, bool) {
		prompts = append(prompts, prompt)
		switch {
		case strings.Contains(prompt, "free"):
			return "", false
		case strings.Contains(prompt, "sunny"):
			return "It is sunny in Paris.<|im_end|>", true
		}
		return `{"tool_call": {"name": "weather", "arguments": {"city": "Paris"}}}`, true
	}}
	t.Cleanup(func() { _ = s.Close() })
	decode := func(toks []int32) string {
		var b strings.Builder
		for _, tok := range toks {
			b.Write(v.Piece(tok, true))
		}
		return b.String()
	}
	prompt, _ := v.Tokenize("<|im_start|>user\nweather in Paris?<|im_end|>", false, true)

	out, err := run(t, s, 1, prompt, 200)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decode(out), `{"tool_call": {"name": "weather", "arguments": {"city": "Paris"}}}</s>`; got != want {
		t.Fatalf("answer %q, want %q", got, want)
	}
	if want := "<|im_start|>user\nweather in Paris?<|im_end|>"; prompts[0] != want {
		t.Fatalf("the script saw %q, want %q", prompts[0], want)
	}
	// Spelled longest first: the vocabulary's pieces, not bytes.
	if out[0] != v.Token("{\"") || out[1] != v.Token("tool") {
		t.Fatalf("answer tokens %v: not spelled by the longest pieces", out[:2])
	}

	// A second turn, and a control token in the answer.
	prompt2, _ := v.Tokenize("<|im_start|>tool\nsunny<|im_end|>", false, true)
	out, err = run(t, s, 2, prompt2, 200)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decode(out), "It is sunny in Paris.<|im_end|></s>"; got != want {
		t.Fatalf("answer %q, want %q", got, want)
	}

	// Unscripted: the model's own tokens.
	free, _ := v.Tokenize("free", false, false)
	out, err = run(t, s, 3, free, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := enginetest.Next(free, v.NumTokens())
	if out[0] != want {
		t.Fatalf("unscripted sample %d, want the model's %d", out[0], want)
	}

	if s.Asked() != 2 {
		t.Fatalf("Asked %d, want 2", s.Asked())
	}
}

// lettersVocab has one token per letter and an EOS, and no byte tokens.
type lettersVocab struct{}

func (lettersVocab) Piece(tok int32, special bool) []byte {
	if tok == 26 {
		if special {
			return []byte("</s>")
		}
		return nil
	}
	return []byte{byte('a' + tok)}
}
func (lettersVocab) NumTokens() int { return 27 }
func (lettersVocab) EOS() int32     { return 26 }

// TestScriptedUnspellable: an answer the vocabulary cannot spell fails the
// sequence, not the executor.
func TestScriptedUnspellable(t *testing.T) {
	fake := &enginetest.Fake{Slots: 1, SlotTokens: 64, Vocab: 27}
	s := &enginetest.Scripted{Executor: fake, Vocab: lettersVocab{}, Script: func(p string) (string, bool) { return p + "!", true }}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := run(t, s, 1, []int32{0, 1}, 5); !errors.Is(err, engine.ErrInvalidBatch) || !strings.Contains(err.Error(), `"ab!" at byte 2`) {
		t.Fatalf("unspellable answer: err %v, want ErrInvalidBatch at \"ab!\"", err)
	}
	out, err := run(t, &enginetest.Scripted{Executor: fake, Vocab: lettersVocab{}, Script: func(p string) (string, bool) { return "zz", true }}, 2, []int32{0}, 5)
	if err != nil || len(out) != 3 || out[0] != 25 || out[1] != 25 || out[2] != 26 {
		t.Fatalf("answer %v, %v; want z z </s>", out, err)
	}
}

// TestScriptedResume: a sequence recomputed from its prompt and generated
// tokens (preemption) or restored from the prefix cache continues its
// answer where it was.
func TestScriptedResume(t *testing.T) {
	v := tokenizertest.New(tokenizertest.Spec{})
	fake := &enginetest.Fake{Slots: 1, SlotTokens: 64, Vocab: v.NumTokens()}
	s := &enginetest.Scripted{Executor: fake, Vocab: v, Script: func(string) (string, bool) { return "abc", true }}
	t.Cleanup(func() { _ = s.Close() })
	prompt, _ := v.Tokenize("xy", false, false)
	a := tokenizertest.ByteToken('a')
	// The sequence has generated "a" and is recomputed whole.
	res, err := s.Execute(context.Background(), &engine.Step{
		Added: []engine.NewSequence{{Seq: 1, History: prompt, Sampling: greedy()}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: append(prompt, a), Sample: true}},
	})
	if err != nil || len(res.Samples) != 1 || res.Samples[0].Token != tokenizertest.ByteToken('b') {
		t.Fatalf("after a recompute: %+v, %v; want b", res, err)
	}
}

func greedy() engine.Sampling {
	s := engine.DefaultSampling()
	s.Temperature = 0
	return s
}
