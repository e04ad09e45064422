package workercodec

import (
	"math"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// EncodeOutput is the wire form of one output of a choice; an error that
// ended it travels as EncodeError's typed error.
func EncodeOutput(o *scheduler.Output) *workerpb.Output {
	out := &workerpb.Output{
		Choice: int32(o.Choice), Tokens: o.Tokens, Logprobs: EncodeLogprobs(o.Logprobs),
		PromptLogprobs: EncodeLogprobs(o.PromptLogprobs), FinishReason: EncodeFinish(o.Finish),
	}
	if o.Err != nil {
		out.Error = EncodeError(o.Err)
	}
	return out
}

// DecodeOutput is the output a worker sent, for the request's choice
// (the leg's o.choice may number it differently); its error is
// DecodeError's.
func DecodeOutput(o *workerpb.Output, choice int) scheduler.Output {
	out := scheduler.Output{Choice: choice, Tokens: o.Tokens, Logprobs: DecodeLogprobs(o.Logprobs),
		PromptLogprobs: DecodeLogprobs(o.PromptLogprobs), Finish: DecodeFinish(o.FinishReason)}
	if o.Error != nil {
		out.Err = DecodeError(o.Error)
	}
	return out
}

// EncodeLogprobs is the wire form of a run of logprobs (nil for none).
func EncodeLogprobs(in []engine.Logprobs) []*workerpb.Logprobs {
	if len(in) == 0 {
		return nil
	}
	out := make([]*workerpb.Logprobs, len(in))
	for i := range in {
		out[i] = EncodeLogprob(&in[i])
	}
	return out
}

// DecodeLogprobs is the inverse of EncodeLogprobs.
func DecodeLogprobs(in []*workerpb.Logprobs) []engine.Logprobs {
	if len(in) == 0 {
		return nil
	}
	out := make([]engine.Logprobs, len(in))
	for i, lp := range in {
		out[i] = DecodeLogprob(lp)
	}
	return out
}

// EncodeLogprob is the wire form of one position's logprobs; -Inf is
// sent as -math.MaxFloat32, which every float field can hold.
func EncodeLogprob(lp *engine.Logprobs) *workerpb.Logprobs {
	o := &workerpb.Logprobs{Chosen: &workerpb.TokenLogprob{Token: lp.Chosen.Token, Logprob: finite(lp.Chosen.Logprob)}, Rank: int32(lp.Rank)}
	for _, t := range lp.Top {
		o.Top = append(o.Top, &workerpb.TokenLogprob{Token: t.Token, Logprob: finite(t.Logprob)})
	}
	return o
}

// DecodeLogprob is the inverse of EncodeLogprob.
func DecodeLogprob(lp *workerpb.Logprobs) engine.Logprobs {
	o := engine.Logprobs{Chosen: engine.TokenLogprob{Token: lp.GetChosen().GetToken(), Logprob: lp.GetChosen().GetLogprob()}, Rank: int(lp.GetRank())}
	for _, t := range lp.GetTop() {
		o.Top = append(o.Top, engine.TokenLogprob{Token: t.GetToken(), Logprob: t.GetLogprob()})
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

// finishes pairs each finish reason with its wire form; the zero values
// (none) are each other's too.
var finishes = []struct {
	reason scheduler.FinishReason
	wire   workerpb.FinishReason
}{
	{scheduler.FinishStop, workerpb.FinishReason_FINISH_REASON_STOP},
	{scheduler.FinishLength, workerpb.FinishReason_FINISH_REASON_LENGTH},
	{scheduler.FinishAbort, workerpb.FinishReason_FINISH_REASON_ABORT},
}

// EncodeFinish is the wire form of f.
func EncodeFinish(f scheduler.FinishReason) workerpb.FinishReason {
	for _, p := range finishes {
		if p.reason == f {
			return p.wire
		}
	}
	return workerpb.FinishReason_FINISH_REASON_NONE
}

// DecodeFinish is the inverse of EncodeFinish.
func DecodeFinish(f workerpb.FinishReason) scheduler.FinishReason {
	for _, p := range finishes {
		if p.wire == f {
			return p.reason
		}
	}
	return scheduler.FinishNone
}

// EncodeUsage is the wire form of a request's usage.
func EncodeUsage(u scheduler.Usage) *workerpb.Usage {
	return &workerpb.Usage{PromptTokens: int32(u.PromptTokens), CompletionTokens: int32(u.CompletionTokens), CachedTokens: int32(u.CachedTokens),
		ReasoningTokens: int32(u.ReasoningTokens)}
}
