//go:build cgo

package llamacpp

/*
#include "llama.h"
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
)

// How a step's batch becomes llama_decode calls
//
// With one KV stream per slot (kv_unified off), llama.cpp splits a batch
// into evaluations ("ubatches") that hold an equal number of tokens from
// each of a run of consecutive streams. A sequence's numbers must not
// depend on what else runs, and for some weight types ggml computes a
// matrix product of one column with other kernels (matrix-vector, a
// different summation order) than products of two or more (llamafile's
// sgemm, where every output element is summed the same way whatever the
// width): F32 and F16 weights do; Q8_0 weights do not (both kernels sum
// the same blocks the same way). probePadding finds out at start-up, by
// comparing a row evaluated alone and beside another bit for bit, and
// sets c.pad when they differ. The binding shapes every evaluation itself:
//
//   - chunks of one token (decodes, and short tails of prompts) go in one
//     llama_decode, sorted by slot; a gap between two of their slots is
//     filled with a throwaway token per stream (appended at the stream's
//     next position, whatever the stream holds), so the run stays one
//     evaluation. Throwaway tokens are removed right after the call, which
//     leaves their streams as they were.
//   - longer chunks of one length in consecutive slots, as many as fit in
//     the micro-batch, go in one llama_decode (one evaluation: prompts
//     that arrive together, such as a wave of requests sharing a cached
//     prefix, are computed as one wider matrix product); every other
//     longer chunk gets llama_decode calls of its own, one evaluation each
//     (at most the micro-batch size; with c.pad, never a last piece of one
//     token). A row's numbers do not depend on the evaluation's width:
//     sgemm sums every output element the same way whatever the width.
//   - with c.pad, a run of one token gets a throwaway neighbour, and every
//     evaluation has at least two output rows: when fewer rows are asked
//     for, another row's logits are computed and ignored.
//
// Within an evaluation each row's attention reads only its own stream, and
// a stream holds its sequence's positions 0, 1, ... in order, so a row's
// result depends only on its sequence's tokens. A failed llama_decode
// removes what the call added and is retried in halves until the failing
// chunk is found; only that sequence fails.
//
// Draft tokens (engine.Chunk.Draft) are rows of their chunk after Tokens:
// a chunk with a draft is a chunk of len(Tokens)+len(Draft) rows, grouped
// and split like any other, with an output at its last token and at every
// draft token. Because a row's numbers depend only on its sequence's
// tokens before it, the logits after an accepted draft token are bit for
// bit those a step of that token alone would have computed; collect runs
// the acceptance (sampleAt, in order) and the rejected rows are removed
// from the slot (rollback) before the step ends.

// row is one token of a llama_decode call.
type row struct {
	slot   engine.Slot
	pos    int32
	token  int32
	output bool
	chunk  *engine.Chunk // nil for a throwaway token
	// embd, when not nil, is the row's input embedding (a media position):
	// token is then unused. An evaluation's rows are all tokens or all
	// embeddings.
	embd []float32
}

// chunkOut collects what a chunk produced, to report in Batch order.
type chunkOut struct {
	sample  *engine.Sample
	targets []engine.Logprobs
	// accepted and acceptedLP are the draft tokens accepted so far, while
	// the sample is being drawn; they move into sample when it is done.
	accepted   []int32
	acceptedLP []engine.Logprobs
}

// chunkLen is the number of rows of a chunk: its tokens, then its draft.
func chunkLen(ch *engine.Chunk) int { return len(ch.Tokens) + len(ch.Draft) }

// chunkToken is row j's token: Tokens, then Draft.
func chunkToken(ch *engine.Chunk, j int) int32 {
	if j < len(ch.Tokens) {
		return ch.Tokens[j]
	}
	return ch.Draft[j-len(ch.Tokens)]
}

// decodeBatch validates the chunks, evaluates them and samples.
func (c *Context) decodeBatch(chunks []engine.Chunk, failed map[engine.SeqID]bool, fail func(engine.SeqID, error), res *engine.StepResult) {
	var singles, multis, media []*engine.Chunk
	seen := make(map[engine.Slot]bool, len(chunks))
	for i := range chunks {
		ch := &chunks[i]
		if failed[ch.Seq] {
			continue
		}
		if err := c.checkChunk(ch, seen); err != nil {
			fail(ch.Seq, err)
			continue
		}
		if len(ch.Media) > 0 {
			media = append(media, ch)
		} else if chunkLen(ch) == 1 {
			singles = append(singles, ch)
		} else {
			multis = append(multis, ch)
		}
	}
	outs := make(map[engine.SeqID]*chunkOut, len(chunks))
	for _, ch := range media {
		c.decodeMedia(ch, fail, outs)
	}
	c.decodeSingles(singles, fail, outs)
	for _, g := range c.groupChunks(multis) {
		if len(g) == 1 || !c.decodeGroup(g, fail, outs) {
			for _, ch := range g {
				c.decodeChunk(ch, fail, outs)
			}
		}
	}
	for i := range chunks {
		ch := &chunks[i]
		o := outs[ch.Seq]
		if o == nil || failed[ch.Seq] {
			continue
		}
		if ch.Targets != nil {
			res.PromptLogprobs = append(res.PromptLogprobs, engine.PromptLogprobs{Seq: ch.Seq, Logprobs: o.targets})
		}
		if o.sample != nil {
			res.Samples = append(res.Samples, *o.sample)
		}
	}
}

// checkChunk reports why a chunk cannot be decoded, or nil.
func (c *Context) checkChunk(ch *engine.Chunk, seen map[engine.Slot]bool) error {
	switch {
	case !c.validSlot(ch.Slot):
		return fmt.Errorf("%w: slot %d outside [0, %d)", engine.ErrInvalidBatch, ch.Slot, c.slots)
	case seen[ch.Slot]:
		return fmt.Errorf("%w: two chunks for slot %d", engine.ErrInvalidBatch, ch.Slot)
	case len(ch.Tokens) == 0:
		return fmt.Errorf("%w: empty chunk for sequence %d", engine.ErrInvalidBatch, ch.Seq)
	case len(ch.Targets) > len(ch.Tokens):
		return fmt.Errorf("%w: %d targets for %d tokens", engine.ErrInvalidBatch, len(ch.Targets), len(ch.Tokens))
	case len(ch.Draft) > 0 && !ch.Sample:
		return fmt.Errorf("%w: sequence %d has draft tokens but does not sample", engine.ErrInvalidBatch, ch.Seq)
	}
	seen[ch.Slot] = true
	if len(ch.Media) > 0 {
		if err := c.checkMedia(ch); err != nil {
			return fmt.Errorf("%w: sequence %d: %w", engine.ErrInvalidBatch, ch.Seq, err)
		}
	} else if err := c.checkTokens(ch.Tokens); err != nil {
		return fmt.Errorf("%w: %w", engine.ErrInvalidBatch, err)
	}
	if err := c.checkTokens(ch.Draft); err != nil {
		return fmt.Errorf("%w: draft: %w", engine.ErrInvalidBatch, err)
	}
	if next := c.slotLen(ch.Slot); ch.Pos != next {
		return fmt.Errorf("%w: sequence %d continues at position %d but slot %d holds %d positions", engine.ErrInvalidBatch, ch.Seq, ch.Pos, ch.Slot, next)
	}
	if n := int(ch.Pos) + chunkLen(ch); n > c.slotTokens {
		return fmt.Errorf("%w: sequence %d needs %d positions, a slot holds %d", engine.ErrKVFull, ch.Seq, n, c.slotTokens)
	}
	if (ch.Sample || ch.Targets != nil) && c.samplers[ch.Seq] == nil {
		return fmt.Errorf("%w: sequence %d has no sampler", engine.ErrInvalidBatch, ch.Seq)
	}
	return nil
}

// slotLen is the number of positions a stream holds.
func (c *Context) slotLen(s engine.Slot) int32 {
	return int32(C.llama_memory_seq_pos_max(c.mem, C.llama_seq_id(s))) + 1
}

// decodeSingles evaluates one-token chunks in one llama_decode call (see
// the comment at the top of the file).
func (c *Context) decodeSingles(chunks []*engine.Chunk, fail func(engine.SeqID, error), outs map[engine.SeqID]*chunkOut) {
	if len(chunks) == 0 {
		return
	}
	slices.SortFunc(chunks, func(a, b *engine.Chunk) int { return int(a.Slot) - int(b.Slot) })
	used := make(map[engine.Slot]bool, len(chunks))
	for _, ch := range chunks {
		used[ch.Slot] = true
	}
	// A throwaway token goes at the next position of a stream no chunk of
	// this call uses, empty or not: it is removed after the call, which
	// leaves the stream as it was.
	room := func(s engine.Slot) bool {
		return !used[s] && c.hasRoom(s)
	}
	filler := func(s engine.Slot) row {
		used[s] = true
		return c.throwaway(s, chunks[0].Tokens[0])
	}

	// Group the chunks into runs of consecutive streams.
	var groups [][]row
	var g []row
	for i, ch := range chunks {
		if i > 0 {
			prev := chunks[i-1].Slot
			gap := true
			for s := prev + 1; s < ch.Slot; s++ {
				if !room(s) {
					gap = false
					break
				}
			}
			if gap {
				for s := prev + 1; s < ch.Slot; s++ {
					g = append(g, filler(s))
				}
			} else {
				groups = append(groups, g)
				g = nil
			}
		}
		g = append(g, row{slot: ch.Slot, pos: ch.Pos, token: ch.Tokens[0], output: ch.Sample || ch.Targets != nil, chunk: ch})
	}
	groups = append(groups, g)
	rows := make([]row, 0, len(chunks)+2)
	for _, g := range groups {
		if c.pad && len(g) == 1 {
			switch s := g[0].slot; {
			case room(s + 1):
				g = append(g, filler(s+1))
			case room(s - 1):
				g = append([]row{filler(s - 1)}, g...)
			}
		}
		if c.pad {
			ensureOutputs(g)
		}
		rows = append(rows, g...)
	}
	if err := c.evaluate(rows); err != nil {
		c.undo(rows)
		if len(chunks) == 1 {
			fail(chunks[0].Seq, err)
			return
		}
		half := len(chunks) / 2
		c.decodeSingles(slices.Clone(chunks[:half]), fail, outs)
		c.decodeSingles(slices.Clone(chunks[half:]), fail, outs)
		return
	}
	for i := range rows {
		r := &rows[i]
		if r.chunk == nil {
			C.llama_memory_seq_rm(c.mem, C.llama_seq_id(r.slot), C.llama_pos(r.pos), -1)
			continue
		}
		o := &chunkOut{}
		outs[r.chunk.Seq] = o
		if err := c.collect(r.chunk, i, 0, 1, o); err != nil {
			fail(r.chunk.Seq, err)
		}
	}
}

// hasRoom reports whether stream s exists and has room for a throwaway
// row at its next position.
func (c *Context) hasRoom(s engine.Slot) bool {
	return s >= 0 && int(s) < c.streams && int(c.slotLen(s)) < c.slotTokens
}

// throwaway is a row of token at stream s's next position, whatever the
// stream holds: it keeps an evaluation's streams consecutive (or gives it
// a second row) and is removed right after the call.
func (c *Context) throwaway(s engine.Slot, token int32) row {
	return row{slot: s, pos: c.slotLen(s), token: token}
}

// ensureOutputs marks rows as outputs until there are two (when there are
// two rows), preferring throwaway rows.
func ensureOutputs(g []row) {
	n := 0
	for i := range g {
		if g[i].output {
			n++
		}
	}
	for pass := 0; pass < 2 && n < 2; pass++ {
		for i := range g {
			if n >= 2 {
				return
			}
			if !g[i].output && (pass == 1 || g[i].chunk == nil) {
				g[i].output = true
				n++
			}
		}
	}
}

// groupChunks splits chunks of two or more tokens into groups evaluated
// in one llama_decode each: a run of chunks of one length in consecutive
// slots, within the micro-batch, makes one evaluation (llama.cpp puts
// equal numbers of tokens from consecutive streams in one ubatch); every
// other chunk is a group of its own.
func (c *Context) groupChunks(chunks []*engine.Chunk) [][]*engine.Chunk {
	sorted := slices.Clone(chunks)
	slices.SortFunc(sorted, func(x, y *engine.Chunk) int { return int(x.Slot) - int(y.Slot) })
	var groups [][]*engine.Chunk
	for i := 0; i < len(sorted); {
		n := chunkLen(sorted[i])
		j := i + 1
		for j < len(sorted) && chunkLen(sorted[j]) == n && sorted[j].Slot == sorted[j-1].Slot+1 && (j-i+1)*n <= c.nUbatch {
			j++
		}
		groups = append(groups, sorted[i:j])
		i = j
	}
	return groups
}

// decodeGroup evaluates chunks of one length in consecutive slots in one
// llama_decode and collects their outputs. false means the evaluation
// failed and left the KV memory as it was: the caller evaluates the
// chunks one by one, which finds the failing one.
func (c *Context) decodeGroup(g []*engine.Chunk, fail func(engine.SeqID, error), outs map[engine.SeqID]*chunkOut) bool {
	n := chunkLen(g[0])
	rows := make([]row, 0, len(g)*n)
	for _, ch := range g {
		rows = appendChunkRows(rows, ch, 0, n)
	}
	if c.pad {
		ensureOutputs(rows)
	}
	if err := c.evaluate(rows); err != nil {
		for _, ch := range g {
			C.llama_memory_seq_rm(c.mem, C.llama_seq_id(ch.Slot), C.llama_pos(ch.Pos), -1)
		}
		return false
	}
	for k, ch := range g {
		o := &chunkOut{}
		if err := c.collect(ch, k*n, 0, n, o); err != nil {
			fail(ch.Seq, err)
			continue
		}
		c.rollback(ch, int(ch.Pos)+n, o)
		outs[ch.Seq] = o
	}
	return true
}

// rollback removes the KV of a chunk's rejected draft tokens: the slot,
// which holds positions up to written, keeps Pos+len(Tokens)+len(Accepted).
// The pages those rows touched stay committed (counted in held, so
// KVMemory reports them) until the slot is cleared; the positions that
// follow overwrite them. Nothing else refers to the removed positions: the
// prefix cache exports only positions the scheduler committed, and it
// commits only accepted tokens.
func (c *Context) rollback(ch *engine.Chunk, written int, o *chunkOut) {
	if len(ch.Draft) == 0 || o.sample == nil {
		return
	}
	if c.held != nil && int(ch.Slot) < len(c.held) {
		c.held[ch.Slot] = max(c.held[ch.Slot], written)
	}
	keep := int(ch.Pos) + len(ch.Tokens) + len(o.sample.Accepted)
	if keep < written {
		C.llama_memory_seq_rm(c.mem, C.llama_seq_id(ch.Slot), C.llama_pos(keep), -1)
	}
	c.stats.DraftTokens += uint64(len(ch.Draft))
	c.stats.AcceptedTokens += uint64(len(o.sample.Accepted))
}

// appendChunkRows appends the rows [a, b) of ch (tokens, then draft): an
// output wherever a prompt logprob is asked for, and, when it samples, at
// its last token and every draft token.
func appendChunkRows(rows []row, ch *engine.Chunk, a, b int) []row {
	for j := a; j < b; j++ {
		out := j < len(ch.Targets) || (j >= len(ch.Tokens)-1 && ch.Sample)
		rows = append(rows, row{slot: ch.Slot, pos: ch.Pos + int32(j), token: chunkToken(ch, j), output: out, chunk: ch})
	}
	return rows
}

// decodeChunk evaluates a chunk of two or more rows in pieces of at most
// the micro-batch size, none of them of one row. A draft rejected in one
// piece leaves the pieces after it unevaluated.
func (c *Context) decodeChunk(ch *engine.Chunk, fail func(engine.SeqID, error), outs map[engine.SeqID]*chunkOut) {
	n := chunkLen(ch)
	o := &chunkOut{}
	rows := make([]row, 0, min(n, c.nUbatch))
	a := 0
	for a < n {
		size := min(c.nUbatch, n-a)
		if c.pad && n-a-size == 1 {
			size-- // leave two tokens for the last piece
		}
		b := a + size
		rows = appendChunkRows(rows[:0], ch, a, b)
		if c.pad {
			ensureOutputs(rows)
		}
		if err := c.evaluate(rows); err != nil {
			C.llama_memory_seq_rm(c.mem, C.llama_seq_id(ch.Slot), C.llama_pos(ch.Pos), -1)
			fail(ch.Seq, err)
			return
		}
		if err := c.collect(ch, 0, a, b, o); err != nil {
			fail(ch.Seq, err)
			return
		}
		a = b
		if o.sample != nil {
			break // the sample is drawn: a draft was rejected, or this was the last piece
		}
	}
	c.rollback(ch, int(ch.Pos)+a, o)
	outs[ch.Seq] = o
}

// evaluate runs one llama_decode over rows.
func (c *Context) evaluate(rows []row) error {
	if len(rows) > c.batchCap {
		return fmt.Errorf("%w: %d rows exceed the batch capacity %d", engine.ErrInvalidBatch, len(rows), c.batchCap)
	}
	b := &c.batch
	embd := len(rows) > 0 && rows[0].embd != nil
	var tokens []C.llama_token
	var inputs []float32
	if embd {
		b = c.embdBatch()
		inputs = unsafe.Slice((*float32)(unsafe.Pointer(b.embd)), len(rows)*c.nEmbd)
	} else {
		tokens = unsafe.Slice(b.token, len(rows))
	}
	pos := unsafe.Slice(b.pos, len(rows))
	nSeq := unsafe.Slice(b.n_seq_id, len(rows))
	seqIDs := unsafe.Slice(b.seq_id, len(rows))
	logits := unsafe.Slice(b.logits, len(rows))
	pad := 0
	for i, r := range rows {
		if embd {
			copy(inputs[i*c.nEmbd:(i+1)*c.nEmbd], r.embd)
		} else {
			tokens[i] = C.llama_token(r.token)
		}
		pos[i] = C.llama_pos(r.pos)
		nSeq[i] = 1
		*seqIDs[i] = C.llama_seq_id(r.slot)
		logits[i] = 0
		if r.output {
			logits[i] = 1
		}
		if r.chunk == nil {
			pad++
		}
	}
	b.n_tokens = C.int32_t(len(rows))
	rc := C.llama_decode(c.c, *b)
	c.stats.Evaluations++
	switch rc {
	case 0:
		c.stats.DecodedTokens += uint64(len(rows) - pad)
		c.stats.PaddingTokens += uint64(pad)
		return nil
	case 1:
		return fmt.Errorf("%w: llama_decode found no KV cells", engine.ErrKVFull)
	case -1:
		return fmt.Errorf("%w: llama_decode rejected the batch (see its log)", engine.ErrInvalidBatch)
	default:
		return fmt.Errorf("llama_decode failed with code %d", int(rc))
	}
}

// undo removes what a failed evaluation of rows may have left in the KV
// memory.
func (c *Context) undo(rows []row) {
	for _, r := range rows {
		C.llama_memory_seq_rm(c.mem, C.llama_seq_id(r.slot), C.llama_pos(r.pos), -1)
	}
}

// collect reads the results of chunk rows [a, b), which sit in rows
// first, first+1, ... of the last evaluation: prompt logprobs for targets
// in that range, and, when the chunk samples, the draws at its last token
// and after each draft token, in order, until one differs from the draft
// (speculative decoding's acceptance; see engine.Chunk.Draft). Rows are
// read in order over successive calls; o keeps the acceptance between
// them and gets its sample when the drawing is done.
func (c *Context) collect(ch *engine.Chunk, first, a, b int, o *chunkOut) error {
	s := c.samplers[ch.Seq]
	for j := a; j < min(b, len(ch.Targets)); j++ {
		lg := c.logits(first + j - a)
		if lg == nil {
			return fmt.Errorf("%w: no logits for prompt position %d", engine.ErrInvalidBatch, int(ch.Pos)+j)
		}
		if err := checkLogits(lg, math.MaxFloat32); err != nil {
			return err
		}
		o.targets = append(o.targets, logprobsOf(lg, ch.Targets[j], s.topLogprobs))
	}
	if !ch.Sample {
		return nil
	}
	last := len(ch.Tokens) - 1
	for j := max(a, last); j < b && o.sample == nil; j++ {
		tok, lp, err := c.sampleAt(ch, s, first+j-a)
		if err != nil {
			return err
		}
		if d := j - last; d < len(ch.Draft) && tok == ch.Draft[d] {
			o.accepted = append(o.accepted, tok)
			if lp != nil {
				o.acceptedLP = append(o.acceptedLP, *lp)
			}
			continue
		}
		o.sample = &engine.Sample{Seq: ch.Seq, Token: tok, Logprobs: lp, Accepted: o.accepted, AcceptedLogprobs: o.acceptedLP}
	}
	return nil
}

// sampleAt draws the token after row idx of the last evaluation with s's
// chain (which accepts it), the chunk's Ban and Only applied.
func (c *Context) sampleAt(ch *engine.Chunk, s *sampler, idx int) (int32, *engine.Logprobs, error) {
	lg := c.logits(idx)
	if lg == nil {
		return 0, nil, fmt.Errorf("%w: no logits for row %d", engine.ErrInvalidBatch, idx)
	}
	if err := checkLogits(lg, s.bound); err != nil {
		return 0, nil, err
	}
	var lp *engine.Logprobs
	var lse float32
	if s.logprobs {
		// Raw distribution: before bans, bias, penalties and temperature.
		lse = logSumExp(lg)
		lp = &engine.Logprobs{Top: topLogprobs(lg, s.topLogprobs, lse)}
	}
	banned := 0
	switch {
	case len(ch.Only) > 0:
		banned = keepOnly(lg, ch.Only)
	default:
		for _, t := range ch.Ban {
			if t >= 0 && int(t) < len(lg) && !math.IsInf(float64(lg[t]), -1) {
				lg[t] = float32(math.Inf(-1))
				banned++
			}
		}
		if s.allowed != nil {
			banned = banOthers(lg, s.allowed)
		}
	}
	if banned >= len(lg) {
		return 0, nil, fmt.Errorf("%w: every token is banned", engine.ErrSampling)
	}
	var tok int32
	if s.argmax {
		// The chain is llama.cpp's greedy sampler alone, which accepts
		// nothing: the first largest logit is what it would pick.
		tok = int32(C.llmserve_argmax((*C.float)(&lg[0]), C.int32_t(len(lg))))
	} else {
		tok = c.draw(s, lg)
	}
	if tok < 0 && s.grammar != nil {
		return 0, nil, fmt.Errorf("%w: the grammar allows none of the tokens left (a banned stop token, or a grammar that cannot end)", engine.ErrSampling)
	}
	if tok < 0 || int(tok) >= c.nVocab {
		return 0, nil, fmt.Errorf("%w: the sampler drew token %d", engine.ErrSampling, tok)
	}
	if lp != nil {
		// A banned token is never drawn, so lg[tok] is still raw.
		lp.Chosen = engine.TokenLogprob{Token: tok, Logprob: lg[tok] - lse}
	}
	return tok, lp, nil
}

// keepOnly sets the logit of every token not in only (Chunk.Only) to
// -inf and returns how many tokens are now at -inf. Tokens of only
// outside the vocabulary are ignored.
func keepOnly(lg []float32, only []int32) int {
	keep := make([]float32, len(only))
	for i, t := range only {
		if t >= 0 && int(t) < len(lg) {
			keep[i] = lg[t]
		}
	}
	inf := float32(math.Inf(-1))
	for i := range lg {
		lg[i] = inf
	}
	n := len(lg)
	for i, t := range only {
		if t >= 0 && int(t) < len(lg) && lg[t] == inf && keep[i] != inf {
			lg[t] = keep[i]
			n--
		}
	}
	return n
}

// banOthers sets the logit of every token not allowed to -inf and returns
// how many tokens are now at -inf.
func banOthers(lg []float32, allowed []bool) int {
	inf := float32(math.Inf(-1))
	n := 0
	for t := range lg {
		if !allowed[t] {
			lg[t] = inf
		}
		if lg[t] == inf {
			n++
		}
	}
	return n
}

// checkLogits refuses logits that are not finite or beyond bound.
func checkLogits(lg []float32, bound float32) error {
	switch C.llmserve_check_logits((*C.float)(&lg[0]), C.int32_t(len(lg)), C.float(bound)) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: NaN or infinite logits", engine.ErrSampling)
	default:
		return fmt.Errorf("%w: logits beyond %g, where the sampler chain would overflow", engine.ErrSampling, bound)
	}
}

// draw samples a token from the logits lg with s's chain and grammar
// (llmserve_sample), or returns -1.
func (c *Context) draw(s *sampler, lg []float32) int32 {
	if len(c.cand) < len(lg) {
		c.cand = make([]C.llama_token_data, len(lg))
	}
	var scanned C.int
	greedy := C.int(0)
	if s.greedy {
		greedy = 1
	}
	tok := int32(C.llmserve_sample(s.chain, s.grammar, greedy, (*C.float)(&lg[0]), C.int32_t(len(lg)), &c.cand[0], &scanned))
	if s.grammar != nil {
		c.stats.GrammarTokens++
		c.stats.GrammarScans += uint64(scanned)
	}
	return tok
}
