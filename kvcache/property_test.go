package kvcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
)

// TestManagerRandomized drives a Manager with random admissions, chunks,
// offers, frees and late or failed exports, applying its StepOps on an
// enginetest.Fake, and checks after every operation that:
//
//   - a restore brings back exactly the tokens the sequence starts with
//     (the fake's slot then holds cached positions), never the last one,
//     and only from positions that a sequence with the same salt exported;
//   - an export copies exactly the positions the sequence computed: whole
//     blocks, then at most the tail of what it holds;
//   - the fake accepts every step (no failures);
//   - held sequences have distinct slots, FreeSlots and HeldTokens agree;
//   - with a token capacity (odd seeds): Admit refuses only for want of a
//     slot or of blocks, a chunk computes only positions its sequence
//     reserved (Grow first), reservations are whole blocks, add up to
//     ReservedTokens and stay within CapacityTokens, and the fake, which
//     enforces the capacity on positions held, never runs out;
//   - the cache stays within its byte budget, its index, LRU list and byte
//     count agree, every cached block's parent is cached and more recently
//     used than the block (the LRU head is always a leaf);
//   - the event outbox never holds more than MaxEvents, and stored plus
//     evicted blocks equal the events drained, pending and dropped.
func TestManagerRandomized(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newKVRand(t, seed)
			for range 3000 {
				r.op()
				r.check()
			}
			// Let everything finish: nothing may be left behind.
			for _, id := range r.heldIDs() {
				r.ops()
				r.m.Free(id, true)
			}
			r.ops()
			r.store(len(r.pending))
			r.check()
			if st := r.m.Stats(); st.UsedSlots != 0 || st.HeldTokens != 0 || len(r.m.pending) != 0 {
				t.Fatalf("left behind: %+v, %d pending exports", st, len(r.m.pending))
			}
			t.Logf("stored %d blocks, evicted %d, hits %d of %d tokens; refused for want of blocks: %d admissions, %d growths",
				r.m.stats.StoredBlocks, r.m.stats.Evictions, r.m.stats.HitTokens, r.m.stats.QueryTokens, r.refused.admits, r.refused.grows)
		})
	}
}

type kvSeq struct {
	tokens []int32
	salt   string
	held   int
	// ready: the step that applies the sequence's restore has run, so its
	// slot holds held positions and it may compute.
	ready bool
}

type kvRand struct {
	t      *testing.T
	rng    *rand.Rand
	cfg    Config
	m      *Manager
	fake   *enginetest.Fake
	seqs   map[engine.SeqID]*kvSeq // every sequence ever admitted
	nextID engine.SeqID
	// pending are exported results not stored yet.
	pending []engine.Exported
	// exported[salt] holds every prefix (whole blocks) that an export of a
	// sequence with that salt covered.
	exported map[string]map[string]bool
	prefixes [][]int32
	events   struct{ drained uint64 }
	// refused counts admissions and growths refused for want of blocks.
	refused struct{ admits, grows int }
}

func newKVRand(t *testing.T, seed uint64) *kvRand {
	rng := rand.New(rand.NewPCG(seed, 1))
	cfg := Config{
		BlockSize:  1 + rng.IntN(4),
		Slots:      1 + rng.IntN(5),
		SlotTokens: 48,
		MaxEvents:  1 + rng.IntN(16),
	}
	cfg.CacheBytes = int64(rng.IntN(24)*cfg.BlockSize*4 + rng.IntN(4)) // budgets that are not whole blocks too
	if seed%2 == 1 {
		cfg.CapacityTokens = cfg.BlockSize * (2 + rng.IntN(24))
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &kvRand{
		t: t, rng: rng, cfg: cfg, m: m,
		fake:     &enginetest.Fake{Slots: cfg.Slots, SlotTokens: cfg.SlotTokens, CapacityTokens: cfg.CapacityTokens},
		seqs:     map[engine.SeqID]*kvSeq{},
		exported: map[string]map[string]bool{},
	}
	// A few shared prefixes over a tiny alphabet, so that blocks collide
	// often.
	for range 3 {
		p := make([]int32, 4+rng.IntN(16))
		for i := range p {
			p[i] = 1 + rng.Int32N(3)
		}
		r.prefixes = append(r.prefixes, p)
	}
	t.Logf("config %+v", cfg)
	return r
}

func (r *kvRand) heldIDs() []engine.SeqID {
	var ids []engine.SeqID
	for id := range r.m.seqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (r *kvRand) pick(ready bool) (engine.SeqID, *kvSeq, bool) {
	var ids []engine.SeqID
	for _, id := range r.heldIDs() {
		if !ready || r.seqs[id].ready {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, nil, false
	}
	id := ids[r.rng.IntN(len(ids))]
	return id, r.seqs[id], true
}

func (r *kvRand) op() {
	t := r.t
	switch n := r.rng.IntN(100); {
	case n < 20: // admit
		toks := slices.Clone(r.prefixes[r.rng.IntN(len(r.prefixes))])
		toks = toks[:1+r.rng.IntN(len(toks))]
		for range r.rng.IntN(12) {
			toks = append(toks, 1+r.rng.Int32N(4))
		}
		salt := ""
		if r.rng.IntN(4) == 0 {
			salt = "x"
		}
		id := r.nextID
		opt := AdmitOptions{Tokens: toks, Salt: salt, NoCache: r.rng.IntN(10) == 0, Count: true}
		free, fits, reserved := r.m.FreeSlots(), r.m.FitsTokens(len(toks)), r.m.Stats().ReservedTokens
		cached, ok := r.m.Admit(id, opt)
		if !ok {
			if free != 0 && fits {
				t.Fatalf("admit of %d tokens refused with %d free slots and %d free tokens", len(toks), free, r.m.FreeTokens())
			}
			if st := r.m.Stats(); st.ReservedTokens != reserved || r.m.Holds(id) {
				t.Fatalf("a refused admit changed the reservations: %d, then %d", reserved, st.ReservedTokens)
			}
			if free != 0 {
				r.refused.admits++
			}
			return
		}
		if !fits {
			t.Fatalf("admitted %d tokens that FitsTokens refused", len(toks))
		}
		r.nextID++
		switch {
		case cached >= len(toks) || cached < 0:
			t.Fatalf("admit %v: cached %d", toks, cached)
		case cached > 0 && (opt.NoCache || !r.exported[salt][key(toks[:cached])]):
			t.Fatalf("admit %v salt %q: %d cached tokens no export with that salt covered", toks, salt, cached)
		}
		r.seqs[id] = &kvSeq{tokens: toks, salt: salt, held: cached}
	case n < 50: // compute a chunk
		id, s, ok := r.pick(true)
		if !ok || s.held == len(s.tokens) {
			return
		}
		to := s.held + 1 + r.rng.IntN(len(s.tokens)-s.held)
		if !r.m.Grow(id, to) {
			// No block free for a decode: the scheduler would preempt.
			if r.cfg.CapacityTokens == 0 || r.m.FitsTokens(to) {
				t.Fatalf("grow of %d to %d refused with %d free tokens", id, to, r.m.FreeTokens())
			}
			r.refused.grows++
			return
		}
		slot, _ := r.m.Slot(id)
		res, err := r.fake.Execute(context.Background(), &engine.Step{Batch: []engine.Chunk{{Seq: id, Slot: slot, Pos: int32(s.held), Tokens: s.tokens[s.held:to]}}})
		if err != nil || len(res.Failures) > 0 {
			t.Fatalf("chunk of %d [%d,%d): %v %v", id, s.held, to, err, res.Failures)
		}
		s.held = to
		r.m.Commit(id, s.tokens, to)
		// A sampled token, sometimes.
		if to == len(s.tokens) && len(s.tokens) < r.cfg.SlotTokens && r.rng.IntN(2) == 0 {
			s.tokens = append(s.tokens, 1+r.rng.Int32N(4))
		}
	case n < 60:
		if id, _, ok := r.pick(false); ok {
			r.m.Offer(id)
		}
	case n < 72: // finish or preempt; the restore must have been applied
		if id, _, ok := r.pick(true); ok {
			r.m.Free(id, r.rng.IntN(4) != 0)
		}
	case n < 90:
		r.ops()
	case n < 97:
		r.store(r.rng.IntN(len(r.pending) + 1))
	default:
		r.events.drained += uint64(len(r.m.DrainEvents()))
	}
}

// ops applies StepOps on the fake and checks what it exported and
// restored.
func (r *kvRand) ops() {
	t := r.t
	exports, clears, restores := r.m.StepOps()
	res, err := r.fake.Execute(context.Background(), &engine.Step{Exports: exports, Clears: clears, Restores: restores})
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("ops: %v %v", err, res.Failures)
	}
	for i, e := range exports {
		s := r.seqs[e.Seq]
		x := res.Exported[i]
		if x.KV == nil || !slices.Equal(kvTokens(x.KV), s.tokens[e.From:e.To]) {
			t.Fatalf("export %+v of %v: got %+v", e, s.tokens, x.KV)
		}
		// Whole blocks, then at most a tail, of positions computed (a tail
		// ends where the sequence was when it was offered).
		if e.From%r.cfg.BlockSize != 0 || e.To > s.held || e.From >= e.To {
			t.Fatalf("export %+v of a sequence holding %d positions", e, s.held)
		}
		if r.exported[s.salt] == nil {
			r.exported[s.salt] = map[string]bool{}
		}
		// A restore may take the first positions of an exported block.
		for j := e.From + 1; j <= e.To; j++ {
			r.exported[s.salt][key(s.tokens[:j])] = true
		}
		if r.rng.IntN(8) == 0 {
			x.KV = nil // a failed export
		}
		r.pending = append(r.pending, x)
	}
	for _, rs := range restores {
		s := r.seqs[rs.Seq]
		var got []int32
		for _, kv := range rs.KV {
			got = append(got, kvTokens(kv)...)
		}
		if !slices.Equal(got, s.tokens[:len(got)]) || len(got) != s.held {
			t.Fatalf("restore of %d (%v, held %d): %v", rs.Seq, s.tokens, s.held, got)
		}
		if n := r.fake.SlotLen(rs.Slot); n != len(got) {
			t.Fatalf("slot %d holds %d after a restore of %d", rs.Slot, n, len(got))
		}
	}
	for id := range r.m.seqs {
		r.seqs[id].ready = true
	}
}

// store stores the first n pending exports, in a shuffled order.
func (r *kvRand) store(n int) {
	batch := r.pending[:n]
	r.rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	r.m.Store(slices.Clone(batch))
	r.pending = slices.Delete(r.pending, 0, n)
	if r.m.bytes > r.cfg.CacheBytes {
		r.t.Fatalf("cache holds %d bytes after Store, budget %d", r.m.bytes, r.cfg.CacheBytes)
	}
}

func (r *kvRand) check() {
	t := r.t
	m := r.m
	// Slots.
	used := map[engine.Slot]engine.SeqID{}
	held, blocks := 0, 0
	for id, s := range m.seqs {
		if other, dup := used[s.slot]; dup {
			t.Fatalf("slot %d held by %d and %d", s.slot, id, other)
		}
		used[s.slot] = id
		if !m.slotUsed[s.slot] {
			t.Fatalf("slot %d of %d is marked free", s.slot, id)
		}
		if s.held != r.seqs[id].held {
			t.Fatalf("seq %d: manager holds %d, computed %d", id, s.held, r.seqs[id].held)
		}
		if r.seqs[id].ready {
			if n := r.fake.SlotLen(s.slot); n != s.held {
				t.Fatalf("seq %d: slot %d holds %d positions, the manager says %d", id, s.slot, n, s.held)
			}
		}
		held += s.held
		if r.cfg.CapacityTokens > 0 && s.blocks*r.cfg.BlockSize < s.held {
			t.Fatalf("seq %d holds %d positions and reserves %d blocks", id, s.held, s.blocks)
		}
		if r.cfg.CapacityTokens == 0 && s.blocks != 0 {
			t.Fatalf("seq %d reserves %d blocks without a capacity", id, s.blocks)
		}
		blocks += s.blocks
	}
	st := m.Stats()
	if st.ReservedTokens != blocks*r.cfg.BlockSize || st.ReservedTokens > r.cfg.CapacityTokens && r.cfg.CapacityTokens > 0 ||
		st.CapacityTokens != r.cfg.CapacityTokens || st.Usage() < 0 || st.Usage() > 1 {
		t.Fatalf("%d blocks reserved; stats %+v, usage %v", blocks, st, st.Usage())
	}
	if r.cfg.CapacityTokens > 0 && m.FreeTokens() != r.cfg.CapacityTokens-st.ReservedTokens {
		t.Fatalf("%d free tokens, %d reserved of %d", m.FreeTokens(), st.ReservedTokens, r.cfg.CapacityTokens)
	}
	if m.FreeSlots() != r.cfg.Slots-len(m.seqs) || st.UsedSlots != len(m.seqs) || st.HeldTokens != held {
		t.Fatalf("stats %+v, free %d, %d sequences holding %d", st, m.FreeSlots(), len(m.seqs), held)
	}
	// The cache.
	if m.bytes > r.cfg.CacheBytes {
		t.Fatalf("cache holds %d bytes, budget %d", m.bytes, r.cfg.CacheBytes)
	}
	rank := map[Hash]int{}
	var bytes int64
	prev := int32(none)
	for e := m.lruHead; e != none; e = m.entries[e].next {
		en := &m.entries[e]
		if en.prev != prev {
			t.Fatalf("LRU list broken at entry %d", e)
		}
		prev = e
		if m.index[en.hash] != e {
			t.Fatalf("entry %d is in the LRU list, not the index", e)
		}
		if en.kv.N < 1 || en.kv.N > r.cfg.BlockSize {
			t.Fatalf("entry %d holds %d positions", e, en.kv.N)
		}
		rank[en.hash] = len(rank)
		bytes += int64(en.kv.Size())
	}
	if prev != m.lruTail || len(rank) != len(m.index) || bytes != m.bytes {
		t.Fatalf("LRU list of %d entries (tail %d/%d), index %d, %d bytes counted, %d recorded", len(rank), prev, m.lruTail, len(m.index), bytes, m.bytes)
	}
	for h, e := range m.index {
		en := &m.entries[e]
		if en.depth == 0 {
			if en.parent != (Hash{}) {
				t.Fatalf("a first block with a parent")
			}
			continue
		}
		pr, ok := rank[en.parent]
		if !ok {
			t.Fatalf("block at depth %d is cached without its parent", en.depth)
		}
		if m.entries[m.index[en.parent]].depth != en.depth-1 {
			t.Fatalf("block at depth %d under a parent at depth %d", en.depth, m.entries[m.index[en.parent]].depth)
		}
		if pr < rank[h] {
			t.Fatalf("block at depth %d is more recent than its parent: eviction would orphan it", en.depth)
		}
	}
	// Events.
	if st.EventsPending > m.cfg.MaxEvents {
		t.Fatalf("%d events pending, bound %d", st.EventsPending, m.cfg.MaxEvents)
	}
	if total := st.StoredBlocks + st.Evictions; total != r.events.drained+uint64(st.EventsPending)+st.EventsDropped {
		t.Fatalf("%d blocks stored or evicted, %d events drained, %d pending, %d dropped", total, r.events.drained, st.EventsPending, st.EventsDropped)
	}
	if st.CachedBlocks != int(st.StoredBlocks-st.Evictions) {
		t.Fatalf("%d cached blocks, %d stored, %d evicted", st.CachedBlocks, st.StoredBlocks, st.Evictions)
	}
}

func key(toks []int32) string { return fmt.Sprint(toks) }
