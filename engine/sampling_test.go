package engine

import (
	"errors"
	"testing"
)

func TestSamplingValidate(t *testing.T) {
	ok := DefaultSampling()
	if err := ok.Validate(100); err != nil {
		t.Fatalf("default sampling: %v", err)
	}
	cases := map[string]func(*Sampling){
		"negative temperature": func(s *Sampling) { s.Temperature = -0.1 },
		"top_p zero":           func(s *Sampling) { s.TopP = 0 },
		"top_p above one":      func(s *Sampling) { s.TopP = 1.5 },
		"min_p above one":      func(s *Sampling) { s.MinP = 2 },
		"repetition zero":      func(s *Sampling) { s.RepetitionPenalty = 0 },
		"presence too big":     func(s *Sampling) { s.PresencePenalty = 3 },
		"frequency too small":  func(s *Sampling) { s.FrequencyPenalty = -3 },
		"top_logprobs":         func(s *Sampling) { s.TopLogprobs = -1 },
		"bias outside vocab":   func(s *Sampling) { s.LogitBias = []TokenBias{{Token: 100, Bias: 1}} },
	}
	for name, mutate := range cases {
		s := DefaultSampling()
		mutate(&s)
		if err := s.Validate(100); !errors.Is(err, ErrInvalidSampling) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	greedy := DefaultSampling()
	if !greedy.Greedy() {
		t.Error("temperature 0 is not greedy")
	}
	greedy.Temperature, greedy.TopK = 0.8, 1
	if !greedy.Greedy() {
		t.Error("top_k 1 is not greedy")
	}
}
