package scheduler

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"

	"github.com/llmserve/llmserve/engine"
)

// fakeEngine models what matters of llama.cpp for the scheduler: a unified
// KV of cells (position, token, sequence set) that fails like llama.cpp when
// a batch's positions do not continue a slot, and a deterministic "model"
// whose next token is a hash of every token the slot can see. A scheduler
// or KV-manager bug that shows a sequence the wrong cells changes its
// output, so "batched equals solo" is a real check.
type fakeEngine struct {
	mu       sync.Mutex
	cells    []fakeCell
	samplers map[engine.SeqID]bool
	vocab    int32
	decoded  int
	steps    int
	added    []engine.SeqID // in the order the engine first saw them
	maxBatch int
	// block, when set, is called at the start of every step (tests use it
	// to pace the loop).
	block func()
}

type fakeCell struct {
	used  bool
	pos   int32
	token int32
	seqs  map[engine.Slot]bool
}

func newFakeEngine(cells int) *fakeEngine {
	return &fakeEngine{cells: make([]fakeCell, cells), samplers: map[engine.SeqID]bool{}, vocab: 500}
}

func (f *fakeEngine) Execute(ctx context.Context, step *engine.Step) (engine.StepResult, error) {
	if f.block != nil {
		f.block()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var res engine.StepResult
	for _, a := range step.Added {
		f.samplers[a.Seq] = true
		f.added = append(f.added, a.Seq)
	}
	for _, op := range step.MemOps {
		f.apply(op)
	}
	n := step.NumTokens()
	f.maxBatch = max(f.maxBatch, n)
	for _, ch := range step.Batch {
		lo, hi := f.posRange(ch.Slot)
		if ch.Pos != hi+1 {
			return res, fmt.Errorf("%w: slot %d holds [%d,%d], chunk starts at %d", engine.ErrInvalidBatch, ch.Slot, lo, hi, ch.Pos)
		}
		for j, t := range ch.Tokens {
			i := f.freeCell()
			if i < 0 {
				return res, engine.ErrKVFull
			}
			f.cells[i] = fakeCell{used: true, pos: ch.Pos + int32(j), token: t, seqs: map[engine.Slot]bool{ch.Slot: true}}
		}
		f.decoded += len(ch.Tokens)
		if ch.Sample {
			if !f.samplers[ch.Seq] {
				return res, fmt.Errorf("%w: no sampler for %d", engine.ErrInvalidBatch, ch.Seq)
			}
			tok := f.next(ch.Slot)
			for _, b := range ch.Ban {
				if tok == b {
					tok = (tok + 1) % f.vocab
				}
			}
			res.Samples = append(res.Samples, engine.Sample{Seq: ch.Seq, Token: tok})
		}
	}
	for _, id := range step.Removed {
		delete(f.samplers, id)
	}
	f.steps++
	return res, nil
}

func (f *fakeEngine) apply(op engine.MemOp) {
	p1 := op.P1
	if p1 < 0 {
		p1 = 1 << 30
	}
	p0 := max(op.P0, 0)
	for i := range f.cells {
		c := &f.cells[i]
		if !c.used || c.pos < p0 || c.pos >= p1 {
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

func (f *fakeEngine) posRange(s engine.Slot) (lo, hi int32) {
	lo, hi = -1, -1
	for _, c := range f.cells {
		if c.used && c.seqs[s] {
			if lo < 0 || c.pos < lo {
				lo = c.pos
			}
			hi = max(hi, c.pos)
		}
	}
	return lo, hi
}

func (f *fakeEngine) freeCell() int {
	for i := range f.cells {
		if !f.cells[i].used {
			return i
		}
	}
	return -1
}

// next hashes the tokens the slot sees, in position order. A greedy model:
// the same context always gives the same token.
func (f *fakeEngine) next(s engine.Slot) int32 {
	type pt struct{ pos, tok int32 }
	var seen []pt
	for _, c := range f.cells {
		if c.used && c.seqs[s] {
			seen = append(seen, pt{c.pos, c.token})
		}
	}
	sort.Slice(seen, func(i, j int) bool { return seen[i].pos < seen[j].pos })
	h := fnv.New32a()
	for i, p := range seen {
		if int32(i) != p.pos {
			return -1 // a hole: the output will be wrong and the test fails
		}
		fmt.Fprint(h, p.tok, ",")
	}
	return int32(h.Sum32() % uint32(f.vocab))
}

func (f *fakeEngine) usedCells() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.cells {
		if c.used {
			n++
		}
	}
	return n
}

func (f *fakeEngine) decodedTokens() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.decoded
}
