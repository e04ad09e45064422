package tensor

import (
	"context"
	"fmt"
)

// DType is an element type, named as the V2 protocol names datatypes.
type DType string

// The element types tensor models take and give.
const (
	FP32  DType = "FP32"
	INT64 DType = "INT64"
)

// Spec describes one input or output of a model. Shape[0] is the batch
// dimension and is -1; other dimensions are fixed (>= 1) or -1 when the
// model accepts any size there.
type Spec struct {
	Name  string
	DType DType
	Shape []int64
}

// Tensor is one input or output value: row-major elements in F32 (FP32)
// or I64 (INT64), the other slice nil. Shape[0] is the batch size.
type Tensor struct {
	Name  string
	DType DType
	Shape []int64
	F32   []float32
	I64   []int64
}

// Elements is the number of elements Shape holds.
func (t *Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Check reports whether the tensor's data matches its type and shape.
func (t *Tensor) Check() error {
	n := t.Elements()
	switch t.DType {
	case FP32:
		if t.I64 != nil || int64(len(t.F32)) != n {
			return fmt.Errorf("tensor %q: shape %v holds %d FP32 elements, data has %d", t.Name, t.Shape, n, len(t.F32))
		}
	case INT64:
		if t.F32 != nil || int64(len(t.I64)) != n {
			return fmt.Errorf("tensor %q: shape %v holds %d INT64 elements, data has %d", t.Name, t.Shape, n, len(t.I64))
		}
	default:
		return fmt.Errorf("tensor %q: datatype %q is not FP32 or INT64", t.Name, t.DType)
	}
	return nil
}

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
	// ends before it starts computing.
	Run(ctx context.Context, in []Tensor) ([]Tensor, error)
	// Close frees the model; Run must not be called after.
	Close() error
}
