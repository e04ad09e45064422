//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/grammar"
	"github.com/llmserve/llmserve/models/stories260k"
)

// grammarRun generates up to n tokens for prompt with sampling s in slot 0
// of c, stopping at an end-of-generation token (included). It returns the
// tokens and the chosen-token logprobs when s asks for them.
func grammarRun(t *testing.T, c *Context, prompt []int32, s engine.Sampling, n int) ([]int32, []engine.Logprobs) {
	t.Helper()
	ctx := context.Background()
	st := engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: s, History: prompt}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: prompt, Sample: true}},
	}
	pos := int32(len(prompt))
	var out []int32
	var lps []engine.Logprobs
	defer func() {
		if _, err := c.Execute(ctx, &engine.Step{Clears: []engine.Slot{0}, Removed: []engine.SeqID{1}}); err != nil {
			t.Fatal(err)
		}
	}()
	for len(out) < n {
		res, err := c.Execute(ctx, &st)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) > 0 {
			t.Fatalf("after %d tokens: %v", len(out), res.Failures[0].Err)
		}
		smp := res.Samples[0]
		out = append(out, smp.Token)
		if smp.Logprobs != nil {
			lps = append(lps, *smp.Logprobs)
		}
		if c.model.IsEOG(smp.Token) {
			break
		}
		st = engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: pos, Tokens: []int32{smp.Token}, Sample: true}}}
		pos++
	}
	return out, lps
}

// A grammar forces stories260K (a model of children's stories) to write
// what the grammar says, greedy and sampled, and to stop only once the
// grammar is complete.
func TestGrammarForcesOutput(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	prompt := stories260k.ReferenceGreedy().PromptTokens
	cases := []struct {
		name    string
		grammar string
		want    *regexp.Regexp
	}{
		{"json object", `root ::= "{" ws "\"name\"" ws ":" ws "\"" [a-z]{1,8} "\"" ws "," ws "\"age\"" ws ":" ws [0-9]{1,3} ws "}"
ws ::= " "?`, regexp.MustCompile(`^\{ ?"name" ?: ?"[a-z]{1,8}" ?, ?"age" ?: ?[0-9]{1,3} ?\}$`)},
		{"choice", `root ::= "yes" | "no" | "maybe"`, regexp.MustCompile(`^(yes|no|maybe)$`)},
		{"digits", `root ::= [0-9]{4}`, regexp.MustCompile(`^[0-9]{4}$`)},
		{"array", `root ::= "[" ("true" | "false") ("," ("true" | "false")){0,3} "]"`, regexp.MustCompile(`^\[(true|false)(,(true|false)){0,3}\]$`)},
	}
	greedy := engine.DefaultSampling()
	greedy.Logprobs = true
	hot := engine.DefaultSampling()
	hot.Temperature, hot.TopK, hot.TopP = 1.5, 0, 1
	for _, tc := range cases {
		for _, mode := range []struct {
			name  string
			s     engine.Sampling
			seeds []uint32
		}{{"greedy", greedy, []uint32{0}}, {"sampled", hot, []uint32{1, 2, 3, 4, 5}}} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				for _, seed := range mode.seeds {
					s := mode.s
					s.Seed, s.Grammar = seed, tc.grammar
					out, lps := grammarRun(t, c, prompt, s, 64)
					if len(out) == 0 || !m.IsEOG(out[len(out)-1]) {
						t.Fatalf("seed %d: %v does not end with an end-of-generation token", seed, out)
					}
					text, err := m.Detokenize(out[:len(out)-1], false, false)
					if err != nil {
						t.Fatal(err)
					}
					if !tc.want.MatchString(text) {
						t.Fatalf("seed %d: %q does not match %v", seed, text, tc.want)
					}
					// Logprobs are the raw model's: a forced token is
					// usually not the model's favourite.
					for i, lp := range lps {
						if lp.Chosen.Token != out[i] || lp.Chosen.Logprob > 0 {
							t.Fatalf("logprobs[%d] = %+v for token %d", i, lp.Chosen, out[i])
						}
					}
				}
			})
		}
	}
}

// A sequence with a grammar does not change what its batch neighbours
// compute, and its own output is what it gets alone.
func TestGrammarBesidePlain(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	g := engine.DefaultSampling()
	g.Grammar = `root ::= "{\"n\":" [0-9]{1,2} "}"`
	alone, _ := grammarRun(t, c, ref.PromptTokens, g, 32)

	ctx := context.Background()
	plain := engine.DefaultSampling()
	st := engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: plain}, {Seq: 2, Sampling: g}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: ref.PromptTokens, Sample: true}, {Seq: 2, Slot: 1, Tokens: ref.PromptTokens, Sample: true}},
	}
	var outs [2][]int32
	done2 := false
	for len(outs[0]) < len(ref.GeneratedTokens) {
		res, err := c.Execute(ctx, &st)
		if err != nil || len(res.Failures) > 0 {
			t.Fatalf("%v %v", err, res.Failures)
		}
		next := engine.Step{}
		for _, smp := range res.Samples {
			i := int(smp.Seq) - 1
			outs[i] = append(outs[i], smp.Token)
			pos := int32(len(ref.PromptTokens) + len(outs[i]) - 1)
			if smp.Seq == 2 && m.IsEOG(smp.Token) {
				done2 = true
				continue
			}
			if smp.Seq == 1 && len(outs[0]) == len(ref.GeneratedTokens) {
				continue
			}
			next.Batch = append(next.Batch, engine.Chunk{Seq: smp.Seq, Slot: engine.Slot(i), Pos: pos, Tokens: []int32{smp.Token}, Sample: true})
		}
		st = next
	}
	if !slices.Equal(outs[0], ref.GeneratedTokens) {
		t.Fatalf("plain neighbour\n got %v\nwant %v", outs[0], ref.GeneratedTokens)
	}
	if !done2 || !slices.Equal(outs[1], alone) {
		t.Fatalf("grammar sequence beside another %v, alone %v", outs[1], alone)
	}
}

// A grammar llama.cpp cannot parse is an error, never a crash: from
// CheckGrammar, and as a failed sequence when one reaches the engine.
func TestBadGrammar(t *testing.T) {
	m := loadModel(t)
	for _, g := range []string{
		`root ::= "a`,
		`root ::= undefined`,
		`start ::= "a"`,
		`root ::= root "a"`,
		`root ::= [`,
		"root ::= \"a\"\x00",
		`root ::= "a"{3000}`,
	} {
		if err := m.CheckGrammar(g); !errors.Is(err, ErrGrammar) {
			t.Errorf("CheckGrammar(%q) = %v, want ErrGrammar", g, err)
		}
	}
	if err := m.CheckGrammar(`root ::= "a" | [0-9]+`); err != nil {
		t.Fatalf("CheckGrammar(good) = %v", err)
	}
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	bad := engine.DefaultSampling()
	bad.Grammar = `root ::= (`
	res, err := c.Execute(context.Background(), &engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: bad}, {Seq: 2, Sampling: engine.DefaultSampling()}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: ref.PromptTokens, Sample: true}, {Seq: 2, Slot: 1, Tokens: ref.PromptTokens, Sample: true}},
	})
	if err != nil || len(res.Failures) != 1 || res.Failures[0].Seq != 1 || !errors.Is(res.Failures[0].Err, ErrGrammar) {
		t.Fatalf("%v %+v", err, res.Failures)
	}
	if len(res.Samples) != 1 || res.Samples[0].Token != ref.GeneratedTokens[0] {
		t.Fatalf("samples %+v", res.Samples)
	}
}

// A grammar that is complete while the stop tokens are banned leaves no
// token to draw: the sequence fails with ErrSampling.
func TestGrammarDeadEnd(t *testing.T) {
	m := loadModel(t)
	c := newContext(t, m, ContextParams{})
	ref := stories260k.ReferenceGreedy()
	s := engine.DefaultSampling()
	s.Grammar = `root ::= "a"`
	ctx := context.Background()
	res, err := c.Execute(ctx, &engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: s}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: ref.PromptTokens, Sample: true}},
	})
	if err != nil || len(res.Samples) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	tok := res.Samples[0].Token
	if string(m.Piece(tok, false)) != "a" {
		t.Fatalf("token %d %q, want a", tok, m.Piece(tok, false))
	}
	res, err = c.Execute(ctx, &engine.Step{
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Pos: int32(len(ref.PromptTokens)), Tokens: []int32{tok}, Sample: true, Ban: []int32{m.EOS()}}},
	})
	if err != nil || len(res.Failures) != 1 || !errors.Is(res.Failures[0].Err, engine.ErrSampling) {
		t.Fatalf("%v %+v", err, res)
	}
}

// grammar.Check agrees with llama.cpp's own parser, on hand-written
// grammars and on what the converters write.
func TestGrammarCheckAgrees(t *testing.T) {
	m := loadModel(t)
	gs := []string{
		`root ::= "a"`, "root ::= \"a\" | [0-9]+ # c\n", "root ::= x y\nx ::= \"x\"*\ny ::= (\n  \"a\" |\n  \"b\"\n){2,3}\n",
		`root ::= [^"\\\x00-\x1F] "\u00e9" "\U0001F600" "\t\r\n\"\[\]"`, `root ::= "a"{0,2000} "b"{3} "c"{1,} .? <[42]> !<[7]>`,
		`root ::= "x"{ 2 , 4 }`, "root ::= a? b\na ::= \"a\"*\nb ::= \"b\"", "root ::= \"a\"\r\nb ::= \"b\"\r\n",
		`start ::= "a"`, `root ::= "a`, `root ::= [a`, `root ::= x`, `root ::= root "a"`,
		"root ::= a \"b\"\na ::= \"\" | root", "root ::= e root\ne ::= \"\"", `root ::= "a"{2001}`,
		`root ::= *`, `root ::= ""*`, `root ::= "\q"`, `root ::= "\x4"`, `root = "a"`, `root ::= ("a"`, `root ::= "a" )`,
		"root ::= \"a\"\n| \"b\"", `root ::= <abc`, `root ::= []`, `root ::= [^]`, `root ::= [] "a"`, `root ::= "a"??`,
		`root ::= ("a"*)?`, `root ::= ("a"?){3}`, `root ::= "a" {2}`, "root ::= \"a\"\n  \n\nx ::= \"b\"",
		`root ::= x | y` + "\nx ::= y \"a\"\ny ::= \"\" x",
	}
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}},"required":["a"]}`,
		`{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/n"}`,
		`{"type":"array","prefixItems":[{"type":"string","format":"date"},{"enum":[1,"x",null]}],"items":{"type":"number"},"maxItems":4}`,
		`{"type":"object","additionalProperties":{"type":"boolean"}}`, `{}`,
	} {
		g, err := grammar.FromJSONSchema([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	for _, p := range []string{`[a-z]+@[a-z]+\.com`, `(?i)hello|\d{2,4}`, `[^\x00-\x7f]+`, `(a|)b`} {
		g, err := grammar.FromRegex(p)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	g, _ := grammar.Choices([]string{"a", "", `"\`})
	gs = append(gs, grammar.AnyJSONObject(), g)
	for _, g := range gs {
		goErr := grammar.Check(g)
		cErr := m.checkLlama(g)
		if (goErr == nil) != (cErr == nil) {
			t.Errorf("%q: grammar.Check: %v; llama.cpp: %v", g, goErr, cErr)
		}
	}
	// What llama.cpp's parser does not refuse but cannot survive: an
	// unbounded repetition of a group that can be empty (it recurses until
	// the stack overflows), {m,n} with n < m (an endless expansion).
	// Check refuses them, and so CheckGrammar and the sampler do.
	for _, g := range []string{`root ::= ("a"?)*`, `root ::= ("a"?){2,}`, `root ::= ("a" | "")+ "b"`, `root ::= "a"{5,2}`, "root ::= x+\nx ::= \"\" | \"b\""} {
		if err := m.CheckGrammar(g); !errors.Is(err, ErrGrammar) {
			t.Errorf("CheckGrammar(%q) = %v", g, err)
		}
	}
}

// What grammar.Check accepts, llama.cpp parses without crashing and
// accepts too (token references aside: they need the vocabulary).
func FuzzGrammarAgrees(f *testing.F) {
	for _, g := range []string{`root ::= "a"`, "root ::= x y\nx ::= \"x\"*\ny ::= (\"a\" | \"b\"){2,3}", `root ::= ("a"?){3} [^a-z]+ .`, "root ::= a? b\na ::= \"a\"*\nb ::= \"b\" | \"\""} {
		f.Add(g)
	}
	m := loadModel(f)
	f.Fuzz(func(t *testing.T, g string) {
		if len(g) > 512 || grammar.Check(g) != nil {
			return
		}
		if err := m.checkLlama(g); err != nil && !strings.Contains(g, "<") {
			t.Fatalf("grammar.Check accepts %q; llama.cpp: %v", g, err)
		}
	})
}

// The greedy fast path (match the grammar against the most likely tokens
// first) gives exactly the tokens of matching the whole vocabulary, with
// bias and penalties in the chain too.
func TestGrammarGreedyTopK(t *testing.T) {
	for _, load := range []func(testing.TB) *Model{loadModel, loadQ8} {
		m := load(t)
		c := newContext(t, m, ContextParams{})
		prompt := stories260k.ReferenceGreedy().PromptTokens
		g, err := grammar.FromJSONSchema([]byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":10},"n":{"type":"integer"},"tags":{"type":"array","items":{"enum":["x","yy"]},"maxItems":3}},"required":["name","n","tags"]}`))
		if err != nil {
			t.Fatal(err)
		}
		plain := engine.DefaultSampling()
		plain.Grammar = g
		pen := plain
		pen.RepetitionPenalty, pen.PresencePenalty = 1.3, 0.5
		pen.LogitBias = []engine.TokenBias{{Token: 34, Bias: 5}, {Token: 100, Bias: -3}}
		for _, s := range []engine.Sampling{plain, pen} {
			for _, k := range []int{1, 8, 64} {
				old := setGrammarTopK(k)
				before := c.Stats()
				fast, _ := grammarRun(t, c, prompt, s, 200)
				mid := c.Stats()
				setGrammarTopK(0)
				full, _ := grammarRun(t, c, prompt, s, 200)
				after := c.Stats()
				setGrammarTopK(old)
				if !slices.Equal(fast, full) {
					t.Fatalf("top %d: %v\nfull: %v", k, fast, full)
				}
				fastScans, fullScans := mid.GrammarScans-before.GrammarScans, after.GrammarScans-mid.GrammarScans
				t.Logf("top %d: %d tokens, %d full scans, %d without the fast path", k, len(fast), fastScans, fullScans)
				if fastScans > fullScans {
					t.Errorf("top %d: %d full scans, %d without the fast path", k, fastScans, fullScans)
				}
			}
		}
	}
}
