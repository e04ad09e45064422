package oip

import "fmt"

// Spec describes one input or output of a tensor model. Shape[0] is the
// batch dimension and is -1; other dimensions are fixed (>= 1) or -1 when
// the model accepts any size there.
type Spec struct {
	Name  string
	DType Datatype
	Shape []int64
}

// Tensor is one input or output value of a tensor model: row-major
// elements in F32 (FP32) or I64 (INT64), the other slice nil. Shape[0] is
// the batch size.
type Tensor struct {
	Name  string
	DType Datatype
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
