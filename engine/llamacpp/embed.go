//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
)

// Pooling names, as in the GGUF key {arch}.pooling_type and vLLM's
// --override-pooler-config.
var poolingTypes = map[string]C.enum_llama_pooling_type{
	"none": C.LLAMA_POOLING_TYPE_NONE,
	"mean": C.LLAMA_POOLING_TYPE_MEAN,
	"cls":  C.LLAMA_POOLING_TYPE_CLS,
	"last": C.LLAMA_POOLING_TYPE_LAST,
	"rank": C.LLAMA_POOLING_TYPE_RANK,
}

// PoolingName returns the name of GGUF pooling type n ("" when unknown).
func PoolingName(n int) string {
	for name, t := range poolingTypes {
		if int(t) == n {
			return name
		}
	}
	return ""
}

// embedContext is the llama.cpp context that embeds: the same weights as
// the generating context, with embeddings on, the pooling chosen, and one
// unified KV memory that every step clears. It is built on the first step
// that embeds, so a model nobody asks for embeddings pays nothing for it.
type embedContext struct {
	c     *C.struct_llama_context
	mem   C.llama_memory_t
	batch C.struct_llama_batch
	// width is the length of a pooled vector: n_embd, or n_cls_out for
	// rank pooling.
	width int
}

// EmbedCapacity implements engine.Embedder.
func (c *Context) EmbedCapacity() engine.EmbedCapacity {
	return engine.EmbedCapacity{Tokens: c.embedTokens(), Inputs: c.embedInputs()}
}

func (c *Context) embedTokens() int {
	if c.params.EmbedTokens > 0 {
		return c.params.EmbedTokens
	}
	return c.slotTokens
}

func (c *Context) embedInputs() int {
	if c.params.EmbedInputs > 0 {
		return min(c.params.EmbedInputs, MaxSlots)
	}
	return 32
}

// buildEmbed creates the embedding context.
func (c *Context) buildEmbed() error {
	pooling, ok := poolingTypes[c.params.Pooling]
	switch {
	case c.params.Pooling == "":
		pooling = C.LLAMA_POOLING_TYPE_UNSPECIFIED // the model's own
	case !ok:
		return fmt.Errorf("pooling %q (want mean, cls, last, rank or none)", c.params.Pooling)
	}
	m := c.model
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return ErrModelClosed
	}
	n := c.embedTokens()
	cp := C.llama_context_default_params()
	cp.n_ctx = C.uint32_t(roundUp(n, 256))
	// A pooled input must be evaluated in one piece.
	cp.n_batch = cp.n_ctx
	cp.n_ubatch = cp.n_ctx
	cp.n_seq_max = C.uint32_t(c.embedInputs())
	cp.kv_unified = true
	threads := max(c.params.Threads, 1)
	cp.n_threads = C.int32_t(threads)
	cp.n_threads_batch = C.int32_t(threads)
	if c.params.BatchThreads > 0 {
		cp.n_threads_batch = C.int32_t(c.params.BatchThreads)
	}
	cp.embeddings = true
	cp.pooling_type = pooling
	cp.no_perf = true
	cc := C.llama_init_from_model(m.c, cp)
	if cc == nil {
		return errors.New("llama.cpp could not create the embedding context (see its log)")
	}
	if C.llama_pooling_type(cc) == C.LLAMA_POOLING_TYPE_NONE {
		C.llama_free(cc)
		return fmt.Errorf("%w: the model has no pooling; serve it with a pooling setting (mean, cls or last)", ErrNoPooling)
	}
	bp := c.batchPool
	if bp == nil {
		bp = c.pool
	}
	C.llama_attach_threadpool(cc, c.pool, bp)
	width := m.info.NEmbd
	if C.llama_pooling_type(cc) == C.LLAMA_POOLING_TYPE_RANK {
		width = max(int(C.llama_model_n_cls_out(m.c)), 1)
	}
	c.embed = &embedContext{
		c:     cc,
		mem:   C.llama_get_memory(cc),
		batch: C.llama_batch_init(C.int32_t(cp.n_ctx), 0, 1),
		width: width,
	}
	return nil
}

// freeEmbed frees the embedding context.
func (c *Context) freeEmbed() {
	if c.embed != nil {
		C.llama_batch_free(c.embed.batch)
		C.llama_free(c.embed.c)
		c.embed = nil
	}
}

// embedAll evaluates inputs together, one sequence each, and returns one
// result per input. Inputs that cannot run fail alone.
func (c *Context) embedAll(inputs []engine.EmbedInput) []engine.Embedding {
	out := make([]engine.Embedding, len(inputs))
	for i := range inputs {
		out[i].Tag = inputs[i].Tag
	}
	if c.embed == nil {
		if err := c.buildEmbed(); err != nil {
			for i := range out {
				out[i].Err = fmt.Errorf("%w: embed: %w", engine.ErrInvalidBatch, err)
			}
			return out
		}
	}
	capTokens, capInputs := c.embedTokens(), c.embedInputs()
	var run []int // indexes of inputs that go into the evaluation
	total := 0
	for i, in := range inputs {
		switch {
		case len(in.Tokens) == 0:
			out[i].Err = fmt.Errorf("%w: embed: an empty input", engine.ErrInvalidBatch)
		case len(in.Tokens)+total > capTokens || len(run) == capInputs:
			out[i].Err = fmt.Errorf("%w: embed: %d tokens do not fit the step (%d of %d tokens, %d of %d inputs taken)",
				engine.ErrInvalidBatch, len(in.Tokens), total, capTokens, len(run), capInputs)
		default:
			if err := c.checkTokens(in.Tokens); err != nil {
				out[i].Err = fmt.Errorf("%w: embed: %w", engine.ErrInvalidBatch, err)
				continue
			}
			run = append(run, i)
			total += len(in.Tokens)
		}
	}
	if len(run) == 0 {
		return out
	}
	e := c.embed
	C.llama_memory_clear(e.mem, C.bool(true))
	b := &e.batch
	b.n_tokens = 0
	tokens := unsafe.Slice(b.token, total)
	pos := unsafe.Slice(b.pos, total)
	nSeq := unsafe.Slice(b.n_seq_id, total)
	seqIDs := unsafe.Slice(b.seq_id, total)
	logits := unsafe.Slice(b.logits, total)
	k := 0
	for seq, i := range run {
		for p, tok := range inputs[i].Tokens {
			tokens[k] = C.llama_token(tok)
			pos[k] = C.llama_pos(p)
			nSeq[k] = 1
			*seqIDs[k] = C.llama_seq_id(seq)
			logits[k] = 1
			k++
		}
	}
	b.n_tokens = C.int32_t(total)
	rc := C.llama_decode(e.c, *b)
	c.stats.EmbeddedTokens += uint64(total)
	if rc != 0 {
		err := fmt.Errorf("embed: llama_decode returned %d", int(rc))
		for _, i := range run {
			out[i].Err = err
		}
		return out
	}
	for seq, i := range run {
		p := C.llama_get_embeddings_seq(e.c, C.llama_seq_id(seq))
		if p == nil {
			out[i].Err = errors.New("embed: llama.cpp returned no pooled embedding")
			continue
		}
		out[i].Vector = append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(p)), e.width)...)
	}
	return out
}

// checkTokens refuses token ids outside the vocabulary, which llama.cpp
// would abort on.
func (c *Context) checkTokens(toks []int32) error {
	for _, t := range toks {
		if t < 0 || int(t) >= c.nVocab {
			return fmt.Errorf("token %d is outside the vocabulary [0, %d)", t, c.nVocab)
		}
	}
	return nil
}
