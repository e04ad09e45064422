//go:build cgo

package llamacpp

/*
#include "llama.h"
*/
import "C"

import "github.com/llmserve/llmserve/engine"

// SlotLen returns the number of positions slot holds (0 when it is empty).
// Call it from the goroutine that owns c.
func (c *Context) SlotLen(slot engine.Slot) int {
	if c.c == nil || slot < 0 || int(slot) >= c.streams {
		return 0
	}
	return int(c.slotLen(slot))
}
