package frontend

import (
	"fmt"
	"slices"

	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Thinking returns the thinking section of a request for a model whose
// reasoning parser is parser (one of tokenizer.ReasoningParsers): its
// markers as tokens of tok's vocabulary, whether the output starts inside
// thinking or with thinking off (read from the end of prompt, the text the
// model saw), budget, the most tokens it may think (-1: no bound), and how
// each token leaves UTF-8 text, so that a forced end never cuts a
// character (the budget is then passed by the 1 to 3 tokens that complete
// it). The scheduler counts and bounds the section with it; the output processor
// (OutputConfig.Reasoning) splits the same section from the answer.
//
// Checking the budget against the client's request is the protocol's job:
// it names its own field.
func Thinking(tok *tokenizer.Tokenizer, parser, prompt string, budget int) (*scheduler.Thinking, error) {
	marks, err := tokenizer.ReasoningMarkers(parser)
	if err != nil {
		return nil, err
	}
	start, err := tokenizer.ReasoningStartOf(parser, prompt)
	if err != nil {
		return nil, err
	}
	// UTF8: a forced end of thinking waits for the character the thinking
	// text is in the middle of, if any, rather than cut it.
	th := &scheduler.Thinking{Budget: budget, StartInside: start == tokenizer.ReasoningInside, Off: start == tokenizer.ReasoningOff,
		UTF8: tok.UTF8Tails()}
	for _, x := range []struct {
		dst  *[]int32
		text string
	}{{&th.Start, marks.Open}, {&th.End, marks.Close}, {&th.After, marks.After}} {
		if *x.dst, err = markerTokens(tok, x.text); err != nil {
			return nil, fmt.Errorf("tokenize the reasoning marker %q: %w", x.text, err)
		}
	}
	if len(th.Start) == 0 || len(th.End) == 0 {
		return nil, fmt.Errorf("the reasoning markers %q and %q tokenize to nothing", marks.Open, marks.Close)
	}
	return th, nil
}

// markerTokens tokenizes a marker as it appears after other text, which
// is how the model writes it: alone, a SentencePiece vocabulary would put
// its dummy-prefix space in front ("▁<", ...), and a forced </think> would
// then add a space to the reasoning and the answer. The marker is encoded
// after "a" and the tokens of "a" are dropped, when they are a prefix;
// otherwise (the two merged) the marker is encoded alone.
func markerTokens(tok *tokenizer.Tokenizer, marker string) ([]int32, error) {
	lead, err := tok.Encode("a", false)
	if err != nil {
		return nil, err
	}
	both, err := tok.Encode("a"+marker, false)
	if err != nil {
		return nil, err
	}
	if len(both) > len(lead) && slices.Equal(both[:len(lead)], lead) {
		return both[len(lead):], nil
	}
	return tok.Encode(marker, false)
}
