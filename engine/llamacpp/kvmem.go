//go:build cgo

package llamacpp

/*
#include "bridge.h"
*/
import "C"

import (
	"os"
	"strings"
	"sync"

	"github.com/llmserve/llmserve/engine"
)

// Virtual KV memory.
//
// A context's KV buffer holds every slot's full capacity (SlotTokens
// positions per stream), but a slot's positions are written in order from
// cell 0, so only the pages under the positions a slot holds are ever
// touched. kvmem.c makes the buffer an anonymous mapping reserved without
// committing memory (so that llama.cpp's clear at creation commits
// nothing), and records where each cache tensor lies in it; kvPages turns
// that into the pages of each stream. When a slot empties, its pages are
// given back (MADV_DONTNEED). Resident KV memory is then the positions
// held, rounded up to pages, whatever the slots' capacity: a context of 64
// slots of 131,072 positions costs address space, not memory.
//
// This holds for KV in host memory only. KV that llama.cpp puts on a GPU
// is allocated by that backend and is not paged (KVMemory().Paged false);
// the KV sizing then falls back to slots of full capacity.

var (
	kvmemOnce      sync.Once
	kvmemInstalled bool
	// kvmemMu makes one context creation at a time arm the hook, so that
	// the buffers recorded in a window are that context's.
	kvmemMu     sync.Mutex
	kvmemWindow int64 // guarded by kvmemMu
)

// createWithVirtualKV runs create (a llama_init_from_model) with the hook
// armed and returns the cache tensors ggml placed in mapped buffers (none
// when the hook is not installed or create failed).
func createWithVirtualKV(create func() bool) []kvTensorLayout {
	kvmemOnce.Do(func() { kvmemInstalled = C.llmserve_kvmem_install() == 0 })
	if !kvmemInstalled {
		create()
		return nil
	}
	kvmemMu.Lock()
	defer kvmemMu.Unlock()
	kvmemWindow++
	w := C.int64_t(kvmemWindow)
	C.llmserve_kvmem_arm(w)
	ok := create()
	C.llmserve_kvmem_arm(0)
	if !ok {
		return nil
	}
	n := C.llmserve_kvmem_tensors(w, nil, 0)
	if n <= 0 {
		return nil
	}
	buf := make([]C.struct_llmserve_kvmem_tensor, n)
	n = min(n, C.llmserve_kvmem_tensors(w, &buf[0], n))
	var out []kvTensorLayout
	for _, t := range buf[:n] {
		name := C.GoString(&t.name[0])
		if !strings.HasPrefix(name, "cache_k_l") && !strings.HasPrefix(name, "cache_v_l") {
			continue
		}
		out = append(out, kvTensorLayout{
			name: name, data: uintptr(t.data),
			rowBytes: int64(t.nb[1]), streamBytes: int64(t.nb[2]),
			cells: int(t.ne[1]), streams: int(t.ne[2]),
			bufferBase: int64(t.base), bufferBytes: int64(t.mapped),
		})
	}
	return out
}

// clearSlot empties a slot and gives its pages back.
func (c *Context) clearSlot(s engine.Slot) {
	C.llama_memory_seq_rm(c.mem, C.llama_seq_id(s), -1, -1)
	c.releaseSlot(s)
}

// releaseSlot gives back the pages of an empty slot that no other slot
// uses.
func (c *Context) releaseSlot(s engine.Slot) {
	if c.pages == nil || int(s) >= len(c.held) {
		return
	}
	lens := c.slotLens()
	lens[s] = 0
	for _, r := range c.pages.release(int(s), lens) {
		C.llmserve_kvmem_release(C.uintptr_t(r[0]), C.int64_t(r[1]-r[0]))
	}
	c.held[s] = 0
}

// slotLens returns the positions every stream holds now.
func (c *Context) slotLens() []int {
	lens := make([]int, c.streams)
	for s := range lens {
		lens[s] = int(c.slotLen(engine.Slot(s)))
	}
	return lens
}

// noteKVUse records the most positions each stream has held since it was
// last emptied: the pages it has touched.
func (c *Context) noteKVUse() {
	if c.pages == nil {
		return
	}
	for s := range c.held {
		c.held[s] = max(c.held[s], int(c.slotLen(engine.Slot(s))))
	}
}

// KVMemory implements engine.KVMemoryReporter.
func (c *Context) KVMemory() engine.KVMemory {
	if c.c == nil {
		return engine.KVMemory{}
	}
	if c.pages == nil {
		n := c.kvBytes
		return engine.KVMemory{Committed: n, Reserved: n}
	}
	return engine.KVMemory{Paged: true, Committed: c.pages.committed(c.held), Reserved: c.pages.reserved()}
}

// kvResidentPages counts the resident pages of the KV tensors (mincore),
// for tests; -1 when the memory is not paged.
func (c *Context) kvResidentPages() int64 {
	if c.pages == nil {
		return -1
	}
	var total int64
	for _, r := range c.pages.ranges {
		if r.stream != 0 {
			continue
		}
		// One call per tensor: its streams are contiguous.
		total += int64(C.llmserve_kvmem_resident(C.uintptr_t(r.start), C.int64_t(r.rowBytes*int64(r.cells)*int64(c.streams))))
	}
	return total
}

var pageSize = int64(os.Getpagesize())
