package kvcache

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/hostmem"
)

// Kept is the outcome of a keep (AdmitOptions.Keep) whose export came
// back: OK with the size of the KV of the sequence's first KeepPositions
// positions, now held under Name (read it with Lease), or not OK when the
// export failed or no host memory was left for it.
type Kept struct {
	Name      string
	OK        bool
	Positions int
	Bytes     int64
}

// keptKV is the KV of a keep, in the arena, with its references: the
// manager's own (until Release or Close) and one per KeptRef not yet
// released. The last one frees the memory.
type keptKV struct {
	kv    engine.KV
	mem   hostmem.Buf
	arena *hostmem.Arena
	refs  atomic.Int32
}

func (k *keptKV) unref() {
	if n := k.refs.Add(-1); n == 0 {
		k.arena.Free(k.mem)
	} else if n < 0 {
		panic("kvcache: kept KV released more often than referenced")
	}
}

// KeptRef is a reference to kept KV (Lease): its KV stays valid, on any
// goroutine, until Release, even if the manager releases the keep or
// closes meanwhile.
type KeptRef struct {
	k        *keptKV
	released atomic.Bool
}

// KV returns the kept KV. Its Data is host memory off the Go heap: do not
// read it after Release, nor keep it (copy what must outlive the ref).
func (r *KeptRef) KV() *engine.KV {
	if r.released.Load() {
		panic("kvcache: KeptRef used after Release")
	}
	return &r.k.kv
}

// Release drops the reference; calling it again does nothing.
func (r *KeptRef) Release() {
	if r.released.CompareAndSwap(false, true) {
		r.k.unref()
	}
}

// keepExport is a keep's export on its way.
type keepExport struct {
	name string
	n    int
}

// keepOnFree queues the export of a freed sequence's kept positions, or
// reports at once that they cannot be kept.
func (m *Manager) keepOnFree(id engine.SeqID, s *sequence, offer bool) {
	if s.keep == "" {
		return
	}
	if !offer || s.held < s.keepN || s.keepN < 1 {
		// Nothing to keep now. A sequence preempted or retried before it
		// held the positions asks again at its next admission; one that
		// ends so has no keep, which the caller sees as Keeping false and
		// no Kept for the name.
		return
	}
	m.nextTag++
	m.keeping[m.nextTag] = keepExport{name: s.keep, n: s.keepN}
	m.exports = append(m.exports, engine.Export{Tag: m.nextTag, Seq: id, Slot: s.slot, From: 0, To: s.keepN})
	s.keep = ""
}

// storeKept files the export of a keep; false when x is not one.
func (m *Manager) storeKept(x engine.Exported) bool {
	k, ok := m.keeping[x.Tag]
	if !ok {
		return false
	}
	delete(m.keeping, x.Tag)
	out := Kept{Name: k.name}
	if x.KV != nil && x.KV.N == k.n && x.From == 0 {
		if kv, mem, ok := m.hold(x.KV, 0, x.KV.N); ok {
			m.Release(k.name)
			kk := &keptKV{kv: *kv, mem: mem, arena: m.mem}
			kk.refs.Store(1)
			m.kept[k.name] = kk
			m.keptSize += int64(kv.Size())
			out = Kept{Name: k.name, OK: true, Positions: kv.N, Bytes: int64(kv.Size())}
		}
	}
	m.keptOut = append(m.keptOut, out)
	return true
}

// Keeping reports whether the export of a keep named name is on its way.
func (m *Manager) Keeping(name string) bool {
	for _, k := range m.keeping {
		if k.name == name {
			return true
		}
	}
	return false
}

// TakeKept returns the keeps that completed or failed since the last call.
func (m *Manager) TakeKept() []Kept {
	out := m.keptOut
	m.keptOut = nil
	return out
}

// Lease returns a reference to the KV kept under name, or nil. The KV is
// immutable, and valid until the reference's Release: the caller may read
// it from any goroutine meanwhile, also after the manager's Release of the
// name or Close. The caller must Release the reference.
func (m *Manager) Lease(name string) *KeptRef {
	k := m.kept[name]
	if k == nil {
		return nil
	}
	k.refs.Add(1)
	return &KeptRef{k: k}
}

// Release drops the KV kept under name (its memory is freed once no
// KeptRef holds it); false when none is.
func (m *Manager) Release(name string) bool {
	k, ok := m.kept[name]
	if !ok {
		return false
	}
	delete(m.kept, name)
	m.keptSize -= int64(k.kv.Size())
	k.unref()
	return true
}

// Import files KV received from another node into the prefix cache, as if
// a sequence with these tokens had computed it here: kv holds positions
// [0, kv.N) of tokens (kv.N <= len(tokens)), in the cache namespace salt.
// Its full blocks become cached blocks, the positions after them a tail,
// each kept only under a cached parent as Store keeps exports, and the
// budget is enforced afterwards (least recently used first; the imported
// chain is the most recent). A sequence admitted with these tokens then
// restores them (all but the last token) instead of computing them. It
// returns the positions the cache holds for tokens afterwards (0 when
// caching is off).
func (m *Manager) Import(tokens []int32, salt string, kv *engine.KV) int {
	if !m.Caching() || kv == nil || kv.N < 1 || kv.N > len(tokens) {
		return 0
	}
	bs := m.cfg.BlockSize
	full := kv.N / bs
	hashes := hashBlocks(nil, tokens, salt, bs, full)
	var path []int32
	for i := range full {
		e, cached := m.index[hashes[i]]
		if !cached {
			if e = m.insert(hashes[i], parentOf(hashes, i), int32(i), kv, i*bs, (i+1)*bs); e == none {
				break // no host memory
			}
		}
		path = append(path, e)
	}
	held := full * bs
	if k := kv.N - full*bs; k > 0 && len(path) == full {
		tail := tailHash(parentOf(hashes, full), full == 0, salt, tokens[full*bs:kv.N])
		e, cached := m.index[tail]
		if !cached {
			e = m.insert(tail, parentOf(hashes, full), int32(full), kv, full*bs, kv.N)
		}
		if e != none {
			path = append(path, e)
			held = kv.N
		}
	}
	m.touchPath(path)
	for m.bytes > m.cfg.CacheBytes && m.lruHead != none {
		m.evict(m.lruHead)
	}
	// What survived the budget: the chain from its root.
	n := 0
	for i, h := range hashes {
		if _, ok := m.index[h]; !ok {
			return i * bs
		}
		n = (i + 1) * bs
	}
	if held > n {
		if _, ok := m.index[tailHash(parentOf(hashes, full), full == 0, salt, tokens[full*bs:kv.N])]; ok {
			n = held
		}
	}
	return n
}

// Snapshot returns one BlockStored event per cached block and tail, parents
// before children (by depth), for a router that starts watching the events
// and must first learn what is cached now.
func (m *Manager) Snapshot() []Event {
	out := make([]Event, 0, len(m.index))
	for _, e := range m.index {
		en := &m.entries[e]
		out = append(out, Event{Kind: BlockStored, Hash: en.hash, Parent: en.parent, Depth: int(en.depth)})
	}
	slices.SortFunc(out, func(a, b Event) int {
		if c := cmp.Compare(a.Depth, b.Depth); c != 0 {
			return c
		}
		return slices.Compare(a.Hash[:], b.Hash[:])
	})
	return out
}
