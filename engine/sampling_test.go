package engine

import (
	"errors"
	"math"
	"testing"
)

func TestSamplingValidate(t *testing.T) {
	ok := DefaultSampling()
	if err := ok.Validate(100); err != nil {
		t.Fatalf("default sampling: %v", err)
	}
	nan := float32(math.NaN())
	cases := []struct {
		name   string
		mutate func(*Sampling)
		field  Field
	}{
		{"negative temperature", func(s *Sampling) { s.Temperature = -0.1 }, FieldTemperature},
		{"denormal temperature", func(s *Sampling) { s.Temperature = 1e-40 }, FieldTemperature},
		{"tiny temperature", func(s *Sampling) { s.Temperature = 1e-38 }, FieldTemperature},
		{"huge temperature", func(s *Sampling) { s.Temperature = float32(math.Inf(1)) }, FieldTemperature},
		{"NaN temperature", func(s *Sampling) { s.Temperature = nan }, FieldTemperature},
		{"negative top_k", func(s *Sampling) { s.TopK = -1 }, FieldTopK},
		{"top_p zero", func(s *Sampling) { s.TopP = 0 }, FieldTopP},
		{"top_p above one", func(s *Sampling) { s.TopP = 1.5 }, FieldTopP},
		{"NaN top_p", func(s *Sampling) { s.TopP = nan }, FieldTopP},
		{"min_p above one", func(s *Sampling) { s.MinP = 2 }, FieldMinP},
		{"repetition zero", func(s *Sampling) { s.RepetitionPenalty = 0 }, FieldRepetitionPenalty},
		{"repetition tiny", func(s *Sampling) { s.RepetitionPenalty = 1e-38 }, FieldRepetitionPenalty},
		{"repetition huge", func(s *Sampling) { s.RepetitionPenalty = 1e3 }, FieldRepetitionPenalty},
		{"presence too big", func(s *Sampling) { s.PresencePenalty = 3 }, FieldPresencePenalty},
		{"frequency too small", func(s *Sampling) { s.FrequencyPenalty = -3 }, FieldFrequencyPenalty},
		{"top_logprobs", func(s *Sampling) { s.TopLogprobs = -1 }, FieldTopLogprobs},
		{"bias outside vocab", func(s *Sampling) { s.LogitBias = []TokenBias{{Token: 100, Bias: 1}} }, FieldLogitBiasToken},
		{"bias too big", func(s *Sampling) { s.LogitBias = []TokenBias{{Token: 1, Bias: 101}} }, FieldLogitBiasValue},
		{"NaN bias", func(s *Sampling) { s.LogitBias = []TokenBias{{Token: 1, Bias: nan}} }, FieldLogitBiasValue},
	}
	for _, tc := range cases {
		s := DefaultSampling()
		tc.mutate(&s)
		var re *RangeError
		if err := s.Validate(100); !errors.As(err, &re) || re.Field != tc.field || re.Want == "" {
			t.Errorf("%s: err = %v, want a RangeError for %s", tc.name, err, tc.field)
		}
	}
	for _, temp := range []float32{0, MinTemperature, 1, MaxTemperature} {
		s := DefaultSampling()
		s.Temperature = temp
		if err := s.Validate(100); err != nil {
			t.Errorf("temperature %g: %v", temp, err)
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

// At the edges of the valid ranges, the bound leaves room for real logits
// and a logit at the bound stays finite through every stage.
func TestSafeLogitBound(t *testing.T) {
	s := DefaultSampling()
	s.Temperature, s.RepetitionPenalty = MinTemperature, MinRepetitionPenalty
	b := s.SafeLogitBound(1 << 20)
	if b < 1e25 {
		t.Fatalf("bound %g leaves no room for real logits", b)
	}
	x := float64(b) + MaxBias + MaxPenalty*(1<<20)
	x *= 1 / float64(s.RepetitionPenalty) / float64(s.Temperature)
	if x > math.MaxFloat32 {
		t.Fatalf("a logit at the bound scales to %g", x)
	}
	if g := DefaultSampling(); g.SafeLogitBound(10) != math.MaxFloat32 {
		t.Fatal("greedy sampling is bounded")
	}
}

func TestKVSliceAndJoin(t *testing.T) {
	l := &KVLayout{Sections: []KVSection{{Groups: 1, Unit: 2}, {Groups: 3, Unit: 1}}}
	// Position p holds bytes p*10+k in section 0 and p*10+5+g in section 1.
	mk := func(from, n int) *KV {
		kv := &KV{Layout: l, N: n}
		for p := from; p < from+n; p++ {
			kv.Data = append(kv.Data, byte(p*10), byte(p*10+1))
		}
		for g := range 3 {
			for p := from; p < from+n; p++ {
				kv.Data = append(kv.Data, byte(p*10+5+g))
			}
		}
		return kv
	}
	whole := mk(0, 6)
	if l.BytesPerPosition() != 5 || whole.Size() != 30 {
		t.Fatalf("sizes %d %d", l.BytesPerPosition(), whole.Size())
	}
	if got, want := whole.Slice(2, 5).Data, mk(2, 3).Data; string(got) != string(want) {
		t.Fatalf("slice = %v, want %v", got, want)
	}
	joined, n, err := JoinKV(nil, []*KV{whole.Slice(0, 2), whole.Slice(2, 3), whole.Slice(3, 6)})
	if err != nil || n != 6 || string(joined) != string(whole.Data) {
		t.Fatalf("join = %v %d %v, want %v", joined, n, err, whole.Data)
	}
	other := &KV{Layout: &KVLayout{Sections: []KVSection{{Groups: 1, Unit: 5}}}, N: 1, Data: make([]byte, 5)}
	if _, _, err := JoinKV(nil, []*KV{whole, other}); !errors.Is(err, ErrKVLayout) {
		t.Fatalf("join of different layouts: %v", err)
	}
}
