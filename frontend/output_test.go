package frontend

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// outVocab has one token per lower-case letter (0 = "a"), and the
// characters below; EOS is a control token.
type outVocab struct{}

const outEOS = 27

var outChars = map[int32]string{26: " ", 28: "<", 29: ">", 30: "/", 31: "\n",
	32: "{", 33: "}", 34: `"`, 35: ":", 36: "[", 37: "]", 38: ",", 39: "1", 40: "_"}

func (outVocab) Tokenize(text string, _, _ bool) ([]int32, error) {
	var out []int32
	for _, r := range text {
		if r >= 'a' && r <= 'z' {
			out = append(out, r-'a')
			continue
		}
		for id, c := range outChars {
			if c == string(r) {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

func (outVocab) Piece(tok int32, special bool) []byte {
	if tok == outEOS {
		if special {
			return []byte("</s>")
		}
		return nil
	}
	if c, ok := outChars[tok]; ok {
		return []byte(c)
	}
	return []byte{byte('a' + tok)}
}
func (outVocab) NumTokens() int           { return 41 }
func (outVocab) BOS() int32               { return -1 }
func (outVocab) EOS() int32               { return outEOS }
func (outVocab) IsEOG(tok int32) bool     { return tok == outEOS }
func (outVocab) IsControl(tok int32) bool { return tok == outEOS }

func outToks(t *testing.T, s string) []int32 {
	t.Helper()
	ids, _ := outVocab{}.Tokenize(s, false, false)
	return ids
}

// run feeds outs to a new choice and returns the deltas' text, reasoning
// and finish, and whether a stop string asked to stop the sequence.
func run(t *testing.T, cfg OutputConfig, outs ...scheduler.Output) (c *Output, ds []Delta, stopped bool, err error) {
	t.Helper()
	tok, terr := tokenizer.New(outVocab{}, "")
	if terr != nil {
		t.Fatal(terr)
	}
	cfg.Tokenizer = tok
	if cfg.StopTokens == nil {
		cfg.StopTokens = []int32{outEOS}
	}
	c, nerr := NewOutput(&cfg)
	if nerr != nil {
		t.Fatal(nerr)
	}
	for i := range outs {
		var s bool
		ds, s, err = c.Add(&outs[i], ds)
		stopped = stopped || s
		if err != nil {
			return c, ds, stopped, err
		}
	}
	return c, ds, stopped, nil
}

func joined(ds []Delta) (text, reasoning string, finish Finish) {
	var b, r strings.Builder
	for _, d := range ds {
		b.WriteString(d.Text)
		r.WriteString(d.Reasoning)
		if d.Finish != FinishNone {
			finish = d.Finish
		}
	}
	return b.String(), r.String(), finish
}

func TestOutput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      OutputConfig
		outs     func(t *testing.T) []scheduler.Output
		text     string
		reason   string
		finish   Finish
		tokens   int
		stopped  bool
		stopWord string
	}{
		{
			name: "the stop token counts but is not text",
			outs: func(t *testing.T) []scheduler.Output {
				return []scheduler.Output{{Tokens: outToks(t, "ab")}, {Tokens: append(outToks(t, "c"), outEOS), Finish: scheduler.FinishStop}}
			},
			text: "abc", finish: FinishStop, tokens: 4,
		},
		{
			name: "a stop string across tokens ends the answer before it",
			cfg:  OutputConfig{Stops: []string{"cd"}},
			outs: func(t *testing.T) []scheduler.Output {
				return []scheduler.Output{{Tokens: outToks(t, "abc")}, {Tokens: outToks(t, "def")}}
			},
			text: "ab", finish: FinishStopString, tokens: 4, stopped: true, stopWord: "cd",
		},
		{
			name: "min_tokens: no stop strings in the first tokens",
			cfg:  OutputConfig{Stops: []string{"a"}, MinTokens: 2},
			outs: func(t *testing.T) []scheduler.Output {
				return []scheduler.Output{{Tokens: outToks(t, "bab"), Finish: scheduler.FinishLength}}
			},
			text: "bab", finish: FinishLength, tokens: 3,
		},
		{
			name: "text held back for a stop string is released at the end",
			cfg:  OutputConfig{Stops: []string{"abc"}},
			outs: func(t *testing.T) []scheduler.Output {
				return []scheduler.Output{{Tokens: outToks(t, "ab")}, {Finish: scheduler.FinishLength}}
			},
			text: "ab", finish: FinishLength, tokens: 2,
		},
		{
			name: "reasoning split from the answer, the tags dropped",
			cfg:  OutputConfig{Reasoning: tokenizer.ReasoningQwen3, Prompt: "q <think>\n"},
			outs: func(t *testing.T) []scheduler.Output {
				return []scheduler.Output{{Tokens: outToks(t, "hm</th")}, {Tokens: append(outToks(t, "ink>ok"), outEOS), Finish: scheduler.FinishStop}}
			},
			text: "ok", reason: "hm", finish: FinishStop, tokens: 13,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ds, stopped, err := run(t, tc.cfg, tc.outs(t)...)
			text, reason, finish := joined(ds)
			if err != nil || text != tc.text || reason != tc.reason || finish != tc.finish || stopped != tc.stopped {
				t.Fatalf("text %q reasoning %q finish %v stopped %v err %v; want %q %q %v %v", text, reason, finish, stopped, err, tc.text, tc.reason, tc.finish, tc.stopped)
			}
			if c.Tokens() != tc.tokens || c.StopString() != tc.stopWord || !c.Done() || c.Finish() != tc.finish {
				t.Fatalf("tokens %d stop string %q done %v finish %v; want %d %q", c.Tokens(), c.StopString(), c.Done(), c.Finish(), tc.tokens, tc.stopWord)
			}
		})
	}
}

// Logprobs: one per token, cut to TopLogprobs, with the token's character
// offset; the stop token is marked; the sum is kept.
func TestOutputLogprobs(t *testing.T) {
	lp := func(tok int32, v float32) engine.Logprobs {
		return engine.Logprobs{Chosen: engine.TokenLogprob{Token: tok, Logprob: v},
			Top: []engine.TokenLogprob{{Token: tok, Logprob: v}, {Token: 1, Logprob: -3}, {Token: 2, Logprob: -4}}}
	}
	out := scheduler.Output{Tokens: []int32{0, 26, 1, outEOS}, Logprobs: []engine.Logprobs{lp(0, -1), lp(26, -0.5), lp(1, -0.25), lp(outEOS, -0.125)}, Finish: scheduler.FinishStop}
	c, ds, _, err := run(t, OutputConfig{Logprobs: true, TopLogprobs: 2}, out)
	if err != nil || len(ds) != 4 {
		t.Fatalf("%d deltas, %v", len(ds), err)
	}
	for i, want := range []int{0, 1, 2, 3} {
		d := ds[i]
		if !d.HasLogprobs || len(d.Logprobs.Top) != 2 || d.Offset != want || d.StopToken != (i == 3) {
			t.Errorf("delta %d: %+v", i, d)
		}
	}
	if c.CumLogprob() != -1.875 {
		t.Errorf("cumulative logprob %v", c.CumLogprob())
	}
}

// An abort ends the choice with the scheduler's error, or ErrAborted;
// outputs after the end are discarded but the final one is noted.
func TestOutputAbortAndAfterEnd(t *testing.T) {
	boom := errors.New("boom")
	if _, _, _, err := run(t, OutputConfig{}, scheduler.Output{Finish: scheduler.FinishAbort, Err: boom}); !errors.Is(err, boom) {
		t.Errorf("abort with an error: %v", err)
	}
	if _, _, _, err := run(t, OutputConfig{}, scheduler.Output{Finish: scheduler.FinishAbort}); !errors.Is(err, ErrAborted) {
		t.Errorf("abort: %v", err)
	}
	c, ds, stopped, err := run(t, OutputConfig{Stops: []string{"b"}}, scheduler.Output{Tokens: outToks(t, "ab")}, scheduler.Output{Tokens: outToks(t, "cd")})
	if err != nil || !stopped || c.Final() || len(ds) != 2 {
		t.Fatalf("stopped %v final %v deltas %d err %v", stopped, c.Final(), len(ds), err)
	}
	ds, _, _ = c.Add(&scheduler.Output{Tokens: outToks(t, "e"), Finish: scheduler.FinishStop}, nil)
	if len(ds) != 0 || !c.Final() || c.Tokens() != 2 {
		t.Errorf("after the end: %d deltas, final %v, tokens %d", len(ds), c.Final(), c.Tokens())
	}
}

// Tool calls are split from the answer by the plan's mode, the same
// however the text is cut into outputs: the named function's arguments,
// the required mode's JSON array, the auto mode's model syntax (Hermes's
// <tool_call> here).
func TestOutputToolCalls(t *testing.T) {
	tools := []Tool{{Name: "f"}, {Name: "g"}}
	for _, tc := range []struct {
		name    string
		plan    ToolPlan
		answer  string
		content string
		calls   [][2]string // name, arguments
	}{
		{"named", ToolPlan{Mode: ToolNamed, Tools: tools, Named: 1}, `{"a":1}`, "", [][2]string{{"g", `{"a":1}`}}},
		{"required", ToolPlan{Mode: ToolRequired, Tools: tools, Parallel: true},
			`[{"name":"f","parameters":{"x":1}},{"name":"g","parameters":{}}]`, "", [][2]string{{"f", `{"x":1}`}, {"g", `{}`}}},
		{"auto", ToolPlan{Mode: ToolAuto, Tools: tools, Parser: tokenizer.ToolsHermes},
			"ok <tool_call>{\"name\":\"f\",\"arguments\":{\"x\":1}}</tool_call>", "ok ", [][2]string{{"f", `{"x": 1}`}}}, // re-serialized as vLLM does
		{"none", ToolPlan{Mode: ToolNone, Tools: tools}, `{"a":1}`, `{"a":1}`, nil},
	} {
		for _, size := range []int{1, 3, 100} {
			toks := outToks(t, tc.answer)
			var outs []scheduler.Output
			for i := 0; i < len(toks); i += size {
				outs = append(outs, scheduler.Output{Tokens: toks[i:min(i+size, len(toks))]})
			}
			outs = append(outs, scheduler.Output{Tokens: []int32{outEOS}, Finish: scheduler.FinishStop})
			c, ds, _, err := run(t, OutputConfig{Tools: &tc.plan}, outs...)
			text, _, finish := joined(ds)
			if err != nil || text != tc.content || finish != FinishStop {
				t.Fatalf("%s, outputs of %d tokens: content %q finish %v err %v; want %q", tc.name, size, text, finish, err, tc.content)
			}
			var args []string
			for _, d := range ds {
				for _, cd := range d.ToolCalls {
					for len(args) <= cd.Index {
						args = append(args, "")
					}
					args[cd.Index] += cd.Arguments
				}
			}
			calls := c.ToolCalls()
			if len(calls) != len(tc.calls) || len(args) != len(tc.calls) {
				t.Fatalf("%s, outputs of %d tokens: calls %+v, deltas %q; want %v", tc.name, size, calls, args, tc.calls)
			}
			for i, want := range tc.calls {
				if calls[i].Name != want[0] || calls[i].Arguments != want[1] || args[i] != want[1] || calls[i].ID == "" {
					t.Errorf("%s, outputs of %d tokens: call %d %+v (deltas %q), want %v", tc.name, size, i, calls[i], args[i], want)
				}
			}
		}
	}
}
