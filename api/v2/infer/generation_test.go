package infer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// fakeVocab has one token per lower-case letter (0 = "a"), a space (26),
// and EOS (27, a control token).
type fakeVocab struct{}

const (
	tokSpace = 26
	tokEOS   = 27
)

func (fakeVocab) Tokenize(text string, _, _ bool) ([]int32, error) {
	var out []int32
	for _, r := range text {
		switch {
		case r == ' ':
			out = append(out, tokSpace)
		case r >= 'a' && r <= 'z':
			out = append(out, r-'a')
		}
	}
	return out, nil
}

func (fakeVocab) Piece(tok int32, special bool) []byte {
	switch tok {
	case tokSpace:
		return []byte(" ")
	case tokEOS:
		if special {
			return []byte("</s>")
		}
		return nil
	}
	return []byte{byte('a' + tok)}
}
func (fakeVocab) NumTokens() int                     { return 28 }
func (fakeVocab) BOS() int32                         { return -1 }
func (fakeVocab) EOS() int32                         { return tokEOS }
func (fakeVocab) IsEOG(tok int32) bool               { return tok == tokEOS }
func (fakeVocab) IsControl(tok int32) bool           { return tok == tokEOS }
func toks(s string) []int32                          { t, _ := fakeVocab{}.Tokenize(s, false, false); return t }
func (m *fakeModel) Name() string                    { return "fake" }
func (m *fakeModel) Ready() bool                     { return true }
func (m *fakeModel) MaxModelLen() int                { return 64 }
func (m *fakeModel) RequestTimeout() time.Duration   { return 0 }
func (m *fakeModel) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// fakeModel answers every request with the scripted outputs, and records
// cancellations.
type fakeModel struct {
	tok    *tokenizer.Tokenizer
	script func(req *scheduler.Request) []scheduler.Output
	mu     sync.Mutex
	reqs   []*scheduler.Request
	cancel int
}

func (m *fakeModel) Submit(_ context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	var out []*core.Stream
	for _, r := range reqs {
		if err := (&scheduler.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, MaxWaiting: 4, MaxModelLen: 64}).CheckRequest(r); err != nil {
			return nil, &core.IndexError{Index: len(out), Err: err}
		}
		m.mu.Lock()
		m.reqs = append(m.reqs, r)
		m.mu.Unlock()
		s := core.NewStream(r.ID, 1, func(int, bool) {
			m.mu.Lock()
			m.cancel++
			m.mu.Unlock()
		})
		for _, o := range m.script(r) {
			s.Push([]scheduler.Output{o}, scheduler.Usage{})
		}
		out = append(out, s)
	}
	return out, nil
}

func newFake(t *testing.T, script func(*scheduler.Request) []scheduler.Output) *fakeModel {
	tok, err := tokenizer.New(fakeVocab{}, "")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeModel{tok: tok, script: script}
}

// emit scripts the tokens of text one output each, then a last output
// with fin (and the extra tokens).
func emit(text string, fin scheduler.FinishReason, extra ...int32) []scheduler.Output {
	var outs []scheduler.Output
	for _, t := range toks(text) {
		outs = append(outs, scheduler.Output{Tokens: []int32{t}, Logprobs: []engine.Logprobs{{Chosen: engine.TokenLogprob{Token: t, Logprob: -0.5}}}})
	}
	if len(extra) > 0 || fin != scheduler.FinishNone {
		outs = append(outs, scheduler.Output{Tokens: extra, Finish: fin})
	}
	return outs
}

func TestGenerationFinishReasons(t *testing.T) {
	cases := []struct {
		name   string
		params Parameters
		outs   []scheduler.Output
		text   string
		finish string
		tokens int
	}{
		{"eos", Parameters{"details": true}, emit("ab cd", scheduler.FinishStop, tokEOS), "ab cd", FinishEOS, 6},
		{"length", nil, emit("ab cd", scheduler.FinishLength), "ab cd", FinishLength, 5},
		{"stop string", Parameters{"stop": []string{" c"}}, emit("ab cd ef", scheduler.FinishNone), "ab", FinishStopSequence, 4},
		{"stop string held back then released", Parameters{"stop": "bx"}, emit("ab", scheduler.FinishLength), "ab", FinishLength, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newFake(t, func(*scheduler.Request) []scheduler.Output { return c.outs })
			p, err := ParseParams(m, c.params, 1)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Start(context.Background(), m, p, []string{"hi"}, "r", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			res, err := g.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Text != c.text || res[0].Finish != c.finish || res[0].OutputTokens != c.tokens {
				t.Fatalf("%+v, want %q %s %d tokens", res[0], c.text, c.finish, c.tokens)
			}
			if c.params["details"] == true {
				last := res[0].Tokens[len(res[0].Tokens)-1]
				if len(res[0].Tokens) != c.tokens || last.ID != tokEOS || !last.Special || last.Text != "</s>" || res[0].Tokens[0].Logprob != -0.5 {
					t.Fatalf("details %+v", res[0].Tokens)
				}
			}
		})
	}
}

func TestGenerationErrorsAndCancel(t *testing.T) {
	m := newFake(t, func(*scheduler.Request) []scheduler.Output {
		return append(emit("ab", scheduler.FinishNone), scheduler.Output{Finish: scheduler.FinishAbort, Err: scheduler.ErrClosed})
	})
	p, _ := ParseParams(m, nil, 1)
	g, err := Start(context.Background(), m, p, []string{"hi"}, "r", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Collect(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != Unavailable {
		t.Fatalf("%v", err)
	}
	g.Close()

	// A stream that never ends: the context ends it, and Close cancels it.
	m = newFake(t, func(*scheduler.Request) []scheduler.Output { return emit("ab", scheduler.FinishNone) })
	g, _ = Start(context.Background(), m, p, []string{"hi", "yo"}, "r", time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.Collect(ctx); !errors.As(err, &e) || e.Code != Deadline {
		t.Fatalf("%v", err)
	}
	g.Close()
	if m.cancel != 2 || m.reqs[0].ID == m.reqs[1].ID {
		t.Fatalf("%d cancels, ids %q %q", m.cancel, m.reqs[0].ID, m.reqs[1].ID)
	}
}

func TestParseParams(t *testing.T) {
	m := newFake(t, nil)
	p, err := ParseParams(m, Parameters{"max_tokens": int64(5), "temperature": 0.5, "top_k": int64(-1), "seed": uint64(1<<32 + 3), "stop": "x", "ignore_eos": true}, 9)
	if err != nil {
		t.Fatal(err)
	}
	if p.base.MaxTokens != 5 || p.base.Sampling.Temperature != 0.5 || p.base.Sampling.Seed != 3 || len(p.base.StopTokens) != 0 || p.stops[0] != "x" {
		t.Fatalf("%+v", p)
	}
	for _, c := range []struct {
		p    Parameters
		want string
	}{
		{Parameters{"max_tokens": "x"}, "max_tokens must be an integer"},
		{Parameters{"max_tokens": int64(0)}, "max_tokens must be at least 1"},
		{Parameters{"temperature": -1.0}, "temperature must be 0 (greedy) or in"},
		{Parameters{"top_p": 0.0}, "top_p must be in (0, 1]"},
		{Parameters{"repetition_penalty": 1e9}, "repetition_penalty"},
		{Parameters{"seed": 1.5}, "seed must be an integer"},
		{Parameters{"stream": "yes"}, "stream must be true or false"},
		{Parameters{"stop": int64(1)}, "stop must be a string"},
	} {
		if _, err := ParseParams(m, c.p, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.p, err, c.want)
		}
	}
}
