//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
)

// LoRA adapters
//
// llama.cpp applies adapters to a context, not to a sequence: every row of
// a llama_decode is computed with the adapters set on the context at that
// moment (llama_set_adapter_lora). A step whose sequences use several
// adapters is therefore decoded as one batch per adapter group: the base
// model's sequences first, with no adapter set, then each adapter's, with
// that adapter set alone (decodeByAdapter). Each group goes through
// decodeBatch unchanged, so a sequence's numbers still depend only on its
// own tokens (and its adapter). What a group costs is the evaluations it
// adds: n groups make at least n llama_decode calls where one group makes
// one, each on fewer rows (Stats.AdapterSwitches counts the groups decoded
// with an adapter set).
//
// llama.cpp reuses the previous evaluation's graph when the batch has the
// same shape, and its test for that compares the context's adapter list by
// address, not content: after a switch it would run the old adapter's
// graph. A context built with ContextParams.LoRA therefore has graph reuse
// off (LLAMA_GRAPH_REUSE_DISABLE while llama_init_from_model runs), which
// costs a graph build per evaluation (docs/BENCHMARKS.md, "LoRA adapters");
// contexts without LoRA keep it.
//
// An Adapter is freed when it was closed and no sequence uses it: every
// sequence holds its adapter from its NewSequence until it is removed, and
// the context sets an adapter only for the evaluations of its own
// sequences and clears it right after, so no context keeps a pointer to
// an adapter between steps.

// Adapter is a LoRA adapter loaded for a Model (engine.Adapter). It is safe
// for concurrent use.
type Adapter struct {
	name, path string
	model      *Model
	scale      float32
	alpha      float32

	mu     sync.Mutex
	c      *C.struct_llama_adapter_lora
	users  int  // sequences that hold it
	closed bool // Close was called: no new users
}

// adapterLoadMu serializes adapter loads, so that the llama.cpp error lines
// logged during one belong to it.
var adapterLoadMu sync.Mutex

// LoadAdapter loads the LoRA adapter GGUF at path (as llama.cpp's
// convert_lora_to_gguf.py writes it) for m, named name, applied with scale
// (1 applies it as trained: llama.cpp multiplies by alpha/rank). An adapter
// llama.cpp refuses is an error wrapping ErrAdapter with llama.cpp's reason.
func (m *Model) LoadAdapter(name, path string, scale float32) (*Adapter, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrAdapter, path, err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return nil, ErrModelClosed
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	adapterLoadMu.Lock()
	lines := captureErrors()
	ca := C.llama_adapter_lora_init(m.c, cpath)
	msgs := lines()
	adapterLoadMu.Unlock()
	if ca == nil {
		reason := "llama.cpp could not load it"
		for _, l := range msgs {
			if i := strings.Index(l, "failed to apply lora adapter: "); i >= 0 {
				reason = strings.TrimSpace(l[i+len("failed to apply lora adapter: "):])
			}
		}
		return nil, fmt.Errorf("%w %s: %s", ErrAdapter, path, reason)
	}
	a := &Adapter{name: name, path: path, model: m, scale: scale, c: ca}
	buf := make([]byte, 64)
	key := C.CString("adapter.lora.alpha")
	defer C.free(unsafe.Pointer(key))
	if n := C.llama_adapter_meta_val_str(ca, key, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))); n > 0 {
		_, _ = fmt.Sscan(string(buf[:min(int(n), len(buf)-1)]), &a.alpha)
	}
	return a, nil
}

// AdapterName implements engine.Adapter.
func (a *Adapter) AdapterName() string { return a.name }

// Path is the file the adapter was loaded from.
func (a *Adapter) Path() string { return a.path }

// Alpha is the adapter's adapter.lora.alpha (0 when it has none).
func (a *Adapter) Alpha() float32 { return a.alpha }

// Model is the model the adapter was loaded for.
func (a *Adapter) Model() *Model { return a.model }

// Users is the number of sequences that hold the adapter.
func (a *Adapter) Users() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.users
}

// Close unloads the adapter: sequences that hold it keep it until they
// are removed, and it is freed after the last one; new sequences that name
// it fail. It is idempotent.
func (a *Adapter) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.freeLocked()
	return nil
}

func (a *Adapter) acquire() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return fmt.Errorf("%w: %s", ErrAdapterClosed, a.name)
	}
	a.users++
	return nil
}

func (a *Adapter) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users--
	a.freeLocked()
}

func (a *Adapter) freeLocked() {
	if a.closed && a.users == 0 && a.c != nil {
		C.llama_adapter_lora_free(a.c)
		a.c = nil
	}
}

// setAdapter holds n's adapter for sequence n.Seq (releasing the one it
// held before).
func (c *Context) setAdapter(n *engine.NewSequence) error {
	c.dropAdapter(n.Seq)
	if n.Adapter == nil {
		return nil
	}
	a, ok := n.Adapter.(*Adapter)
	switch {
	case !ok:
		return fmt.Errorf("%w: sequence %d: adapter %q is a %T, not one this binding loaded", engine.ErrInvalidBatch, n.Seq, n.Adapter.AdapterName(), n.Adapter)
	case a.model != c.model:
		return fmt.Errorf("%w: sequence %d: adapter %q was loaded for another model", engine.ErrInvalidBatch, n.Seq, a.name)
	case !c.params.LoRA:
		return fmt.Errorf("%w: sequence %d: adapter %q on a context built without LoRA (ContextParams.LoRA)", engine.ErrInvalidBatch, n.Seq, a.name)
	}
	if err := a.acquire(); err != nil {
		return fmt.Errorf("%w: sequence %d: %w", engine.ErrInvalidBatch, n.Seq, err)
	}
	if c.adapters == nil {
		c.adapters = make(map[engine.SeqID]*Adapter)
	}
	c.adapters[n.Seq] = a
	return nil
}

// dropAdapter releases the adapter sequence id holds, if any.
func (c *Context) dropAdapter(id engine.SeqID) {
	if a := c.adapters[id]; a != nil {
		delete(c.adapters, id)
		a.release()
	}
}

// decodeByAdapter decodes chunks as one batch per adapter group (see the
// top of the file): the base model's first, then each adapter's in the
// order of its first chunk. Results are reported in chunk order.
func (c *Context) decodeByAdapter(chunks []engine.Chunk, failed map[engine.SeqID]bool, fail func(engine.SeqID, error), res *engine.StepResult) {
	if len(c.adapters) == 0 {
		c.decodeBatch(chunks, failed, fail, res)
		return
	}
	var order []*Adapter
	groups := make(map[*Adapter][]engine.Chunk)
	for _, ch := range chunks {
		a := c.adapters[ch.Seq]
		if _, ok := groups[a]; !ok && a != nil {
			order = append(order, a)
		}
		groups[a] = append(groups[a], ch)
	}
	if len(order) == 0 {
		c.decodeBatch(chunks, failed, fail, res)
		return
	}
	samples, lps := len(res.Samples), len(res.PromptLogprobs)
	if base := groups[nil]; len(base) > 0 {
		c.decodeBatch(base, failed, fail, res)
	}
	for _, a := range order {
		if C.llama_set_adapter_lora(c.c, a.c, C.float(a.scale)) != 0 {
			for _, ch := range groups[a] {
				fail(ch.Seq, fmt.Errorf("%w: llama.cpp could not set adapter %q", engine.ErrInvalidBatch, a.name))
			}
			continue
		}
		c.stats.AdapterSwitches++
		c.decodeBatch(groups[a], failed, fail, res)
		C.llama_clear_adapter_lora(c.c)
	}
	c.stats.AdapterSteps++
	// Back to chunk order.
	idx := make(map[engine.SeqID]int, len(chunks))
	for i, ch := range chunks {
		idx[ch.Seq] = i
	}
	slices.SortStableFunc(res.Samples[samples:], func(x, y engine.Sample) int { return idx[x.Seq] - idx[y.Seq] })
	slices.SortStableFunc(res.PromptLogprobs[lps:], func(x, y engine.PromptLogprobs) int { return idx[x.Seq] - idx[y.Seq] })
}

// reuseEnvMu guards the process environment while a LoRA context is built
// with LLAMA_GRAPH_REUSE_DISABLE set.
var reuseEnvMu sync.Mutex

// withoutGraphReuse runs create with LLAMA_GRAPH_REUSE_DISABLE=1, which
// llama.cpp reads when it creates a context (see the top of the file).
func withoutGraphReuse(create func() bool) bool {
	reuseEnvMu.Lock()
	defer reuseEnvMu.Unlock()
	const key = "LLAMA_GRAPH_REUSE_DISABLE"
	old, had := os.LookupEnv(key)
	_ = os.Setenv(key, "1")
	defer func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	}()
	return create()
}

// AdapterSwitches implements engine.AdapterSwitchReporter.
func (c *Context) AdapterSwitches() uint64 { return c.stats.AdapterSwitches }

// graphReuses is how often llama.cpp reused an evaluation's graph for the
// next one (llama_perf_context's n_reused), for tests.
func (c *Context) graphReuses() int {
	return int(C.llama_perf_context(c.c).n_reused)
}
