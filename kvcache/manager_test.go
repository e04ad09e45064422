package kvcache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newManager(t testing.TB, blocks, holders int) *Manager {
	t.Helper()
	m, err := New(Config{BlockSize: 4, NumBlocks: blocks, RunSlots: 4, HolderSlots: holders, MaxSeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func toks(s string) []int32 {
	out := make([]int32, len(s))
	for i, c := range s {
		out[i] = int32(c)
	}
	return out
}

func TestPrefixHitAfterFinish(t *testing.T) {
	m := newManager(t, 6, 1)
	a := toks("abcdefg")
	if cached, ok := m.Admit(1, AdmitOptions{Tokens: a, NewTokens: len(a), Count: true}); !ok || cached != 0 {
		t.Fatalf("admit A: cached %d ok %v", cached, ok)
	}
	if ops := m.DrainOps(); len(ops) != 0 {
		t.Fatalf("admit A ops = %v", ops)
	}
	m.Commit(1, a, len(a))
	want := []engine.MemOp{{Kind: engine.MemCopy, Src: 0, Dst: 4, P0: 0, P1: 4}}
	if ops := m.DrainOps(); !slices.Equal(ops, want) {
		t.Fatalf("commit ops = %v, want %v", ops, want)
	}
	m.Free(1)
	if ops := m.DrainOps(); !slices.Equal(ops, []engine.MemOp{{Kind: engine.MemRemove, Dst: 0, P0: -1, P1: -1}}) {
		t.Fatalf("free ops = %v", ops)
	}
	if st := m.Stats(); st.UsedBlocks != 0 || st.CachedBlocks != 1 || st.Usage() != 0 {
		t.Fatalf("stats after free = %+v", st)
	}

	b := toks("abcdxy")
	cached, ok := m.Admit(2, AdmitOptions{Tokens: b, NewTokens: 2, Count: true})
	if !ok || cached != 4 {
		t.Fatalf("admit B: cached %d ok %v", cached, ok)
	}
	slot, _ := m.Slot(2)
	want = []engine.MemOp{{Kind: engine.MemCopy, Src: 4, Dst: slot, P0: 0, P1: 4}}
	if ops := m.DrainOps(); !slices.Equal(ops, want) {
		t.Fatalf("hit ops = %v, want %v", ops, want)
	}
	if st := m.Stats(); st.QueryTokens != 13 || st.HitTokens != 4 || st.UsedBlocks != 2 || st.CachedBlocks != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// The last token is always computed, even when the whole prompt is cached.
func TestFullPromptHitLeavesLastToken(t *testing.T) {
	m := newManager(t, 8, 1)
	p := toks("abcdefgh")
	m.Admit(1, AdmitOptions{Tokens: p, NewTokens: len(p)})
	m.Commit(1, p, len(p))
	m.Free(1)
	cached, ok := m.Admit(2, AdmitOptions{Tokens: p, NewTokens: 4})
	if !ok || cached != 4 {
		t.Fatalf("cached %d ok %v, want 4", cached, ok)
	}
}

func TestSaltSeparatesNamespaces(t *testing.T) {
	m := newManager(t, 8, 2)
	p := toks("abcdefgh!")
	m.Admit(1, AdmitOptions{Tokens: p, Salt: "alice", NewTokens: len(p)})
	m.Commit(1, p, len(p))
	m.Free(1)
	if cached, _ := m.Admit(2, AdmitOptions{Tokens: p, Salt: "bob", NewTokens: len(p)}); cached != 0 {
		t.Fatalf("bob hit alice's cache: %d", cached)
	}
	if cached, _ := m.Admit(3, AdmitOptions{Tokens: p, Salt: "alice", NewTokens: 1}); cached != 8 {
		t.Fatalf("alice missed her cache: %d", cached)
	}
	if cached, _ := m.Admit(4, AdmitOptions{Tokens: p, NoCache: true, Salt: "alice", NewTokens: len(p)}); cached != 0 {
		t.Fatalf("NoCache hit: %d", cached)
	}
}

func TestEvictionOrder(t *testing.T) {
	m := newManager(t, 4, 2)
	// Two cached prefixes of two blocks each fill the cache.
	x, y := toks("xxxxXXXX."), toks("yyyyYYYY.")
	for id, p := range map[engine.SeqID][]int32{1: x, 2: y} {
		if _, ok := m.Admit(id, AdmitOptions{Tokens: p, NewTokens: 8}); !ok {
			t.Fatal("admit")
		}
		m.Commit(id, p, 8)
	}
	m.Free(1) // x's blocks go to the tail first
	m.Free(2)
	m.DrainOps()
	if st := m.Stats(); st.CachedBlocks != 4 || st.UsedBlocks != 0 {
		t.Fatalf("stats = %+v", st)
	}
	// One new block evicts the deepest block of the least recently freed
	// prefix: x's second block.
	z := toks("zzz")
	if _, ok := m.Admit(3, AdmitOptions{Tokens: z, NewTokens: 3}); !ok {
		t.Fatal("admit z")
	}
	ops := m.DrainOps()
	if len(ops) != 1 || ops[0].Kind != engine.MemRemove || ops[0].P0 != 4 || ops[0].P1 != 8 {
		t.Fatalf("evict ops = %v", ops)
	}
	if cached, _ := m.Admit(4, AdmitOptions{Tokens: x, NewTokens: 0}); cached != 4 {
		t.Fatalf("x keeps its first block: cached %d", cached)
	}
	if cached, _ := m.Admit(5, AdmitOptions{Tokens: y, NewTokens: 0}); cached != 8 {
		t.Fatalf("y keeps both blocks: cached %d", cached)
	}
	if st := m.Stats(); st.Evictions != 1 {
		t.Fatalf("evictions = %d", st.Evictions)
	}
}

func TestAdmitAndGrowFailWithoutSideEffects(t *testing.T) {
	m := newManager(t, 3, 1)
	if _, ok := m.Admit(1, AdmitOptions{Tokens: toks("abcdefghijklm"), NewTokens: 13}); ok {
		t.Fatal("admitted 4 blocks into 3")
	}
	if st := m.Stats(); st.UsedBlocks != 0 || m.Holds(1) || len(m.DrainOps()) != 0 {
		t.Fatalf("failed admit changed state: %+v", st)
	}
	if _, ok := m.Admit(1, AdmitOptions{Tokens: toks("abcdefgh"), NewTokens: 8}); !ok {
		t.Fatal("admit")
	}
	if m.Grow(1, 13) {
		t.Fatal("grew past capacity")
	}
	if !m.Grow(1, 12) || m.FreeBlocks() != 0 {
		t.Fatalf("grow to 12: free %d", m.FreeBlocks())
	}
	// No slot left: 4 run slots.
	for id := engine.SeqID(2); id < 5; id++ {
		m.Free(1)
		m.Admit(id, AdmitOptions{Tokens: toks("a"), NewTokens: 1})
	}
}

func TestNoSlotNoAdmit(t *testing.T) {
	m := newManager(t, 64, 1)
	for id := range engine.SeqID(4) {
		if _, ok := m.Admit(id, AdmitOptions{Tokens: toks("a"), NewTokens: 1}); !ok {
			t.Fatal("admit")
		}
	}
	if _, ok := m.Admit(9, AdmitOptions{Tokens: toks("a"), NewTokens: 1}); ok {
		t.Fatal("admitted a fifth sequence with four run slots")
	}
}

// fakeKV models llama.cpp's unified cache: cells with a position, a set of
// sequence ids and the content they were computed from.
type fakeKV struct {
	cells []fakeCell
}

type fakeCell struct {
	pos     int32
	content string // the tokens up to and including pos
	seqs    map[engine.Slot]bool
}

func (kv *fakeKV) apply(t *testing.T, ops []engine.MemOp) {
	for _, op := range ops {
		p1 := op.P1
		if p1 < 0 {
			p1 = 1 << 30
		}
		p0 := max(op.P0, 0)
		for i := range kv.cells {
			c := &kv.cells[i]
			if c.seqs == nil || c.pos < p0 || c.pos >= p1 {
				continue
			}
			switch op.Kind {
			case engine.MemCopy:
				if c.seqs[op.Src] {
					c.seqs[op.Dst] = true
				}
			case engine.MemRemove:
				delete(c.seqs, op.Dst)
				if len(c.seqs) == 0 {
					*c = fakeCell{}
				}
			}
		}
	}
}

// compute writes cells for positions [from, to) of tokens in slot.
func (kv *fakeKV) compute(t *testing.T, slot engine.Slot, tokens []int32, from, to int) {
	for p := from; p < to; p++ {
		i := slices.IndexFunc(kv.cells, func(c fakeCell) bool { return c.seqs == nil })
		if i < 0 {
			t.Fatalf("KV full: the manager admitted more than the cells hold")
		}
		kv.cells[i] = fakeCell{pos: int32(p), content: fmt.Sprint(tokens[:p+1]), seqs: map[engine.Slot]bool{slot: true}}
	}
}

// check verifies that slot holds exactly the positions [0, n) of tokens.
func (kv *fakeKV) check(t *testing.T, slot engine.Slot, tokens []int32, n int) {
	t.Helper()
	seen := make([]bool, n)
	for _, c := range kv.cells {
		if !c.seqs[slot] {
			continue
		}
		if int(c.pos) >= n || seen[c.pos] {
			t.Fatalf("slot %d holds position %d twice or past %d", slot, c.pos, n)
		}
		if want := fmt.Sprint(tokens[:c.pos+1]); c.content != want {
			t.Fatalf("slot %d position %d holds %s, want %s", slot, c.pos, c.content, want)
		}
		seen[c.pos] = true
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Fatalf("slot %d misses position %d of %d", slot, i, n)
	}
}

// A random workload of sequences with shared prefixes, run against a model
// of llama.cpp's cells: every running sequence always sees exactly its own
// tokens, cells never run out, and holders keep one block per depth.
func TestRandomWorkloadAgainstCellModel(t *testing.T) {
	const bs, blocks = 4, 24
	m, err := New(Config{BlockSize: bs, NumBlocks: blocks, RunSlots: 4, HolderSlots: 3, MaxSeqLen: 40})
	if err != nil {
		t.Fatal(err)
	}
	kv := &fakeKV{cells: make([]fakeCell, bs*blocks)}
	rng := rand.New(rand.NewPCG(1, 2))
	prefixes := [][]int32{toks("aaaabbbbccccdddd"), toks("aaaabbbbxxxx"), toks("qqqqrrrr")}
	type seq struct {
		tokens   []int32
		computed int
	}
	running := map[engine.SeqID]*seq{}
	next := engine.SeqID(0)
	hits := 0
	for iter := range 3000 {
		switch r := rng.IntN(10); {
		case r < 3 && len(running) < 4:
			p := slices.Clone(prefixes[rng.IntN(len(prefixes))])
			p = p[:rng.IntN(len(p))+1]
			for range rng.IntN(10) {
				p = append(p, int32('a'+rng.IntN(3)))
			}
			first := min(len(p), 1+rng.IntN(8))
			cached, ok := m.Admit(next, AdmitOptions{Tokens: p, NewTokens: first, Count: true})
			if !ok {
				continue
			}
			if cached%bs != 0 || cached >= len(p) {
				t.Fatalf("iter %d: cached %d of %d", iter, cached, len(p))
			}
			hits += cached
			kv.apply(t, m.DrainOps())
			slot, _ := m.Slot(next)
			kv.check(t, slot, p, cached)
			s := &seq{tokens: p, computed: cached}
			to := min(len(p), cached+first)
			kv.compute(t, slot, p, cached, to)
			s.computed = to
			m.Commit(next, p, to)
			running[next] = s
			next++
		case r < 8 && len(running) > 0:
			for id, s := range running {
				// Compute a few more tokens (prompt chunks or output).
				n := 1 + rng.IntN(5)
				if s.computed+n > 40 {
					break
				}
				for len(s.tokens) < s.computed+n {
					s.tokens = append(s.tokens, int32('a'+rng.IntN(3)))
				}
				if !m.Grow(id, s.computed+n) {
					// Preempt: free and forget, as the scheduler would.
					m.Free(id)
					delete(running, id)
					break
				}
				kv.apply(t, m.DrainOps())
				slot, _ := m.Slot(id)
				kv.compute(t, slot, s.tokens, s.computed, s.computed+n)
				s.computed += n
				m.Commit(id, s.tokens, s.computed)
				break
			}
		case len(running) > 0:
			for id := range running {
				m.Free(id)
				delete(running, id)
				break
			}
		}
		kv.apply(t, m.DrainOps())
		for id, s := range running {
			slot, _ := m.Slot(id)
			kv.check(t, slot, s.tokens, s.computed)
		}
		for h := range m.holders {
			byPos := map[int32]int{}
			for _, c := range kv.cells {
				if c.seqs[m.holders[h].slot] {
					byPos[c.pos]++
					if byPos[c.pos] > 1 {
						t.Fatalf("iter %d: holder %d has two cells at position %d", iter, h, c.pos)
					}
				}
			}
		}
		st := m.Stats()
		if st.UsedBlocks+st.CachedBlocks > blocks || st.CachedBlocks < 0 {
			t.Fatalf("iter %d: stats %+v", iter, st)
		}
	}
	if st := m.Stats(); hits == 0 || st.Evictions == 0 {
		t.Fatalf("the workload did not exercise the cache: %d hit tokens, %+v", hits, st)
	}
	for id := range running {
		m.Free(id)
	}
	kv.apply(t, m.DrainOps())
	if st := m.Stats(); st.UsedBlocks != 0 {
		t.Fatalf("blocks still used after freeing all: %+v", st)
	}
	// Only holders keep cells now, and exactly the cached blocks' cells.
	used := 0
	for _, c := range kv.cells {
		if c.seqs != nil {
			used++
			for s := range c.seqs {
				if int(s) < 4 {
					t.Fatalf("run slot %d still holds a cell", s)
				}
			}
		}
	}
	if st := m.Stats(); used != st.CachedBlocks*bs {
		t.Fatalf("%d cells held, %d cached blocks", used, st.CachedBlocks)
	}
}

func BenchmarkAdmitFree(b *testing.B) {
	m, err := New(Config{BlockSize: 16, NumBlocks: 4096, RunSlots: 64, HolderSlots: 192, MaxSeqLen: 4096})
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 1024)
	for i := range prompt {
		prompt[i] = int32(i % 500)
	}
	m.Admit(0, AdmitOptions{Tokens: prompt, NewTokens: len(prompt)})
	m.Commit(0, prompt, len(prompt))
	m.Free(0)
	b.ReportAllocs()
	id := engine.SeqID(1)
	for b.Loop() {
		m.Admit(id, AdmitOptions{Tokens: prompt, NewTokens: 16})
		m.Free(id)
		m.DrainOps()
		id++
	}
}

// Idle cached blocks beyond MaxCachedBlocks are evicted when their
// sequence is freed, least recently used first.
func TestMaxCachedBlocks(t *testing.T) {
	m, err := New(Config{BlockSize: 4, NumBlocks: 16, RunSlots: 4, HolderSlots: 4, MaxSeqLen: 64, MaxCachedBlocks: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, b := toks("aaaaAAAA."), toks("bbbbBBBB.")
	for id, p := range []([]int32){a, b} {
		m.Admit(engine.SeqID(id), AdmitOptions{Tokens: p, NewTokens: len(p)})
		m.Commit(engine.SeqID(id), p, len(p))
	}
	m.Free(0)
	if st := m.Stats(); st.CachedBlocks != 2 || st.Evictions != 0 {
		t.Fatalf("after freeing a: %+v", st)
	}
	m.DrainOps()
	m.Free(1) // four cached blocks: a's deepest goes first
	ops := m.DrainOps()
	if st := m.Stats(); st.CachedBlocks != 3 || st.Evictions != 1 {
		t.Fatalf("after freeing b: %+v", st)
	}
	last := ops[len(ops)-1]
	if last.Kind != engine.MemRemove || last.P0 != 4 || last.P1 != 8 {
		t.Fatalf("eviction op = %+v", last)
	}
	if cached, _ := m.Admit(2, AdmitOptions{Tokens: a, NewTokens: 1}); cached != 4 {
		t.Fatalf("a keeps its first block: cached %d", cached)
	}
	if cached, _ := m.Admit(3, AdmitOptions{Tokens: b, NewTokens: 1}); cached != 8 {
		t.Fatalf("b keeps both blocks: cached %d", cached)
	}
}
