package openaitest

import (
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/tokenizer"
	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

// Pieces make up the fake vocabulary: words split so that stop strings
// and multi-token words cross token boundaries.
var Pieces = []string{
	"Hello", "Hel", "lo", " wo", "rld", " world", "!", " there", " Once", " upon", " a", " time",
	" ", "\n", "Hi", "Bye", "user", "assistant", "system", "END", "E", "ND", "a", "b", "c",
}

var (
	// Vocab is the fake vocabulary: Pieces, then <|im_start|> and
	// <|im_end|> as control tokens; <|im_end|> ends generation, and
	// tokenizing adds BOS.
	Vocab = tokenizertest.New(tokenizertest.Spec{
		Pieces:  Pieces,
		Special: []string{"<|im_start|>", "<|im_end|>"},
		EOG:     []string{"<|im_end|>"},
		AddBOS:  true,
	})
	// IMEnd is <|im_end|>, the token that ends an answer.
	IMEnd = Vocab.Token("<|im_end|>")
)

// NewTokenizer returns a tokenizer over Vocab with the given chat
// template ("" for ChatML).
func NewTokenizer(t testing.TB, template string) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New(Vocab, template)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Tokens tokenizes s with Vocab, without BOS, parsing special tokens.
func Tokens(s string) []int32 {
	ids, _ := Vocab.Tokenize(s, false, true)
	return ids
}

// Token is the single token for s; it panics when s is not one token.
func Token(s string) int32 {
	id := Vocab.Token(s)
	if id < 0 {
		panic("openaitest: not a token: " + s)
	}
	return id
}

// Logprob is the logprob entry of the token chosen, with the top
// alternatives (see Alt).
func Logprob(chosen string, v float32, top ...engine.TokenLogprob) engine.Logprobs {
	return engine.Logprobs{Chosen: engine.TokenLogprob{Token: Token(chosen), Logprob: v}, Top: top}
}

// Alt is one top-logprobs alternative: the token s with logprob v.
func Alt(s string, v float32) engine.TokenLogprob {
	return engine.TokenLogprob{Token: Token(s), Logprob: v}
}
