package scheduler

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
	"github.com/llmserve/llmserve/kvcache"
)

func TestPromptLookup(t *testing.T) {
	cases := []struct {
		tokens        []int32
		minN, maxN, k int
		want          []int32
		why           string
	}{
		{[]int32{1, 2, 3, 4, 1, 2}, 1, 3, 3, []int32{3, 4, 1}, "the 2-gram 1 2 occurred at the start"},
		{[]int32{1, 2, 3, 4, 1, 2}, 3, 3, 3, nil, "no earlier 3-gram"},
		{[]int32{1, 2, 3, 9, 2, 7, 2}, 1, 1, 2, []int32{7, 2}, "the latest earlier occurrence of 2"},
		{[]int32{5, 2, 8, 9, 2, 7, 5, 2}, 1, 2, 2, []int32{8, 9}, "the longest match wins over a later shorter one"},
		{[]int32{7, 7, 7, 7}, 2, 4, 5, []int32{7}, "a run matches itself one position back; the draft ends at the end"},
		{[]int32{1, 2, 3}, 1, 2, 4, nil, "nothing repeats"},
		{[]int32{4}, 1, 1, 4, nil, "one token"},
		{[]int32{1, 2, 1, 2}, 1, 2, 0, nil, "no room"},
	}
	for _, c := range cases {
		got := promptLookup(c.tokens, c.minN, c.maxN, c.k)
		if !slices.Equal(got, c.want) {
			t.Errorf("promptLookup(%v, %d, %d, %d) = %v, want %v (%s)", c.tokens, c.minN, c.maxN, c.k, got, c.want, c.why)
		}
		if cap(got) != len(got) {
			t.Errorf("promptLookup(%v): capacity %d beyond its length %d: an append would write into the sequence", c.tokens, cap(got), len(got))
		}
	}
}

func TestSpeculativeValidate(t *testing.T) {
	good := Speculative{Method: SpecNgram}.WithDefaults()
	if good.NumTokens != DefaultSpeculativeTokens || good.PromptLookupMin != DefaultPromptLookup || good.PromptLookupMax != DefaultPromptLookup {
		t.Fatalf("defaults %+v", good)
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := (Speculative{Method: SpecNgram, PromptLookupMax: 3}).WithDefaults(); d.PromptLookupMin != 3 {
		t.Fatalf("min defaults to max: %+v", d)
	}
	for _, c := range []struct {
		sp   Speculative
		want string
	}{
		{Speculative{Method: "eagle", NumTokens: 3, PromptLookupMin: 1, PromptLookupMax: 3}, `method "eagle" is unknown`},
		{Speculative{Method: SpecDraft, NumTokens: 3}, `method "draft" needs a draft model`},
		{Speculative{Method: SpecDraft, Model: "d.gguf", NumTokens: 17}, "num_speculative_tokens 17"},
		{Speculative{Method: SpecNgram, Model: "d.gguf", NumTokens: 3, PromptLookupMin: 1, PromptLookupMax: 3}, `a draft model goes with method "draft"`},
		{Speculative{Method: SpecNgram, NumTokens: 0, PromptLookupMin: 1, PromptLookupMax: 3}, "num_speculative_tokens 0 is outside [1, 16]"},
		{Speculative{Method: SpecNgram, NumTokens: 17, PromptLookupMin: 1, PromptLookupMax: 3}, "num_speculative_tokens 17"},
		{Speculative{Method: SpecNgram, NumTokens: 3, PromptLookupMin: 0, PromptLookupMax: 3}, "prompt_lookup_min 0"},
		{Speculative{Method: SpecNgram, NumTokens: 3, PromptLookupMin: 4, PromptLookupMax: 3}, "prompt_lookup_max 3"},
		{Speculative{Method: SpecNgram, NumTokens: 3, PromptLookupMin: 1, PromptLookupMax: 3, DisableByBatchSize: -1}, "disable_by_batch_size -1 is negative"},
	} {
		err := c.sp.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.sp, err, c.want)
		}
	}
	if err := (&Speculative{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if d := (Speculative{Method: SpecDraft, Model: "d.gguf"}).WithDefaults(); d.NumTokens != DefaultSpeculativeTokens || d.Validate() != nil {
		t.Fatalf("draft defaults %+v: %v", d, d.Validate())
	}
}

// modelDrafter is a fake draft model: the greedy continuation of model
// (enginetest.Next when nil) with every wrong-th position changed (0:
// none; 1: all).
func modelDrafter(model func([]int32, int) int32, vocab, wrong int) func([]int32, int) []int32 {
	if model == nil {
		model = enginetest.Next
	}
	return func(h []int32, limit int) []int32 {
		h = slices.Clone(h)
		var d []int32
		for range limit {
			tok := model(h, vocab)
			if wrong > 0 && len(h)%wrong == 0 {
				tok = (tok + 1) % int32(vocab)
			}
			d = append(d, tok)
			h = append(h, tok)
		}
		return d
	}
}

// bothMethods is sp (method ngram) and its draft-model twin: the
// scheduler's limits on a draft are the same for both.
func bothMethods(sp Speculative) []Speculative {
	d := sp
	d.Method, d.Model, d.PromptLookupMin, d.PromptLookupMax = SpecDraft, "draft.gguf", 0, 0
	return []Speculative{sp, d}
}

// periodic is a fake model whose greedy output repeats the last period
// tokens of the history, except every jitter-th position (0: never), where
// it takes the next token: prompt lookup then proposes drafts that are
// right, and with jitter, right only in part.
func periodic(period, jitter int) func([]int32, int) int32 {
	return func(h []int32, vocab int) int32 {
		if len(h) < period {
			return enginetest.Next(h, vocab)
		}
		tok := h[len(h)-period]
		if jitter > 0 && len(h)%jitter == 0 {
			tok = (tok + 1) % int32(vocab)
		}
		return tok
	}
}

// specResult is what one request produced: every output, in order.
type specResult struct {
	tokens  [][]int32
	lps     [][]engine.Logprobs
	finish  []FinishReason
	usage   Usage
	outputs int
}

// runSpec serves reqs to the end with the fake model and returns each
// request's result, the scheduler's stats and the number of steps.
func runSpec(t *testing.T, sp Speculative, model func([]int32, int) int32, cfg Config, reqs []*Request, hooks ...func(*enginetest.Fake)) (map[string]*specResult, Stats, int) {
	t.Helper()
	if cfg.MaxNumSeqs == 0 {
		cfg = Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxWaiting: 16, MaxModelLen: 256}
	}
	cfg.Speculative = sp
	kc := kvcache.Config{BlockSize: 4, Slots: cfg.MaxNumSeqs, SlotTokens: cfg.MaxModelLen, CacheBytes: 1 << 16, CapacityTokens: cfg.KVCapacityTokens}
	s, fake := newTestScheduler(t, cfg, kc)
	fake.Model = model
	fake.CapacityTokens = cfg.KVCapacityTokens
	if sp.Method == SpecDraft {
		fake.Drafter = modelDrafter(model, fake.Vocab, 0)
	}
	if len(hooks) > 0 {
		hooks[0](fake)
	}
	if len(hooks) > 1 {
		defer hooks[1](fake)
	}
	results := map[string]*specResult{}
	for _, r := range reqs {
		r := *r
		s.Add(&r)
		results[r.ID] = &specResult{tokens: make([][]int32, r.N), lps: make([][]engine.Logprobs, r.N), finish: make([]FinishReason, r.N)}
	}
	steps := 0
	for ; s.HasWork(); steps++ {
		if steps > 2000 {
			t.Fatal("no progress")
		}
		st := runStep(t, s, fake)
		for i := range st.Batch {
			ch := &st.Batch[i]
			if len(ch.Draft) > 0 && (!ch.Sample || len(ch.Tokens) != 1) {
				t.Fatalf("step %d: a draft on a chunk of %d tokens (sample %v)", steps, len(ch.Tokens), ch.Sample)
			}
			if ch.DraftLimit > 0 && (sp.Method != SpecDraft || !ch.Sample || len(ch.Tokens) != 1 || len(ch.Draft) > ch.DraftLimit || ch.DraftLimit > sp.NumTokens) {
				t.Fatalf("step %d: DraftLimit %d with method %q on a chunk of %d tokens (sample %v), draft %v", steps, ch.DraftLimit, sp.Method, len(ch.Tokens), ch.Sample, ch.Draft)
			}
		}
		if n := st.NumTokens(); n > cfg.MaxNumBatchedTokens {
			t.Fatalf("step %d: %d tokens, budget %d", steps, n, cfg.MaxNumBatchedTokens)
		}
		for _, o := range s.Outputs() {
			res := results[o.RequestID]
			res.outputs++
			res.tokens[o.Output.Choice] = append(res.tokens[o.Output.Choice], o.Output.Tokens...)
			res.lps[o.Output.Choice] = append(res.lps[o.Output.Choice], o.Output.Logprobs...)
			if o.Output.Logprobs != nil && len(o.Output.Logprobs) != len(o.Output.Tokens) {
				t.Fatalf("%d logprobs for %d tokens", len(o.Output.Logprobs), len(o.Output.Tokens))
			}
			if o.Output.Finish != FinishNone {
				res.finish[o.Output.Choice] = o.Output.Finish
			}
			res.usage = o.Usage
		}
	}
	return results, s.Stats(), steps
}

func specRequests() []*Request {
	mk := func(id string, seed int, n, maxTokens int) *Request {
		p := make([]int32, 12)
		for j := range p {
			p[j] = int32((seed*13+j*7)%90 + 5)
		}
		return &Request{ID: id, Prompt: p, Sampling: engine.DefaultSampling(), N: n, MaxTokens: maxTokens, Arrival: testBase, PromptLogprobs: -1}
	}
	seeded := mk("seeded", 3, 2, 40)
	seeded.Sampling.Temperature, seeded.Sampling.Seed = 0.9, 11
	lps := mk("logprobs", 4, 1, 33)
	lps.Sampling.Logprobs = true
	minTok := mk("min-tokens", 5, 1, 30)
	minTok.MinTokens, minTok.StopTokens = 9, []int32{3}
	return []*Request{mk("a", 1, 1, 50), mk("b", 2, 1, 7), seeded, lps, minTok, mk("c", 6, 3, 25)}
}

// With n-gram speculation, every request gets exactly the tokens, logprobs,
// finish reasons and usage it gets without, in fewer steps when drafts are
// right, whether they are right, partly right or mostly wrong.
func TestSpeculativeMatchesPlain(t *testing.T) {
	sp := Speculative{Method: SpecNgram, NumTokens: 4, PromptLookupMin: 1, PromptLookupMax: 3}
	for _, m := range []struct {
		name   string
		model  func([]int32, int) int32
		faster bool
	}{
		{"repeating", periodic(5, 0), true},
		{"repeating with changes", periodic(6, 7), true},
		{"not repeating", nil, false},
	} {
		t.Run(m.name, func(t *testing.T) {
			want, _, plainSteps := runSpec(t, Speculative{}, m.model, Config{}, specRequests())
			got, st, steps := runSpec(t, sp, m.model, Config{}, specRequests())
			for id, w := range want {
				g := got[id]
				if !reflect.DeepEqual(g.tokens, w.tokens) || !reflect.DeepEqual(g.lps, w.lps) || !slices.Equal(g.finish, w.finish) || g.usage != w.usage {
					t.Errorf("request %s\n got %v %v %+v\nwant %v %v %+v", id, g.tokens, g.finish, g.usage, w.tokens, w.finish, w.usage)
				}
			}
			if st.Spec.Drafts == 0 || st.Spec.DraftTokens < st.Spec.Drafts || len(st.Spec.AcceptedPerPos) != sp.NumTokens {
				t.Fatalf("spec stats %+v", st.Spec)
			}
			var perPos uint64
			for i, n := range st.Spec.AcceptedPerPos {
				perPos += n
				if i > 0 && n > st.Spec.AcceptedPerPos[i-1] {
					t.Fatalf("position %d accepted more often than the one before: %v", i, st.Spec.AcceptedPerPos)
				}
			}
			if perPos != st.Spec.AcceptedTokens {
				t.Fatalf("per position %v sums to %d, accepted %d", st.Spec.AcceptedPerPos, perPos, st.Spec.AcceptedTokens)
			}
			if m.faster && (steps >= plainSteps || st.Spec.AcceptedTokens == 0) {
				t.Fatalf("%d steps with speculation, %d without; %+v", steps, plainSteps, st.Spec)
			}
			t.Logf("%d steps, %d without; %+v", steps, plainSteps, st.Spec)
		})
	}
}

// A stop token among the accepted draft tokens ends the choice there, as
// it does without speculation: the tokens after it are dropped, usage
// counts up to it.
func TestSpeculativeStopInsideAccepted(t *testing.T) {
	sp := Speculative{Method: SpecNgram, NumTokens: 8, PromptLookupMin: 1, PromptLookupMax: 3}
	// The model repeats 10 20 30 40 50 60 70 99, and the prompt ends one
	// period in: the first draft holds the stop token 99 and what follows.
	prompt := []int32{10, 20, 30, 40, 50, 60, 70, 99, 10, 20, 30}
	req := &Request{ID: "s", Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 60,
		StopTokens: []int32{99}, Arrival: testBase, PromptLogprobs: -1}
	req.Sampling.Logprobs = true
	want, _, _ := runSpec(t, Speculative{}, periodic(8, 0), Config{}, []*Request{req})
	got, st, steps := runSpec(t, sp, periodic(8, 0), Config{}, []*Request{req})
	w, g := want["s"], got["s"]
	if !reflect.DeepEqual(g.tokens, w.tokens) || !reflect.DeepEqual(g.lps, w.lps) || g.finish[0] != FinishStop || w.finish[0] != FinishStop || g.usage != w.usage {
		t.Fatalf("got %v %v %+v, want %v %v %+v", g.tokens, g.finish, g.usage, w.tokens, w.finish, w.usage)
	}
	if wantToks := []int32{40, 50, 60, 70, 99}; !slices.Equal(g.tokens[0], wantToks) || g.usage.CompletionTokens != 5 {
		t.Fatalf("tokens %v (usage %+v), want %v", g.tokens[0], g.usage, wantToks)
	}
	// The prompt, then one decode step (and one that frees the slot):
	// 40's draft 50 60 70 99 10 20 30 40 is accepted whole, and the
	// choice ends at 99.
	if st.Spec.AcceptedTokens != 8 || steps > 3 || g.outputs != 2 {
		t.Fatalf("%d steps, %d outputs, %+v", steps, g.outputs, st.Spec)
	}
}

// Drafts never reach past max_tokens or the context: a step's tokens
// fit both, and the choice ends exactly at the limit.
func TestSpeculativeLimits(t *testing.T) {
	for _, sp := range bothMethods(Speculative{Method: SpecNgram, NumTokens: 16, PromptLookupMin: 1, PromptLookupMax: 3}) {
		t.Run(sp.Method, func(t *testing.T) { testSpeculativeLimits(t, sp) })
	}
}

func testSpeculativeLimits(t *testing.T, sp Speculative) {
	prompt := []int32{1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1}
	cfg := Config{MaxNumSeqs: 2, MaxNumBatchedTokens: 64, MaxWaiting: 4, MaxModelLen: 40}
	reqs := []*Request{
		{ID: "max", Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 7, Arrival: testBase, PromptLogprobs: -1},
		{ID: "ctx", Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 29, Arrival: testBase, PromptLogprobs: -1},
	}
	got, st, _ := runSpec(t, sp, periodic(5, 0), cfg, reqs)
	if g := got["max"]; len(g.tokens[0]) != 7 || g.finish[0] != FinishLength || g.usage.CompletionTokens != 7 {
		t.Fatalf("max_tokens 7: %v %v %+v", g.tokens, g.finish, g.usage)
	}
	if g := got["ctx"]; len(g.tokens[0]) != 29 || g.finish[0] != FinishLength {
		t.Fatalf("max_tokens 29 in a context of 40: %v %v", g.tokens, g.finish)
	}
	if st.Spec.AcceptedTokens == 0 {
		t.Fatalf("%+v", st.Spec)
	}
}

// Where the scheduler's per-token decisions would differ inside a draft,
// there is none: bad words, a forced token, a thinking budget; min_tokens
// lets drafts run only while every position stays under it.
func TestSpeculativeNoDraftWhereUnsafe(t *testing.T) {
	for _, sp := range bothMethods(Speculative{Method: SpecNgram, NumTokens: 4, PromptLookupMin: 1, PromptLookupMax: 3}) {
		t.Run(sp.Method, func(t *testing.T) { testSpeculativeNoDraftWhereUnsafe(t, sp) })
	}
}

func testSpeculativeNoDraftWhereUnsafe(t *testing.T, sp Speculative) {
	prompt := []int32{1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1}
	mk := func(id string) *Request {
		return &Request{ID: id, Prompt: prompt, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 20, Arrival: testBase, PromptLogprobs: -1}
	}
	bad := mk("bad")
	bad.BadWords = [][]int32{{77, 78}}
	think := mk("think")
	think.Thinking = &Thinking{Start: []int32{90}, End: []int32{91}, StartInside: true, Budget: 8}
	minTok := mk("min")
	minTok.MinTokens, minTok.StopTokens = 6, []int32{99}
	for _, r := range []*Request{bad, think, minTok} {
		cfg := Config{MaxNumSeqs: 1, MaxNumBatchedTokens: 64, MaxWaiting: 4, MaxModelLen: 64, Speculative: sp}
		s, fake := newTestScheduler(t, cfg, kvcache.Config{BlockSize: 4, Slots: 1, SlotTokens: 64})
		fake.Model = periodic(5, 0)
		fake.Drafter = modelDrafter(fake.Model, fake.Vocab, 0)
		s.Add(r)
		drafted := 0
		for s.HasWork() {
			out, thinking := 0, false
			if sq := s.byID[0]; sq != nil {
				out, thinking = sq.numOutput(), sq.think.phase != thinkDone
			}
			st := runStep(t, s, fake)
			for _, ch := range st.Batch {
				drafted += len(ch.Draft)
				switch {
				case len(ch.Draft) == 0:
				case r.MinTokens > 0 && out < r.MinTokens && out+len(ch.Draft) >= r.MinTokens:
					t.Fatalf("%s: %d tokens out, a draft of %d crosses min_tokens %d", r.ID, out, len(ch.Draft), r.MinTokens)
				case len(r.BadWords) > 0 || thinking || len(ch.Only) > 0:
					t.Fatalf("%s: a draft of %d tokens (thinking %v, only %v)", r.ID, len(ch.Draft), thinking, ch.Only)
				}
			}
			s.Outputs()
		}
		if (drafted > 0) != (r.ID != "bad") {
			t.Fatalf("%s: %d draft tokens", r.ID, drafted)
		}
	}
}

// Drafts take what the token budget leaves after every decode, before
// prompts; with KV tokens short they shrink rather than preempt anyone.
func TestSpeculativeBudgetAndKV(t *testing.T) {
	for _, sp := range bothMethods(Speculative{Method: SpecNgram, NumTokens: 8, PromptLookupMin: 1, PromptLookupMax: 3}) {
		t.Run(sp.Method, func(t *testing.T) { testSpeculativeBudgetAndKV(t, sp) })
	}
}

func testSpeculativeBudgetAndKV(t *testing.T, sp Speculative) {
	var reqs []*Request
	for i := range 4 {
		p := []int32{1, 2, 3, 4, 5, 1, 2, 3, 4, 5, int32(1 + i)}
		reqs = append(reqs, &Request{ID: fmt.Sprint(i), Prompt: p, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 30, Arrival: testBase, PromptLogprobs: -1})
	}
	cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 12, MaxWaiting: 8, MaxModelLen: 64}
	want, _, _ := runSpec(t, Speculative{}, periodic(5, 0), cfg, reqs)
	got, st, _ := runSpec(t, sp, periodic(5, 0), cfg, reqs) // runSpec checks the budget
	for id := range want {
		if !reflect.DeepEqual(got[id].tokens, want[id].tokens) {
			t.Fatalf("request %s: %v, want %v", id, got[id].tokens, want[id].tokens)
		}
	}
	if st.Spec.AcceptedTokens == 0 {
		t.Fatalf("%+v", st.Spec)
	}
	// KV tokens for 4 × 44 positions and a few more: drafts shrink.
	cfg.KVCapacityTokens = 4*44 + 8
	cfg.MaxNumBatchedTokens = 64
	want, _, _ = runSpec(t, Speculative{}, periodic(5, 0), cfg, reqs)
	got, st, _ = runSpec(t, sp, periodic(5, 0), cfg, reqs)
	for id := range want {
		if !reflect.DeepEqual(got[id].tokens, want[id].tokens) {
			t.Fatalf("request %s with KV capacity: %v, want %v", id, got[id].tokens, want[id].tokens)
		}
	}
	if st.Preemptions != 0 || st.Spec.AcceptedTokens == 0 {
		t.Fatalf("%d preemptions; %+v", st.Preemptions, st.Spec)
	}
}

// DisableByBatchSize leaves out the drafts of steps that decode more
// sequences than it, and outputs stay those of plain decoding.
func TestSpeculativeDisableByBatchSize(t *testing.T) {
	for _, method := range []string{SpecNgram, SpecDraft} {
		t.Run(method, func(t *testing.T) { testSpeculativeDisableByBatchSize(t, method) })
	}
}

func testSpeculativeDisableByBatchSize(t *testing.T, method string) {
	var reqs []*Request
	for i := range 4 {
		p := []int32{1, 2, 3, 4, 5, 1, 2, 3, 4, 5, int32(1 + i)}
		reqs = append(reqs, &Request{ID: fmt.Sprint(i), Prompt: p, Sampling: engine.DefaultSampling(), N: 1, MaxTokens: 30, Arrival: testBase, PromptLogprobs: -1})
	}
	want, _, _ := runSpec(t, Speculative{}, periodic(5, 0), Config{}, reqs)
	for _, c := range []struct {
		disable int
		drafts  bool
	}{{0, true}, {4, true}, {3, false}, {1, false}} {
		sp := bothMethods(Speculative{Method: SpecNgram, NumTokens: 4, PromptLookupMin: 1, PromptLookupMax: 3, DisableByBatchSize: c.disable})[map[string]int{SpecNgram: 0, SpecDraft: 1}[method]]
		got, st, _ := runSpec(t, sp, periodic(5, 0), Config{}, reqs)
		for id := range want {
			if !reflect.DeepEqual(got[id].tokens, want[id].tokens) {
				t.Fatalf("disable_by_batch_size %d, request %s: %v, want %v", c.disable, id, got[id].tokens, want[id].tokens)
			}
		}
		if (st.Spec.Drafts > 0) != c.drafts {
			t.Errorf("disable_by_batch_size %d with 4 sequences decoding together: %d drafts", c.disable, st.Spec.Drafts)
		}
	}
	// Alone, a request drafts under any positive setting.
	sp := bothMethods(Speculative{Method: SpecNgram, NumTokens: 4, PromptLookupMin: 1, PromptLookupMax: 3, DisableByBatchSize: 1})[map[string]int{SpecNgram: 0, SpecDraft: 1}[method]]
	if _, st, _ := runSpec(t, sp, periodic(5, 0), Config{}, reqs[:1]); st.Spec.Drafts == 0 {
		t.Error("a lone request made no drafts with disable_by_batch_size 1")
	}
}

// With a draft model, the scheduler hands each decode chunk a DraftLimit
// (the executor proposes): every request gets exactly the tokens,
// logprobs, finish reasons and usage it gets without, whether the draft
// model is right, right in part or always wrong; the spec_decode stats
// count what the executor proposed and what was accepted; and a right
// draft model takes fewer steps.
func TestDraftModelMatchesPlain(t *testing.T) {
	sp := Speculative{Method: SpecDraft, Model: "draft.gguf", NumTokens: 4}
	for _, m := range []struct {
		name  string
		wrong int
	}{{"right", 0}, {"right in part", 3}, {"wrong", 1}} {
		t.Run(m.name, func(t *testing.T) {
			want, _, plainSteps := runSpec(t, Speculative{}, nil, Config{}, specRequests())
			var limits [][]int
			cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxWaiting: 16, MaxModelLen: 256, Speculative: sp}
			got, st, steps := runSpec(t, sp, nil, cfg, specRequests(), func(f *enginetest.Fake) {
				f.Drafter = modelDrafter(nil, f.Vocab, m.wrong)
			}, func(f *enginetest.Fake) { limits = f.Stats().DraftLimits })
			for id, w := range want {
				g := got[id]
				if !reflect.DeepEqual(g.tokens, w.tokens) || !reflect.DeepEqual(g.lps, w.lps) || !slices.Equal(g.finish, w.finish) || g.usage != w.usage {
					t.Errorf("request %s\n got %v %v %+v\nwant %v %v %+v", id, g.tokens, g.finish, g.usage, w.tokens, w.finish, w.usage)
				}
			}
			if len(limits) == 0 || st.Spec.Drafts == 0 || st.Spec.DraftTokens < st.Spec.Drafts {
				t.Fatalf("%d steps with draft limits; spec stats %+v", len(limits), st.Spec)
			}
			switch {
			case m.wrong == 1 && st.Spec.AcceptedTokens*10 > st.Spec.DraftTokens: // the seeded request may draw a wrong draft token
				t.Fatalf("a wrong draft model: %+v", st.Spec)
			case m.wrong == 0 && (steps >= plainSteps || st.Spec.AcceptedTokens == 0):
				t.Fatalf("%d steps with a right draft model, %d without; %+v", steps, plainSteps, st.Spec)
			case m.wrong == 3 && (st.Spec.AcceptedTokens == 0 || st.Spec.AcceptedTokens == st.Spec.DraftTokens):
				t.Fatalf("a draft model right in part: %+v", st.Spec)
			}
			t.Logf("%d steps, %d without; %+v", steps, plainSteps, st.Spec)
		})
	}
}
