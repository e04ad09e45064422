package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/llmserve/llmserve/engine"
)

// Config sizes a Manager.
type Config struct {
	// BlockSize is the number of tokens per block (16).
	BlockSize int
	// NumBlocks is the KV capacity in blocks: the engine's KV tokens divided
	// by BlockSize, rounded down.
	NumBlocks int
	// RunSlots is the number of slots for running sequences: slots
	// [0, RunSlots). It bounds how many sequences hold KV at once.
	RunSlots int
	// HolderSlots is the number of slots that keep cached blocks alive:
	// slots [RunSlots, RunSlots+HolderSlots). 0 disables prefix caching.
	HolderSlots int
	// MaxSeqLen is the most tokens one sequence may hold.
	MaxSeqLen int
	// MaxCachedBlocks caps the idle blocks kept for prefix reuse; beyond
	// it, the least recently used are evicted at once. <= 0: no cap (all
	// free memory may hold cached prefixes). In llama.cpp's unified KV every
	// query scans every occupied cell, so idle cached cells are not free:
	// see doc.go.
	MaxCachedBlocks int
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.BlockSize < 1:
		return fmt.Errorf("kvcache: block size %d < 1", c.BlockSize)
	case c.NumBlocks < 1:
		return fmt.Errorf("kvcache: %d blocks < 1", c.NumBlocks)
	case c.RunSlots < 1:
		return fmt.Errorf("kvcache: %d run slots < 1", c.RunSlots)
	case c.HolderSlots < 0:
		return fmt.Errorf("kvcache: %d holder slots < 0", c.HolderSlots)
	case c.MaxSeqLen < 1:
		return fmt.Errorf("kvcache: max sequence length %d < 1", c.MaxSeqLen)
	}
	return nil
}

// Stats are the manager's counters and gauges.
type Stats struct {
	// Blocks is the capacity; UsedBlocks are held by running sequences;
	// CachedBlocks are idle but hold a reusable prefix.
	Blocks, UsedBlocks, CachedBlocks int
	// QueryTokens and HitTokens count prompt tokens looked up in the prefix
	// cache and found there (vLLM's prefix_cache_queries / hits).
	QueryTokens, HitTokens uint64
	// Evictions counts cached blocks dropped to make room.
	Evictions uint64
}

// Usage is the fraction of blocks held by running sequences, in [0, 1].
func (s Stats) Usage() float64 {
	if s.Blocks == 0 {
		return 0
	}
	return float64(s.UsedBlocks) / float64(s.Blocks)
}

// ErrUnknownSeq is returned for a sequence the manager does not hold.
var ErrUnknownSeq = errors.New("kvcache: unknown sequence")

// Hash names a full block by its content and everything before it.
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
	// NewTokens is the most tokens the first step may compute past the
	// cached prefix (the step's token budget); Admit reserves blocks for
	// min(NewTokens, len(Tokens)-cached) of them.
	NewTokens int
	// Count adds the lookup to the query and hit counters; false for a
	// sequence resuming after preemption.
	Count bool
}

const none = -1

type block struct {
	hash       Hash
	hashed     bool  // hash is valid and the block is in the index
	ref        int32 // running sequences using the block
	depth      int32 // block index within its sequence
	holder     int32 // index into Manager.holders when hashed
	prev, next int32 // links in the list the block is in
	in         *list // the list holding the block, nil when in use
}

// list is a doubly linked list of blocks through their prev/next indexes.
type list struct {
	head, tail int32
	n          int
}

type sequence struct {
	slot   engine.Slot
	blocks []int32
	// hashes[i] is the hash of full block i, as far as it was computed.
	hashes []Hash
	salt   string
	// committed counts leading blocks that are full and were offered to
	// the cache.
	committed int
}

type holder struct {
	slot engine.Slot
	used []bool // by depth
}

// Manager is the paged KV manager. It is not safe for concurrent use: the
// scheduler's goroutine owns it.
type Manager struct {
	cfg       Config
	blocks    []block
	empty     list // free blocks with nothing worth keeping
	cached    list // idle blocks of cached prefixes, least recently used first
	index     map[Hash]int32
	seqs      map[engine.SeqID]*sequence
	freeSlots []engine.Slot
	holders   []holder
	ops       []engine.MemOp
	events    []Event
	stats     Stats
}

// New returns a manager with every block free.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:    cfg,
		blocks: make([]block, cfg.NumBlocks),
		empty:  list{head: none, tail: none},
		cached: list{head: none, tail: none},
		index:  make(map[Hash]int32),
		seqs:   make(map[engine.SeqID]*sequence),
	}
	for i := range m.blocks {
		m.blocks[i] = block{holder: none, prev: none, next: none}
		m.push(&m.empty, int32(i))
	}
	for s := cfg.RunSlots - 1; s >= 0; s-- {
		m.freeSlots = append(m.freeSlots, engine.Slot(s))
	}
	depths := (cfg.MaxSeqLen + cfg.BlockSize - 1) / cfg.BlockSize
	for h := range cfg.HolderSlots {
		m.holders = append(m.holders, holder{slot: engine.Slot(cfg.RunSlots + h), used: make([]bool, depths)})
	}
	return m, nil
}

// BlockSize returns the tokens per block.
func (m *Manager) BlockSize() int { return m.cfg.BlockSize }

// FreeBlocks is how many blocks an allocation can take right now (free and
// idle cached blocks).
func (m *Manager) FreeBlocks() int { return m.empty.n + m.cached.n }

// BlocksFor is the number of blocks n tokens occupy.
func (m *Manager) BlocksFor(n int) int { return (n + m.cfg.BlockSize - 1) / m.cfg.BlockSize }

// Stats returns the counters and gauges.
func (m *Manager) Stats() Stats {
	s := m.stats
	s.Blocks = m.cfg.NumBlocks
	s.UsedBlocks = m.cfg.NumBlocks - m.FreeBlocks()
	s.CachedBlocks = m.cached.n
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

// Admit gives a sequence a slot, the cached prefix of its tokens, and blocks
// for opt.NewTokens more. It returns the number of tokens found in the cache
// (a multiple of the block size, never all of Tokens: the last token is
// always computed so that the step has logits). When there is no slot or
// not enough blocks it returns ok false and changes nothing.
func (m *Manager) Admit(id engine.SeqID, opt AdmitOptions) (cached int, ok bool) {
	if _, dup := m.seqs[id]; dup {
		panic(fmt.Sprintf("kvcache: sequence %d admitted twice", id))
	}
	if len(m.freeSlots) == 0 {
		return 0, false
	}
	bs := m.cfg.BlockSize
	var hits []int32
	var hashes []Hash
	if !opt.NoCache && len(m.holders) > 0 {
		hashes = m.hashBlocks(nil, opt.Tokens, opt.Salt, (len(opt.Tokens)-1)/bs)
		for _, h := range hashes {
			b, found := m.index[h]
			if !found {
				break
			}
			hits = append(hits, b)
		}
	}
	cached = len(hits) * bs
	need := m.BlocksFor(cached+min(opt.NewTokens, len(opt.Tokens)-cached)) - len(hits)
	// Hit blocks that sit in the free queue stop being allocatable.
	avail := m.FreeBlocks()
	for _, b := range hits {
		if m.blocks[b].in != nil {
			avail--
		}
	}
	if need > avail {
		return 0, false
	}
	if opt.Count {
		m.stats.QueryTokens += uint64(len(opt.Tokens))
		m.stats.HitTokens += uint64(cached)
	}
	slot := m.freeSlots[len(m.freeSlots)-1]
	m.freeSlots = m.freeSlots[:len(m.freeSlots)-1]
	s := &sequence{slot: slot, salt: opt.Salt, hashes: hashes[:len(hits)], committed: len(hits)}
	m.seqs[id] = s
	for _, b := range hits {
		m.claim(b)
		s.blocks = append(s.blocks, b)
	}
	m.shareHits(s)
	for range need {
		s.blocks = append(s.blocks, m.allocate(int32(len(s.blocks))))
	}
	return cached, true
}

// shareHits makes the sequence's slot share the cells of its cached blocks,
// one copy per run of blocks kept by the same holder.
func (m *Manager) shareHits(s *sequence) {
	bs := int32(m.cfg.BlockSize)
	for i := 0; i < len(s.blocks); {
		h := m.blocks[s.blocks[i]].holder
		j := i + 1
		for j < len(s.blocks) && m.blocks[s.blocks[j]].holder == h {
			j++
		}
		m.ops = append(m.ops, engine.MemOp{Kind: engine.MemCopy, Src: m.holders[h].slot, Dst: s.slot, P0: int32(i) * bs, P1: int32(j) * bs})
		i = j
	}
}

// Grow makes sure the sequence has blocks for total tokens. It returns false
// and changes nothing when there are not enough free blocks.
func (m *Manager) Grow(id engine.SeqID, total int) bool {
	s, ok := m.seqs[id]
	if !ok {
		panic(fmt.Sprintf("kvcache: Grow of unknown sequence %d", id))
	}
	need := m.BlocksFor(total) - len(s.blocks)
	if need <= 0 {
		return true
	}
	if need > m.FreeBlocks() {
		return false
	}
	for range need {
		s.blocks = append(s.blocks, m.allocate(int32(len(s.blocks))))
	}
	return true
}

// Commit tells the manager that the first computed tokens of the sequence
// are in the KV memory. Blocks that became full are offered to the prefix
// cache: a block whose content is not cached yet is registered and kept
// alive by a holder slot, so that later sequences can share it.
func (m *Manager) Commit(id engine.SeqID, tokens []int32, computed int) {
	s, ok := m.seqs[id]
	if !ok || len(m.holders) == 0 {
		return
	}
	full := min(computed/m.cfg.BlockSize, len(s.blocks))
	if full <= s.committed {
		return
	}
	s.hashes = m.hashBlocks(s.hashes, tokens, s.salt, full)
	bs := int32(m.cfg.BlockSize)
	for i := s.committed; i < full; i++ {
		b := s.blocks[i]
		blk := &m.blocks[b]
		if blk.hashed {
			continue // a shared cached block
		}
		h := s.hashes[i]
		if _, dup := m.index[h]; dup {
			continue // same content computed twice; keep the first
		}
		hi := m.pickHolder(s, i)
		if hi == none {
			continue // no holder free at this depth: the block is not cached
		}
		m.holders[hi].used[i] = true
		blk.hash, blk.hashed, blk.holder = h, true, hi
		m.index[h] = b
		m.ops = append(m.ops, engine.MemOp{Kind: engine.MemCopy, Src: s.slot, Dst: m.holders[hi].slot, P0: int32(i) * bs, P1: int32(i+1) * bs})
		var parent Hash
		if i > 0 {
			parent = s.hashes[i-1]
		}
		m.events = append(m.events, Event{Kind: BlockStored, Hash: h, Parent: parent, Depth: i})
	}
	s.committed = full
}

// pickHolder returns a holder with no block at depth, preferring the holder
// of the parent block so that a chain stays in one slot (fewer copies on a
// hit), or none.
func (m *Manager) pickHolder(s *sequence, depth int) int32 {
	if depth >= len(m.holders[0].used) {
		return none
	}
	if depth > 0 {
		if p := &m.blocks[s.blocks[depth-1]]; p.hashed && !m.holders[p.holder].used[depth] {
			return p.holder
		}
	}
	for i := range m.holders {
		if !m.holders[i].used[depth] {
			return int32(i)
		}
	}
	return none
}

// Free releases a finished, aborted or preempted sequence: its slot, and its
// blocks, tail first. Blocks that hold a cached prefix stay in the cache
// until their space is needed.
func (m *Manager) Free(id engine.SeqID) {
	s, ok := m.seqs[id]
	if !ok {
		return
	}
	delete(m.seqs, id)
	m.ops = append(m.ops, engine.MemOp{Kind: engine.MemRemove, Dst: s.slot, P0: -1, P1: -1})
	for i := len(s.blocks) - 1; i >= 0; i-- {
		b := s.blocks[i]
		blk := &m.blocks[b]
		blk.ref--
		if blk.ref > 0 {
			continue
		}
		if blk.hashed {
			m.push(&m.cached, b)
		} else {
			m.push(&m.empty, b)
		}
	}
	m.freeSlots = append(m.freeSlots, s.slot)
	for m.cfg.MaxCachedBlocks > 0 && m.cached.n > m.cfg.MaxCachedBlocks {
		b := m.cached.head
		m.remove(b)
		m.evict(b)
		m.push(&m.empty, b)
	}
}

// DrainOps returns the memory operations emitted since the last call, in
// the order the engine must apply them.
func (m *Manager) DrainOps() []engine.MemOp {
	ops := m.ops
	m.ops = nil
	return ops
}

// DrainEvents returns cache events since the last call (for routers).
func (m *Manager) DrainEvents() []Event {
	ev := m.events
	m.events = nil
	return ev
}

// claim takes a cached block for one more sequence.
func (m *Manager) claim(b int32) {
	if m.blocks[b].in != nil {
		m.remove(b)
	}
	m.blocks[b].ref++
}

// allocate takes a free block for a sequence at the given depth: an empty
// one if there is any, else the least recently used cached one, whose
// content is evicted.
func (m *Manager) allocate(depth int32) int32 {
	l := &m.empty
	if l.n == 0 {
		l = &m.cached
	}
	b := l.head
	if b == none {
		panic("kvcache: allocate with no free block")
	}
	m.remove(b)
	blk := &m.blocks[b]
	if blk.hashed {
		m.evict(b)
	}
	blk.ref = 1
	blk.depth = depth
	return b
}

// evict drops a cached block: from the index, and from its holder slot so
// that llama.cpp frees its cells.
func (m *Manager) evict(b int32) {
	blk := &m.blocks[b]
	bs := int32(m.cfg.BlockSize)
	h := &m.holders[blk.holder]
	h.used[blk.depth] = false
	m.ops = append(m.ops, engine.MemOp{Kind: engine.MemRemove, Dst: h.slot, P0: blk.depth * bs, P1: (blk.depth + 1) * bs})
	delete(m.index, blk.hash)
	m.events = append(m.events, Event{Kind: BlockRemoved, Hash: blk.hash, Depth: int(blk.depth)})
	m.stats.Evictions++
	blk.hashed, blk.holder, blk.hash = false, none, Hash{}
}

// remove takes b out of the list it is in.
func (m *Manager) remove(b int32) {
	blk := &m.blocks[b]
	l := blk.in
	if blk.prev != none {
		m.blocks[blk.prev].next = blk.next
	} else {
		l.head = blk.next
	}
	if blk.next != none {
		m.blocks[blk.next].prev = blk.prev
	} else {
		l.tail = blk.prev
	}
	blk.prev, blk.next, blk.in = none, none, nil
	l.n--
}

// push appends b to l.
func (m *Manager) push(l *list, b int32) {
	blk := &m.blocks[b]
	blk.prev, blk.next, blk.in = l.tail, none, l
	if l.tail != none {
		m.blocks[l.tail].next = b
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

// hashBlocks extends hashes to cover the first n full blocks of tokens.
func (m *Manager) hashBlocks(hashes []Hash, tokens []int32, salt string, n int) []Hash {
	bs := m.cfg.BlockSize
	n = min(n, len(tokens)/bs)
	buf := make([]byte, 0, 32+4*bs+len(salt))
	for i := len(hashes); i < n; i++ {
		buf = buf[:0]
		if i > 0 {
			buf = append(buf, hashes[i-1][:]...)
		} else {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(len(salt)))
			buf = append(buf, salt...)
		}
		for _, t := range tokens[i*bs : (i+1)*bs] {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		hashes = append(hashes, sha256.Sum256(buf))
	}
	return hashes
}
