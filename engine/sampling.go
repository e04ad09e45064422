package engine

import (
	"errors"
	"fmt"
)

// Sampling is how a sequence picks its next token. The zero value is not
// valid; start from DefaultSampling.
type Sampling struct {
	// Temperature 0 means greedy (argmax).
	Temperature float32
	// TopK keeps the K most likely tokens; <= 0 disables it.
	TopK int32
	// TopP keeps the smallest set whose probability reaches P; 1 disables it.
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one; 0
	// disables it.
	MinP float32
	// RepetitionPenalty divides positive logits (and multiplies negative
	// ones) of tokens in the prompt or the output; 1 disables it.
	RepetitionPenalty float32
	// PresencePenalty and FrequencyPenalty subtract from the logits of tokens
	// in the output, once and per occurrence; 0 disables them.
	PresencePenalty  float32
	FrequencyPenalty float32
	// Seed seeds the sequence's random generator.
	Seed uint32
	// LogitBias adds a bias to a token's logit before sampling.
	LogitBias []TokenBias
	// Logprobs asks for the chosen token's logprob; TopLogprobs for that many
	// alternatives as well.
	Logprobs    bool
	TopLogprobs int
}

// TokenBias is one logit bias entry.
type TokenBias struct {
	Token int32
	Bias  float32
}

// DefaultSampling is neutral: greedy with no penalties.
func DefaultSampling() Sampling {
	return Sampling{TopP: 1, RepetitionPenalty: 1}
}

// Greedy reports whether the sampling always picks the most likely token.
func (s *Sampling) Greedy() bool { return s.Temperature == 0 || s.TopK == 1 }

// ErrInvalidSampling is returned for sampling parameters out of range.
var ErrInvalidSampling = errors.New("invalid sampling parameters")

// Validate checks ranges against a vocabulary of nVocab tokens.
func (s *Sampling) Validate(nVocab int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSampling, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Temperature < 0:
		return bad("temperature must be >= 0, got %g", s.Temperature)
	case s.TopP <= 0 || s.TopP > 1:
		return bad("top_p must be in (0, 1], got %g", s.TopP)
	case s.MinP < 0 || s.MinP > 1:
		return bad("min_p must be in [0, 1], got %g", s.MinP)
	case s.RepetitionPenalty <= 0:
		return bad("repetition_penalty must be > 0, got %g", s.RepetitionPenalty)
	case s.PresencePenalty < -2 || s.PresencePenalty > 2:
		return bad("presence_penalty must be in [-2, 2], got %g", s.PresencePenalty)
	case s.FrequencyPenalty < -2 || s.FrequencyPenalty > 2:
		return bad("frequency_penalty must be in [-2, 2], got %g", s.FrequencyPenalty)
	case s.TopLogprobs < 0:
		return bad("top_logprobs must be >= 0, got %d", s.TopLogprobs)
	}
	for _, b := range s.LogitBias {
		if b.Token < 0 || int(b.Token) >= nVocab {
			return bad("logit_bias token %d is outside the vocabulary [0, %d)", b.Token, nVocab)
		}
	}
	return nil
}
