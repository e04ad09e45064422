package scheduler

import (
	"context"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
)

// refThinking is the thinking section of output, found from scratch: the
// tokens counted inside it and whether the budget ended it (forced End and
// After right after the budget's last token). ok is false when output
// breaks the budget.
func refThinking(th *Thinking, output []int32) (reasoning int, forced, ok bool) {
	if th.Off {
		return 0, false, true
	}
	start := 0
	if !th.StartInside {
		i := indexSeq(output, th.Start)
		if i < 0 {
			return 0, false, true
		}
		start = i + len(th.Start)
	} else if len(output) >= len(th.Start) && slices.Equal(output[:len(th.Start)], th.Start) {
		start = len(th.Start)
	}
	body := output[start:]
	end := indexSeq(body, th.End)
	if th.Budget >= 0 && (end < 0 || end >= th.Budget) && len(body) > th.Budget {
		// The budget must have ended it: End then After at the budget.
		tail := slices.Concat(th.End, th.After)
		rest := body[th.Budget:]
		n := min(len(rest), len(tail))
		return th.Budget, true, slices.Equal(rest[:n], tail[:n])
	}
	if end < 0 {
		return len(body), false, true
	}
	return end, false, true
}

func indexSeq(s, sub []int32) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if slices.Equal(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func TestThinkState(t *testing.T) {
	const S, E1, E2, A = 30, 31, 32, 33
	for _, tc := range []struct {
		name      string
		th        Thinking
		output    []int32 // the model's own tokens; forced ones replace them
		want      []int32
		reasoning int
	}{
		{"inside, budget 3", Thinking{Start: []int32{S}, End: []int32{E1, E2}, After: []int32{A}, StartInside: true, Budget: 3},
			[]int32{1, 2, 3, 4, 5, 6, 7, 8}, []int32{1, 2, 3, E1, E2, A, 7, 8}, 3},
		{"inside, budget 0", Thinking{Start: []int32{S}, End: []int32{E1}, StartInside: true, Budget: 0},
			[]int32{1, 2, 3}, []int32{E1, 2, 3}, 0},
		{"inside, model ends first", Thinking{Start: []int32{S}, End: []int32{E1, E2}, After: []int32{A}, StartInside: true, Budget: 5},
			[]int32{1, E1, E2, 4, 5, 6, 7, 8}, []int32{1, E1, E2, 4, 5, 6, 7, 8}, 1},
		{"inside, leading start not counted", Thinking{Start: []int32{S}, End: []int32{E1}, StartInside: true, Budget: 2},
			[]int32{S, 1, 2, 3, 4}, []int32{S, 1, 2, E1, 4}, 2},
		{"before, opens later", Thinking{Start: []int32{S}, End: []int32{E1}, After: []int32{A, A}, Budget: 1},
			[]int32{1, S, 2, 3, 4, 5, 6}, []int32{1, S, 2, E1, A, A, 6}, 1},
		{"before, never opens", Thinking{Start: []int32{S}, End: []int32{E1}, Budget: 0},
			[]int32{1, 2, 3}, []int32{1, 2, 3}, 0},
		{"unlimited", Thinking{Start: []int32{S}, End: []int32{E1}, StartInside: true, Budget: -1},
			[]int32{1, 2, 3, 4}, []int32{1, 2, 3, 4}, 4},
		{"off", Thinking{Start: []int32{S}, End: []int32{E1}, Off: true, Budget: 0},
			[]int32{1, 2}, []int32{1, 2}, 0},
		{"max tokens cut the forced end", Thinking{Start: []int32{S}, End: []int32{E1, E2}, StartInside: true, Budget: 1},
			[]int32{1, 2}, []int32{1, E1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newThinkState(&tc.th)
			var out []int32
			for _, tok := range tc.output {
				if f, ok := st.force(&tc.th); ok {
					tok = f
				}
				out = append(out, tok)
				st.advance(&tc.th, out)
			}
			if !slices.Equal(out, tc.want) || st.reasoning != tc.reasoning {
				t.Errorf("got %v (%d reasoning), want %v (%d)", out, st.reasoning, tc.want, tc.reasoning)
			}
			if r, _, ok := refThinking(&tc.th, out); !ok || r != tc.reasoning {
				t.Errorf("reference: %d reasoning, ok %v", r, ok)
			}
		})
	}
}

// A forced End waits until the thinking text ends on a whole character
// (Thinking.UTF8): a character spelled over three byte tokens is never cut,
// and the tokens it takes past the budget count as reasoning.
func TestThinkStateUTF8(t *testing.T) {
	const E, A, lead, cont = 31, 33, 10, 11
	utf8 := make([]int8, 40)
	utf8[lead] = 2  // "\xE2": 2 bytes short of "’"
	utf8[cont] = -1 // "\x80"
	for _, tc := range []struct {
		name      string
		budget    int
		output    []int32
		want      []int32
		reasoning int
	}{
		{"the budget ends inside a character", 2, []int32{1, lead, cont, cont, 5, 6, 7}, []int32{1, lead, cont, cont, E, A, 7}, 4},
		{"the budget ends after one", 4, []int32{1, lead, cont, cont, 5, 6, 7}, []int32{1, lead, cont, cont, E, A, 7}, 4},
		{"a stray continuation byte does not hold it", 1, []int32{cont, cont, 3, 4}, []int32{cont, E, A, 4}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := &Thinking{Start: []int32{30}, End: []int32{E}, After: []int32{A}, StartInside: true, Budget: tc.budget, UTF8: utf8}
			st := newThinkState(th)
			var out []int32
			for _, tok := range tc.output {
				if f, ok := st.force(th); ok {
					tok = f
				}
				out = append(out, tok)
				st.advance(th, out)
			}
			if !slices.Equal(out, tc.want) || st.reasoning != tc.reasoning {
				t.Errorf("got %v (%d reasoning), want %v (%d)", out, st.reasoning, tc.want, tc.reasoning)
			}
		})
	}
}

// The scheduler forces the end of thinking through Chunk.Only with the
// fake engine: each choice's output keeps the budget, the usage counts
// the reasoning tokens, the metric counts the forced ends, and the same
// request alone gives the same tokens.
func TestThinkingBudgetScheduled(t *testing.T) {
	kv, err := kvcache.New(kvcache.Config{BlockSize: 4, Slots: 4, SlotTokens: 64, CacheBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{MaxNumSeqs: 4, MaxWaiting: 16, MaxModelLen: 64, MaxNumBatchedTokens: 32}, kv)
	if err != nil {
		t.Fatal(err)
	}
	fake := &enginetest.Fake{Slots: 4, SlotTokens: 64, Vocab: 40, PoisonToken: -1}
	th := &Thinking{Start: []int32{38}, End: []int32{39, 37}, After: []int32{36}, StartInside: true, Budget: 5}
	req := &Request{ID: "a", Prompt: []int32{1, 2, 3}, Sampling: engine.DefaultSampling(), N: 3, MaxTokens: 20,
		Arrival: testBase, PromptLogprobs: -1, Thinking: th}
	req.Sampling.Temperature, req.Sampling.Seed = 0.8, 7
	s.Add(req)
	out := make([][]int32, 3)
	var usage Usage
	for i := 0; s.HasWork(); i++ {
		if i > 200 {
			t.Fatal("no progress")
		}
		step := s.Schedule()
		res, err := fake.Execute(context.Background(), step)
		if err != nil {
			t.Fatal(err)
		}
		s.Update(step, res)
		for _, o := range s.Outputs() {
			out[o.Output.Choice] = append(out[o.Output.Choice], o.Output.Tokens...)
			usage = o.Usage
		}
	}
	total, forced := 0, 0
	for i, o := range out {
		r, f, ok := refThinking(th, o)
		if !ok {
			t.Errorf("choice %d: %v breaks the budget", i, o)
		}
		total += r
		if f {
			forced++
		}
	}
	if usage.ReasoningTokens != total || total == 0 {
		t.Errorf("usage %d reasoning tokens, want %d", usage.ReasoningTokens, total)
	}
	if got := s.Stats().ThinkingForced; got != uint64(forced) || forced == 0 {
		t.Errorf("ThinkingForced %d, want %d", got, forced)
	}
}

// runThinking runs one request alone on the fake engine and returns
// choice 0's tokens and the usage.
func runThinking(t *testing.T, req *Request) ([]int32, Usage) {
	t.Helper()
	kv, err := kvcache.New(kvcache.Config{BlockSize: 4, Slots: 4, SlotTokens: 64, CacheBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MaxNumSeqs: 4, MaxWaiting: 16, MaxModelLen: 64, MaxNumBatchedTokens: 32}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckRequest(req); err != nil {
		t.Fatal(err)
	}
	fake := &enginetest.Fake{Slots: 4, SlotTokens: 64, Vocab: 40, PoisonToken: -1}
	s.Add(req)
	var out []int32
	var usage Usage
	for i := 0; s.HasWork(); i++ {
		if i > 200 {
			t.Fatal("no progress")
		}
		step := s.Schedule()
		res, err := fake.Execute(context.Background(), step)
		if err != nil {
			t.Fatal(err)
		}
		s.Update(step, res)
		for _, o := range s.Outputs() {
			out = append(out, o.Output.Tokens...)
			usage = o.Usage
		}
	}
	return out, usage
}

// A continuation (the head's migration: prompt + the tokens generated so
// far, Thinking.Generated of them) keeps the budget of the whole choice
// and counts only its own reasoning tokens, at every cut point.
func TestThinkingGeneratedContinuation(t *testing.T) {
	th := Thinking{Start: []int32{38}, End: []int32{39, 37}, After: []int32{36}, StartInside: true, Budget: 5}
	prompt := []int32{1, 2, 3}
	mk := func(prompt []int32, th Thinking, maxTokens int) *Request {
		r := &Request{ID: "a", Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: maxTokens,
			Arrival: testBase, PromptLogprobs: -1, Thinking: &th}
		r.Sampling.Temperature = 0
		return r
	}
	const maxTokens = 14
	whole, wu := runThinking(t, mk(prompt, th, maxTokens))
	r, forced, ok := refThinking(&th, whole)
	if !ok || !forced || wu.ReasoningTokens != r {
		t.Fatalf("whole: %v, %d reasoning (reference %d, forced %v, ok %v)", whole, wu.ReasoningTokens, r, forced, ok)
	}
	for k := 1; k < maxTokens; k++ {
		c := th
		c.Generated = k
		rest, u := runThinking(t, mk(slices.Concat(prompt, whole[:k]), c, maxTokens-k))
		before := NewThinkingCount(&th)
		for i := 1; i <= k; i++ {
			before.Advance(whole[:i])
		}
		if !slices.Equal(rest, whole[k:]) || before.Reasoning()+u.ReasoningTokens != wu.ReasoningTokens {
			t.Errorf("cut at %d: %v (%d+%d reasoning), want %v (%d)", k, rest, before.Reasoning(), u.ReasoningTokens, whole[k:], wu.ReasoningTokens)
		}
	}
	// Generated must leave a prompt token and needs n = 1.
	for _, bad := range []*Request{mk(prompt, Thinking{Start: []int32{38}, End: []int32{39}, Generated: 3}, 4),
		func() *Request {
			r := mk(prompt, Thinking{Start: []int32{38}, End: []int32{39}, Generated: 1}, 4)
			r.N = 2
			return r
		}()} {
		cfg := Config{MaxNumSeqs: 4, MaxWaiting: 16, MaxModelLen: 64, MaxNumBatchedTokens: 32}
		if err := cfg.CheckRequest(bad); err == nil {
			t.Errorf("Generated %d, n %d: accepted", bad.Thinking.Generated, bad.N)
		}
	}
}
