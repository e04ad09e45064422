package tensor

import (
	"context"

	"github.com/llmserve/llmserve/oip"
)

// DType is an element type: oip's Datatype, of which tensor models take
// and give two.
type DType = oip.Datatype

// The element types tensor models take and give.
const (
	FP32  = oip.FP32
	INT64 = oip.INT64
)

// Spec describes one input or output of a model (oip.Spec: the protocol
// packages name a model's tensors without linking this runtime).
type Spec = oip.Spec

// Tensor is one input or output value (oip.Tensor): row-major elements in
// F32 (FP32) or I64 (INT64), the other slice nil. Shape[0] is the batch
// size.
type Tensor = oip.Tensor

// Executor runs a loaded model graph on one batch.
type Executor interface {
	// Inputs and Outputs describe the model's tensors, in order.
	Inputs() []Spec
	Outputs() []Spec
	// Run executes one batch: in has one tensor per input, in Inputs'
	// order, all with the same batch size (Shape[0] >= 1); the outputs
	// come in Outputs' order with that batch size. Row i of every output
	// depends only on row i of the inputs, and is bit-identical whatever
	// the batch size and whatever else runs. Run is safe for concurrent
	// use (parallel workers call it at once) and returns ctx.Err() if ctx
	// ends before it starts computing. Run only reads in and keeps none of
	// it once it returns (callers reuse the memory, or share it with a
	// request's wire bytes); the outputs are new memory, the caller's,
	// sharing none with in (an output that is an input is a copy).
	Run(ctx context.Context, in []Tensor) ([]Tensor, error)
	// Close frees the model; Run must not be called after.
	Close() error
}
