//go:build cgo

package llamacpp

/*
#include "llama.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
)

// KV export and import
//
// A slot's KV leaves and enters llama.cpp through llama_state_seq_get_data
// and llama_state_seq_set_data, whose byte format (llama_kv_cache::
// state_write at the vendored commit) is, for one sequence of n cells in a
// context of S streams, all integers little-endian:
//
//	u32 S
//	per stream: u32 n (0 for every stream but the sequence's), and when n > 0:
//	    n × (i32 pos, u32 n_seq_id = 1, i32 seq_id)              cell metadata
//	    u32 v_trans, u32 n_layer
//	    per layer: i32 type, u64 row bytes, n rows                K
//	    per layer, v_trans = 0: i32 type, u64 row bytes, n rows   V
//	    per layer, v_trans = 1: i32 type, u32 element bytes, u32 dims,
//	                            dims × n elements                 V transposed
//
// The binding cuts exports into engine.KV (the data sections, positions
// [from, to)) and writes imports back in the same format, so the rest of
// the server sees only engine.KVLayout. probeFormat learns the section
// headers once per context, and export checks every state against them, so
// a llama.cpp update that changes the format fails loudly at start-up.

// stateFormat is what probeFormat learned.
type stateFormat struct {
	streams  uint32
	vTrans   uint32
	layers   uint32
	sections []sectionFormat // K of every layer, then V of every layer
	layout   *engine.KVLayout
}

type sectionFormat struct {
	header []byte // the bytes before the section's data
	groups int
	unit   int
}

// errStateFormat means a state did not have the expected format.
var errStateFormat = errors.New("llamacpp: unexpected KV state format")

// stateReader reads a state buffer.
type stateReader struct {
	b   []byte
	off int
	err error
}

func (r *stateReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.off+n > len(r.b) {
		r.err = fmt.Errorf("%w: truncated at byte %d", errStateFormat, r.off)
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

func (r *stateReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *stateReader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// parsedState locates a sequence's cells and data sections in a state.
type parsedState struct {
	cells    int
	vTrans   uint32
	layers   uint32
	sections []parsedSection
}

type parsedSection struct {
	header []byte
	groups int
	unit   int
	data   []byte // groups × cells × unit bytes
}

// parseState reads the state of one sequence.
func parseState(b []byte) (*parsedState, error) {
	r := &stateReader{b: b}
	streams := r.u32()
	var p *parsedState
	for s := uint32(0); s < streams && r.err == nil; s++ {
		n := int(r.u32())
		if n == 0 {
			continue
		}
		if p != nil {
			return nil, fmt.Errorf("%w: cells in two streams", errStateFormat)
		}
		p = &parsedState{cells: n}
		for i := range n {
			pos := int32(r.u32())
			nseq := r.u32()
			r.bytes(4 * int(nseq))
			if r.err == nil && (pos != int32(i) || nseq != 1) {
				return nil, fmt.Errorf("%w: cell %d has position %d and %d sequences", errStateFormat, i, pos, nseq)
			}
		}
		p.vTrans, p.layers = r.u32(), r.u32()
		for range p.layers { // K
			start := r.off
			r.bytes(4)
			row := int(r.u64())
			p.sections = append(p.sections, parsedSection{header: r.b[start:r.off:r.off], groups: 1, unit: row})
			p.sections[len(p.sections)-1].data = r.bytes(n * row)
		}
		for range p.layers { // V
			start := r.off
			r.bytes(4)
			sec := parsedSection{groups: 1}
			if p.vTrans == 0 {
				sec.unit = int(r.u64())
			} else {
				sec.unit = int(r.u32())
				sec.groups = int(r.u32())
			}
			if r.err != nil {
				break
			}
			sec.header = r.b[start:r.off:r.off]
			sec.data = r.bytes(sec.groups * n * sec.unit)
			p.sections = append(p.sections, sec)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if p == nil {
		return &parsedState{}, nil
	}
	return p, nil
}

// probeFormat decodes two tokens into slot 0, reads their state to learn
// the format, and clears the slot.
func (c *Context) probeFormat() error {
	tok := max(c.model.BOS(), 0)
	rows := []row{{slot: 0, pos: 0, token: tok}, {slot: 0, pos: 1, token: tok}}
	defer c.clearSlot(0)
	saved := c.stats // the probe is not work anyone asked for
	err := c.evaluate(rows)
	c.stats = saved
	if err != nil {
		return fmt.Errorf("probe the KV state format: %w", err)
	}
	buf, err := c.readState(0)
	if err != nil {
		return err
	}
	p, err := parseState(buf)
	if err != nil {
		return err
	}
	if p.cells != 2 || len(p.sections) == 0 {
		return fmt.Errorf("%w: probe of 2 positions read %d cells", errStateFormat, p.cells)
	}
	f := &stateFormat{streams: binary.LittleEndian.Uint32(buf), vTrans: p.vTrans, layers: p.layers, layout: &engine.KVLayout{}}
	for _, s := range p.sections {
		f.sections = append(f.sections, sectionFormat{header: append([]byte(nil), s.header...), groups: s.groups, unit: s.unit})
		f.layout.Sections = append(f.layout.Sections, engine.KVSection{Groups: s.groups, Unit: s.unit})
	}
	c.format = f
	return nil
}

// readState copies slot's state into the scratch buffer.
func (c *Context) readState(slot engine.Slot) ([]byte, error) {
	n := int(C.llama_state_seq_get_size(c.c, C.llama_seq_id(slot)))
	if n == 0 {
		return nil, fmt.Errorf("%w: slot %d has no state", errStateFormat, slot)
	}
	if cap(c.scratch) < n {
		c.scratch = make([]byte, n)
	}
	buf := c.scratch[:n]
	w := int(C.llama_state_seq_get_data(c.c, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(n), C.llama_seq_id(slot)))
	if w != n {
		return nil, fmt.Errorf("export slot %d: llama.cpp wrote %d of %d bytes", slot, w, n)
	}
	return buf, nil
}

// export returns a copy of positions [from, to) of slot.
func (c *Context) export(slot engine.Slot, from, to int) (*engine.KV, error) {
	if !c.validSlot(slot) || from < 0 || from >= to {
		return nil, fmt.Errorf("%w: export [%d, %d) of slot %d", engine.ErrInvalidBatch, from, to, slot)
	}
	buf, err := c.readState(slot)
	if err != nil {
		return nil, err
	}
	p, err := parseState(buf)
	if err != nil {
		return nil, err
	}
	if to > p.cells {
		return nil, fmt.Errorf("%w: export [%d, %d) of slot %d, which holds %d positions", engine.ErrInvalidBatch, from, to, slot, p.cells)
	}
	if err := c.format.check(p); err != nil {
		return nil, err
	}
	n := to - from
	kv := &engine.KV{Layout: c.format.layout, N: n, Data: make([]byte, 0, n*c.format.layout.BytesPerPosition())}
	for _, s := range p.sections {
		for g := range s.groups {
			base := g * p.cells * s.unit
			kv.Data = append(kv.Data, s.data[base+from*s.unit:base+to*s.unit]...)
		}
	}
	c.stats.Exported += uint64(n)
	return kv, nil
}

// check reports whether a parsed state has the probed format.
func (f *stateFormat) check(p *parsedState) error {
	if p.vTrans != f.vTrans || p.layers != f.layers || len(p.sections) != len(f.sections) {
		return fmt.Errorf("%w: %d layers (v_trans %d), probed %d (v_trans %d)", errStateFormat, p.layers, p.vTrans, f.layers, f.vTrans)
	}
	for i, s := range p.sections {
		w := f.sections[i]
		if s.groups != w.groups || s.unit != w.unit || string(s.header) != string(w.header) {
			return fmt.Errorf("%w: section %d differs from the probe", errStateFormat, i)
		}
	}
	return nil
}

// restore fills the empty slot with the pieces' positions, from 0.
func (c *Context) restore(slot engine.Slot, pieces []*engine.KV) error {
	if !c.validSlot(slot) {
		return fmt.Errorf("%w: restore into slot %d outside [0, %d)", engine.ErrInvalidBatch, slot, c.slots)
	}
	if c.slotLen(slot) != 0 {
		return fmt.Errorf("%w: restore into slot %d, which is not empty", engine.ErrInvalidBatch, slot)
	}
	f := c.format
	n := 0
	for _, p := range pieces {
		if !p.Layout.Equal(f.layout) || len(p.Data) != p.N*f.layout.BytesPerPosition() {
			return fmt.Errorf("restore slot %d: %w", slot, engine.ErrKVLayout)
		}
		n += p.N
	}
	if n == 0 {
		return nil
	}
	if n > c.slotTokens {
		return fmt.Errorf("%w: restore of %d positions, a slot holds %d", engine.ErrKVFull, n, c.slotTokens)
	}
	size := 4 + 4*int(f.streams) + 12*n + 8
	for _, s := range f.sections {
		size += len(s.header) + s.groups*n*s.unit
	}
	buf := c.scratch[:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size)
		c.scratch = buf
	}
	le := binary.LittleEndian
	buf = le.AppendUint32(buf, f.streams)
	buf = le.AppendUint32(buf, uint32(n))
	for i := range n {
		buf = le.AppendUint32(buf, uint32(i))
		buf = le.AppendUint32(buf, 1)
		buf = le.AppendUint32(buf, uint32(slot))
	}
	buf = le.AppendUint32(buf, f.vTrans)
	buf = le.AppendUint32(buf, f.layers)
	offs := make([]int, len(pieces))
	for _, s := range f.sections {
		buf = append(buf, s.header...)
		for range s.groups {
			for i, p := range pieces {
				w := p.N * s.unit
				buf = append(buf, p.Data[offs[i]:offs[i]+w]...)
				offs[i] += w
			}
		}
	}
	for s := uint32(1); s < f.streams; s++ {
		buf = le.AppendUint32(buf, 0)
	}
	r := C.llama_state_seq_set_data(c.c, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), C.llama_seq_id(slot))
	if int(r) != len(buf) {
		c.clearSlot(slot)
		return fmt.Errorf("restore slot %d: llama.cpp read %d of %d bytes of state", slot, int(r), len(buf))
	}
	c.stats.Restored += uint64(n)
	return nil
}

// probePadding reports whether this model needs evaluations padded to two
// rows to keep a sequence's numbers independent of its batch: it decodes
// the same token after the same prompt once alone (one row, one output)
// and once beside another sequence (two rows, two outputs), and compares
// the logits bit for bit. The kernels that differ (a matrix-vector product
// against a matrix-matrix one) differ in their summation order, which
// shows in almost every logit; equal logits mean the model's weight types
// take kernels that sum alike.
func (c *Context) probePadding() (bool, error) {
	prompt := make([]row, 8)
	for i := range prompt {
		prompt[i] = row{slot: 0, pos: int32(i), token: int32(1 + i*37%(c.nVocab-1))}
	}
	other := make([]row, len(prompt))
	for i := range other {
		other[i] = row{slot: 1, pos: int32(i), token: int32(1 + i*53%(c.nVocab-1))}
	}
	next := row{slot: 0, pos: int32(len(prompt)), token: int32(1 + 11%(c.nVocab-1)), output: true}
	saved := c.stats
	defer func() {
		c.stats = saved
		c.clearSlot(0)
		c.clearSlot(1)
	}()
	if err := c.evaluate(prompt); err != nil {
		return false, fmt.Errorf("probe padding: %w", err)
	}
	if err := c.evaluate([]row{next}); err != nil {
		return false, fmt.Errorf("probe padding: %w", err)
	}
	alone := append([]float32(nil), c.logits(0)...)
	// Take the token back; the prompt's KV stays as it was computed.
	C.llama_memory_seq_rm(c.mem, 0, C.llama_pos(len(prompt)), -1)
	if err := c.evaluate(other); err != nil {
		return false, fmt.Errorf("probe padding: %w", err)
	}
	beside := row{slot: 1, pos: int32(len(other)), token: next.token, output: true}
	if err := c.evaluate([]row{next, beside}); err != nil {
		return false, fmt.Errorf("probe padding: %w", err)
	}
	batched := c.logits(0)
	for i := range alone {
		if math.Float32bits(alone[i]) != math.Float32bits(batched[i]) {
			return true, nil
		}
	}
	return false, nil
}
