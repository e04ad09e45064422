//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "llama.h"
#include "ggml-cpu.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
)

// Context owns a llama.cpp context: its KV memory (one stream per slot),
// its thread pools, the batch buffer and the sampler chains. One goroutine
// uses it; it implements engine.Executor.
type Context struct {
	// llamaContext is the llama.cpp context of the current number of
	// slots (usable slots [0, slots); streams adds a spare when slots is
	// 1). Resize replaces it.
	llamaContext

	model     *Model
	params    ContextParams
	pool      *C.struct_ggml_threadpool
	batchPool *C.struct_ggml_threadpool // nil when it would equal pool
	nVocab    int
	nEmbd     int
	// mediaBatch is the batch of embedding rows media positions are
	// decoded with (decodeMedia), made on first use; hasMediaBatch says
	// whether it was.
	mediaBatch    C.struct_llama_batch
	hasMediaBatch bool
	slotTokens    int

	samplers map[engine.SeqID]*sampler
	adapters map[engine.SeqID]*Adapter // sequences' LoRA adapters (lora.go)
	embed    *embedContext             // nil until a step embeds
	draft    *drafter                  // nil without ContextParams.Draft
	// sharedPools is set when pool and batchPool are another context's
	// (a draft model's context uses its target's).
	sharedPools bool
	// cand is the candidate array llmserve_sample fills, one entry per
	// vocabulary token.
	cand    []C.llama_token_data
	stats   Stats
	scratch []byte // reused buffer for KV state import and export
}

// NewContext creates a context over m.
func NewContext(m *Model, p ContextParams) (*Context, error) {
	return newContextWith(m, p, nil)
}

// newContextWith creates a context over m; with shared, it computes with
// shared's thread pools (a draft model's context runs between the
// target's evaluations: its own pools would poll for work beside them)
// and leaves them to shared to free.
func newContextWith(m *Model, p ContextParams, shared *Context) (*Context, error) {
	if p.Slots < 1 || p.Slots > MaxSlots {
		return nil, fmt.Errorf("new context: %d slots outside [1, %d]", p.Slots, MaxSlots)
	}
	if p.SlotTokens < 2 {
		return nil, fmt.Errorf("new context: %d tokens per slot < 2", p.SlotTokens)
	}
	if p.Poll < 0 || p.Poll > 100 {
		return nil, fmt.Errorf("new context: poll level %d outside [0, 100]", p.Poll)
	}
	threads := max(p.Threads, 1)
	batchThreads := threads
	if p.BatchThreads > 0 {
		batchThreads = p.BatchThreads
	}
	ctx := &Context{
		model:      m,
		params:     p,
		nVocab:     m.info.NVocab,
		nEmbd:      m.info.NEmbd,
		slotTokens: roundUp(p.SlotTokens, 256),
		samplers:   make(map[engine.SeqID]*sampler),
	}
	// Without a thread pool of its own, ggml creates and joins its worker
	// threads on every evaluation.
	switch {
	case shared != nil:
		ctx.pool, ctx.batchPool, ctx.sharedPools = shared.pool, shared.batchPool, true
	default:
		ctx.pool = newThreadPool(threads, p.Poll)
		if batchThreads != threads {
			ctx.batchPool = newThreadPool(batchThreads, p.Poll)
		}
	}
	if ctx.pool == nil || (batchThreads != threads && ctx.batchPool == nil) {
		return nil, errors.Join(errors.New("new context: ggml could not create its thread pool"), ctx.Close())
	}
	if err := ctx.build(p.Slots); err != nil {
		return nil, errors.Join(fmt.Errorf("new context: %w", err), ctx.Close())
	}
	if p.Draft != nil {
		d, err := newDrafter(ctx, p)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("new context: %w", err), ctx.Close())
		}
		ctx.draft = d
	}
	return ctx, nil
}

// llamaContext is what build makes and Resize replaces: the llama.cpp
// context of a given number of slots with its batch buffer and state
// format.
type llamaContext struct {
	c        *C.struct_llama_context
	mem      C.llama_memory_t
	batch    C.struct_llama_batch
	batchCap int
	nUbatch  int
	slots    int
	streams  int
	format   *stateFormat
	// pad is set when a one-row evaluation gives other numbers than the
	// same row among others (probePadding): evaluations are then padded to
	// two rows and two outputs (decode.go).
	pad bool
	// pages maps the KV streams to the pages of their mapped buffer
	// (kvmem.go); nil when the KV memory is not paged, and notPaged says
	// why. held[s] is the most positions stream s held since it was last
	// emptied. kvBytes is the KV of every stream's full capacity.
	pages    *kvPages
	held     []int
	notPaged string
	kvBytes  int64
}

// build creates the llama.cpp context for slots slots and makes it the
// context's current one. On error nothing changes.
func (c *Context) build(slots int) error {
	m, p := c.model, c.params
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return ErrModelClosed
	}
	// A lone sequence is padded with a token in a neighbouring stream
	// (decode.go), so one slot needs a spare stream.
	streams := max(slots, 2)
	ub := p.MicroBatchTokens
	if ub <= 0 {
		ub = 512
	}
	// A decode of every slot at once must be one evaluation.
	ub = max(ub, streams+1)

	cp := C.llama_context_default_params()
	cp.n_ctx = C.uint32_t(streams * c.slotTokens)
	cp.n_batch = C.uint32_t(ub)
	cp.n_ubatch = C.uint32_t(ub)
	cp.n_seq_max = C.uint32_t(streams)
	cp.kv_unified = false
	threads := max(p.Threads, 1)
	cp.n_threads = C.int32_t(threads)
	cp.n_threads_batch = C.int32_t(threads)
	if p.BatchThreads > 0 {
		cp.n_threads_batch = C.int32_t(p.BatchThreads)
	}
	fa, ok := flashAttnTypes[p.FlashAttention]
	if !ok {
		return fmt.Errorf("flash attention %q (want auto, on or off)", p.FlashAttention)
	}
	cp.flash_attn_type = fa
	cp.offload_kqv = C.bool(!p.NoOffloadKQV)
	kvType, ok := kvTypes[p.KVType]
	if !ok {
		return fmt.Errorf("KV cache type %q (want f16, f32, bf16, q8_0 or q4_0)", p.KVType)
	}
	if err := m.checkKVType(p.KVType, kvType); err != nil {
		return err
	}
	cp.type_k, cp.type_v = kvType, kvType
	cp.no_perf = true
	cp.embeddings = false

	var cc *C.struct_llama_context
	tensors := createWithVirtualKV(func() bool {
		if p.LoRA {
			return withoutGraphReuse(func() bool {
				cc = C.llama_init_from_model(m.c, cp)
				return cc != nil
			})
		}
		cc = C.llama_init_from_model(m.c, cp)
		return cc != nil
	})
	if cc == nil {
		return errors.New("llama.cpp could not create the context (see its log)")
	}
	bp := c.batchPool
	if bp == nil {
		bp = c.pool
	}
	C.llama_attach_threadpool(cc, c.pool, bp)
	lc := llamaContext{
		c:        cc,
		mem:      C.llama_get_memory(cc),
		batch:    C.llama_batch_init(C.int32_t(ub), 0, 1),
		batchCap: ub,
		nUbatch:  ub,
		slots:    slots,
		streams:  streams,
	}
	if len(tensors) > 0 {
		if pages, err := newKVPages(tensors, streams, c.slotTokens, pageSize); err == nil {
			lc.pages, lc.held = pages, make([]int, streams)
		} else {
			lc.notPaged = err.Error()
		}
	} else {
		lc.notPaged = "the KV memory is not in host memory made by the binding (GPU offload, or the mapping failed)"
	}
	old := c.llamaContext
	c.llamaContext = lc
	if err := c.probeFormat(); err != nil {
		c.freeLlama()
		c.llamaContext = old
		return err
	}
	// Whether to pad is a property of the model's kernels: a resize keeps
	// the answer the first context found.
	c.kvBytes = int64(streams) * int64(c.slotTokens) * int64(c.format.layout.BytesPerPosition())
	switch {
	case c.pages == nil:
	case len(tensors) != 2*int(c.format.layers):
		// Some layers' KV is elsewhere (offloaded to a GPU).
		c.pages, c.held = nil, nil
		c.notPaged = fmt.Sprintf("%d of %d KV tensors are in host memory", len(tensors), 2*c.format.layers)
	case c.format.vTrans != 0:
		// Without flash attention V is stored transposed: a position
		// writes one element per dimension across the whole stream.
		c.pages, c.held = nil, nil
		c.notPaged = "V is stored transposed (flash attention is off)"
	}
	c.pad = old.pad
	if old.c == nil {
		var err error
		if c.pad, err = c.probePadding(); err != nil {
			c.freeLlama()
			c.llamaContext = old
			return err
		}
	}
	if old.c != nil && !c.format.layout.Equal(old.format.layout) {
		c.freeLlama()
		c.llamaContext = old
		return fmt.Errorf("%w: the new context's KV layout differs", errStateFormat)
	}
	return nil
}

// Resize implements engine.Resizer: it builds a context of n slots and
// moves every occupied slot's KV into it, bit for bit.
func (c *Context) Resize(n int) error {
	if c.c == nil {
		return engine.ErrClosed
	}
	if n < 1 || n > MaxSlots {
		return fmt.Errorf("resize: %d slots outside [1, %d]", n, MaxSlots)
	}
	if n == c.slots {
		return nil
	}
	if c.draft != nil {
		old := c.slots
		if err := c.draft.resize(n); err != nil {
			return fmt.Errorf("resize the draft model's context: %w", err)
		}
		if err := c.resize(n); err != nil {
			return errors.Join(err, c.draft.resize(old))
		}
		return nil
	}
	return c.resize(n)
}

// resize is Resize of the target's context.
func (c *Context) resize(n int) error {
	// Copy the occupied slots out of the old context first.
	kept := make(map[engine.Slot]*engine.KV)
	for s := range c.slots {
		slot := engine.Slot(s)
		l := int(c.slotLen(slot))
		if l == 0 {
			continue
		}
		if s >= n {
			return fmt.Errorf("resize to %d slots: slot %d holds %d positions", n, s, l)
		}
		kv, err := c.export(slot, 0, l)
		if err != nil {
			return fmt.Errorf("resize: %w", err)
		}
		kept[slot] = kv
	}
	old := c.llamaContext
	if err := c.build(n); err != nil {
		return fmt.Errorf("resize to %d slots: %w", n, err)
	}
	for slot, kv := range kept {
		if err := c.restore(slot, []*engine.KV{kv}); err != nil {
			// Back to the old context, which still holds everything.
			c.freeLlama()
			c.llamaContext = old
			return fmt.Errorf("resize: %w", err)
		}
	}
	cur := c.llamaContext
	c.llamaContext = old
	c.freeLlama()
	c.llamaContext = cur
	c.stats.Resizes++
	return nil
}

// freeLlama frees the current llama.cpp context and its batch.
func (c *Context) freeLlama() {
	if c.c != nil {
		C.llama_batch_free(c.batch)
		C.llama_free(c.c)
	}
	c.llamaContext = llamaContext{}
}

func newThreadPool(threads, poll int) *C.struct_ggml_threadpool {
	tp := C.ggml_threadpool_params_default(C.int(threads))
	tp.poll = C.uint32_t(poll)
	return C.ggml_threadpool_new(&tp)
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// The values ContextParams.FlashAttention and KVType name ("" is the
// default).
var (
	flashAttnTypes = map[string]C.enum_llama_flash_attn_type{
		"":     C.LLAMA_FLASH_ATTN_TYPE_AUTO,
		"auto": C.LLAMA_FLASH_ATTN_TYPE_AUTO,
		"on":   C.LLAMA_FLASH_ATTN_TYPE_ENABLED,
		"off":  C.LLAMA_FLASH_ATTN_TYPE_DISABLED,
	}
	kvTypes = map[string]C.enum_ggml_type{
		"":     C.GGML_TYPE_F16,
		"f16":  C.GGML_TYPE_F16,
		"f32":  C.GGML_TYPE_F32,
		"bf16": C.GGML_TYPE_BF16,
		"q8_0": C.GGML_TYPE_Q8_0,
		"q4_0": C.GGML_TYPE_Q4_0,
	}
)

// Slots is the number of slots.
func (c *Context) Slots() int { return c.slots }

// KVNotPaged says why the KV memory is not paged (kvmem.go), or "" when
// it is.
func (c *Context) KVNotPaged() string { return c.notPaged }

// Pads reports whether evaluations are padded to two rows (see
// probePadding).
func (c *Context) Pads() bool { return c.pad }

// SlotTokens is the KV capacity of one slot after rounding.
func (c *Context) SlotTokens() int { return c.slotTokens }

// KVLayout is the layout of the KV this context exports and restores.
func (c *Context) KVLayout() *engine.KVLayout { return c.format.layout }

// Stats returns the counters. Call it from the goroutine that owns c.
func (c *Context) Stats() Stats {
	st := c.stats
	if c.draft != nil {
		st.DraftModelTokens = c.draft.c.stats.DecodedTokens
		st.DraftModelEvaluations = c.draft.c.stats.Evaluations
	}
	return st
}

// Execute implements engine.Executor.
func (c *Context) Execute(ctx context.Context, step *engine.Step) (engine.StepResult, error) {
	var res engine.StepResult
	if c.c == nil {
		return res, engine.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	failed := make(map[engine.SeqID]bool)
	fail := func(seq engine.SeqID, err error) {
		if !failed[seq] {
			failed[seq] = true
			res.Failures = append(res.Failures, engine.Failure{Seq: seq, Err: err})
		}
	}
	for i := range step.Added {
		n := &step.Added[i]
		if err := c.addSequence(n); err != nil {
			fail(n.Seq, err)
		}
		if c.draft != nil {
			c.draft.add(n)
		}
	}
	for _, e := range step.Exports {
		kv, err := c.export(e.Slot, e.From, e.To)
		if err != nil {
			// Losing a cache entry is not the sequence's failure.
			kv = nil
		}
		res.Exported = append(res.Exported, engine.Exported{Tag: e.Tag, Seq: e.Seq, From: e.From, KV: kv})
	}
	for _, s := range step.Clears {
		if c.validSlot(s) {
			c.clearSlot(s)
			if c.draft != nil {
				c.draft.empty(s)
			}
		}
	}
	for i := range step.Restores {
		r := &step.Restores[i]
		if err := c.restore(r.Slot, r.KV); err != nil {
			fail(r.Seq, err)
		}
		if c.draft != nil && c.validSlot(r.Slot) {
			c.draft.empty(r.Slot)
		}
	}
	if len(step.Batch) > 0 {
		var ds []*drafting
		if c.draft != nil {
			ds = c.draft.propose(step.Batch, failed)
		}
		c.decodeByAdapter(step.Batch, failed, fail, &res)
		if c.draft != nil {
			c.draft.settle(step.Batch, ds, &res, failed)
		}
		c.stats.Steps++
	}
	for _, id := range step.Removed {
		if s := c.samplers[id]; s != nil {
			s.free()
			delete(c.samplers, id)
		}
		c.dropAdapter(id)
		if c.draft != nil {
			c.draft.remove(id)
		}
	}
	if len(step.Embeds) > 0 {
		res.Embeddings = c.embedAll(step.Embeds)
	}
	c.noteKVUse()
	if c.params.PauseEachStep {
		c.Idle()
	}
	return res, nil
}

// Idle implements engine.Idler: ggml's workers sleep until the next
// evaluation instead of polling for it.
func (c *Context) Idle() {
	for _, pool := range c.pools() {
		C.ggml_threadpool_pause(pool)
	}
}

// pools returns the context's thread pools: pool, and batchPool when there
// is one.
func (c *Context) pools() []*C.struct_ggml_threadpool {
	var out []*C.struct_ggml_threadpool
	for _, pool := range []*C.struct_ggml_threadpool{c.pool, c.batchPool} {
		if pool != nil {
			out = append(out, pool)
		}
	}
	return out
}

func (c *Context) validSlot(s engine.Slot) bool { return s >= 0 && int(s) < c.slots }

func (c *Context) addSequence(n *engine.NewSequence) error {
	if old := c.samplers[n.Seq]; old != nil {
		old.free()
		delete(c.samplers, n.Seq)
	}
	c.dropAdapter(n.Seq)
	s, err := newSampler(c.model, &n.Sampling, c.slotTokens)
	if err != nil {
		return fmt.Errorf("%w: sequence %d: %w", engine.ErrInvalidBatch, n.Seq, err)
	}
	if err := c.setAdapter(n); err != nil {
		s.free()
		return err
	}
	s.acceptHistory(n.History)
	c.samplers[n.Seq] = s
	return nil
}

// logits returns a view of the logits of row i of the last evaluation, or
// nil.
func (c *Context) logits(i int) []float32 {
	p := C.llama_get_logits_ith(c.c, C.int32_t(i))
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), c.nVocab)
}

// Close frees the context, its thread pools and its samplers. The model
// stays loaded. It is idempotent.
func (c *Context) Close() error {
	for id, s := range c.samplers {
		s.free()
		delete(c.samplers, id)
	}
	for id := range c.adapters {
		c.dropAdapter(id)
	}
	c.freeEmbed()
	if c.hasMediaBatch {
		C.llama_batch_free(c.mediaBatch)
		c.hasMediaBatch = false
	}
	var err error
	if c.draft != nil {
		err = c.draft.close()
		c.draft = nil
	}
	c.freeLlama()
	if !c.sharedPools {
		for _, pool := range c.pools() {
			C.ggml_threadpool_free(pool)
		}
	}
	c.pool, c.batchPool = nil, nil
	return err
}

// checkKVType refuses a quantized KV cache type whose block does not
// divide the model's attention head sizes: llama.cpp's kernels assert on
// such rows and abort the process (stories260K's heads of 8 under q8_0's
// blocks of 32) instead of returning an error. Newer llama.cpp makes the
// same check when it creates a context.
func (m *Model) checkKVType(name string, t C.enum_ggml_type) error {
	if !C.ggml_is_quantized(t) {
		return nil
	}
	block := int(C.ggml_blck_size(t))
	for _, head := range m.headSizes() {
		if head%block != 0 {
			return fmt.Errorf("KV cache type %q stores blocks of %d values, which do not divide this model's attention head size %d (use f16, f32 or bf16)", name, block, head)
		}
	}
	return nil
}

// headSizes are the model's key and value head sizes: the GGUF's
// attention.key_length and value_length where it has them, else the
// embedding width over the head count, as llama.cpp derives them.
func (m *Model) headSizes() []int {
	heads := int(C.llama_model_n_head(m.c))
	if heads <= 0 {
		return nil
	}
	derived := int(C.llama_model_n_embd(m.c)) / heads
	arch := m.Meta("general.architecture")
	var sizes []int
	for _, key := range []string{".attention.key_length", ".attention.value_length"} {
		size := derived
		if v, err := strconv.Atoi(m.Meta(arch + key)); err == nil && v > 0 {
			size = v
		}
		sizes = append(sizes, size)
	}
	return sizes
}
