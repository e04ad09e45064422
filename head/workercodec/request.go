package workercodec

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// EncodeRequest is the wire form of q for one Generate or Prefill, all
// of its choices, without media (the head encodes a request's spans once,
// with EncodeMedia, and sets Request.media on every leg).
func EncodeRequest(q *scheduler.Request) *workerpb.Request {
	w := &workerpb.Request{
		RequestId: q.ID, Prompt: q.Prompt, N: int32(q.N), MaxTokens: int32(q.MaxTokens), MinTokens: int32(q.MinTokens),
		StopTokens: q.StopTokens, IgnoreEos: q.IgnoreEOS, Priority: int32(q.Priority), CacheSalt: q.CacheSalt,
		Sampling: encodeSampling(&q.Sampling), Thinking: encodeThinking(q.Thinking),
	}
	for _, bw := range q.BadWords {
		w.BadWords = append(w.BadWords, &workerpb.TokenSequence{Tokens: bw})
	}
	if !q.Deadline.IsZero() {
		w.Deadline = timestamppb.New(q.Deadline)
	}
	if q.PromptLogprobs >= 0 {
		w.PromptLogprobs = proto.Int32(int32(q.PromptLogprobs))
	}
	return w
}

// DecodeRequest checks a wire request and converts it (the inverse of
// EncodeRequest, media included). vocab is the model's vocabulary size,
// width its embedding width (the rows of media spans), now the arrival;
// the scheduler's own checks (CheckRequest) run at Submit. An error is an
// INVALID_ARGUMENT status naming the field.
func DecodeRequest(in *workerpb.Request, vocab, width int, now time.Time) (*scheduler.Request, error) {
	if in == nil {
		return nil, Invalid("request", "request is required.")
	}
	if len(in.Prompt) == 0 {
		return nil, Invalid("prompt", "prompt must hold at least one token id.")
	}
	spans, err := DecodeMedia(in.Media, in.Prompt, vocab, width)
	if err != nil {
		return nil, err
	}
	if spans == nil {
		if err := checkVocab("prompt", in.Prompt, vocab); err != nil {
			return nil, err
		}
	}
	if err := checkVocab("stop_tokens", in.StopTokens, vocab); err != nil {
		return nil, err
	}
	r := &scheduler.Request{
		ID: in.RequestId, Prompt: in.Prompt, N: int(in.N), MaxTokens: int(in.MaxTokens), MinTokens: int(in.MinTokens),
		StopTokens: in.StopTokens, IgnoreEOS: in.IgnoreEos, Priority: int(in.Priority), Arrival: now,
		CacheSalt: in.CacheSalt, PromptLogprobs: -1, Sampling: engine.DefaultSampling(), Media: spans,
	}
	if r.N == 0 {
		r.N = 1
	}
	if r.N < 0 {
		return nil, Invalid("n", "n must be at least 1, got %d.", r.N)
	}
	if r.MaxTokens < 1 {
		return nil, Invalid("max_tokens", "max_tokens must be at least 1, got %d.", r.MaxTokens)
	}
	if r.MinTokens < 0 || r.MinTokens > r.MaxTokens {
		return nil, Invalid("min_tokens", "min_tokens must be in [0, max_tokens=%d], got %d.", r.MaxTokens, r.MinTokens)
	}
	for i, bw := range in.BadWords {
		if bw == nil || len(bw.Tokens) == 0 {
			return nil, Invalid(fmt.Sprintf("bad_words[%d]", i), "a bad word must hold at least one token id.")
		}
		if err := checkVocab(fmt.Sprintf("bad_words[%d].tokens", i), bw.Tokens, vocab); err != nil {
			return nil, err
		}
		r.BadWords = append(r.BadWords, bw.Tokens)
	}
	if in.Deadline != nil {
		if err := in.Deadline.CheckValid(); err != nil {
			return nil, Invalid("deadline", "deadline is not a valid timestamp: %v.", err)
		}
		r.Deadline = in.Deadline.AsTime()
	}
	if in.PromptLogprobs != nil {
		if *in.PromptLogprobs < 0 || *in.PromptLogprobs > 20 {
			return nil, Invalid("prompt_logprobs", "prompt_logprobs must be in [0, 20], got %d.", *in.PromptLogprobs)
		}
		r.PromptLogprobs = int(*in.PromptLogprobs)
	}
	if th := in.Thinking; th != nil {
		t, err := decodeThinking(th, vocab)
		if err != nil {
			return nil, err
		}
		r.Thinking = t
	}
	if sp := in.Sampling; sp != nil {
		if err := decodeSampling(sp, &r.Sampling, vocab); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkVocab refuses an id of toks outside [0, vocab), naming it
// param[i].
func checkVocab(param string, toks []int32, vocab int) error {
	for i, t := range toks {
		if t < 0 || int(t) >= vocab {
			return Invalid(fmt.Sprintf("%s[%d]", param, i), "token id %d is outside the vocabulary [0, %d).", t, vocab)
		}
	}
	return nil
}

// encodeThinking is the wire form of t (nil for nil).
func encodeThinking(t *scheduler.Thinking) *workerpb.Thinking {
	if t == nil {
		return nil
	}
	return &workerpb.Thinking{Start: t.Start, End: t.End, After: t.After, StartInside: t.StartInside, Off: t.Off,
		Budget: int32(min(max(t.Budget, -1), math.MaxInt32)), Generated: int32(t.Generated)}
}

// decodeThinking checks a wire Thinking and converts it (the scheduler
// checks Generated against the prompt and n).
func decodeThinking(in *workerpb.Thinking, vocab int) (*scheduler.Thinking, error) {
	for _, f := range []struct {
		name string
		toks []int32
	}{{"start", in.Start}, {"end", in.End}, {"after", in.After}} {
		if len(f.toks) == 0 && f.name != "after" {
			return nil, Invalid("thinking."+f.name, "thinking.%s must hold at least one token id.", f.name)
		}
		if err := checkVocab("thinking."+f.name, f.toks, vocab); err != nil {
			return nil, err
		}
	}
	if in.Generated < 0 {
		return nil, Invalid("thinking.generated", "thinking.generated must not be negative, got %d.", in.Generated)
	}
	return &scheduler.Thinking{Start: in.Start, End: in.End, After: in.After, StartInside: in.StartInside, Off: in.Off,
		Budget: int(in.Budget), Generated: int(in.Generated)}, nil
}

// encodeSampling is the wire form of s: top_p and repetition_penalty
// only when they are not neutral (1).
func encodeSampling(s *engine.Sampling) *workerpb.Sampling {
	w := &workerpb.Sampling{
		Temperature: s.Temperature, TopK: s.TopK, MinP: s.MinP, PresencePenalty: s.PresencePenalty,
		FrequencyPenalty: s.FrequencyPenalty, Seed: s.Seed, AllowedTokens: s.AllowedTokens,
		Logprobs: s.Logprobs, TopLogprobs: int32(s.TopLogprobs), Grammar: s.Grammar,
	}
	if s.TopP != 1 {
		w.TopP = proto.Float32(s.TopP)
	}
	if s.RepetitionPenalty != 1 {
		w.RepetitionPenalty = proto.Float32(s.RepetitionPenalty)
	}
	for _, b := range s.LogitBias {
		w.LogitBias = append(w.LogitBias, &workerpb.TokenBias{Token: b.Token, Bias: b.Bias})
	}
	return w
}

// decodeSampling sets s (engine.DefaultSampling's values) from a wire
// Sampling and checks it against a vocabulary of vocab ids.
func decodeSampling(sp *workerpb.Sampling, s *engine.Sampling, vocab int) error {
	s.Temperature, s.TopK, s.MinP = sp.Temperature, sp.TopK, sp.MinP
	if sp.TopP != nil {
		s.TopP = *sp.TopP
	}
	if sp.RepetitionPenalty != nil {
		s.RepetitionPenalty = *sp.RepetitionPenalty
	}
	s.PresencePenalty, s.FrequencyPenalty, s.Seed = sp.PresencePenalty, sp.FrequencyPenalty, sp.Seed
	for _, b := range sp.LogitBias {
		s.LogitBias = append(s.LogitBias, engine.TokenBias{Token: b.GetToken(), Bias: b.GetBias()})
	}
	s.AllowedTokens, s.Logprobs, s.TopLogprobs, s.Grammar = sp.AllowedTokens, sp.Logprobs, int(sp.TopLogprobs), sp.Grammar
	if err := s.Validate(vocab); err != nil {
		var re *engine.RangeError
		if errors.As(err, &re) {
			return Invalid("sampling."+samplingParams[re.Field], "%s must be %s, got %v.", samplingParams[re.Field], re.Want, re.Value)
		}
		return Invalid("sampling", "%v", err)
	}
	return nil
}

// samplingParams are the wire names of engine.Sampling's fields.
var samplingParams = map[engine.Field]string{
	engine.FieldTemperature: "temperature", engine.FieldTopK: "top_k", engine.FieldTopP: "top_p", engine.FieldMinP: "min_p",
	engine.FieldRepetitionPenalty: "repetition_penalty", engine.FieldPresencePenalty: "presence_penalty",
	engine.FieldFrequencyPenalty: "frequency_penalty", engine.FieldLogitBiasToken: "logit_bias.token",
	engine.FieldLogitBiasValue: "logit_bias.bias", engine.FieldTopLogprobs: "top_logprobs", engine.FieldAllowedTokens: "allowed_tokens",
}

// EncodeEmbedInputs is the wire form of Embed's token-id inputs.
func EncodeEmbedInputs(inputs [][]int32) []*workerpb.TokenSequence {
	out := make([]*workerpb.TokenSequence, len(inputs))
	for i, in := range inputs {
		out[i] = &workerpb.TokenSequence{Tokens: in}
	}
	return out
}

// DecodeEmbedInputs checks an Embed request's inputs against the model
// (vocab ids, maxLen tokens each) and converts them.
func DecodeEmbedInputs(in []*workerpb.TokenSequence, vocab, maxLen int) ([][]int32, error) {
	if len(in) == 0 {
		return nil, Invalid("inputs", "inputs must not be empty.")
	}
	out := make([][]int32, len(in))
	for i, seq := range in {
		toks := seq.GetTokens()
		switch {
		case len(toks) == 0:
			return nil, Invalid(fmt.Sprintf("inputs[%d]", i), "an input must not be empty.")
		case len(toks) > maxLen:
			return nil, Invalid(fmt.Sprintf("inputs[%d]", i), "the input has %d tokens, more than the model's %d.", len(toks), maxLen)
		}
		if err := checkVocab(fmt.Sprintf("inputs[%d]", i), toks, vocab); err != nil {
			return nil, err
		}
		out[i] = toks
	}
	return out, nil
}
