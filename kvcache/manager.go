package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/hostmem"
)

// Config sizes a Manager.
type Config struct {
	// BlockSize is the number of tokens per cached block (16).
	BlockSize int
	// Slots is the most sequences that hold KV at once (the engine's slots
	// when it is largest).
	Slots int
	// InitialSlots is how many of them the engine starts with (0: Slots);
	// SetActiveSlots follows it when it grows or shrinks.
	InitialSlots int
	// SlotTokens is the most positions one slot holds.
	SlotTokens int
	// CacheBytes is the host memory the prefix cache may fill with idle
	// blocks; 0 turns prefix caching off.
	CacheBytes int64
	// CapacityTokens is the most positions all running sequences together
	// may reserve (the engine's KV memory divided by its bytes per
	// position), a multiple of BlockSize. A sequence reserves whole blocks:
	// at admission for all its known tokens, then by Grow as it decodes.
	// 0 means no token bound: only the slots bound the sequences.
	CapacityTokens int
	// MaxEvents bounds the event outbox; 0 means DefaultMaxEvents.
	MaxEvents int
}

// DefaultMaxEvents is the event outbox bound when Config.MaxEvents is 0.
const DefaultMaxEvents = 4096

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.BlockSize < 1:
		return fmt.Errorf("kvcache: block size %d < 1", c.BlockSize)
	case c.Slots < 1:
		return fmt.Errorf("kvcache: %d slots < 1", c.Slots)
	case c.InitialSlots < 0 || c.InitialSlots > c.Slots:
		return fmt.Errorf("kvcache: %d initial slots outside [0, %d]", c.InitialSlots, c.Slots)
	case c.SlotTokens < 1:
		return fmt.Errorf("kvcache: %d tokens per slot < 1", c.SlotTokens)
	case c.CacheBytes < 0:
		return fmt.Errorf("kvcache: cache budget %d bytes < 0", c.CacheBytes)
	case c.MaxEvents < 0:
		return fmt.Errorf("kvcache: event bound %d < 0", c.MaxEvents)
	case c.CapacityTokens < 0:
		return fmt.Errorf("kvcache: token capacity %d < 0", c.CapacityTokens)
	case c.CapacityTokens%c.BlockSize != 0:
		return fmt.Errorf("kvcache: token capacity %d is not a multiple of the block size %d", c.CapacityTokens, c.BlockSize)
	}
	return nil
}

// Stats are the manager's counters and gauges.
type Stats struct {
	// Slots is the capacity in sequences, SlotTokens in positions per
	// sequence; ActiveSlots are those the engine has allocated now;
	// UsedSlots hold a sequence, HeldTokens count the positions they hold.
	Slots, ActiveSlots, SlotTokens, UsedSlots, HeldTokens int
	// CachedBlocks and CachedBytes are what the prefix cache keeps;
	// CacheBytesLimit is its budget.
	CachedBlocks           int
	CachedBytes            int64
	CacheBytesLimit        int64
	QueryTokens, HitTokens uint64
	// StoredBlocks counts blocks that entered the cache, Evictions those
	// dropped to stay within the budget.
	StoredBlocks, Evictions uint64
	// EventsPending is the number of events in the outbox, at most
	// Config.MaxEvents; EventsDropped counts events lost because nobody
	// drained the outbox in time.
	EventsPending int
	EventsDropped uint64
	// Leases and LeaseBytes are the kept KV of finished sequences waiting
	// for a transfer (Kept), outside the prefix cache's budget.
	Leases     int
	LeaseBytes int64
	// CapacityTokens is Config.CapacityTokens (0: no token bound);
	// ReservedTokens the positions running sequences reserve (their
	// blocks times BlockSize), at most CapacityTokens when it is set.
	CapacityTokens, ReservedTokens int
}

// Usage is the fraction of the KV capacity in use, in [0, 1]: with a token
// capacity, the positions reserved by running sequences over
// CapacityTokens (as vLLM counts used blocks over its pool); without one,
// the positions held over every slot's (allocated or not).
func (s Stats) Usage() float64 {
	if s.CapacityTokens > 0 {
		return float64(s.ReservedTokens) / float64(s.CapacityTokens)
	}
	if s.Slots == 0 || s.SlotTokens == 0 {
		return 0
	}
	return float64(s.HeldTokens) / float64(s.Slots*s.SlotTokens)
}

// Hash names a cached entry (a full block or a tail) by its content and
// everything before it.
type Hash [32]byte

// AdmitOptions describe a sequence entering the manager.
type AdmitOptions struct {
	// Tokens are all tokens known for the sequence (prompt, plus output
	// when it resumes after preemption).
	Tokens []int32
	// Salt separates cache namespaces (cache_salt).
	Salt string
	// NoCache skips the prefix lookup (prompt logprobs need every logit).
	NoCache bool
	// Count adds the lookup to the query and hit counters; false for a
	// sequence resuming after preemption.
	Count bool
	// Keep, when not empty, names a transfer: when the sequence is freed
	// with offer and holds at least KeepPositions positions, positions
	// [0, KeepPositions) are exported too and kept under that name (see
	// transfer.go). Used for a prefill whose KV another node pulls.
	Keep          string
	KeepPositions int
}

const none = -1

// entry is one cached block, or a tail (fewer positions than a block,
// always a leaf).
type entry struct {
	hash, parent Hash
	depth        int32
	// kv's Data is mem, memory of the manager's arena (memory.go).
	kv         *engine.KV
	mem        hostmem.Buf
	prev, next int32 // LRU links; the head is the least recently used
	// pins counts restores queued or in the engine that read kv; an
	// entry evicted while pinned is dead: out of the index and the LRU,
	// its memory freed when the last pin goes.
	pins int32
	dead bool
}

type sequence struct {
	slot engine.Slot
	salt string
	// hashes[i] is the hash of full block i, as far as it was computed.
	hashes []Hash
	// held is the number of positions in the slot.
	held int
	// offered counts leading blocks that are cached or asked for;
	// settled those whose export came back (or that were hits).
	offered, settled int
	// tokens are the sequence's tokens as of the last Commit (the
	// scheduler's slice; positions below held never change).
	tokens []int32
	// tailOffered is the position up to which a tail was offered.
	tailOffered int
	// keep and keepN are AdmitOptions.Keep and KeepPositions.
	keep  string
	keepN int
	// blocks is the number of blocks reserved against the token capacity
	// (0 when there is none).
	blocks int
}

// pendingExport is an export the engine has not answered yet.
type pendingExport struct {
	seq engine.SeqID
	// from and to are block indexes; hashes covers blocks [0, to).
	from, to int
	hashes   []Hash
	// tail, when not zero, is the hash of the positions after block to
	// (fewer than a block), exported with them as a leaf entry.
	tail    Hash
	tailLen int
}

// Manager is the KV manager. It is not safe for concurrent use: the
// scheduler's goroutine owns it. See doc.go.
type Manager struct {
	cfg      Config
	slotUsed []bool
	active   int // slots [0, active) are allocated in the engine
	seqs     map[engine.SeqID]*sequence
	// reserved is the number of blocks running sequences reserve against
	// Config.CapacityTokens.
	reserved int

	entries     []entry
	freeEntries []int32
	index       map[Hash]int32
	lruHead     int32
	lruTail     int32
	bytes       int64
	// mem holds the entries' and kept transfers' KV off the Go heap;
	// pinsQueued are the entries that queued restores read, pinsInFlight
	// those of the restores StepOps handed out last (memory.go).
	mem                      *hostmem.Arena
	pinsQueued, pinsInFlight []int32

	exports  []engine.Export
	clears   []engine.Slot
	restores []engine.Restore
	pending  map[uint64]pendingExport
	nextTag  uint64
	events   eventRing
	stats    Stats

	// Kept KV of finished sequences (transfer.go): exports on their way
	// by tag, what came back by name, and results not yet taken.
	keeping  map[uint64]keepExport
	kept     map[string]*keptKV
	keptOut  []Kept
	keptSize int64
}

// New returns a manager with every slot free and an empty cache.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.InitialSlots == 0 {
		cfg.InitialSlots = cfg.Slots
	}
	return &Manager{
		cfg:      cfg,
		active:   cfg.InitialSlots,
		slotUsed: make([]bool, cfg.Slots),
		seqs:     make(map[engine.SeqID]*sequence),
		index:    make(map[Hash]int32),
		mem:      hostmem.New(arenaOptions),
		lruHead:  none,
		lruTail:  none,
		pending:  make(map[uint64]pendingExport),
		events:   eventRing{buf: make([]Event, cfg.MaxEvents)},
		keeping:  make(map[uint64]keepExport),
		kept:     make(map[string]*keptKV),
	}, nil
}

// BlockSize returns the tokens per block.
func (m *Manager) BlockSize() int { return m.cfg.BlockSize }

// Caching reports whether the prefix cache is on.
func (m *Manager) Caching() bool { return m.cfg.CacheBytes > 0 }

// FreeSlots is the number of allocated slots a sequence can be admitted to
// now.
func (m *Manager) FreeSlots() int { return m.active - len(m.seqs) }

// ActiveSlots is the number of slots allocated in the engine.
func (m *Manager) ActiveSlots() int { return m.active }

// SetActiveSlots records that the engine now has n slots. Shrinking is
// refused while a sequence holds a slot at n or above.
func (m *Manager) SetActiveSlots(n int) error {
	if n < 1 || n > m.cfg.Slots {
		return fmt.Errorf("kvcache: %d active slots outside [1, %d]", n, m.cfg.Slots)
	}
	for _, s := range m.seqs {
		if int(s.slot) >= n {
			return fmt.Errorf("kvcache: slot %d is in use; cannot shrink to %d slots", s.slot, n)
		}
	}
	m.active = n
	return nil
}

// HighestUsedSlot is the highest slot a sequence holds, or -1.
func (m *Manager) HighestUsedSlot() int {
	hi := -1
	for _, s := range m.seqs {
		hi = max(hi, int(s.slot))
	}
	return hi
}

// Stats returns the counters and gauges.
func (m *Manager) Stats() Stats {
	s := m.stats
	s.Slots, s.ActiveSlots, s.SlotTokens, s.UsedSlots = m.cfg.Slots, m.active, m.cfg.SlotTokens, len(m.seqs)
	s.HeldTokens = 0
	for _, sq := range m.seqs {
		s.HeldTokens += sq.held
	}
	s.CachedBlocks, s.CachedBytes, s.CacheBytesLimit = len(m.index), m.bytes, m.cfg.CacheBytes
	s.EventsPending, s.EventsDropped = m.events.n, m.events.dropped
	s.Leases, s.LeaseBytes = len(m.kept), m.keptSize
	s.CapacityTokens = m.cfg.CapacityTokens
	s.ReservedTokens = m.reserved * m.cfg.BlockSize
	return s
}

// Slot returns the slot of a sequence the manager holds.
func (m *Manager) Slot(id engine.SeqID) (engine.Slot, bool) {
	s, ok := m.seqs[id]
	if !ok {
		return 0, false
	}
	return s.slot, true
}

// Holds reports whether the manager holds the sequence.
func (m *Manager) Holds(id engine.SeqID) bool { _, ok := m.seqs[id]; return ok }

// Admit gives a sequence the lowest free slot, reserves blocks for all of
// its Tokens against the token capacity, and finds, in the prefix cache,
// the longest cached prefix its tokens start with (blocks, then part of a
// block or a tail; never all of Tokens: the last token is always computed
// so that the step has logits). It returns the number of cached tokens,
// which the engine restores into the slot before the next batch. It
// returns ok false and changes nothing when no slot is free or the free
// blocks do not hold Tokens.
func (m *Manager) Admit(id engine.SeqID, opt AdmitOptions) (cached int, ok bool) {
	if _, dup := m.seqs[id]; dup {
		panic(fmt.Sprintf("kvcache: sequence %d admitted twice", id))
	}
	slot := slices.Index(m.slotUsed[:m.active], false)
	if slot < 0 || !m.FitsTokens(len(opt.Tokens)) {
		return 0, false
	}
	m.slotUsed[slot] = true
	s := &sequence{slot: engine.Slot(slot), salt: opt.Salt, keep: opt.Keep, keepN: opt.KeepPositions}
	m.seqs[id] = s
	if m.cfg.CapacityTokens > 0 {
		s.blocks = m.blocksFor(len(opt.Tokens))
		m.reserved += s.blocks
	}
	if m.Caching() && !opt.NoCache {
		cached = m.lookup(id, s, opt.Tokens)
	}
	if opt.Count {
		m.stats.QueryTokens += uint64(len(opt.Tokens))
		m.stats.HitTokens += uint64(cached)
	}
	return cached, true
}

// CapacityTokens is Config.CapacityTokens: the most positions running
// sequences may reserve together, 0 when only the slots bound them.
func (m *Manager) CapacityTokens() int { return m.cfg.CapacityTokens }

// FitsTokens reports whether a sequence of n tokens could reserve its
// blocks now (Admit needs a free slot too). It is true when there is no
// token capacity.
func (m *Manager) FitsTokens(n int) bool {
	return m.cfg.CapacityTokens == 0 || m.blocksFor(n) <= m.freeBlocks()
}

// freeBlocks is the number of blocks no sequence reserves.
func (m *Manager) freeBlocks() int { return m.cfg.CapacityTokens/m.cfg.BlockSize - m.reserved }

// FreeTokens is the token capacity no sequence reserves, in positions
// (whole blocks); 0 when there is no token capacity.
func (m *Manager) FreeTokens() int { return m.freeBlocks() * m.cfg.BlockSize }

// Reserved is the number of positions a held sequence reserves (whole
// blocks); 0 when there is no token capacity or the sequence is not held.
func (m *Manager) Reserved(id engine.SeqID) int {
	if s, ok := m.seqs[id]; ok {
		return s.blocks * m.cfg.BlockSize
	}
	return 0
}

// Grow makes a held sequence's reservation cover its first positions
// positions, taking free blocks as needed. It returns false and changes
// nothing when the free blocks do not suffice or the sequence is not
// held. A reservation never shrinks until Free. It is always true when
// there is no token capacity.
func (m *Manager) Grow(id engine.SeqID, positions int) bool {
	if m.cfg.CapacityTokens == 0 {
		return true
	}
	s, ok := m.seqs[id]
	if !ok {
		return false
	}
	need := m.blocksFor(positions) - s.blocks
	if need <= 0 {
		return true
	}
	if need > m.freeBlocks() {
		return false
	}
	s.blocks += need
	m.reserved += need
	return true
}

// blocksFor is the number of blocks that hold n positions.
func (m *Manager) blocksFor(n int) int { return (n + m.cfg.BlockSize - 1) / m.cfg.BlockSize }

// lookup finds the longest cached prefix of tokens that leaves the last
// token to compute: whole cached blocks, then the first positions of the
// next cached block or of a cached tail, and queues their restore.
func (m *Manager) lookup(id engine.SeqID, s *sequence, tokens []int32) int {
	bs := m.cfg.BlockSize
	limit := len(tokens) - 1 // positions that may be restored
	hashes := hashBlocks(nil, tokens, s.salt, bs, len(tokens)/bs)
	var path []int32
	for _, h := range hashes {
		e, found := m.index[h]
		if !found {
			break
		}
		path = append(path, e)
	}
	var pieces []*engine.KV
	full := min(len(path), limit/bs)
	for _, e := range path[:full] {
		pieces = append(pieces, m.entries[e].kv)
		m.pin(e)
	}
	cached := full * bs
	if len(path) > full {
		// The next block is cached but holds the last token: all of it but
		// that.
		path = path[:full+1]
		pieces = append(pieces, m.entries[path[full]].kv.Slice(0, limit-cached))
		cached = limit
	} else {
		// A tail cached after the last full block: the longest one the
		// tokens go on with (it may end with the last token, which is not
		// restored).
		parent := parentOf(hashes, full)
		for k := min(bs-1, len(tokens)-cached); k > 0; k-- {
			if e, found := m.index[tailHash(parent, full == 0, s.salt, tokens[cached:cached+k])]; found {
				n := min(k, limit-cached)
				if n == 0 {
					break
				}
				path = append(path, e)
				kv := m.entries[e].kv
				if n < kv.N {
					kv = kv.Slice(0, n)
				} else {
					m.pin(e)
				}
				pieces = append(pieces, kv)
				cached += n
				break
			}
		}
	}
	if len(pieces) > 0 {
		m.restores = append(m.restores, engine.Restore{Seq: id, Slot: s.slot, KV: pieces})
		m.touchPath(path)
	}
	s.hashes = hashes[:full:full]
	s.offered, s.settled = full, full
	s.held = cached
	return cached
}

// Commit tells the manager that the first computed positions of the
// sequence are in its slot.
func (m *Manager) Commit(id engine.SeqID, tokens []int32, computed int) {
	s, ok := m.seqs[id]
	if !ok {
		return
	}
	s.held = computed
	s.tokens = tokens
	if m.Caching() {
		s.hashes = hashBlocks(s.hashes, tokens, s.salt, m.cfg.BlockSize, computed/m.cfg.BlockSize)
	}
}

// Offer asks for the sequence's full blocks that the cache lacks, and the
// positions after them as a tail, to be exported into it at the next step
// (before anything clears the slot).
func (m *Manager) Offer(id engine.SeqID) {
	s, ok := m.seqs[id]
	if !ok || !m.Caching() {
		return
	}
	bs := m.cfg.BlockSize
	full := min(len(s.hashes), s.held/bs)
	for s.offered < full {
		if _, cached := m.index[s.hashes[s.offered]]; !cached {
			break
		}
		s.offered++
		s.settled = max(s.settled, s.offered)
	}
	// The positions after the last full block, unless the cache has them.
	p := pendingExport{seq: id, from: s.offered, to: full, hashes: slices.Clone(s.hashes[:full])}
	if k := s.held - full*bs; k > 0 && len(s.tokens) >= s.held && s.tailOffered < s.held {
		p.tail = tailHash(parentOf(s.hashes, full), full == 0, s.salt, s.tokens[full*bs:s.held])
		p.tailLen = k
		s.tailOffered = s.held
		if _, cached := m.index[p.tail]; cached {
			p.tailLen = 0
		}
	}
	if s.offered >= full && p.tailLen == 0 {
		return
	}
	m.nextTag++
	m.pending[m.nextTag] = p
	m.exports = append(m.exports, engine.Export{Tag: m.nextTag, Seq: id, Slot: s.slot, From: s.offered * bs, To: full*bs + p.tailLen})
	s.offered = full
}

// Settled reports whether every full block among the sequence's first
// tokens positions was offered and has settled: cached, or its export came
// back (stored or not). For a sequence the manager no longer holds, it
// reports whether none of its exports is still on its way. It is true when
// caching is off.
func (m *Manager) Settled(id engine.SeqID, tokens int) bool {
	if !m.Caching() {
		return true
	}
	s, ok := m.seqs[id]
	if !ok {
		for _, p := range m.pending {
			if p.seq == id {
				return false
			}
		}
		return true
	}
	return s.settled >= tokens/m.cfg.BlockSize
}

// Free releases a finished, aborted or preempted sequence. With offer,
// what it holds that the cache lacks (blocks and tail) is exported first; without, its KV is
// dropped (use that when the engine failed the sequence and its KV is
// unknown). The slot is cleared at the next step; it and the sequence's
// reserved blocks can be admitted to at once.
func (m *Manager) Free(id engine.SeqID, offer bool) {
	s, ok := m.seqs[id]
	if !ok {
		return
	}
	if offer {
		m.Offer(id)
	}
	m.keepOnFree(id, s, offer)
	delete(m.seqs, id)
	m.reserved -= s.blocks
	// A restore not yet applied would refill the slot after its clear.
	m.restores = slices.DeleteFunc(m.restores, func(r engine.Restore) bool { return r.Seq == id })
	m.slotUsed[s.slot] = false
	m.clears = append(m.clears, s.slot)
}

// Store puts exported blocks into the cache, then evicts the least
// recently used blocks beyond the budget.
func (m *Manager) Store(exported []engine.Exported) {
	bs := m.cfg.BlockSize
	for _, x := range exported {
		if m.storeKept(x) {
			continue
		}
		p, ok := m.pending[x.Tag]
		if !ok {
			continue
		}
		delete(m.pending, x.Tag)
		if s := m.seqs[p.seq]; s != nil {
			s.settled = max(s.settled, p.to)
		}
		if x.KV == nil || x.KV.N != (p.to-p.from)*bs+p.tailLen {
			continue
		}
		// Walk the chain from its root: a block is kept only under a
		// cached parent, so that every cached block can be found.
		var path []int32
		for i := 0; i < p.to; i++ {
			e, cached := m.index[p.hashes[i]]
			if !cached {
				if i < p.from {
					break // an ancestor was evicted meanwhile
				}
				if e = m.insert(p.hashes[i], parentOf(p.hashes, i), int32(i), x.KV, (i-p.from)*bs, (i-p.from+1)*bs); e == none {
					break // no host memory
				}
			}
			path = append(path, e)
		}
		if p.tailLen > 0 && len(path) == p.to {
			// A tail is a leaf under the last full block.
			e, cached := m.index[p.tail]
			if !cached {
				e = m.insert(p.tail, parentOf(p.hashes, p.to), int32(p.to), x.KV, (p.to-p.from)*bs, x.KV.N)
			}
			if e != none {
				path = append(path, e)
			}
		}
		m.touchPath(path)
	}
	for m.bytes > m.cfg.CacheBytes && m.lruHead != none {
		m.evict(m.lruHead)
	}
}

// StepOps returns the KV work the engine must do before the next batch, in
// the order it must do it: exports, clears, restores.
// The KV of the restores stays valid until the next call of StepOps or
// Close: the engine must apply them before.
func (m *Manager) StepOps() (exports []engine.Export, clears []engine.Slot, restores []engine.Restore) {
	m.unpinStep()
	exports, clears, restores = m.exports, m.clears, m.restores
	m.exports, m.clears, m.restores = nil, nil, nil
	return exports, clears, restores
}

// DrainEvents returns the cache events since the last call, oldest first.
// The outbox keeps the last MaxEvents; older ones are dropped and counted
// in Stats.EventsDropped.
func (m *Manager) DrainEvents() []Event { return m.events.drain() }

// insert adds positions [from, to) of src, copied into the arena, as a
// block or tail to the index and to the LRU tail. It returns none when the
// arena has no memory for them.
func (m *Manager) insert(h, parent Hash, depth int32, src *engine.KV, from, to int) int32 {
	kv, mem, ok := m.hold(src, from, to)
	if !ok {
		return none
	}
	var e int32
	if n := len(m.freeEntries); n > 0 {
		e = m.freeEntries[n-1]
		m.freeEntries = m.freeEntries[:n-1]
	} else {
		e = int32(len(m.entries))
		m.entries = append(m.entries, entry{})
	}
	m.entries[e] = entry{hash: h, parent: parent, depth: depth, kv: kv, mem: mem, prev: none, next: none}
	m.index[h] = e
	m.pushTail(e)
	m.bytes += int64(kv.Size())
	m.stats.StoredBlocks++
	m.events.push(Event{Kind: BlockStored, Hash: h, Parent: parent, Depth: int(depth)})
	return e
}

// evict drops a cached block and frees its memory, or, while a restore
// reads it (pinned), marks it dead for unpinStep to free.
func (m *Manager) evict(e int32) {
	en := &m.entries[e]
	m.unlink(e)
	delete(m.index, en.hash)
	m.bytes -= int64(en.kv.Size())
	m.stats.Evictions++
	m.events.push(Event{Kind: BlockRemoved, Hash: en.hash, Depth: int(en.depth)})
	if en.pins > 0 {
		en.dead = true
		return
	}
	m.release(e)
}

// touchPath marks a chain of blocks (root first) as just used, deepest
// first, so that every block is more recent than its descendants and the
// LRU head is always a block no other cached block depends on.
func (m *Manager) touchPath(path []int32) {
	for i := len(path) - 1; i >= 0; i-- {
		m.unlink(path[i])
		m.pushTail(path[i])
	}
}

func (m *Manager) unlink(e int32) {
	en := &m.entries[e]
	if en.prev != none {
		m.entries[en.prev].next = en.next
	} else if m.lruHead == e {
		m.lruHead = en.next
	}
	if en.next != none {
		m.entries[en.next].prev = en.prev
	} else if m.lruTail == e {
		m.lruTail = en.prev
	}
	en.prev, en.next = none, none
}

func (m *Manager) pushTail(e int32) {
	en := &m.entries[e]
	en.prev, en.next = m.lruTail, none
	if m.lruTail != none {
		m.entries[m.lruTail].next = e
	} else {
		m.lruHead = e
	}
	m.lruTail = e
}

// parentOf is the key of the block before block i of a chain (zero for
// the first).
func parentOf(hashes []Hash, i int) Hash {
	if i == 0 {
		return Hash{}
	}
	return hashes[i-1]
}

// tailHash names fewer than a block of positions after the block whose
// hash is parent (first: after nothing, in the salt's namespace). The marker
// keeps tails apart from full blocks.
func tailHash(parent Hash, first bool, salt string, tokens []int32) Hash {
	buf := appendChainKey(make([]byte, 0, 32+9+4*len(tokens)+len(salt)), parent, first, salt)
	buf = append(buf, 0xff, 't', 'a', 'i', 'l')
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(tokens)))
	for _, t := range tokens {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
	}
	return sha256.Sum256(buf)
}

// appendChainKey appends what an entry's key starts with: the salt for
// the first entry of a chain, else its parent's key.
func appendChainKey(buf []byte, parent Hash, first bool, salt string) []byte {
	if first {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(salt)))
		return append(buf, salt...)
	}
	return append(buf, parent[:]...)
}

// BlockHashes returns the hashes of the full blocks of tokens (blockSize
// tokens each; a partial last block has none) in the cache namespace salt:
// the keys the Manager gives those blocks, and that its BlockStored events
// carry. A router that sees a Manager's events only (another process)
// computes a prompt's hashes with it to find the longest cached prefix.
func BlockHashes(tokens []int32, salt string, blockSize int) []Hash {
	if blockSize <= 0 {
		return nil
	}
	return hashBlocks(nil, tokens, salt, blockSize, len(tokens)/blockSize)
}

// hashBlocks extends hashes to cover the first n full blocks of tokens.
func hashBlocks(hashes []Hash, tokens []int32, salt string, bs, n int) []Hash {
	n = min(n, len(tokens)/bs)
	if n <= len(hashes) {
		return hashes
	}
	buf := make([]byte, 0, 32+4*bs+len(salt))
	for i := len(hashes); i < n; i++ {
		buf = appendChainKey(buf[:0], parentOf(hashes, i), i == 0, salt)
		for _, t := range tokens[i*bs : (i+1)*bs] {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		hashes = append(hashes, sha256.Sum256(buf))
	}
	return hashes
}
