//go:build cgo

package llamacpp

/*
#include "llama.h"
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"slices"

	"github.com/llmserve/llmserve/engine"
)

// Draft-model speculation
//
// A context made with ContextParams.Draft owns a second context over the
// draft model (a drafter): the same slots, one KV stream each, of the
// same capacity. The scheduler says how many draft tokens a decode chunk
// may carry (engine.Chunk.DraftLimit); the drafter proposes them at the
// start of Execute, writes them into the chunk's Draft, and the step then
// runs exactly as with drafts the scheduler proposed (decode.go: the
// target verifies them with the sequence's own chain and rolls rejected
// rows back), so the output does not depend on the draft model.
//
// The drafter keeps, per sequence, the tokens the target's slot holds:
// NewSequence.History (the prompt), then every chunk's tokens and the
// accepted draft tokens. A chunk's tokens are taken as the truth for its
// positions: where they differ from what was recorded (they never do,
// unless the scheduler rewrote a sequence), the record and the draft's KV
// are cut there. Per draft slot it knows which sequence's tokens the
// stream holds and how many (draftSlot). A prompt chunk is computed in
// the draft's stream in the same step; before proposing, a decoding
// chunk's draft stream is caught up to the chunk's last token. Either
// way the positions the draft has not computed (a prefix the target
// restored from the cache, everything after a preemption, the one or two
// tokens of the step before, or the decodes of steps without drafts) are
// computed from the token record, the rows of all these sequences packed
// into as few llama_decode calls as the batch takes; the last row of a
// drafting chunk gives its first draft token.
// Then each further draft position is one llama_decode over all drafting
// sequences, one row each. Drafts are greedy (the first largest logit,
// no sampler chain: Ban, grammars and penalties apply in the
// verification). After the verification the draft's stream keeps the
// accepted tokens it computed and drops the rest. Clears and Resize are
// mirrored; a Restore leaves the draft's stream empty, to be computed
// from the record when the sequence next drafts. A sequence with media
// (negative placeholder tokens) never drafts: the draft model cannot
// compute embeddings it did not encode. A failed draft evaluation costs
// only the draft (the chunk then carries fewer or no draft tokens).

// drafter is the draft model's context and what its streams hold.
type drafter struct {
	c     *Context // over the draft model; its Execute is never called
	seqs  map[engine.SeqID]*draftSeq
	slots []draftSlot
}

// draftSeq is what the drafter knows of a sequence.
type draftSeq struct {
	// tokens are the sequence's tokens from position 0: at least those
	// the target's slot holds.
	tokens []int32
	// media is set when a token is a media placeholder: no drafts.
	media bool
}

// draftSlot says what a draft stream holds: positions [0, n) of seq's
// tokens (nothing when n is 0).
type draftSlot struct {
	seq engine.SeqID
	n   int
}

// drafting is one chunk's draft being made, or a prompt chunk the draft's
// stream computes too (k 0).
type drafting struct {
	ch   *engine.Chunk
	seq  *draftSeq
	k    int // draft tokens wanted
	end  int // positions known: Pos+len(Tokens)
	ok   bool
	next int32 // the draft token the last evaluation proposed
}

// CheckDraftVocab reports why draft cannot propose tokens for target: a
// draft model must have the target's vocabulary, token for token.
func CheckDraftVocab(target, draft *Model) error {
	if a, b := target.info.NVocab, draft.info.NVocab; a != b {
		return fmt.Errorf("the draft model's vocabulary has %d tokens, the target's %d", b, a)
	}
	for i := range target.specialPieces {
		if !slices.Equal(target.specialPieces[i], draft.specialPieces[i]) {
			return fmt.Errorf("token %d is %q in the draft model's vocabulary and %q in the target's", i, draft.specialPieces[i], target.specialPieces[i])
		}
	}
	return nil
}

// newDrafter builds the draft context for target, a context of p; it
// computes with target's thread pools.
func newDrafter(target *Context, p ContextParams) (*drafter, error) {
	if err := CheckDraftVocab(target.model, p.Draft); err != nil {
		return nil, err
	}
	dp := p
	dp.Draft, dp.LoRA, dp.Pooling = nil, false, ""
	dc, err := newContextWith(p.Draft, dp, target)
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	return &drafter{c: dc, seqs: make(map[engine.SeqID]*draftSeq), slots: make([]draftSlot, dc.streams)}, nil
}

func (d *drafter) close() error { return d.c.Close() }

// add records a new sequence's history.
func (d *drafter) add(n *engine.NewSequence) {
	s := &draftSeq{tokens: slices.Clone(n.History)}
	s.media = slices.ContainsFunc(s.tokens, func(t int32) bool { return t < 0 })
	d.seqs[n.Seq] = s
	// A sequence added again starts over: no stream holds its tokens.
	for i := range d.slots {
		if d.slots[i].seq == n.Seq && d.slots[i].n > 0 {
			d.empty(engine.Slot(i))
		}
	}
}

// empty clears a draft stream.
func (d *drafter) empty(s engine.Slot) {
	if int(s) < len(d.slots) {
		d.c.clearSlot(s)
		d.slots[s] = draftSlot{}
	}
}

// record notes a chunk's tokens as its sequence's, cutting the record and
// any draft stream holding it where they differ. It returns the
// sequence's record, or nil when its tokens before the chunk are not
// known.
func (d *drafter) record(ch *engine.Chunk) *draftSeq {
	s := d.seqs[ch.Seq]
	if s == nil {
		return nil
	}
	pos := int(ch.Pos)
	if pos > len(s.tokens) {
		// The target holds positions the drafter never saw.
		s.tokens, s.media = nil, true
		return nil
	}
	for j, t := range ch.Tokens {
		p := pos + j
		if p < len(s.tokens) {
			if s.tokens[p] == t {
				continue
			}
			s.tokens = s.tokens[:p]
			d.cut(ch.Seq, p)
		}
		s.tokens = append(s.tokens, t)
		if t < 0 {
			s.media = true
		}
	}
	return s
}

// cut makes every draft stream holding seq hold at most n of its
// positions (the KV beyond is removed when the stream is next used).
func (d *drafter) cut(seq engine.SeqID, n int) {
	for i := range d.slots {
		if d.slots[i].seq == seq {
			d.slots[i].n = min(d.slots[i].n, n)
		}
	}
}

// propose fills the Draft of the batch's chunks that have a DraftLimit
// and no Draft, and records every chunk's tokens. Prompt chunks (more
// than one token, or no sample) are computed in the draft's streams too,
// in this step, so that a sequence's first drafting step does not carry
// its whole prompt; a decode chunk without a DraftLimit is left for the
// next step that drafts to catch up.
func (d *drafter) propose(batch []engine.Chunk, failed map[engine.SeqID]bool) []*drafting {
	var ds []*drafting
	for i := range batch {
		ch := &batch[i]
		if failed[ch.Seq] {
			continue
		}
		s := d.record(ch)
		drafts := ch.DraftLimit > 0 && ch.Sample && len(ch.Draft) == 0
		prompt := len(ch.Tokens) > 1 || !ch.Sample
		if s == nil || s.media || !drafts && !prompt || !d.c.validSlot(ch.Slot) {
			continue
		}
		end := int(ch.Pos) + len(ch.Tokens)
		k := 0
		if drafts {
			k = min(ch.DraftLimit, d.c.slotTokens-end)
		}
		if k <= 0 && !prompt || end < 1 {
			continue
		}
		if sl := &d.slots[ch.Slot]; sl.seq != ch.Seq || sl.n > end {
			if sl.seq != ch.Seq {
				d.empty(ch.Slot)
			}
			sl.seq, sl.n = ch.Seq, min(sl.n, end)
		}
		ds = append(ds, &drafting{ch: ch, seq: s, k: k, end: end, ok: true})
	}
	if len(ds) == 0 {
		return nil
	}
	// In slot order: llama.cpp evaluates the rows of consecutive streams
	// together, and only in increasing order (decode.go).
	slices.SortFunc(ds, func(a, b *drafting) int { return int(a.ch.Slot) - int(b.ch.Slot) })
	d.catchUp(ds)
	// Each further draft position: one evaluation over all sequences,
	// the streams between theirs filled with a throwaway row each where
	// they have room, removed after the call (as decodeSingles does).
	for i := 1; ; i++ {
		var rows []row
		for _, g := range ds {
			if !g.ok || g.k == 0 || len(g.ch.Draft) >= g.k {
				continue
			}
			g.ch.Draft = append(g.ch.Draft, g.next)
			if len(g.ch.Draft) == g.k {
				continue
			}
			if n := len(rows); n > 0 {
				rows = d.fillGap(rows, rows[n-1].slot, g.ch.Slot, g.next)
			}
			rows = append(rows, row{slot: g.ch.Slot, pos: int32(g.end + i - 1), token: g.next, output: true, chunk: g.ch})
		}
		if len(rows) == 0 {
			break
		}
		if err := d.c.evaluate(rows); err != nil {
			// The drafts so far stand; the stream is cut in settle.
			d.c.undo(rows)
			for _, r := range rows {
				if g := draftingOf(ds, r.chunk); g != nil {
					g.ok, g.k = false, len(g.ch.Draft)
				}
			}
			continue
		}
		for j, r := range rows {
			if g := draftingOf(ds, r.chunk); g != nil {
				g.next = d.argmax(j)
			} else {
				C.llama_memory_seq_rm(d.c.mem, C.llama_seq_id(r.slot), C.llama_pos(r.pos), -1)
			}
		}
	}
	return ds
}

// fillGap appends a throwaway row for every stream strictly between
// slots a and b when all of them have room for one, so that the rows of
// a and b stay in one evaluation.
func (d *drafter) fillGap(rows []row, a, b engine.Slot, tok int32) []row {
	for s := a + 1; s < b; s++ {
		if !d.c.hasRoom(s) {
			return rows
		}
	}
	for s := a + 1; s < b; s++ {
		rows = append(rows, d.c.throwaway(s, tok))
	}
	return rows
}

// draftingOf is the drafting of chunk ch, or nil (a throwaway row).
func draftingOf(ds []*drafting, ch *engine.Chunk) *drafting {
	if ch == nil {
		return nil
	}
	for _, g := range ds {
		if g.ch == ch {
			return g
		}
	}
	return nil
}

// catchUp computes the positions the draft streams lack up to each
// chunk's last token, whose row proposes the first draft token.
func (d *drafter) catchUp(ds []*drafting) {
	var rows []row
	var outs []*drafting
	flush := func() {
		if len(rows) == 0 {
			return
		}
		if err := d.c.evaluate(rows); err != nil {
			d.c.undo(rows)
			for _, r := range rows {
				for _, g := range ds {
					if g.ch == r.chunk && g.ok {
						g.ok = false
						d.empty(g.ch.Slot)
					}
				}
			}
		} else {
			for j, r := range rows {
				if r.output {
					outs[j].next = d.argmax(j)
				}
			}
		}
		rows, outs = rows[:0], outs[:0]
	}
	for _, g := range ds {
		sl := &d.slots[g.ch.Slot]
		C.llama_memory_seq_rm(d.c.mem, C.llama_seq_id(g.ch.Slot), C.llama_pos(sl.n), -1)
		if sl.n == g.end && g.k > 0 {
			// The last token is computed already, its logits are not
			// kept: compute it again.
			sl.n--
			C.llama_memory_seq_rm(d.c.mem, C.llama_seq_id(g.ch.Slot), C.llama_pos(sl.n), -1)
		}
		for p := sl.n; p < g.end; p++ {
			if len(rows) == d.c.batchCap {
				flush()
				if !g.ok {
					break
				}
			}
			rows = append(rows, row{slot: g.ch.Slot, pos: int32(p), token: g.seq.tokens[p], output: g.k > 0 && p == g.end-1, chunk: g.ch})
			outs = append(outs, g)
		}
		if g.ok {
			sl.n = g.end // a failed flush empties the stream again
		}
	}
	flush()
}

// argmax is the greedy draft token after row i of the draft's last
// evaluation.
func (d *drafter) argmax(i int) int32 {
	lg := d.c.logits(i)
	if lg == nil {
		return 0
	}
	return int32(C.llmserve_argmax((*C.float)(&lg[0]), C.int32_t(len(lg))))
}

// settle applies the verification: each drafting chunk's stream keeps
// the draft tokens it computed that were accepted, a failed sequence's
// stream is emptied, and every sampled sequence's record gets its
// accepted tokens.
func (d *drafter) settle(batch []engine.Chunk, ds []*drafting, res *engine.StepResult, failed map[engine.SeqID]bool) {
	accepted := make(map[engine.SeqID][]int32, len(res.Samples))
	for i := range res.Samples {
		accepted[res.Samples[i].Seq] = res.Samples[i].Accepted
	}
	for _, g := range ds {
		sl := &d.slots[g.ch.Slot]
		if failed[g.ch.Seq] || sl.seq != g.ch.Seq || !g.ok && len(g.ch.Draft) == 0 {
			d.empty(g.ch.Slot)
			continue
		}
		a := len(accepted[g.ch.Seq])
		// The stream computed the draft tokens but the last (none when a
		// draft evaluation failed: it may hold some, cut here).
		computed := max(len(g.ch.Draft)-1, 0)
		if !g.ok {
			computed = 0
		}
		sl.n = g.end + min(a, computed)
		C.llama_memory_seq_rm(d.c.mem, C.llama_seq_id(g.ch.Slot), C.llama_pos(sl.n), -1)
	}
	for i := range batch {
		ch := &batch[i]
		a := accepted[ch.Seq]
		s := d.seqs[ch.Seq]
		if len(a) == 0 || s == nil || failed[ch.Seq] {
			continue
		}
		if end := int(ch.Pos) + len(ch.Tokens); end <= len(s.tokens) {
			for j, t := range a {
				if p := end + j; p < len(s.tokens) && s.tokens[p] != t {
					s.tokens = s.tokens[:p]
					d.cut(ch.Seq, p)
				}
				if p := end + j; p >= len(s.tokens) {
					s.tokens = append(s.tokens, t)
				}
			}
		}
	}
	d.c.noteKVUse()
}

// remove forgets a sequence that is gone.
func (d *drafter) remove(seq engine.SeqID) { delete(d.seqs, seq) }

// resize mirrors the target's number of slots: streams of slots n and
// above are emptied first (the target's are empty).
func (d *drafter) resize(n int) error {
	for s := n; s < len(d.slots); s++ {
		d.empty(engine.Slot(s))
	}
	if err := d.c.Resize(n); err != nil {
		return err
	}
	slots := make([]draftSlot, d.c.streams)
	copy(slots, d.slots)
	d.slots = slots
	return nil
}
