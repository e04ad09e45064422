//go:build cgo

package llamacpp

/*
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/llmserve/llmserve/engine"
)

func (c *Context) checkSlot(s engine.Slot) error {
	if s < 0 || int(s) >= c.slots {
		return fmt.Errorf("%w: slot %d outside [0, %d)", engine.ErrInvalidBatch, s, c.slots)
	}
	return nil
}

func (c *Context) applyMemOp(op engine.MemOp) error {
	if err := c.checkSlot(op.Dst); err != nil {
		return err
	}
	p0, p1 := C.llama_pos(op.P0), C.llama_pos(op.P1)
	switch op.Kind {
	case engine.MemCopy:
		if err := c.checkSlot(op.Src); err != nil {
			return err
		}
		C.llama_memory_seq_cp(c.mem, C.llama_seq_id(op.Src), C.llama_seq_id(op.Dst), p0, p1)
	case engine.MemRemove:
		if !C.llama_memory_seq_rm(c.mem, C.llama_seq_id(op.Dst), p0, p1) {
			return fmt.Errorf("%w: the model's memory cannot remove part of a sequence", engine.ErrInvalidBatch)
		}
	default:
		return fmt.Errorf("%w: unknown memory operation %d", engine.ErrInvalidBatch, op.Kind)
	}
	return nil
}

// SeqPosRange returns the smallest and largest position slot holds, or -1, -1
// when it holds none.
func (c *Context) SeqPosRange(slot engine.Slot) (lo, hi int32) {
	return int32(C.llama_memory_seq_pos_min(c.mem, C.llama_seq_id(slot))),
		int32(C.llama_memory_seq_pos_max(c.mem, C.llama_seq_id(slot)))
}

// Keep drops every slot but slot from the memory (llama_memory_seq_keep).
func (c *Context) Keep(slot engine.Slot) error {
	if err := c.checkSlot(slot); err != nil {
		return err
	}
	C.llama_memory_seq_keep(c.mem, C.llama_seq_id(slot))
	return nil
}

// Shift adds delta to the positions of slot in [p0, p1)
// (llama_memory_seq_add), for context shifting.
func (c *Context) Shift(slot engine.Slot, p0, p1, delta int32) error {
	if err := c.checkSlot(slot); err != nil {
		return err
	}
	if !C.llama_memory_can_shift(c.mem) {
		return fmt.Errorf("%w: the model's memory cannot shift positions", engine.ErrInvalidBatch)
	}
	C.llama_memory_seq_add(c.mem, C.llama_seq_id(slot), C.llama_pos(p0), C.llama_pos(p1), C.llama_pos(delta))
	return nil
}

// SeqState exports the KV state of slot, for moving a sequence to another
// context or node.
func (c *Context) SeqState(slot engine.Slot) ([]byte, error) {
	if err := c.checkSlot(slot); err != nil {
		return nil, err
	}
	n := C.llama_state_seq_get_size(c.c, C.llama_seq_id(slot))
	if n == 0 {
		return nil, nil
	}
	buf := make([]byte, int(n))
	w := C.llama_state_seq_get_data(c.c, (*C.uint8_t)(unsafe.Pointer(&buf[0])), n, C.llama_seq_id(slot))
	if w != n {
		return nil, fmt.Errorf("export slot %d: wrote %d of %d bytes", slot, w, n)
	}
	return buf, nil
}

// SetSeqState imports state produced by SeqState into slot, which must be
// empty. It returns an error when the state does not fit the memory.
func (c *Context) SetSeqState(slot engine.Slot, state []byte) error {
	if err := c.checkSlot(slot); err != nil {
		return err
	}
	if len(state) == 0 {
		return nil
	}
	r := C.llama_state_seq_set_data(c.c, (*C.uint8_t)(unsafe.Pointer(&state[0])), C.size_t(len(state)), C.llama_seq_id(slot))
	if r == 0 {
		return fmt.Errorf("import slot %d: llama.cpp rejected %d bytes of state", slot, len(state))
	}
	return nil
}
