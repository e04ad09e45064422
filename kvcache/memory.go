package kvcache

import (
	"unsafe"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/hostmem"
)

// arenaOptions configure every Manager's arena; the package's tests run
// with hostmem's Guard, so that a read of freed KV faults.
var arenaOptions = hostmem.Options{}

// hold copies positions [from, to) of src into memory of the manager's
// arena: the KV of a cached entry or a kept transfer. ok is false when the
// arena has no memory for it.
func (m *Manager) hold(src *engine.KV, from, to int) (kv *engine.KV, mem hostmem.Buf, ok bool) {
	mem, err := m.mem.Alloc((to - from) * src.Layout.BytesPerPosition())
	if err != nil {
		return nil, hostmem.Buf{}, false
	}
	data := src.AppendSlice(mem.Bytes()[:0], from, to)
	if len(data) > 0 && unsafe.SliceData(data) != unsafe.SliceData(mem.Bytes()) {
		panic("kvcache: KV copied outside its arena memory")
	}
	return &engine.KV{Layout: src.Layout, N: to - from, Data: data}, mem, true
}

// pin keeps an entry's memory from being freed while a restore that reads
// it is queued or in the engine (see unpinStep).
func (m *Manager) pin(e int32) {
	m.entries[e].pins++
	m.pinsQueued = append(m.pinsQueued, e)
}

// unpinStep runs when StepOps hands out the queued restores: the engine has
// applied the restores handed out before (one goroutine runs StepOps and
// the step that follows, then the next StepOps), so their entries are
// unpinned, and entries evicted meanwhile are freed now.
func (m *Manager) unpinStep() {
	for _, e := range m.pinsInFlight {
		en := &m.entries[e]
		en.pins--
		if en.pins == 0 && en.dead {
			m.release(e)
		}
	}
	m.pinsInFlight, m.pinsQueued = m.pinsQueued, m.pinsInFlight[:0]
}

// release frees an evicted entry's memory and recycles the entry.
func (m *Manager) release(e int32) {
	m.mem.Free(m.entries[e].mem)
	m.entries[e] = entry{prev: none, next: none}
	m.freeEntries = append(m.freeEntries, e)
}

// Close frees the host memory of every cached entry and drops the
// manager's reference to every kept transfer (a KeptRef taken by Lease
// stays valid until its Release). The caller must not use the manager
// afterwards, nor have a step in flight that reads its KV.
func (m *Manager) Close() {
	for e := range m.entries {
		if en := &m.entries[e]; en.kv != nil {
			m.mem.Free(en.mem)
			*en = entry{prev: none, next: none}
		}
	}
	m.entries, m.freeEntries, m.pinsQueued, m.pinsInFlight = nil, nil, nil, nil
	clear(m.index)
	m.lruHead, m.lruTail, m.bytes = none, none, 0
	m.restores = nil
	for name := range m.kept {
		m.Release(name)
	}
	m.mem.Trim()
}

// HostMemory reports the arena that holds the cache's entries and kept
// transfers.
func (m *Manager) HostMemory() hostmem.Stats { return m.mem.Stats() }
