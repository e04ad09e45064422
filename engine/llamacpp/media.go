//go:build cgo

package llamacpp

/*
#include "llama.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/llmserve/llmserve/engine"
)

// Media positions (engine.MediaSpan)
//
// A llama_batch holds tokens or input embeddings, never both, so a chunk
// with media is decoded on its own, in segments: each run of text and each
// media span in order, every segment in pieces of at most the micro-batch
// (decodeMedia). A row still attends only to its own stream, so a media
// request's numbers depend only on its own tokens and embeddings, as any
// other's; with c.pad a one-row piece gets a throwaway neighbour row in an
// adjacent stream, as decodeSingles gives one, so that no piece is
// computed with the one-column kernels. A chunk with media takes no draft
// and no prompt logprobs (the API refuses those with media).

// checkMedia reports why a chunk's media spans cannot be decoded, or nil:
// spans in order, inside Tokens, with Rows rows of the model's width, and
// vocabulary tokens everywhere else.
func (c *Context) checkMedia(ch *engine.Chunk) error {
	switch {
	case len(ch.Draft) > 0:
		return errors.New("a chunk with media takes no draft tokens")
	case ch.Targets != nil:
		return errors.New("a chunk with media takes no prompt logprobs")
	}
	next := 0
	for i, m := range ch.Media {
		if m.Rows <= 0 || m.Offset < next || m.Offset+m.Rows > len(ch.Tokens) {
			return fmt.Errorf("media span %d covers positions [%d, %d) of a chunk of %d, after position %d", i, m.Offset, m.Offset+m.Rows, len(ch.Tokens), next)
		}
		if len(m.Embd) != m.Rows*c.nEmbd {
			return fmt.Errorf("media span %d has %d values for %d rows of width %d", i, len(m.Embd), m.Rows, c.nEmbd)
		}
		if err := c.checkTokens(ch.Tokens[next:m.Offset]); err != nil {
			return err
		}
		next = m.Offset + m.Rows
	}
	return c.checkTokens(ch.Tokens[next:])
}

// embdBatch is the batch media rows are evaluated with: the micro-batch's
// rows of the model's width.
func (c *Context) embdBatch() *C.struct_llama_batch {
	if !c.hasMediaBatch {
		c.mediaBatch = C.llama_batch_init(C.int32_t(c.batchCap), C.int32_t(c.nEmbd), 1)
		c.hasMediaBatch = true
	}
	return &c.mediaBatch
}

// decodeMedia evaluates a chunk with media spans segment by segment and
// collects its outputs (see the comment at the top of the file).
func (c *Context) decodeMedia(ch *engine.Chunk, fail func(engine.SeqID, error), outs map[engine.SeqID]*chunkOut) {
	o := &chunkOut{}
	n := len(ch.Tokens)
	spans := ch.Media
	for a := 0; a < n; {
		var span *engine.MediaSpan
		end := n
		switch {
		case len(spans) > 0 && spans[0].Offset == a:
			span, end = &spans[0], a+spans[0].Rows
			spans = spans[1:]
		case len(spans) > 0:
			end = spans[0].Offset
		}
		for a < end {
			size := min(c.nUbatch, end-a)
			if c.pad && size > 1 && end-a-size == 1 {
				size-- // leave two rows for the last piece
			}
			b := a + size
			rows, first := c.mediaRows(ch, span, a, b)
			if c.pad {
				ensureOutputs(rows)
			}
			err := c.evaluate(rows)
			for _, r := range rows {
				if r.chunk == nil {
					C.llama_memory_seq_rm(c.mem, C.llama_seq_id(r.slot), C.llama_pos(r.pos), -1)
				}
			}
			if err == nil {
				err = c.collect(ch, first, a, b, o)
			}
			if err != nil {
				C.llama_memory_seq_rm(c.mem, C.llama_seq_id(ch.Slot), C.llama_pos(ch.Pos), -1)
				fail(ch.Seq, err)
				return
			}
			a = b
		}
	}
	outs[ch.Seq] = o
}

// mediaRows are the rows [a, b) of a chunk's segment, embeddings of span
// when it is not nil, else tokens, and the index of the chunk's first row
// among them. With c.pad a single row gets a throwaway row in an adjacent
// stream with room (the same input at that stream's next position),
// placed in stream order as decodeSingles places its own, and removed
// after the evaluation.
func (c *Context) mediaRows(ch *engine.Chunk, span *engine.MediaSpan, a, b int) ([]row, int) {
	rows := make([]row, 0, b-a+1)
	for j := a; j < b; j++ {
		r := row{slot: ch.Slot, pos: ch.Pos + int32(j), token: ch.Tokens[j], chunk: ch, output: ch.Sample && j == len(ch.Tokens)-1}
		if span != nil {
			k := j - span.Offset
			r.embd = span.Embd[k*c.nEmbd : (k+1)*c.nEmbd]
		}
		rows = append(rows, r)
	}
	if !c.pad || len(rows) != 1 {
		return rows, 0
	}
	for _, s := range []engine.Slot{ch.Slot + 1, ch.Slot - 1} {
		if !c.hasRoom(s) {
			continue
		}
		filler := c.throwaway(s, rows[0].token)
		filler.embd = rows[0].embd
		if s < ch.Slot {
			return []row{filler, rows[0]}, 1
		}
		return append(rows, filler), 0
	}
	return rows, 0
}
