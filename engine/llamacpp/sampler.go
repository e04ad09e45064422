//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "llama.h"
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/grammar"
)

// sampler is one sequence's chain. The order follows vLLM's semantics:
// logit bias, penalties, temperature, then top-k, top-p and min-p on the
// tempered distribution, then the draw. A grammar is not in the chain but
// beside it (llmserve_sample): it restricts the candidates before the
// chain sees them, and only when the chain's own draw is a token the
// grammar forbids (see bridge.h).
type sampler struct {
	chain *C.struct_llama_sampler
	// grammar is the llama.cpp grammar sampler, or nil; owned by sampler.
	grammar *C.struct_llama_sampler
	// repetition sees prompt and output tokens; it is owned by chain.
	repetition  *C.struct_llama_sampler
	logprobs    bool
	topLogprobs int
	// bound is the largest logit magnitude the chain stays finite for
	// (engine.Sampling.SafeLogitBound); collect refuses logits beyond it.
	bound float32
	// allowed, when not nil, is the only tokens that may be drawn
	// (Sampling.AllowedTokens), indexed by token.
	allowed []bool
	// argmax is set when the chain is greedy with nothing before it (no
	// bias, no penalties) and there is no grammar: the token is then the
	// first largest logit, which collect finds without building
	// llama.cpp's candidate array.
	argmax bool
	// greedy is set when the chain transforms each logit on its own and
	// takes the largest (llmserve_sample's fast path for grammars).
	greedy bool
}

// newSampler builds the chain for p, which must pass p.Validate: nothing
// out of range may reach llama.cpp's samplers, which assert rather than
// fail. window is the most tokens the sequence can hold.
func newSampler(m *Model, p *engine.Sampling, window int) (*sampler, error) {
	if err := p.Validate(m.info.NVocab); err != nil {
		return nil, err
	}
	cp := C.llama_sampler_chain_default_params()
	cp.no_perf = true
	s := &sampler{chain: C.llama_sampler_chain_init(cp), logprobs: p.Logprobs, topLogprobs: p.TopLogprobs, bound: p.SafeLogitBound(window)}
	if len(p.AllowedTokens) > 0 {
		s.allowed = make([]bool, m.info.NVocab)
		for _, t := range p.AllowedTokens {
			s.allowed[t] = true
		}
	}
	if p.Grammar != "" {
		g, err := m.newGrammar(p.Grammar)
		if err != nil {
			s.free()
			return nil, err
		}
		s.grammar = g
	}
	add := func(x *C.struct_llama_sampler) *C.struct_llama_sampler {
		C.llama_sampler_chain_add(s.chain, x)
		return x
	}
	if len(p.LogitBias) > 0 {
		n := len(p.LogitBias)
		arr := (*C.llama_logit_bias)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.llama_logit_bias{}))))
		biases := unsafe.Slice(arr, n)
		for i, b := range p.LogitBias {
			biases[i] = C.llama_logit_bias{token: C.llama_token(b.Token), bias: C.float(b.Bias)}
		}
		add(C.llama_sampler_init_logit_bias(C.int32_t(m.info.NVocab), C.int32_t(n), arr))
		C.free(unsafe.Pointer(arr))
	}
	if p.RepetitionPenalty != 1 {
		s.repetition = add(C.llama_sampler_init_penalties(C.int32_t(window), C.float(p.RepetitionPenalty), 0, 0))
	}
	if p.FrequencyPenalty != 0 || p.PresencePenalty != 0 {
		add(C.llama_sampler_init_penalties(C.int32_t(window), 1, C.float(p.FrequencyPenalty), C.float(p.PresencePenalty)))
	}
	if p.Greedy() {
		s.argmax = C.llama_sampler_chain_n(s.chain) == 0 && s.grammar == nil
		s.greedy = true
		add(C.llama_sampler_init_greedy())
		return s, nil
	}
	add(C.llama_sampler_init_temp(C.float(p.Temperature)))
	if p.TopK > 0 {
		add(C.llama_sampler_init_top_k(C.int32_t(p.TopK)))
	}
	if p.TopP < 1 {
		add(C.llama_sampler_init_top_p(C.float(p.TopP), 1))
	}
	if p.MinP > 0 {
		add(C.llama_sampler_init_min_p(C.float(p.MinP), 1))
	}
	add(C.llama_sampler_init_dist(C.uint32_t(p.Seed)))
	if C.llama_sampler_chain_n(s.chain) == 0 {
		s.free()
		return nil, fmt.Errorf("empty sampler chain")
	}
	return s, nil
}

// acceptHistory feeds prompt tokens to the repetition penalty only. Media
// placeholders (negative, engine.MediaToken) are not tokens of the
// vocabulary and are left out.
func (s *sampler) acceptHistory(toks []int32) {
	if s.repetition == nil {
		return
	}
	for _, t := range toks {
		if t < 0 {
			continue
		}
		C.llama_sampler_accept(s.repetition, C.llama_token(t))
	}
}

func (s *sampler) free() {
	if s.grammar != nil {
		C.llama_sampler_free(s.grammar)
		s.grammar = nil
	}
	if s.chain != nil {
		C.llama_sampler_free(s.chain)
		s.chain = nil
		s.repetition = nil
	}
}

// newGrammar builds a grammar sampler for the GBNF text g (start rule
// "root"). grammar.Check runs first, always: llama.cpp's parser recurses
// forever on some grammars it does not refuse (an unbounded repetition of
// a group that can be empty, such as ("a"?)*, overflows its stack), and
// expands {m,n} with n < m without end.
func (m *Model) newGrammar(g string) (*C.struct_llama_sampler, error) {
	if err := grammar.Check(g); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGrammar, err)
	}
	return m.cGrammar(g)
}

// checkLlama is CheckGrammar without grammar.Check, for tests that
// compare the two parsers. g must not be one llama.cpp cannot survive.
func (m *Model) checkLlama(g string) error {
	x, err := m.cGrammar(g)
	if x != nil {
		C.llama_sampler_free(x)
	}
	return err
}

// cGrammar is llama.cpp's part of newGrammar.
func (m *Model) cGrammar(g string) (*C.struct_llama_sampler, error) {
	cg := C.CString(g)
	defer C.free(unsafe.Pointer(cg))
	root := C.CString("root")
	defer C.free(unsafe.Pointer(root))
	x := C.llama_sampler_init_grammar(m.vocab, cg, root)
	if x == nil {
		return nil, fmt.Errorf("%w: llama.cpp rejected it (its log says why)", ErrGrammar)
	}
	return x, nil
}

// CheckGrammar reports whether the GBNF text g (start rule "root") can be
// used: grammar.Check, then llama.cpp's own parser, by building a grammar
// sampler and freeing it. It is safe
// for concurrent use: a grammar reads only the vocabulary. The API calls it
// before submitting a request, so that a grammar the engine would refuse
// is the client's 400 rather than a failed sequence.
func (m *Model) CheckGrammar(g string) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return ErrModelClosed
	}
	x, err := m.newGrammar(g)
	if err != nil {
		return err
	}
	C.llama_sampler_free(x)
	return nil
}

// setGrammarTopK sets llmserve_grammar_topk (tests compare the greedy
// fast path with full matching) and returns the old value.
func setGrammarTopK(k int) int {
	old := int(C.llmserve_grammar_topk)
	C.llmserve_grammar_topk = C.int(k)
	return old
}
