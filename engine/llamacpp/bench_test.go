//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/grammar"
)

// BenchmarkDecodeStep measures one decode step of seqs sequences (one
// token each, at position ~128), on stories260K or the model in
// LLMSERVE_BENCH_MODEL (e.g. the SmolLM2-135M shape of `llmserve synth`).
// On models whose one-row kernels differ (probePadding), a lone sequence
// gets a throwaway row beside it, as in serving (decode.go).
//
//	LLMSERVE_BENCH_MODEL=/tmp/smollm2-q8.gguf go test -run XXX -bench DecodeStep ./engine/llamacpp/
func BenchmarkDecodeStep(b *testing.B) {
	m := benchModel(b)
	threads := 2
	for _, seqs := range []int{1, 2, 4, 16} {
		b.Run(fmt.Sprintf("seqs=%d", seqs), func(b *testing.B) {
			benchDecode(b, m, seqs, threads, func(int) engine.Sampling { return engine.DefaultSampling() })
		})
	}
}

// benchDecode runs decode steps of seqs sequences, sequence s sampling
// with sampling(s), and reports ms/step and tok/s.
func benchDecode(b *testing.B, m *Model, seqs, threads int, sampling func(s int) engine.Sampling) *Context {
	c := newContext(b, m, ContextParams{Slots: max(seqs, 2), SlotTokens: 512, Threads: threads})
	ctx := context.Background()
	step := &engine.Step{}
	for s := range seqs {
		step.Added = append(step.Added, engine.NewSequence{Seq: engine.SeqID(s), Sampling: sampling(s)})
		toks := make([]int32, 128)
		for i := range toks {
			toks[i] = int32(10 + (s*7+i)%200)
		}
		step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: toks, Sample: true})
	}
	res, err := c.Execute(ctx, step)
	if err != nil || len(res.Failures) > 0 {
		b.Fatal(err, res.Failures)
	}
	pos := int32(128)
	step = &engine.Step{}
	for s := range seqs {
		step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: []int32{res.Samples[s].Token}, Sample: true})
	}
	for b.Loop() {
		for s := range step.Batch {
			step.Batch[s].Pos = pos
		}
		res, err = c.Execute(ctx, step)
		if err != nil || len(res.Failures) > 0 {
			b.Fatal(err, res.Failures)
		}
		for s := range step.Batch {
			step.Batch[s].Tokens[0] = res.Samples[s].Token
		}
		if pos++; pos >= 500 {
			b.StopTimer()
			var clr engine.Step
			for s := range seqs {
				clr.Clears = append(clr.Clears, engine.Slot(s))
			}
			// Recompute the first 128 positions and go on from there.
			if _, err := c.Execute(ctx, &clr); err != nil {
				b.Fatal(err)
			}
			refill := &engine.Step{}
			for s := range seqs {
				toks := make([]int32, 128)
				for i := range toks {
					toks[i] = int32(10 + (s*7+i)%200)
				}
				refill.Batch = append(refill.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: toks})
			}
			if _, err := c.Execute(ctx, refill); err != nil {
				b.Fatal(err)
			}
			pos = 128
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/step")
	b.ReportMetric(float64(seqs)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
	return c
}

// BenchmarkGrammarBatch measures whether a sequence sampling under a
// grammar slows its batch: a decode step of 16 sequences where none, one
// or all follow a JSON grammar that never ends (an array of objects of a
// small schema), greedy. Sampling runs on the engine goroutine, after the
// batch's evaluation, so the grammar's cost adds to every sequence's step.
// scans/token is how often the chain's first draw was forbidden and the
// grammar was matched against the whole vocabulary.
//
//	LLMSERVE_BENCH_MODEL=/tmp/smollm2-q8.gguf go test -run XXX -bench GrammarBatch -benchtime 100x ./engine/llamacpp/
func BenchmarkGrammarBatch(b *testing.B) {
	m := benchModel(b)
	item, err := grammar.FromJSONSchema([]byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},"required":["name","age","tags"]}`))
	if err != nil {
		b.Fatal(err)
	}
	g := strings.Replace(item, "root ::= ", "item ::= ", 1) + `root ::= "[" ws item (ws "," ws item)*` + "\n"
	if err := m.CheckGrammar(g); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("grammar=%d", n), func(b *testing.B) {
			c := benchDecode(b, m, 16, 2, func(s int) engine.Sampling {
				p := engine.DefaultSampling()
				if s < n {
					p.Grammar = g
				}
				return p
			})
			if st := c.Stats(); st.GrammarTokens > 0 {
				b.ReportMetric(float64(st.GrammarScans)/float64(st.GrammarTokens), "scans/token")
			}
		})
	}
}

// benchModel is the model in LLMSERVE_BENCH_MODEL, or stories260K.
func benchModel(b *testing.B) *Model {
	if path := os.Getenv("LLMSERVE_BENCH_MODEL"); path != "" {
		return loadFile(b, path)
	}
	return loadModel(b)
}

// BenchmarkPrefill measures the evaluation of one prompt chunk of n tokens
// into an empty slot (model as in BenchmarkDecodeStep).
func BenchmarkPrefill(b *testing.B) {
	m := benchModel(b)
	for _, n := range []int{128, 512} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			c := newContext(b, m, ContextParams{Slots: 2, SlotTokens: 1024, Threads: 2})
			ctx := context.Background()
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(10 + i%200)
			}
			st := &engine.Step{Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: toks}}}
			clr := &engine.Step{Clears: []engine.Slot{0}}
			for b.Loop() {
				if res, err := c.Execute(ctx, st); err != nil || len(res.Failures) > 0 {
					b.Fatal(err, res.Failures)
				}
				b.StopTimer()
				if _, err := c.Execute(ctx, clr); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkGrammarSample measures the sampling of one token from fixed
// logits (one row of the model's output, 128 tokens into a prompt), greedy:
// without a grammar, under a grammar that allows every token (only the
// drawn token is matched), and under the JSON grammar of
// BenchmarkGrammarBatch, where the model's favourite is mostly forbidden
// and the grammar is matched against the whole vocabulary. It is the time
// a grammar adds to its batch's step, since sampling runs on the engine
// goroutine.
//
//	LLMSERVE_BENCH_MODEL=/tmp/smollm2-q8.gguf go test -run XXX -bench GrammarSample ./engine/llamacpp/
func BenchmarkGrammarSample(b *testing.B) {
	m := benchModel(b)
	c := newContext(b, m, ContextParams{Slots: 2, SlotTokens: 512, Threads: 2})
	toks := make([]int32, 128)
	for i := range toks {
		toks[i] = int32(10 + (i*7)%200)
	}
	res, err := c.Execute(context.Background(), &engine.Step{
		Added: []engine.NewSequence{{Seq: 1, Sampling: engine.DefaultSampling()}},
		Batch: []engine.Chunk{{Seq: 1, Slot: 0, Tokens: toks, Sample: true}},
	})
	if err != nil || len(res.Failures) > 0 {
		b.Fatal(err, res.Failures)
	}
	lg := slices.Clone(c.logits(-1)) // the last output row
	item, err := grammar.FromJSONSchema([]byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},"required":["name","age","tags"]}`))
	if err != nil {
		b.Fatal(err)
	}
	jsonArray := strings.Replace(item, "root ::= ", "item ::= ", 1) + `root ::= "[" ws item (ws "," ws item)*` + "\n"
	for _, tc := range []struct{ name, grammar string }{
		{"none", ""}, {"all-allowed", `root ::= [^\x00]*`}, {"json", jsonArray},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := engine.DefaultSampling()
			p.Grammar = tc.grammar
			var s *sampler
			before := c.Stats()
			n := 0
			for b.Loop() {
				if n%256 == 0 {
					if s != nil {
						s.free()
					}
					if s, err = newSampler(m, &p, 512); err != nil {
						b.Fatal(err)
					}
				}
				n++
				buf := slices.Clone(lg)
				if tok := c.draw(s, buf); tok < 0 {
					b.Fatal("no token")
				}
			}
			s.free()
			if st := c.Stats(); st.GrammarTokens > before.GrammarTokens {
				b.ReportMetric(float64(st.GrammarScans-before.GrammarScans)/float64(st.GrammarTokens-before.GrammarTokens), "scans/token")
			}
		})
	}
}

// BenchmarkDraftStep measures a decode step whose sequences carry draft
// tokens that are rejected (the cost speculation adds where it does not
// help): none, drafts of one length, drafts of lengths that differ
// between sequences.
func BenchmarkDraftStep(b *testing.B) {
	m := benchModel(b)
	for _, seqs := range []int{1, 8} {
		for _, d := range []struct {
			name string
			k    func(s, step int) int
		}{
			{"none", func(int, int) int { return 0 }},
			{"k=5", func(int, int) int { return 5 }},
			{"k=1..5", func(s, step int) int { return 1 + (s+step)%5 }},
		} {
			b.Run(fmt.Sprintf("seqs=%d/draft=%s", seqs, d.name), func(b *testing.B) {
				c := newContext(b, m, ContextParams{Slots: max(seqs, 2), SlotTokens: 512, Threads: 1})
				ctx := context.Background()
				vocab := int32(m.Info().NVocab)
				pos := make([]int32, seqs)
				last := make([]int32, seqs)
				restart := func() {
					var st engine.Step
					for s := range seqs {
						if pos[s] == 0 {
							st.Added = append(st.Added, engine.NewSequence{Seq: engine.SeqID(s), Sampling: engine.DefaultSampling()})
						}
						st.Clears = append(st.Clears, engine.Slot(s))
						toks := make([]int32, 128)
						for i := range toks {
							toks[i] = int32(10 + (s*7+i)%200)
						}
						st.Batch = append(st.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Tokens: toks, Sample: true})
					}
					res, err := c.Execute(ctx, &st)
					if err != nil || len(res.Failures) > 0 {
						b.Fatal(err, res.Failures)
					}
					for s := range seqs {
						pos[s], last[s] = 128, res.Samples[s].Token
					}
				}
				restart()
				step, steps, tokens := &engine.Step{}, 0, 0
				for b.Loop() {
					step.Batch = step.Batch[:0]
					for s := range seqs {
						draft := make([]int32, d.k(s, steps))
						for i := range draft {
							draft[i] = (last[s] + 1 + int32(i)) % vocab
						}
						step.Batch = append(step.Batch, engine.Chunk{Seq: engine.SeqID(s), Slot: engine.Slot(s), Pos: pos[s], Tokens: []int32{last[s]}, Draft: draft, Sample: true})
					}
					res, err := c.Execute(ctx, step)
					if err != nil || len(res.Failures) > 0 {
						b.Fatal(err, res.Failures)
					}
					steps++
					for s, smp := range res.Samples {
						pos[s] += int32(1 + len(smp.Accepted))
						last[s] = smp.Token
						tokens += 1 + len(smp.Accepted)
					}
					if slices.Max(pos) >= 480 {
						b.StopTimer()
						restart()
						b.StartTimer()
					}
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(steps), "ms/step")
				b.ReportMetric(float64(c.Stats().Evaluations)/float64(steps), "evals/step")
			})
		}
	}
}
