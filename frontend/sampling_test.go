package frontend

import (
	"fmt"
	"math"
	"testing"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

func ptr[T any](v T) *T { return &v }

// Apply fills the scheduler request from the sampling fields and refuses,
// naming the field, what is the request's own business.
func TestSamplingApply(t *testing.T) {
	s := Sampling{Temperature: ptr(0.5), TopK: ptr(-1), Seed: ptr(int64(1<<32 + 7)), N: ptr(2),
		LogitBias: map[string]float64{"9": 1, "3": -1}, Stop: []string{"", "x"}, StopTokenIDs: []int64{5, 2},
		MinTokens: ptr(1), CacheSalt: ptr("s"), Priority: ptr(3)}
	base := scheduler.Request{Sampling: engine.DefaultSampling()}
	stops, err := s.Apply(&base, 100, []int32{2}, 1234)
	if err != nil {
		t.Fatal(err)
	}
	if len(stops) != 1 || stops[0] != "x" || base.N != 2 || base.Sampling.Temperature != 0.5 || base.Sampling.TopK != 0 ||
		base.Sampling.Seed != 7 || base.Sampling.LogitBias[0].Token != 3 || fmt.Sprint(base.StopTokens) != "[2 5]" ||
		base.MinTokens != 1 || base.CacheSalt != "s" || base.Priority != 3 {
		t.Fatalf("stops %q, base %+v", stops, base)
	}
	for _, tt := range []struct {
		s     Sampling
		param string
	}{
		{Sampling{Temperature: ptr(2.5)}, "temperature"},
		{Sampling{N: ptr(0)}, "n"},
		{Sampling{TopK: ptr(-2)}, "top_k"},
		{Sampling{LogitBias: map[string]float64{"x": 1}}, "logit_bias"},
		{Sampling{StopTokenIDs: []int64{100}}, "stop_token_ids"},
		{Sampling{CacheSalt: ptr("")}, "cache_salt"},
	} {
		_, err := tt.s.Apply(&scheduler.Request{}, 100, nil, 0)
		badParam(t, err, tt.param)
	}
	// The engine's ranges come back named by the field, with what was sent.
	top := Sampling{TopP: ptr(5.0)}
	base = scheduler.Request{Sampling: engine.DefaultSampling()}
	if _, err := top.Apply(&base, 100, nil, 0); err != nil {
		t.Fatal(err)
	}
	err = top.Finish(&base, 100, "top_logprobs")
	badParam(t, err, "top_p")
	if err.Error() != "top_p: top_p must be in (0, 1]; got 5." {
		t.Errorf("range error %q", err)
	}
}

func TestFloat32(t *testing.T) {
	if Float32(1e-46) == 0 || Float32(-1e-46) >= 0 || !math.IsInf(float64(Float32(1e300)), 1) || Float32(0.5) != 0.5 {
		t.Error("Float32 changes what a value means to the range checks")
	}
}

// RequestError names the scheduler's capacity checks in the request's
// protocol's fields.
func TestRequestError(t *testing.T) {
	prompt := func(i int) string { return fmt.Sprintf("input[%d]", i) }
	re := &scheduler.RequestError{Err: scheduler.ErrTooLong, Field: scheduler.FieldMaxTokens, Limit: 64, PromptTokens: 60, MaxTokens: 10}
	tooLong := &core.IndexError{Index: 1, Err: re}
	badParam(t, RequestError(tooLong, "max_output_tokens", true, prompt), "max_output_tokens")
	re.Field = scheduler.FieldPrompt
	badParam(t, RequestError(tooLong, "max_output_tokens", false, prompt), "input[1]")
	zero := &scheduler.RequestError{Err: scheduler.ErrInvalid, Field: scheduler.FieldMaxTokens, Value: 0}
	if err := RequestError(zero, "max_output_tokens", true, prompt); err.Error() != "max_output_tokens: max_output_tokens must be at least 1, got 0." {
		t.Errorf("%v", err)
	}
}
