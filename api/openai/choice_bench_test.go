package openai

import (
	"testing"

	"github.com/llmserve/llmserve/api/openai/openaitest"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// BenchmarkChoiceAdd is the output path of one streamed choice: 64 outputs
// of one token each, with a stop string to watch and logprobs with two
// alternatives, as a chat stream with logprobs sends them.
func BenchmarkChoiceAdd(b *testing.B) {
	tk := openaitest.NewTokenizer(b, "")
	p := &genParams{Params: &frontend.Params{Stops: []string{"END"}, Logprobs: true, TopLogprobs: 2}}
	p.Base.StopTokens = []int32{openaitest.IMEnd}
	var seq []int32
	for len(seq) < 64 {
		seq = append(seq, openaitest.Tokens(" Once upon a time Hello world! there")...)
	}
	seq = seq[:64]
	outs := make([]scheduler.Output, len(seq))
	for i, t := range seq {
		lp := engine.Logprobs{Chosen: engine.TokenLogprob{Token: t, Logprob: -0.5},
			Top: []engine.TokenLogprob{{Token: t, Logprob: -0.5}, {Token: 1, Logprob: -2}, {Token: 2, Logprob: -3}}}
		outs[i] = scheduler.Output{Tokens: []int32{t}, Logprobs: []engine.Logprobs{lp}}
	}
	outs[len(outs)-1].Finish = scheduler.FinishLength
	b.ReportAllocs()
	for b.Loop() {
		c := newChoice(tk, 0, 0, p)
		for i := range outs {
			var d delta
			if err := c.add(&outs[i], &d); err != nil {
				b.Fatal(err)
			}
		}
	}
}
