package kvcache

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/enginetest"
)

// TestDataDriven runs the scripts in testdata/ against a Manager and an
// enginetest.Fake that plays the engine's KV memory. Regenerate the
// expected output with
//
//	go test ./kvcache/ -run TestDataDriven -rewrite
//
// and read the diff.
//
// Tokens are written as lowercase letters, one token each (a=1 ... z=26),
// and printed back the same way; cached blocks are named h0, h1, ... in
// the order they entered the cache.
//
// Commands:
//
//	new slots=N slot-tokens=N block=N (cache-blocks=N | cache-bytes=N) [max-events=N]
//	    [capacity=N]
//	    a fresh Manager and Fake; cache-blocks is a budget of that many
//	    full blocks (4 bytes per position in the fake's layout); capacity
//	    is CapacityTokens (the fake's too).
//	admit seq=N tokens=abc [salt=S] [nocache] [nocount]
//	    Admit; prints the slot and the cached tokens, or that no slot is
//	    free, or that the free blocks do not hold the tokens.
//	grow seq=N to=N
//	    Grow to that many positions; prints the reservation.
//	fits tokens=N
//	    FitsTokens.
//	append seq=N tokens=abc
//	    the sequence's known tokens grow (sampled output).
//	compute seq=N to=N
//	    decodes the sequence's tokens from what its slot holds up to
//	    position to on the fake (one chunk), then Commit.
//	offer seq=N
//	free seq=N [offer]
//	ops [fail-exports]
//	    StepOps, applied on the fake (exports, clears, restores); prints
//	    them. The exported KV waits for store. fail-exports makes every
//	    export come back nil, as a failed one does.
//	store [only=(tags)]
//	    Store of what ops exported (or only the listed tags), then the
//	    cache as cache prints it.
//	cache
//	    the LRU list, least recently used first, and the bytes used.
//	settled seq=N tokens=N
//	slot seq=N
//	stats
//	events
//	    DrainEvents.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *kvHarness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) (out string) {
			if d.Cmd == "new" {
				h = &kvHarness{}
			} else if h == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			defer func() {
				if r := recover(); r != nil {
					out = fmt.Sprintf("panic: %v\n", r)
				}
			}()
			return h.run(t, d)
		})
	})
}

type kvHarness struct {
	m       *Manager
	fake    *enginetest.Fake
	tokens  map[engine.SeqID][]int32
	names   map[Hash]string
	pending []engine.Exported
}

func (h *kvHarness) run(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	seq := func() engine.SeqID {
		var id uint64
		d.ScanArgs(t, "seq", &id)
		return engine.SeqID(id)
	}
	switch d.Cmd {
	case "new":
		var cfg Config
		d.ScanArgs(t, "slots", &cfg.Slots)
		d.ScanArgs(t, "slot-tokens", &cfg.SlotTokens)
		d.ScanArgs(t, "block", &cfg.BlockSize)
		if d.HasArg("cache-blocks") {
			var n int64
			d.ScanArgs(t, "cache-blocks", &n)
			cfg.CacheBytes = n * int64(cfg.BlockSize) * 4
		}
		d.MaybeScanArgs(t, "cache-bytes", &cfg.CacheBytes)
		d.MaybeScanArgs(t, "max-events", &cfg.MaxEvents)
		d.MaybeScanArgs(t, "capacity", &cfg.CapacityTokens)
		m, err := New(cfg)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		h.m = m
		h.fake = &enginetest.Fake{Slots: cfg.Slots, SlotTokens: cfg.SlotTokens, CapacityTokens: cfg.CapacityTokens}
		h.tokens = map[engine.SeqID][]int32{}
		h.names = map[Hash]string{}
		return ""

	case "admit":
		id := seq()
		opt := AdmitOptions{Tokens: letters(t, d), NoCache: d.HasArg("nocache"), Count: !d.HasArg("nocount")}
		d.MaybeScanArgs(t, "salt", &opt.Salt)
		cached, ok := h.m.Admit(id, opt)
		if !ok {
			if h.m.FreeSlots() > 0 {
				return fmt.Sprintf("no room: %d tokens, %d free\n", len(opt.Tokens), h.m.FreeTokens())
			}
			return "no free slot\n"
		}
		h.tokens[id] = opt.Tokens
		slot, _ := h.m.Slot(id)
		return fmt.Sprintf("slot %d, cached %d\n", slot, cached)

	case "append":
		id := seq()
		h.tokens[id] = append(h.tokens[id], letters(t, d)...)
		return fmt.Sprintf("%s\n", fmtTokens(h.tokens[id]))

	case "compute":
		id := seq()
		var to int
		d.ScanArgs(t, "to", &to)
		s, ok := h.m.seqs[id]
		if !ok {
			return "not held\n"
		}
		toks := h.tokens[id]
		step := &engine.Step{Batch: []engine.Chunk{{Seq: id, Slot: s.slot, Pos: int32(s.held), Tokens: toks[s.held:to]}}}
		res, err := h.fake.Execute(context.Background(), step)
		if err != nil {
			d.Fatalf(t, "execute: %v", err)
		}
		if len(res.Failures) > 0 {
			return fmt.Sprintf("failed: %v\n", res.Failures[0].Err)
		}
		h.m.Commit(id, toks, to)
		return fmt.Sprintf("slot %d holds %s\n", s.slot, fmtTokens(toks[:h.fake.SlotLen(s.slot)]))

	case "offer":
		h.m.Offer(seq())
		return ""

	case "grow":
		id := seq()
		var to int
		d.ScanArgs(t, "to", &to)
		ok := h.m.Grow(id, to)
		return fmt.Sprintf("%t: reserved %d, free %d\n", ok, h.m.Reserved(id), h.m.FreeTokens())

	case "fits":
		var n int
		d.ScanArgs(t, "tokens", &n)
		return fmt.Sprintf("%t\n", h.m.FitsTokens(n))

	case "free":
		h.m.Free(seq(), d.HasArg("offer"))
		return ""

	case "ops":
		exports, clears, restores := h.m.StepOps()
		step := &engine.Step{Exports: exports, Clears: clears, Restores: restores}
		res, err := h.fake.Execute(context.Background(), step)
		if err != nil {
			d.Fatalf(t, "execute: %v", err)
		}
		if d.HasArg("fail-exports") {
			for i := range res.Exported {
				res.Exported[i].KV = nil
			}
		}
		for i, e := range exports {
			fmt.Fprintf(&b, "export tag=%d seq=%d slot=%d [%d,%d)", e.Tag, e.Seq, e.Slot, e.From, e.To)
			if kv := res.Exported[i].KV; kv != nil {
				fmt.Fprintf(&b, ": %s", fmtBlocks(kvTokens(kv), h.m.cfg.BlockSize))
			} else {
				b.WriteString(": failed")
			}
			b.WriteString("\n")
		}
		for _, c := range clears {
			fmt.Fprintf(&b, "clear slot=%d\n", c)
		}
		for _, r := range restores {
			var parts []string
			for _, kv := range r.KV {
				parts = append(parts, fmtTokens(kvTokens(kv)))
			}
			fmt.Fprintf(&b, "restore seq=%d slot=%d: %s\n", r.Seq, r.Slot, strings.Join(parts, " "))
		}
		for _, f := range res.Failures {
			fmt.Fprintf(&b, "failure seq=%d: %v\n", f.Seq, f.Err)
		}
		h.pending = append(h.pending, res.Exported...)
		if b.Len() == 0 {
			return "nothing\n"
		}
		return b.String()

	case "store":
		var only map[uint64]bool
		if arg, ok := d.Arg("only"); ok {
			only = map[uint64]bool{}
			for _, v := range arg.Vals {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					d.Fatalf(t, "only: %v", err)
				}
				only[n] = true
			}
		}
		var exported, keep []engine.Exported
		for _, x := range h.pending {
			if only == nil || only[x.Tag] {
				exported = append(exported, x)
			} else {
				keep = append(keep, x)
			}
		}
		h.pending = keep
		// Name the entries in the order Store inserts them: a block under
		// a cached (or just inserted) parent, from a valid export; then the
		// tail under the last of them.
		known := map[Hash]bool{}
		for hs := range h.m.index {
			known[hs] = true
		}
		for _, x := range exported {
			p, ok := h.m.pending[x.Tag]
			if !ok || x.KV == nil || x.KV.N != (p.to-p.from)*h.m.cfg.BlockSize+p.tailLen {
				continue
			}
			chain := true
			for i, hs := range p.hashes {
				if known[hs] {
					continue
				}
				if i < p.from {
					chain = false
					break
				}
				known[hs] = true
				h.name(hs)
			}
			// The tail, if any, after its blocks.
			if chain && p.tailLen > 0 && !known[p.tail] {
				known[p.tail] = true
				h.name(p.tail)
			}
		}
		h.m.Store(exported)
		return h.cache()

	case "cache":
		return h.cache()

	case "settled":
		var n int
		d.ScanArgs(t, "tokens", &n)
		return fmt.Sprintf("%t\n", h.m.Settled(seq(), n))

	case "slot":
		slot, ok := h.m.Slot(seq())
		if !ok {
			return "not held\n"
		}
		return fmt.Sprintf("slot %d\n", slot)

	case "stats":
		s := h.m.Stats()
		fmt.Fprintf(&b, "slots %d/%d held-tokens=%d usage=%.3f free=%d\n", s.UsedSlots, s.Slots, s.HeldTokens, s.Usage(), h.m.FreeSlots())
		fmt.Fprintf(&b, "cache blocks=%d bytes=%d/%d stored=%d evicted=%d\n", s.CachedBlocks, s.CachedBytes, s.CacheBytesLimit, s.StoredBlocks, s.Evictions)
		fmt.Fprintf(&b, "query-tokens=%d hit-tokens=%d\n", s.QueryTokens, s.HitTokens)
		fmt.Fprintf(&b, "events pending=%d dropped=%d\n", s.EventsPending, s.EventsDropped)
		if s.CapacityTokens > 0 {
			fmt.Fprintf(&b, "tokens reserved=%d/%d free=%d\n", s.ReservedTokens, s.CapacityTokens, h.m.FreeTokens())
		}
		return b.String()

	case "events":
		for _, e := range h.m.DrainEvents() {
			fmt.Fprintf(&b, "%s %s depth=%d", e.Kind, h.name(e.Hash), e.Depth)
			if e.Kind == BlockStored {
				parent := "-"
				if e.Parent != (Hash{}) {
					parent = h.name(e.Parent)
				}
				fmt.Fprintf(&b, " parent=%s", parent)
			}
			b.WriteString("\n")
		}
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// name returns the short name of a block hash, naming it on first sight.
func (h *kvHarness) name(hs Hash) string {
	if n, ok := h.names[hs]; ok {
		return n
	}
	n := fmt.Sprintf("h%d", len(h.names))
	h.names[hs] = n
	return n
}

// cache prints the LRU list, least recently used first.
func (h *kvHarness) cache() string {
	var b strings.Builder
	var lru []string
	for e := h.m.lruHead; e != none; e = h.m.entries[e].next {
		lru = append(lru, h.name(h.m.entries[e].hash))
	}
	fmt.Fprintf(&b, "lru: %s\n", strings.Join(lru, " "))
	for e := h.m.lruHead; e != none; e = h.m.entries[e].next {
		en := &h.m.entries[e]
		parent := "-"
		if en.parent != (Hash{}) {
			parent = h.name(en.parent)
		}
		fmt.Fprintf(&b, "  %s depth=%d parent=%s %s\n", h.name(en.hash), en.depth, parent, fmtTokens(kvTokens(en.kv)))
	}
	fmt.Fprintf(&b, "bytes %d/%d\n", h.m.bytes, h.m.cfg.CacheBytes)
	return b.String()
}

// letters parses the tokens argument: a word of lowercase letters, a=1.
func letters(t *testing.T, d *datadriven.TestData) []int32 {
	var s string
	d.ScanArgs(t, "tokens", &s)
	toks := make([]int32, 0, len(s))
	for _, c := range s {
		if c < 'a' || c > 'z' {
			d.Fatalf(t, "token %q is not a lowercase letter", c)
		}
		toks = append(toks, c-'a'+1)
	}
	return toks
}

func fmtTokens(toks []int32) string {
	var b strings.Builder
	for _, t := range toks {
		if t >= 1 && t <= 26 {
			b.WriteByte(byte('a' + t - 1))
		} else {
			fmt.Fprintf(&b, "<%d>", t)
		}
	}
	return b.String()
}

// fmtBlocks prints tokens in groups of a block.
func fmtBlocks(toks []int32, bs int) string {
	var parts []string
	for i := 0; i < len(toks); i += bs {
		parts = append(parts, fmtTokens(toks[i:min(i+bs, len(toks))]))
	}
	return strings.Join(parts, " ")
}

// kvTokens decodes KV in the fake's layout (the token id, four bytes per
// position).
func kvTokens(kv *engine.KV) []int32 {
	toks := make([]int32, kv.N)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(kv.Data[4*i:]))
	}
	return toks
}

// kvOf fabricates KV in the fake's layout.
func kvOf(toks []int32) *engine.KV {
	kv := &engine.KV{Layout: enginetest.Layout, N: len(toks), Data: make([]byte, 0, 4*len(toks))}
	for _, t := range toks {
		kv.Data = binary.LittleEndian.AppendUint32(kv.Data, uint32(t))
	}
	return kv
}
