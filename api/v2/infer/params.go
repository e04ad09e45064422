package infer

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

// DefaultMaxTokens is the generation cap when a request sets none, as in
// vLLM's SamplingParams (which Triton's vLLM backend uses).
const DefaultMaxTokens = 16

// GenParams are an LLM request's generation settings, checked.
type GenParams struct {
	// base is the scheduler request every prompt starts from.
	base  scheduler.Request
	stops []string
	// Details asks for per-token details with logprobs and the finish
	// reason (generate's "details").
	Details bool
	// Stream is the "stream" setting; StreamSet says whether it was sent.
	Stream, StreamSet bool
	// ExcludeInput leaves the prompt out of text_output (true unless
	// exclude_input_in_output is false; streams never repeat it).
	ExcludeInput bool
	// Reasoning is the model's reasoning parser ("" for none): its
	// thinking is counted (and bounded by ThinkingBudget, -1 for no bound)
	// and returned apart from the answer, as reasoning_content.
	Reasoning      string
	ThinkingBudget int
	// TopLogprobs is how many alternatives each token's details list
	// (top_logprobs, as chat's).
	TopLogprobs int
	// Images are the encoded images of the prompt (the image input or
	// parameter), for a model with a vision projector.
	Images [][]byte
}

// ParamThinkingBudget is the parameter (and optional input) that bounds a
// reasoning model's thinking, as chat's thinking_token_budget does.
const ParamThinkingBudget = "thinking_token_budget"

// maxTopLogprobs is the most alternatives per token a request may ask
// for, as on the OpenAI routes.
const maxTopLogprobs = 20

// reasoningModel is a Model with a reasoning parser (serve
// --reasoning-parser).
type reasoningModel interface{ ReasoningParser() string }

// ReasoningParserOf is m's reasoning parser, "" for none.
func ReasoningParserOf(m Model) string {
	if rm, ok := m.(reasoningModel); ok {
		return rm.ReasoningParser()
	}
	return ""
}

// intIn returns the integer parameter name, which must lie in [lo, hi]
// (want says so in the error: "at least 1").
func (p Parameters) intIn(name string, lo, hi int64, want string) (int64, bool, error) {
	v, ok, err := p.Int64(name)
	if err != nil {
		return 0, false, Errorf(Invalid, "%v", err)
	}
	if ok && (v < lo || v > hi) {
		return 0, false, invalidf("parameter %s must be %s, got %d", name, want, v)
	}
	return v, ok, nil
}

// ParseParams reads the generation settings from parameters (vLLM's
// names): max_tokens, min_tokens, temperature, top_p, top_k, min_p,
// repetition_penalty, presence_penalty, frequency_penalty, seed, stop,
// ignore_eos, details, logprobs, top_logprobs, thinking_token_budget,
// stream, exclude_input_in_output. Other names are
// ignored, as V2 parameters are open-ended. randomSeed is used when no
// seed is sent. Ranges are the engine's (engine.Sampling.Validate).
func ParseParams(m LLM, p Parameters, randomSeed uint32) (*GenParams, error) {
	tok := m.Tokenizer()
	nVocab := tok.Vocab().NumTokens()
	g := &GenParams{base: scheduler.Request{N: 1, PromptLogprobs: -1, Sampling: engine.DefaultSampling(), MaxTokens: DefaultMaxTokens}, ExcludeInput: true}
	s := &g.base.Sampling
	s.Temperature = 1
	s.Seed = randomSeed
	bad := func(err error) error { return Errorf(Invalid, "%v", err) }

	if v, ok, err := p.intIn("max_tokens", 1, math.MaxInt32, "at least 1"); err != nil {
		return nil, err
	} else if ok {
		g.base.MaxTokens = int(v)
	}
	if v, ok, err := p.intIn("min_tokens", 0, math.MaxInt32, "0 or more"); err != nil {
		return nil, err
	} else if ok {
		g.base.MinTokens = int(v)
	}
	for _, f := range []struct {
		name string
		dst  *float32
	}{
		{"temperature", &s.Temperature}, {"top_p", &s.TopP}, {"min_p", &s.MinP},
		{"repetition_penalty", &s.RepetitionPenalty}, {"presence_penalty", &s.PresencePenalty}, {"frequency_penalty", &s.FrequencyPenalty},
	} {
		v, ok, err := p.Float64(f.name)
		if err != nil {
			return nil, bad(err)
		}
		if ok {
			*f.dst = float32(v)
			if math.IsInf(float64(*f.dst), 0) && !math.IsInf(v, 0) {
				*f.dst = float32(math.Copysign(math.MaxFloat32, v)) // out of range either way; Validate names it
			}
		}
	}
	if v, ok, err := p.Int64("top_k"); err != nil {
		return nil, bad(err)
	} else if ok {
		switch {
		case v == -1 || v == 0:
			s.TopK = 0
		case v < -1:
			return nil, invalidf("parameter top_k must be -1 or 0 (disabled) or a positive integer, got %d", v)
		default:
			s.TopK = int32(min(v, math.MaxInt32))
		}
	}
	if x, ok := p["seed"]; ok {
		switch v := x.(type) {
		case int64:
			s.Seed = uint32(v) // the low 32 bits, as the OpenAI routes
		case uint64:
			s.Seed = uint32(v)
		default:
			return nil, invalidf("parameter seed must be an integer, got %s", describeValue(x))
		}
	}
	if v, ok, err := p.Strings("stop"); err != nil {
		return nil, bad(err)
	} else if ok {
		for _, st := range v {
			if st != "" {
				g.stops = append(g.stops, st)
			}
		}
	}
	if v, _, err := p.Bool("ignore_eos"); err != nil {
		return nil, bad(err)
	} else if v {
		g.base.IgnoreEOS = true
	} else {
		g.base.StopTokens = tok.StopTokens()
	}
	if g.base.MinTokens > 0 && len(g.base.StopTokens) >= nVocab {
		return nil, invalidf("parameter min_tokens bans the stop tokens until that many tokens are generated, and they are the whole vocabulary")
	}
	var err error
	if g.Details, _, err = p.Bool("details"); err != nil {
		return nil, bad(err)
	}
	cum, _, err := p.Bool("return_cumulative_logprob")
	if err != nil {
		return nil, bad(err)
	}
	lps, _, err := p.Bool("logprobs")
	if err != nil {
		return nil, bad(err)
	}
	if v, ok, err := p.intIn("top_logprobs", 0, maxTopLogprobs, fmt.Sprintf("between 0 and %d", maxTopLogprobs)); err != nil {
		return nil, err
	} else if ok {
		g.TopLogprobs = int(v)
		lps = lps || v > 0
	}
	// logprobs (chat's name) asks for what details gives: each token with
	// its logprob.
	g.Details = g.Details || lps
	s.Logprobs = g.Details || cum
	s.TopLogprobs = g.TopLogprobs
	g.Reasoning, g.ThinkingBudget = ReasoningParserOf(m), -1
	if v, ok, err := p.intIn(ParamThinkingBudget, 0, math.MaxInt32, "a non-negative integer"); err != nil {
		return nil, err
	} else if ok {
		if g.Reasoning == "" {
			return nil, invalidf("parameter %s needs a model with a reasoning parser; model %q has none (serve it with --reasoning-parser)", ParamThinkingBudget, m.Name())
		}
		g.ThinkingBudget = int(v)
	}
	if g.Stream, g.StreamSet, err = p.Bool("stream"); err != nil {
		return nil, bad(err)
	}
	if v, ok, err := p.Bool(InputExclude); err != nil {
		return nil, bad(err)
	} else if ok {
		g.ExcludeInput = v
	}
	if g.Images, err = imagesParam(p); err != nil {
		return nil, err
	}
	if err := s.Validate(nVocab); err != nil {
		return nil, rangeError(err)
	}
	slices.Sort(g.base.StopTokens)
	return g, nil
}

// rangeError maps the engine's *engine.RangeError to the parameter name.
func rangeError(err error) error {
	var re *engine.RangeError
	if !errors.As(err, &re) {
		return err
	}
	name := map[engine.Field]string{
		engine.FieldTemperature: "temperature", engine.FieldTopP: "top_p", engine.FieldMinP: "min_p",
		engine.FieldTopK: "top_k", engine.FieldRepetitionPenalty: "repetition_penalty",
		engine.FieldPresencePenalty: "presence_penalty", engine.FieldFrequencyPenalty: "frequency_penalty",
		engine.FieldTopLogprobs: "top_logprobs",
	}[re.Field]
	if name == "" {
		name = string(re.Field)
	}
	return invalidf("parameter %s must be %s; got %g", name, re.Want, re.Value)
}
