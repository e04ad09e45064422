package worker

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// invalid is an INVALID_ARGUMENT status naming the field.
func invalid(param, format string, args ...any) error {
	return statusError(codes.InvalidArgument, &workerpb.Error{
		Code: workerpb.ErrorCode_ERROR_CODE_INVALID, Message: fmt.Sprintf(format, args...), Param: param,
	})
}

// statusError is a status with e as its detail.
func statusError(code codes.Code, e *workerpb.Error) error {
	st := status.New(code, e.Message)
	if d, err := st.WithDetails(e); err == nil {
		st = d
	}
	return st.Err()
}

// ErrorDetail returns the typed error a worker attached to a status, or
// nil. The head maps its Code to the HTTP error the OpenAI layer gives for
// the same failure locally.
func ErrorDetail(err error) *workerpb.Error {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if e, ok := d.(*workerpb.Error); ok {
			return e
		}
	}
	return nil
}

// prefixParam prefixes the param of err's detail (a nested message's
// fields).
func prefixParam(err error, prefix string) error {
	e := ErrorDetail(err)
	if e == nil || e.Param == "" {
		return err
	}
	e.Param = prefix + e.Param
	return statusError(status.Code(err), e)
}

// schedulerParams are the wire names of scheduler.Request's fields.
var schedulerParams = map[scheduler.Field]string{
	scheduler.FieldPrompt: "prompt", scheduler.FieldN: "n", scheduler.FieldMaxTokens: "max_tokens",
	scheduler.FieldMinTokens: "min_tokens", scheduler.FieldRequests: "request", scheduler.FieldThinking: "thinking",
}

// typedError is the wire form of an error that ended a request or kept it
// from starting.
func typedError(err error) *workerpb.Error {
	e := &workerpb.Error{Message: err.Error()}
	var re *scheduler.RequestError
	if errors.As(err, &re) {
		e.Param = schedulerParams[re.Field]
		e.Request = &workerpb.RequestLimit{Field: string(re.Field), Value: int32(re.Value), Limit: int32(re.Limit),
			PromptTokens: int32(re.PromptTokens), MaxTokens: int32(re.MaxTokens)}
	}
	var qf *scheduler.QueueFullError
	if errors.As(err, &qf) {
		e.RetryAfterMs = qf.RetryAfter.Milliseconds()
	}
	switch {
	case errors.Is(err, scheduler.ErrQueueFull):
		e.Code = workerpb.ErrorCode_ERROR_CODE_QUEUE_FULL
	case errors.Is(err, scheduler.ErrTooLong):
		e.Code = workerpb.ErrorCode_ERROR_CODE_TOO_LONG
	case errors.Is(err, scheduler.ErrLimit):
		e.Code = workerpb.ErrorCode_ERROR_CODE_LIMIT
	case errors.Is(err, scheduler.ErrInvalid), errors.Is(err, engine.ErrInvalidBatch), errors.Is(err, core.ErrCannotEmbed):
		e.Code = workerpb.ErrorCode_ERROR_CODE_INVALID
	case errors.Is(err, scheduler.ErrClosed):
		e.Code = workerpb.ErrorCode_ERROR_CODE_CLOSED
	case errors.Is(err, scheduler.ErrDeadline):
		e.Code = workerpb.ErrorCode_ERROR_CODE_DEADLINE
	case errors.Is(err, core.ErrNoLease):
		e.Code = workerpb.ErrorCode_ERROR_CODE_NOT_FOUND
	default:
		e.Code = workerpb.ErrorCode_ERROR_CODE_ENGINE
	}
	return e
}

// codeOf is the gRPC code of a typed error.
func codeOf(c workerpb.ErrorCode) codes.Code {
	switch c {
	case workerpb.ErrorCode_ERROR_CODE_QUEUE_FULL:
		return codes.ResourceExhausted
	case workerpb.ErrorCode_ERROR_CODE_TOO_LONG, workerpb.ErrorCode_ERROR_CODE_LIMIT, workerpb.ErrorCode_ERROR_CODE_INVALID:
		return codes.InvalidArgument
	case workerpb.ErrorCode_ERROR_CODE_CLOSED:
		return codes.Unavailable
	case workerpb.ErrorCode_ERROR_CODE_DEADLINE:
		return codes.DeadlineExceeded
	case workerpb.ErrorCode_ERROR_CODE_ROLE:
		return codes.FailedPrecondition
	case workerpb.ErrorCode_ERROR_CODE_NOT_FOUND:
		return codes.NotFound
	}
	return codes.Internal
}

// submitError is the status of an error from Submit.
func submitError(err error) error {
	e := typedError(err)
	return statusError(codeOf(e.Code), e)
}

// toRequest checks a wire request and converts it. vocab is the model's
// vocabulary size, width its embedding width (the rows of media spans);
// the scheduler's own checks (CheckRequest) run at Submit.
func toRequest(in *workerpb.Request, vocab, width int, now time.Time) (*scheduler.Request, error) {
	if in == nil {
		return nil, invalid("request", "request is required.")
	}
	if len(in.Prompt) == 0 {
		return nil, invalid("prompt", "prompt must hold at least one token id.")
	}
	inVocab := func(param string, toks []int32) error {
		for i, t := range toks {
			if t < 0 || int(t) >= vocab {
				return invalid(fmt.Sprintf("%s[%d]", param, i), "token id %d is outside the vocabulary [0, %d).", t, vocab)
			}
		}
		return nil
	}
	spans, err := fromMedia(in.Media, in.Prompt, vocab, width)
	if err != nil {
		return nil, err
	}
	if spans == nil {
		if err := inVocab("prompt", in.Prompt); err != nil {
			return nil, err
		}
	}
	if err := inVocab("stop_tokens", in.StopTokens); err != nil {
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
		return nil, invalid("n", "n must be at least 1, got %d.", r.N)
	}
	if r.MaxTokens < 1 {
		return nil, invalid("max_tokens", "max_tokens must be at least 1, got %d.", r.MaxTokens)
	}
	if r.MinTokens < 0 || r.MinTokens > r.MaxTokens {
		return nil, invalid("min_tokens", "min_tokens must be in [0, max_tokens=%d], got %d.", r.MaxTokens, r.MinTokens)
	}
	for i, bw := range in.BadWords {
		if bw == nil || len(bw.Tokens) == 0 {
			return nil, invalid(fmt.Sprintf("bad_words[%d]", i), "a bad word must hold at least one token id.")
		}
		if err := inVocab(fmt.Sprintf("bad_words[%d].tokens", i), bw.Tokens); err != nil {
			return nil, err
		}
		r.BadWords = append(r.BadWords, bw.Tokens)
	}
	if in.Deadline != nil {
		if err := in.Deadline.CheckValid(); err != nil {
			return nil, invalid("deadline", "deadline is not a valid timestamp: %v.", err)
		}
		r.Deadline = in.Deadline.AsTime()
	}
	if in.PromptLogprobs != nil {
		if *in.PromptLogprobs < 0 || *in.PromptLogprobs > 20 {
			return nil, invalid("prompt_logprobs", "prompt_logprobs must be in [0, 20], got %d.", *in.PromptLogprobs)
		}
		r.PromptLogprobs = int(*in.PromptLogprobs)
	}
	if th := in.Thinking; th != nil {
		t, err := fromThinking(th, vocab)
		if err != nil {
			return nil, err
		}
		r.Thinking = t
	}
	if sp := in.Sampling; sp != nil {
		s := &r.Sampling
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
				return nil, invalid("sampling."+samplingParams[re.Field], "%s must be %s, got %v.", samplingParams[re.Field], re.Want, re.Value)
			}
			return nil, invalid("sampling", "%v", err)
		}
	}
	return r, nil
}

// fromThinking checks a wire Thinking and converts it (the scheduler
// checks Generated against the prompt and n).
func fromThinking(in *workerpb.Thinking, vocab int) (*scheduler.Thinking, error) {
	for _, f := range []struct {
		name string
		toks []int32
	}{{"start", in.Start}, {"end", in.End}, {"after", in.After}} {
		if len(f.toks) == 0 && f.name != "after" {
			return nil, invalid("thinking."+f.name, "thinking.%s must hold at least one token id.", f.name)
		}
		for i, t := range f.toks {
			if t < 0 || int(t) >= vocab {
				return nil, invalid(fmt.Sprintf("thinking.%s[%d]", f.name, i), "token id %d is outside the vocabulary [0, %d).", t, vocab)
			}
		}
	}
	if in.Generated < 0 {
		return nil, invalid("thinking.generated", "thinking.generated must not be negative, got %d.", in.Generated)
	}
	return &scheduler.Thinking{Start: in.Start, End: in.End, After: in.After, StartInside: in.StartInside, Off: in.Off,
		Budget: int(in.Budget), Generated: int(in.Generated)}, nil
}

// samplingParams are the wire names of engine.Sampling's fields.
var samplingParams = map[engine.Field]string{
	engine.FieldTemperature: "temperature", engine.FieldTopK: "top_k", engine.FieldTopP: "top_p", engine.FieldMinP: "min_p",
	engine.FieldRepetitionPenalty: "repetition_penalty", engine.FieldPresencePenalty: "presence_penalty",
	engine.FieldFrequencyPenalty: "frequency_penalty", engine.FieldLogitBiasToken: "logit_bias.token",
	engine.FieldLogitBiasValue: "logit_bias.bias", engine.FieldTopLogprobs: "top_logprobs", engine.FieldAllowedTokens: "allowed_tokens",
}

func toLogprobs(in []engine.Logprobs) []*workerpb.Logprobs {
	if len(in) == 0 {
		return nil
	}
	out := make([]*workerpb.Logprobs, len(in))
	for i := range in {
		out[i] = toLogprob(&in[i])
	}
	return out
}

func toLogprob(lp *engine.Logprobs) *workerpb.Logprobs {
	o := &workerpb.Logprobs{Chosen: &workerpb.TokenLogprob{Token: lp.Chosen.Token, Logprob: finite(lp.Chosen.Logprob)}, Rank: int32(lp.Rank)}
	for _, t := range lp.Top {
		o.Top = append(o.Top, &workerpb.TokenLogprob{Token: t.Token, Logprob: finite(t.Logprob)})
	}
	return o
}

// finite keeps -Inf logprobs representable everywhere a float is.
func finite(f float32) float32 {
	if math.IsInf(float64(f), -1) {
		return -math.MaxFloat32
	}
	return f
}

func toFinish(f scheduler.FinishReason) workerpb.FinishReason {
	switch f {
	case scheduler.FinishStop:
		return workerpb.FinishReason_FINISH_REASON_STOP
	case scheduler.FinishLength:
		return workerpb.FinishReason_FINISH_REASON_LENGTH
	case scheduler.FinishAbort:
		return workerpb.FinishReason_FINISH_REASON_ABORT
	}
	return workerpb.FinishReason_FINISH_REASON_NONE
}

func toOutput(o *scheduler.Output) *workerpb.Output {
	out := &workerpb.Output{
		Choice: int32(o.Choice), Tokens: o.Tokens, Logprobs: toLogprobs(o.Logprobs),
		PromptLogprobs: toLogprobs(o.PromptLogprobs), FinishReason: toFinish(o.Finish),
	}
	if o.Err != nil {
		out.Error = typedError(o.Err)
	}
	return out
}

func toUsage(u scheduler.Usage) *workerpb.Usage {
	return &workerpb.Usage{PromptTokens: int32(u.PromptTokens), CompletionTokens: int32(u.CompletionTokens), CachedTokens: int32(u.CachedTokens),
		ReasoningTokens: int32(u.ReasoningTokens)}
}

// embedInputs checks an Embed request's inputs against the model (vocab
// ids, maxLen tokens each) and converts them.
func embedInputs(in []*workerpb.TokenSequence, vocab, maxLen int) ([][]int32, error) {
	if len(in) == 0 {
		return nil, invalid("inputs", "inputs must not be empty")
	}
	out := make([][]int32, len(in))
	for i, seq := range in {
		toks := seq.GetTokens()
		switch {
		case len(toks) == 0:
			return nil, invalid(fmt.Sprintf("inputs[%d]", i), "an input must not be empty")
		case len(toks) > maxLen:
			return nil, invalid(fmt.Sprintf("inputs[%d]", i), "the input has %d tokens, more than the model's %d", len(toks), maxLen)
		}
		for j, t := range toks {
			if t < 0 || int(t) >= vocab {
				return nil, invalid(fmt.Sprintf("inputs[%d][%d]", i, j), "token id %d is outside the vocabulary [0, %d)", t, vocab)
			}
		}
		out[i] = toks
	}
	return out, nil
}
