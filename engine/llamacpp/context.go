//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
)

// ContextParams says how to build a context.
type ContextParams struct {
	// KVTokens is the KV capacity in tokens, shared by all sequences (the
	// cache is unified). It is rounded up to a multiple of 256.
	KVTokens int
	// Slots is the number of sequence ids (llama.cpp's n_seq_max), at most
	// MaxSlots. Running sequences and prefix-cache holders both use slots.
	Slots int
	// BatchTokens is the most tokens one Execute may decode (n_batch).
	BatchTokens int
	// MicroBatchTokens is the physical batch size (n_ubatch); 0 means
	// min(BatchTokens, 512).
	MicroBatchTokens int
	// Threads is the thread count for decoding; BatchThreads for large
	// batches (0 means Threads).
	Threads      int
	BatchThreads int
	// FlashAttention is "auto" (default), "on" or "off".
	FlashAttention string
	// NoOffloadKQV keeps the KV cache and attention off the GPU when layers
	// are offloaded.
	NoOffloadKQV bool
	// KVType is the KV cache element type: "f16" (default), "f32", "bf16",
	// "q8_0" or "q4_0". Quantized V needs flash attention.
	KVType string
}

// MaxSlots is the most sequence ids callers can use. llama.cpp allows 256
// (LLAMA_MAX_SEQ); the context keeps one more for batch padding.
const MaxSlots = 255

// Stats are counters of a context's work since it was created.
type Stats struct {
	// Steps is the number of Execute calls that decoded a batch.
	Steps uint64
	// DecodedTokens is the number of tokens passed to llama_decode.
	DecodedTokens uint64
}

// Context owns a llama.cpp context: its KV memory, batch buffer and sampler
// chains. One goroutine uses it.
type Context struct {
	model  *Model
	c      *C.struct_llama_context
	mem    C.llama_memory_t
	batch  C.struct_llama_batch
	nBatch int
	nVocab int
	slots  int
	maxLen int

	samplers map[engine.SeqID]*sampler
	stats    Stats
}

// NewContext creates a context over m.
func NewContext(m *Model, p ContextParams) (*Context, error) {
	if p.Slots < 1 || p.Slots > MaxSlots {
		return nil, fmt.Errorf("new context: slots %d outside [1, %d]", p.Slots, MaxSlots)
	}
	if p.BatchTokens < 1 {
		return nil, fmt.Errorf("new context: batch tokens %d < 1", p.BatchTokens)
	}
	if p.KVTokens < 1 {
		return nil, fmt.Errorf("new context: KV tokens %d < 1", p.KVTokens)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return nil, ErrModelClosed
	}
	cp := C.llama_context_default_params()
	// One block of cells more than the caller's capacity: the padding token
	// must never be the one that does not fit.
	kvTokens := roundUp(p.KVTokens, 256)
	cp.n_ctx = C.uint32_t(kvTokens + 256)
	cp.n_batch = C.uint32_t(p.BatchTokens)
	ub := p.MicroBatchTokens
	if ub <= 0 {
		ub = min(p.BatchTokens, 512)
	}
	cp.n_ubatch = C.uint32_t(ub)
	cp.n_seq_max = C.uint32_t(p.Slots + 1) // + padSlot
	threads := max(p.Threads, 1)
	cp.n_threads = C.int32_t(threads)
	cp.n_threads_batch = C.int32_t(threads)
	if p.BatchThreads > 0 {
		cp.n_threads_batch = C.int32_t(p.BatchThreads)
	}
	switch p.FlashAttention {
	case "", "auto":
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_AUTO
	case "on":
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
	case "off":
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
	default:
		return nil, fmt.Errorf("new context: flash attention %q (want auto, on or off)", p.FlashAttention)
	}
	cp.offload_kqv = C.bool(!p.NoOffloadKQV)
	kvType, err := ggmlType(p.KVType)
	if err != nil {
		return nil, fmt.Errorf("new context: %w", err)
	}
	cp.type_k, cp.type_v = kvType, kvType
	cp.kv_unified = true
	cp.no_perf = true
	cp.embeddings = false

	cc := C.llama_init_from_model(m.c, cp)
	if cc == nil {
		return nil, errors.New("new context: llama.cpp could not create the context (see its log)")
	}
	ctx := &Context{
		model:    m,
		c:        cc,
		mem:      C.llama_get_memory(cc),
		batch:    C.llama_batch_init(C.int32_t(p.BatchTokens+1), 0, 1),
		nBatch:   p.BatchTokens,
		nVocab:   m.info.NVocab,
		slots:    p.Slots,
		maxLen:   kvTokens,
		samplers: make(map[engine.SeqID]*sampler),
	}
	return ctx, nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

func ggmlType(name string) (uint32, error) {
	switch name {
	case "", "f16":
		return C.GGML_TYPE_F16, nil
	case "f32":
		return C.GGML_TYPE_F32, nil
	case "bf16":
		return C.GGML_TYPE_BF16, nil
	case "q8_0":
		return C.GGML_TYPE_Q8_0, nil
	case "q4_0":
		return C.GGML_TYPE_Q4_0, nil
	}
	return 0, fmt.Errorf("KV cache type %q (want f16, f32, bf16, q8_0 or q4_0)", name)
}

// KVTokens is the KV capacity in tokens after rounding.
func (c *Context) KVTokens() int { return c.maxLen }

// Stats returns the counters. Call it from the goroutine that owns c.
func (c *Context) Stats() Stats { return c.stats }

// Execute implements engine.Executor.
func (c *Context) Execute(ctx context.Context, step *engine.Step) (engine.StepResult, error) {
	var res engine.StepResult
	if c.c == nil {
		return res, engine.ErrClosed
	}
	for i := range step.Added {
		if err := c.addSequence(&step.Added[i]); err != nil {
			return res, err
		}
	}
	for _, op := range step.MemOps {
		if err := c.applyMemOp(op); err != nil {
			return res, err
		}
	}
	if len(step.Batch) > 0 {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := c.decode(step.Batch); err != nil {
			return res, err
		}
		var err error
		if res, err = c.collect(step.Batch); err != nil {
			return res, err
		}
	}
	for _, id := range step.Removed {
		if s := c.samplers[id]; s != nil {
			s.free()
			delete(c.samplers, id)
		}
	}
	return res, nil
}

func (c *Context) addSequence(n *engine.NewSequence) error {
	if old := c.samplers[n.Seq]; old != nil {
		old.free()
	}
	s, err := newSampler(c.model, &n.Sampling, c.maxLen)
	if err != nil {
		return fmt.Errorf("sequence %d: %w", n.Seq, err)
	}
	s.acceptHistory(n.History)
	c.samplers[n.Seq] = s
	return nil
}

// decode fills the batch and runs llama_decode.
func (c *Context) decode(chunks []engine.Chunk) error {
	n := 0
	for i := range chunks {
		n += len(chunks[i].Tokens)
	}
	if n > c.nBatch {
		return fmt.Errorf("%w: %d tokens exceed the batch size %d", engine.ErrInvalidBatch, n, c.nBatch)
	}
	b := &c.batch
	tokens := unsafe.Slice(b.token, c.nBatch+1)
	pos := unsafe.Slice(b.pos, c.nBatch+1)
	nSeq := unsafe.Slice(b.n_seq_id, c.nBatch+1)
	seqIDs := unsafe.Slice(b.seq_id, c.nBatch+1)
	logits := unsafe.Slice(b.logits, c.nBatch+1)
	k := 0
	for i := range chunks {
		ch := &chunks[i]
		if ch.Slot < 0 || int(ch.Slot) >= c.slots {
			return fmt.Errorf("%w: slot %d outside [0, %d)", engine.ErrInvalidBatch, ch.Slot, c.slots)
		}
		if len(ch.Tokens) == 0 {
			return fmt.Errorf("%w: empty chunk for sequence %d", engine.ErrInvalidBatch, ch.Seq)
		}
		last := len(ch.Tokens) - 1
		for j, t := range ch.Tokens {
			if t < 0 || int(t) >= c.nVocab {
				return fmt.Errorf("%w: token %d outside the vocabulary", engine.ErrInvalidBatch, t)
			}
			tokens[k] = C.llama_token(t)
			pos[k] = C.llama_pos(ch.Pos + int32(j))
			nSeq[k] = 1
			*seqIDs[k] = C.llama_seq_id(ch.Slot)
			out := (j == last && ch.Sample) || j < len(ch.Targets)
			if out {
				logits[k] = 1
			} else {
				logits[k] = 0
			}
			k++
		}
	}
	// A matrix product with one column takes ggml's matrix-vector kernels,
	// whose rounding differs from the matrix-matrix kernels (llamafile
	// sgemm) that wider products take. llama.cpp multiplies every token
	// row in most layers, and only output rows in the last layer and the
	// output head. Keeping both counts at two or more makes a sequence's
	// numbers the same whether it runs alone or batched with others, so
	// greedy output does not depend on the load: a batch of one token gets
	// a padding token in a slot of its own (its cell is dropped after), and
	// a batch with one output row gets a second one whose logits nobody
	// reads.
	outputs := 0
	for i := range k {
		outputs += int(logits[i])
	}
	padded := k == 1
	if padded {
		tokens[k] = tokens[0]
		pos[k] = 0
		nSeq[k] = 1
		*seqIDs[k] = C.llama_seq_id(c.slots) // the padding slot
		logits[k] = C.int8_t(outputs)
		k++
	} else if outputs == 1 {
		for i := range k {
			if logits[i] == 0 {
				logits[i] = 1
				break
			}
		}
	}
	b.n_tokens = C.int32_t(k)
	rc := C.llama_decode(c.c, *b)
	if padded {
		C.llama_memory_seq_rm(c.mem, C.llama_seq_id(c.slots), -1, -1)
		k--
	}
	switch {
	case rc == 0:
	case rc == 1:
		return engine.ErrKVFull
	case rc == -1:
		return fmt.Errorf("%w: llama_decode rejected the batch (see its log)", engine.ErrInvalidBatch)
	default:
		return fmt.Errorf("llama_decode failed with code %d", int(rc))
	}
	c.stats.Steps++
	c.stats.DecodedTokens += uint64(k)
	return nil
}

// collect samples the next token of every chunk that asks for one and
// computes requested logprobs. Batch rows are counted the same way decode
// laid them out.
func (c *Context) collect(chunks []engine.Chunk) (engine.StepResult, error) {
	var res engine.StepResult
	row := int32(0)
	for i := range chunks {
		ch := &chunks[i]
		s := c.samplers[ch.Seq]
		if s == nil && (ch.Sample || ch.Targets != nil) {
			return res, fmt.Errorf("%w: sequence %d has no sampler", engine.ErrInvalidBatch, ch.Seq)
		}
		if ch.Targets != nil {
			pl := engine.PromptLogprobs{Seq: ch.Seq, Logprobs: make([]engine.Logprobs, len(ch.Targets))}
			for j, t := range ch.Targets {
				pl.Logprobs[j] = logprobsOf(c.logits(row+int32(j)), t, s.topLogprobs)
			}
			res.PromptLogprobs = append(res.PromptLogprobs, pl)
		}
		if ch.Sample {
			idx := row + int32(len(ch.Tokens)-1)
			lg := c.logits(idx)
			if lg == nil {
				return res, fmt.Errorf("%w: no logits for row %d", engine.ErrInvalidBatch, idx)
			}
			var lp *engine.Logprobs
			var lse float32
			if s.logprobs {
				// Raw distribution: before bans, bias, penalties and temperature.
				lse = logSumExp(lg)
				lp = &engine.Logprobs{Top: topLogprobs(lg, s.topLogprobs, lse)}
			}
			for _, t := range ch.Ban {
				if t >= 0 && int(t) < len(lg) {
					lg[t] = float32(math.Inf(-1))
				}
			}
			tok := int32(C.llama_sampler_sample(s.chain, c.c, C.int32_t(idx)))
			if lp != nil {
				// A banned token is never drawn, so lg[tok] is still raw.
				lp.Chosen = engine.TokenLogprob{Token: tok, Logprob: lg[tok] - lse}
			}
			res.Samples = append(res.Samples, engine.Sample{Seq: ch.Seq, Token: tok, Logprobs: lp})
		}
		row += int32(len(ch.Tokens))
	}
	return res, nil
}

// logits returns a view of the logits of batch row i, or nil.
func (c *Context) logits(i int32) []float32 {
	p := C.llama_get_logits_ith(c.c, C.int32_t(i))
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), c.nVocab)
}

// Close frees the context and its samplers. The model stays loaded.
func (c *Context) Close() error {
	if c.c == nil {
		return nil
	}
	for id, s := range c.samplers {
		s.free()
		delete(c.samplers, id)
	}
	C.llama_batch_free(c.batch)
	C.llama_free(c.c)
	c.c = nil
	return nil
}
