package engine

import (
	"fmt"
	"math"
	"strconv"
)

// Sampling is how a sequence picks its next token. The zero value is not
// valid; start from DefaultSampling.
type Sampling struct {
	// Temperature 0 means greedy (argmax).
	Temperature float32
	// TopK keeps the K most likely tokens; 0 disables it.
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
	// AllowedTokens, when not empty, are the only tokens that may be
	// sampled (vLLM's allowed_token_ids).
	AllowedTokens []int32
	// Logprobs asks for the chosen token's logprob; TopLogprobs for that many
	// alternatives as well.
	Logprobs    bool
	TopLogprobs int
	// Grammar, when not empty, is a GBNF grammar (llama.cpp's syntax, start
	// rule "root") that every sampled token must follow: a token the
	// grammar forbids is never drawn (greedy included), and a stop token
	// only once the grammar is complete. Logprobs stay the model's raw
	// ones. The caller checks the grammar before it submits the request
	// (package grammar, and the runtime's own parser); a grammar the
	// engine cannot build fails the sequence with ErrInvalidBatch.
	Grammar string
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

// Ranges where the samplers are defined. Outside them llama.cpp's sampler
// chain overflows float32 (logit/temperature and logit/penalty become
// infinite, the softmax NaN) and aborts the process on an assertion, so they
// are refused before a sampler is built; inside them a finite logit of
// magnitude up to MaxLogit stays finite through every stage (see
// SafeLogitBound).
const (
	// MinTemperature and MaxTemperature bound a non-zero temperature.
	MinTemperature = 1e-5
	MaxTemperature = 1e5
	// MinRepetitionPenalty and MaxRepetitionPenalty bound the repetition
	// penalty; 1 disables it.
	MinRepetitionPenalty = 0.01
	MaxRepetitionPenalty = 100
	// MaxPenalty bounds the magnitude of presence and frequency penalties.
	MaxPenalty = 2
	// MaxBias bounds the magnitude of a logit bias.
	MaxBias = 100
)

// Field names a sampling parameter in the engine's own terms (the Sampling
// field). Protocol packages map it to their wire names.
type Field string

// The sampling fields Validate checks.
const (
	FieldTemperature       Field = "Temperature"
	FieldTopK              Field = "TopK"
	FieldTopP              Field = "TopP"
	FieldMinP              Field = "MinP"
	FieldRepetitionPenalty Field = "RepetitionPenalty"
	FieldPresencePenalty   Field = "PresencePenalty"
	FieldFrequencyPenalty  Field = "FrequencyPenalty"
	FieldLogitBiasToken    Field = "LogitBias.Token"
	FieldLogitBiasValue    Field = "LogitBias.Bias"
	FieldTopLogprobs       Field = "TopLogprobs"
	FieldAllowedTokens     Field = "AllowedTokens"
)

// RangeError is a sampling parameter outside the range where the engine is
// defined. It is the only error Validate returns.
type RangeError struct {
	Field Field
	// Value is the offending value.
	Value float64
	// Want describes the accepted values, e.g. "0 or in [1e-05, 100000]".
	Want string
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("engine: sampling %s = %s is invalid: want %s", e.Field, formatValue(e.Value), e.Want)
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Validate checks every parameter against the range where the samplers are
// defined, for a vocabulary of nVocab tokens. It returns a *RangeError
// naming the first parameter out of range.
func (s *Sampling) Validate(nVocab int) error {
	bad := func(f Field, v float64, want string) error { return &RangeError{Field: f, Value: v, Want: want} }
	in := func(v, lo, hi float32) bool { return v >= lo && v <= hi } // false for NaN
	switch {
	case s.Temperature != 0 && !in(s.Temperature, MinTemperature, MaxTemperature):
		return bad(FieldTemperature, float64(s.Temperature), fmt.Sprintf("0 (greedy) or in [%g, %g]", MinTemperature, MaxTemperature))
	case s.TopK < 0:
		return bad(FieldTopK, float64(s.TopK), "0 (disabled) or a positive count")
	case !(s.TopP > 0 && s.TopP <= 1):
		return bad(FieldTopP, float64(s.TopP), "in (0, 1]")
	case !in(s.MinP, 0, 1):
		return bad(FieldMinP, float64(s.MinP), "in [0, 1]")
	case !in(s.RepetitionPenalty, MinRepetitionPenalty, MaxRepetitionPenalty):
		return bad(FieldRepetitionPenalty, float64(s.RepetitionPenalty), fmt.Sprintf("in [%g, %g]", MinRepetitionPenalty, float64(MaxRepetitionPenalty)))
	case !in(s.PresencePenalty, -MaxPenalty, MaxPenalty):
		return bad(FieldPresencePenalty, float64(s.PresencePenalty), fmt.Sprintf("in [%d, %d]", -MaxPenalty, MaxPenalty))
	case !in(s.FrequencyPenalty, -MaxPenalty, MaxPenalty):
		return bad(FieldFrequencyPenalty, float64(s.FrequencyPenalty), fmt.Sprintf("in [%d, %d]", -MaxPenalty, MaxPenalty))
	case s.TopLogprobs < 0 || s.TopLogprobs > nVocab:
		return bad(FieldTopLogprobs, float64(s.TopLogprobs), fmt.Sprintf("in [0, %d]", nVocab))
	}
	for _, t := range s.AllowedTokens {
		if t < 0 || int(t) >= nVocab {
			return bad(FieldAllowedTokens, float64(t), fmt.Sprintf("a token id in [0, %d)", nVocab))
		}
	}
	for _, b := range s.LogitBias {
		if b.Token < 0 || int(b.Token) >= nVocab {
			return bad(FieldLogitBiasToken, float64(b.Token), fmt.Sprintf("a token id in [0, %d)", nVocab))
		}
		if !in(b.Bias, -MaxBias, MaxBias) {
			return bad(FieldLogitBiasValue, float64(b.Bias), fmt.Sprintf("in [%d, %d]", -MaxBias, MaxBias))
		}
	}
	return nil
}

// SafeLogitBound is the largest raw logit magnitude that stays finite
// through the sampler chain of s for a sequence of at most maxLen tokens:
// bias, then penalties (frequency counts at most maxLen occurrences), then
// the repetition penalty's scaling, then the temperature's. The engine
// refuses to sample from logits beyond it (a broken model) instead of
// letting the chain produce NaN. Greedy sampling only needs finite logits.
func (s *Sampling) SafeLogitBound(maxLen int) float32 {
	if s.Greedy() {
		return math.MaxFloat32
	}
	scale := float64(1 / s.Temperature)
	if rp := float64(s.RepetitionPenalty); rp > 0 {
		scale *= max(rp, 1/rp)
	}
	add := MaxBias + MaxPenalty + MaxPenalty*float64(maxLen)
	// Leave a factor of 2 for the softmax's sums.
	bound := math.MaxFloat32/2/scale - add
	if bound <= 0 {
		return 0
	}
	return float32(bound)
}
