package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/llmserve/llmserve/engine"
)

// Vocab is what Scripted needs of the model's vocabulary (tokenizer.Vocab
// has it): the text of each token, to spell answers and read prompts, and
// the token that ends an answer.
type Vocab interface {
	// Piece returns the bytes token tok stands for; control tokens give
	// their text only when special is true.
	Piece(tok int32, special bool) []byte
	// NumTokens is the vocabulary size.
	NumTokens() int
	// EOS is the end-of-sequence token, -1 if none.
	EOS() int32
}

// Script decides what the model answers to a prompt: prompt is the
// prompt's text as the model's vocabulary spells it (control tokens such
// as "<|im_start|>" included, images and audio left out). It returns the
// answer, or ok false to let the model answer as it would.
type Script func(prompt string) (answer string, ok bool)

// Scripted is an engine.Executor that makes a real executor's model
// answer what a Script says, for end-to-end tests that need a model to
// write something chosen (a tool call in the model's tool format, a JSON
// shape) while everything else stays real: the API, the frontend's
// template, parsers and grammars, the scheduler, the KV cache and the
// engine, which computes every token.
//
// It forces, never replaces: for each sampling chunk of a scripted
// sequence it sets engine.Chunk.Only to the answer's next token (then to
// EOS), so the token goes through the sequence's own sampler chain
// (penalties, logit bias, a grammar: a grammar that forbids the scripted
// text fails the sequence with engine.ErrSampling, as a real model held
// to it could not have written it) and its logprobs are the model's. The
// answer is spelled greedily, longest token text first, over the
// vocabulary's token texts (control tokens' included, so "<|im_end|>" in
// an answer is that token), so the answer's text is exactly what the
// frontend decodes; an answer the vocabulary cannot spell fails the
// sequence with engine.ErrInvalidBatch. After the answer the sequence is
// forced to EOS; a sequence held past it (ignore_eos, min_tokens beyond
// the answer) samples freely. Its place in the answer is derived from the
// chunk (positions minus the prompt), so a sequence recomputed after a
// preemption or restored from the prefix cache continues its answer.
//
// Chunks with draft tokens (speculative decoding) are not scripted.
// Scripted forwards the optional capabilities of engine (Resizer,
// Embedder, Idler, KVMemoryReporter, AdapterSwitchReporter, the KV
// layout) to Executor; one that Executor lacks does nothing (a resize
// fails).
//
// models.GenerativeConfig.WrapExecutor puts it under a real model's core:
//
//	cfg.WrapExecutor = func(x engine.Executor, v tokenizer.Vocab) engine.Executor {
//		return &enginetest.Scripted{Executor: x, Vocab: v, Script: func(prompt string) (string, bool) {
//			if strings.Contains(prompt, "sunny") { // the tool's result is in
//				return "It is sunny.", true
//			}
//			return `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`, true
//		}}
//	}
type Scripted struct {
	// Executor computes the steps.
	Executor engine.Executor
	// Vocab spells the answers and reads the prompts.
	Vocab Vocab
	// Script is asked once per sequence, when the sequence is added, on
	// the engine core's goroutine.
	Script Script

	mu      sync.Mutex
	pieces  map[string]int32 // token text -> token, built on first use
	longest int              // the longest token text, in bytes
	seqs    map[engine.SeqID]*scriptedSeq
	asked   int
}

// scriptedSeq is one scripted sequence: its prompt length and answer.
type scriptedSeq struct {
	prompt int
	answer []int32
	err    error
}

// Asked is how many sequences the script answered.
func (s *Scripted) Asked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked
}

// Execute implements engine.Executor: it asks the script about the added
// sequences, forces the scripted ones' samples and runs the step on
// Executor.
func (s *Scripted) Execute(ctx context.Context, step *engine.Step) (engine.StepResult, error) {
	s.mu.Lock()
	if s.seqs == nil {
		s.seqs = make(map[engine.SeqID]*scriptedSeq)
	}
	for _, n := range step.Added {
		answer, ok := s.Script(s.text(n.History))
		if !ok {
			continue
		}
		s.asked++
		toks, err := s.spell(answer)
		s.seqs[n.Seq] = &scriptedSeq{prompt: len(n.History), answer: toks, err: err}
	}
	// The step the scheduler keeps is not changed: the inner executor gets
	// a copy of the batch with Only set, and the drafts it proposes are
	// copied back (engine.Chunk.DraftLimit).
	inner := *step
	inner.Batch = slices.Clone(step.Batch)
	var failed []engine.Failure
	keep := inner.Batch[:0]
	index := make([]int, 0, len(step.Batch)) // inner chunk -> step chunk
	for i, ch := range step.Batch {
		sq := s.seqs[ch.Seq]
		if sq != nil && ch.Sample && len(ch.Draft) == 0 {
			if sq.err != nil {
				failed = append(failed, engine.Failure{Seq: ch.Seq, Err: sq.err})
				continue
			}
			switch k := int(ch.Pos) + len(ch.Tokens) - sq.prompt; {
			case k >= 0 && k < len(sq.answer):
				ch.Only, ch.DraftLimit = []int32{sq.answer[k]}, 0
			case k == len(sq.answer) && s.Vocab.EOS() >= 0:
				ch.Only, ch.DraftLimit = []int32{s.Vocab.EOS()}, 0
			}
		}
		keep = append(keep, ch)
		index = append(index, i)
	}
	inner.Batch = keep
	for _, id := range step.Removed {
		delete(s.seqs, id)
	}
	s.mu.Unlock()

	res, err := s.Executor.Execute(ctx, &inner)
	for j, i := range index {
		step.Batch[i].Draft = inner.Batch[j].Draft
	}
	res.Failures = append(res.Failures, failed...)
	return res, err
}

// text is the prompt's text, control tokens included.
func (s *Scripted) text(prompt []int32) string {
	var b strings.Builder
	for _, t := range prompt {
		if t >= 0 {
			b.Write(s.Vocab.Piece(t, true))
		}
	}
	return b.String()
}

// spell turns answer into tokens whose texts join to exactly answer,
// longest token text first. Called with mu held.
func (s *Scripted) spell(answer string) ([]int32, error) {
	if s.pieces == nil {
		s.pieces = make(map[string]int32)
		for t := range int32(s.Vocab.NumTokens()) {
			p := s.Vocab.Piece(t, true)
			if len(p) == 0 {
				continue
			}
			if _, dup := s.pieces[string(p)]; !dup {
				s.pieces[string(p)] = t
				s.longest = max(s.longest, len(p))
			}
		}
	}
	var toks []int32
	for rest := answer; rest != ""; {
		n := min(len(rest), s.longest)
		for ; n > 0; n-- {
			if t, ok := s.pieces[rest[:n]]; ok {
				toks = append(toks, t)
				break
			}
		}
		if n == 0 {
			at := len(answer) - len(rest)
			return nil, fmt.Errorf("%w: enginetest: the vocabulary cannot spell the scripted answer %q at byte %d (%q)",
				engine.ErrInvalidBatch, answer[:min(len(answer), 80)], at, rest[:min(len(rest), 8)])
		}
		rest = rest[n:]
	}
	return toks, nil
}

// Close implements engine.Executor.
func (s *Scripted) Close() error { return s.Executor.Close() }

// errNoResize is Resize's error when Executor cannot resize.
var errNoResize = errors.New("enginetest: the scripted executor's engine cannot resize")

// Resize implements engine.Resizer when Executor does.
func (s *Scripted) Resize(n int) error {
	if r, ok := s.Executor.(engine.Resizer); ok {
		return r.Resize(n)
	}
	return errNoResize
}

// EmbedCapacity implements engine.Embedder: Executor's, or none.
func (s *Scripted) EmbedCapacity() engine.EmbedCapacity {
	if e, ok := s.Executor.(engine.Embedder); ok {
		return e.EmbedCapacity()
	}
	return engine.EmbedCapacity{}
}

// Idle implements engine.Idler.
func (s *Scripted) Idle() {
	if i, ok := s.Executor.(engine.Idler); ok {
		i.Idle()
	}
}

// KVMemory implements engine.KVMemoryReporter.
func (s *Scripted) KVMemory() engine.KVMemory {
	if r, ok := s.Executor.(engine.KVMemoryReporter); ok {
		return r.KVMemory()
	}
	return engine.KVMemory{}
}

// AdapterSwitches implements engine.AdapterSwitchReporter.
func (s *Scripted) AdapterSwitches() uint64 {
	if r, ok := s.Executor.(engine.AdapterSwitchReporter); ok {
		return r.AdapterSwitches()
	}
	return 0
}

// KVLayout is Executor's KV layout, or nil.
func (s *Scripted) KVLayout() *engine.KVLayout {
	if l, ok := s.Executor.(interface{ KVLayout() *engine.KVLayout }); ok {
		return l.KVLayout()
	}
	return nil
}
