package graph

import (
	"errors"
	"fmt"
	"slices"
)

// input returns the Info of node input i, which must be present.
func (c *Checked) input(n *Node, i int) (*Info, error) {
	if i >= len(n.Inputs) || n.Inputs[i] == "" {
		return nil, fmt.Errorf("input %d is missing", i)
	}
	info, ok := c.Values[n.Inputs[i]]
	if !ok {
		return nil, fmt.Errorf("input %q is not defined before the node (missing initializer?)", n.Inputs[i])
	}
	return info, nil
}

// inputPair returns the Infos of inputs 0 and 1, both present: the
// operands of a binary operator.
func (c *Checked) inputPair(n *Node) (a, b *Info, err error) {
	return c.pair(n, c.input)
}

// floatPair is inputPair for F32 operands.
func (c *Checked) floatPair(n *Node) (a, b *Info, err error) {
	return c.pair(n, c.floatInput)
}

func (c *Checked) pair(n *Node, get func(*Node, int) (*Info, error)) (a, b *Info, err error) {
	if a, err = get(n, 0); err != nil {
		return nil, nil, err
	}
	if b, err = get(n, 1); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// floatInput is input i, which must be F32.
func (c *Checked) floatInput(n *Node, i int) (*Info, error) {
	info, err := c.input(n, i)
	if err != nil {
		return nil, err
	}
	if info.DType != F32 {
		return nil, fmt.Errorf("input %q is %v, want F32", n.Inputs[i], info.DType)
	}
	return info, nil
}

// optional reports whether optional input i is given.
func optional(n *Node, i int) bool { return i < len(n.Inputs) && n.Inputs[i] != "" }

// Axis normalizes a possibly negative axis for a value of rank r.
func Axis(axis int64, r int) (int, error) {
	if axis < 0 {
		axis += int64(r)
	}
	if axis < 0 || axis >= int64(r) {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, r)
	}
	return int(axis), nil
}

var errBatchAxis = errors.New("axis 0 is the batch dimension: rows would depend on each other")

// rowAxis normalizes an operator's axis over x, which must not be the
// batch dimension of a batched x (Softmax, LayerNormalization, ArgMax
// work within a row).
func rowAxis(x *Info, axis int64) (int, error) {
	ax, err := Axis(axis, len(x.Shape))
	if err != nil {
		return 0, err
	}
	if ax == 0 && x.Batched {
		return 0, errBatchAxis
	}
	return ax, nil
}

func unsupportedAttr(format string, args ...any) error {
	return fmt.Errorf("attribute "+format+": %w", append(args, ErrUnsupported)...)
}

// inferNode infers n's outputs and records them in c.Values; folded
// reports that n computed a constant, which is now in c.Consts, and is to
// be dropped from the graph. An operator of opFiles (defined in a file of
// its own, some with several outputs) is never folded (inferFileNode).
func (c *Checked) inferNode(n *Node) (folded bool, err error) {
	for _, in := range n.Inputs {
		if _, ok := c.Values[in]; !ok && in != "" {
			return false, fmt.Errorf("input %q is not defined before the node (missing initializer?)", in)
		}
	}
	if f, ok := opFiles[n.Op]; ok {
		return false, c.inferFileNode(n, f)
	}
	if !slices.Contains(Ops, n.Op) {
		return false, &Error{Node: n.Name, Op: n.Op, Err: ErrUnsupported}
	}
	if len(n.Outputs) == 0 || n.Outputs[0] == "" {
		return false, errors.New("node has no output")
	}
	for _, extra := range n.Outputs[1:] {
		if extra != "" {
			return false, fmt.Errorf("output %q: only one output is supported", extra)
		}
	}
	if _, dup := c.Values[n.Outputs[0]]; dup {
		return false, fmt.Errorf("output %q is defined twice", n.Outputs[0])
	}
	out, err := c.infer(n)
	if err != nil {
		return false, err
	}
	if len(out.Shape) > MaxRank {
		return false, fmt.Errorf("result has %d dimensions, at most %d", len(out.Shape), MaxRank)
	}
	if !out.Batched {
		k := out.Const
		if k == nil {
			if k, err = c.fold(n, out); err != nil {
				return false, err
			}
		}
		k.Name = n.Outputs[0]
		c.Consts = append(c.Consts, *k)
		c.Values[k.Name] = &Info{DType: k.DType, Shape: k.Shape, Const: &c.Consts[len(c.Consts)-1]}
		return true, nil
	}
	if len(out.Shape) == 0 || out.Shape[0] != Batch {
		return false, fmt.Errorf("result shape %v does not keep the batch first", out.Shape)
	}
	if n := elements(out.Shape[1:]); n < 1 || n > MaxRowElements || !bounded(out.Shape[1:]) {
		return false, fmt.Errorf("result shape %v has %d elements per row (1 to %d allowed)", out.Shape, n, MaxRowElements)
	}
	c.Values[n.Outputs[0]] = out
	return false, nil
}

func (c *Checked) infer(n *Node) (*Info, error) {
	switch n.Op {
	case "Identity":
		x, err := c.input(n, 0)
		if err != nil {
			return nil, err
		}
		return &Info{DType: x.DType, Shape: x.Shape, Batched: x.Batched}, nil
	case "Relu", "Tanh", "Sigmoid", "Gelu", "Erf", "Sqrt", "LeakyRelu", "HardSigmoid", "Clip":
		x, err := c.floatInput(n, 0)
		if err != nil {
			return nil, err
		}
		if _, err := c.unaryFunc(n); err != nil {
			return nil, err
		}
		return &Info{DType: F32, Shape: x.Shape, Batched: x.Batched}, nil
	case "Add", "Sub", "Mul", "Div":
		a, b, err := c.inputPair(n)
		if err != nil {
			return nil, err
		}
		dt := F32
		if a.DType == I64 && b.DType == I64 && !a.Batched && !b.Batched {
			dt = I64 // shape arithmetic, folded
		} else if _, err := c.floatInput(n, 0); err != nil {
			return nil, err
		} else if _, err := c.floatInput(n, 1); err != nil {
			return nil, err
		}
		return elementwise(dt, a, b)
	case "MatMul":
		a, b, err := c.floatPair(n)
		if err != nil {
			return nil, err
		}
		if b.Batched {
			return c.inferBatchedMatMul(a, b)
		}
		if len(b.Shape) != 2 {
			return nil, fmt.Errorf("the second input must be a 2-D initializer (weights), got shape %v: %w", b.Shape, ErrUnsupported)
		}
		if len(a.Shape) < 2 {
			return nil, fmt.Errorf("the first input has shape %v, want at least 2 dimensions", a.Shape)
		}
		if a.Shape[len(a.Shape)-1] != b.Shape[0] {
			return nil, fmt.Errorf("shapes %v and %v do not multiply", a.Shape, b.Shape)
		}
		shape := append(slices.Clone(a.Shape[:len(a.Shape)-1]), b.Shape[1])
		return &Info{DType: F32, Shape: shape, Batched: a.Batched}, nil
	case "Gemm":
		a, b, err := c.floatPair(n)
		if err != nil {
			return nil, err
		}
		if len(a.Shape) != 2 {
			return nil, fmt.Errorf("input A has shape %v, want 2 dimensions", a.Shape)
		}
		if n.Int("transA", 0) != 0 {
			if a.Batched {
				return nil, fmt.Errorf("transA=1 on a batched input would transpose the batch: %w", ErrUnsupported)
			}
			return nil, unsupportedAttr("transA=1")
		}
		if b.Batched || len(b.Shape) != 2 {
			return nil, fmt.Errorf("input B must be a 2-D initializer (weights), got shape %v: %w", b.Shape, ErrUnsupported)
		}
		k, nOut := b.Shape[0], b.Shape[1]
		if n.Int("transB", 0) != 0 {
			k, nOut = nOut, k
		}
		if a.Shape[1] != k {
			return nil, fmt.Errorf("inputs A %v and B %v (transB=%d) do not multiply", a.Shape, b.Shape, n.Int("transB", 0))
		}
		shape := []int64{a.Shape[0], nOut}
		if optional(n, 2) {
			cc, err := c.floatInput(n, 2)
			if err != nil {
				return nil, err
			}
			if cc.Batched {
				return nil, fmt.Errorf("input C must be an initializer (bias): %w", ErrUnsupported)
			}
			s, err := Broadcast(shape, cc.Shape)
			if err != nil || !slices.Equal(s, shape) {
				return nil, fmt.Errorf("bias C %v does not broadcast to %v", cc.Shape, shape)
			}
		}
		return &Info{DType: F32, Shape: shape, Batched: a.Batched}, nil
	case "Softmax":
		x, err := c.floatInput(n, 0)
		if err != nil {
			return nil, err
		}
		def := int64(-1)
		if c.Opset != 0 && c.Opset < 13 {
			def = 1
		}
		if _, err := rowAxis(x, n.Int("axis", def)); err != nil {
			return nil, err
		}
		return &Info{DType: F32, Shape: x.Shape, Batched: x.Batched}, nil
	case "LayerNormalization":
		x, err := c.floatInput(n, 0)
		if err != nil {
			return nil, err
		}
		ax, err := rowAxis(x, n.Int("axis", -1))
		if err != nil {
			return nil, err
		}
		norm := x.Shape[ax:]
		for i := 1; i <= 2; i++ {
			if !optional(n, i) {
				if i == 1 {
					return nil, errors.New("input Scale is missing")
				}
				continue
			}
			p, err := c.floatInput(n, i)
			if err != nil {
				return nil, err
			}
			if p.Batched || elements(p.Shape) != elements(norm) {
				return nil, fmt.Errorf("input %q has shape %v, want the normalized shape %v", n.Inputs[i], p.Shape, norm)
			}
		}
		return &Info{DType: F32, Shape: x.Shape, Batched: x.Batched}, nil
	case "Flatten":
		x, err := c.floatInput(n, 0)
		if err != nil {
			return nil, err
		}
		ax := n.Int("axis", 1)
		if ax < 0 {
			ax += int64(len(x.Shape))
		}
		if ax != 1 {
			return nil, fmt.Errorf("axis=%d mixes the batch with other dimensions (only axis 1): %w", n.Int("axis", 1), ErrUnsupported)
		}
		return &Info{DType: F32, Shape: []int64{Batch, elements(x.Shape[1:])}, Batched: x.Batched}, nil
	case "Reshape":
		x, s, err := c.inputPair(n)
		if err != nil {
			return nil, err
		}
		if s.Const == nil || s.DType != I64 || len(s.Shape) != 1 {
			return nil, fmt.Errorf("the shape input must be a 1-D INT64 initializer: %w", ErrUnsupported)
		}
		if !x.Batched {
			shape, err := constReshape(x.Shape, s.Const.I64, n.Int("allowzero", 0) != 0)
			if err != nil {
				return nil, err
			}
			return &Info{DType: x.DType, Shape: shape}, nil
		}
		shape, err := ReshapeTarget(x.Shape, s.Const.I64, n.Int("allowzero", 0) != 0)
		if err != nil {
			return nil, err
		}
		return &Info{DType: x.DType, Shape: shape, Batched: x.Batched}, nil
	case "Concat":
		if _, ok := n.Attrs["axis"]; !ok {
			return nil, errors.New("attribute axis is required")
		}
		if c.allConst(n) {
			return c.inferConstConcat(n)
		}
		var shape []int64
		for i := range n.Inputs {
			x, err := c.floatInput(n, i)
			if err != nil {
				return nil, err
			}
			if !x.Batched {
				return nil, fmt.Errorf("input %q is an initializer, which has no batch dimension: %w", n.Inputs[i], ErrUnsupported)
			}
			if i == 0 {
				shape = slices.Clone(x.Shape)
				continue
			}
			ax, err := Axis(n.Int("axis", 0), len(shape))
			if err != nil {
				return nil, err
			}
			if ax == 0 {
				return nil, errBatchAxis
			}
			if len(x.Shape) != len(shape) {
				return nil, fmt.Errorf("inputs have ranks %d and %d", len(shape), len(x.Shape))
			}
			for d := range shape {
				if d != ax && shape[d] != x.Shape[d] {
					return nil, fmt.Errorf("input %q has shape %v, which differs from %v outside axis %d", n.Inputs[i], x.Shape, shape, ax)
				}
			}
			shape[ax] += x.Shape[ax]
		}
		if len(n.Inputs) == 1 {
			if _, err := Axis(n.Int("axis", 0), len(shape)); err != nil {
				return nil, err
			}
		}
		return &Info{DType: F32, Shape: shape, Batched: true}, nil
	case "ArgMax":
		x, err := c.floatInput(n, 0)
		if err != nil {
			return nil, err
		}
		ax, err := rowAxis(x, n.Int("axis", 0))
		if err != nil {
			return nil, err
		}
		if n.Int("select_last_index", 0) != 0 {
			return nil, unsupportedAttr("select_last_index=1")
		}
		shape := slices.Clone(x.Shape)
		if n.Int("keepdims", 1) != 0 {
			shape[ax] = 1
		} else {
			shape = slices.Delete(shape, ax, ax+1)
		}
		return &Info{DType: I64, Shape: shape, Batched: x.Batched}, nil
	}
	return c.inferShapeOps(n)
}

// elementwise is the Info of an elementwise binary operator's result,
// of type dt, on operands a and b: their broadcast shape, batched where
// either is.
func elementwise(dt DType, a, b *Info) (*Info, error) {
	shape, err := Broadcast(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	return &Info{DType: dt, Shape: shape, Batched: a.Batched || b.Batched}, nil
}

// Broadcast is the numpy broadcast of shapes a and b, where Batch (dimension
// 0 of a batched value) matches Batch or 1. A batched operand must have the
// result's rank, so that the batch stays dimension 0.
func Broadcast(a, b []int64) ([]int64, error) {
	out, ok := broadcastDims(a, b)
	if !ok {
		return nil, fmt.Errorf("shapes %v and %v do not broadcast", a, b)
	}
	r := len(out)
	if (len(a) > 0 && a[0] == Batch && len(a) != r) || (len(b) > 0 && b[0] == Batch && len(b) != r) {
		return nil, fmt.Errorf("shapes %v and %v: broadcasting would move the batch dimension", a, b)
	}
	for i := 1; i < r; i++ {
		if out[i] == Batch {
			return nil, fmt.Errorf("shapes %v and %v: the batch dimension would not be first", a, b)
		}
	}
	return out, nil
}

// broadcastDims is the numpy broadcast of shapes a and b, aligned on their
// last dimensions: where they differ, one must be 1 (ok is false
// otherwise).
func broadcastDims(a, b []int64) (out []int64, ok bool) {
	r := max(len(a), len(b))
	out = make([]int64, r)
	for i := range r {
		da, db := int64(1), int64(1)
		if j := i - (r - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (r - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, false
		}
	}
	return out, true
}

// ReshapeTarget resolves Reshape's shape for an input of shape in (in[0]
// the batch): the first entry must be 0 or -1 (keep the batch), 0 elsewhere
// copies the input's dimension, and one other -1 is inferred.
func ReshapeTarget(in, target []int64, allowZero bool) ([]int64, error) {
	if len(target) == 0 || len(target) > MaxRank {
		return nil, fmt.Errorf("target shape %v must have 1 to %d dimensions", target, MaxRank)
	}
	if allowZero && slices.Contains(target, 0) {
		return nil, unsupportedAttr("allowzero=1 with a 0 in the shape")
	}
	if target[0] == BatchDim {
		target = append([]int64{0}, target[1:]...)
	}
	if target[0] != 0 && target[0] != -1 {
		return nil, fmt.Errorf("target shape %v must keep the batch first (0 or -1 as its first entry): %w", target, ErrUnsupported)
	}
	rest := elements(in[1:])
	out := []int64{Batch}
	infer := -1
	known := int64(1)
	for i, d := range target[1:] {
		i++
		switch {
		case d == 0:
			if i >= len(in) {
				return nil, fmt.Errorf("target shape %v copies dimension %d, which the input %v lacks", target, i, in)
			}
			d = in[i]
		case d == -1:
			if infer >= 0 || target[0] == -1 {
				return nil, fmt.Errorf("target shape %v has more than one -1", target)
			}
			infer = i
		case d == BatchDim:
			return nil, fmt.Errorf("target shape puts the batch size at position %d: %w", i, errBatchMoves)
		case d < -1:
			return nil, fmt.Errorf("target shape %v has a negative dimension", target)
		}
		if d > 0 {
			known *= d
			if known > rest {
				return nil, fmt.Errorf("cannot reshape %v to %v", in, target)
			}
		}
		out = append(out, d)
	}
	return inferDim(out, infer, known, rest, in, target)
}

// inferDim completes Reshape's result out, whose dimensions other than
// out[infer] hold known elements of total: out[infer] (the target's -1,
// where infer >= 0) is what is left, else known must be total. in and
// target are the reshape, for the errors.
func inferDim(out []int64, infer int, known, total int64, in, target []int64) ([]int64, error) {
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %v to %v", in, target)
		}
		out[infer] = total / known
	} else if known != total {
		return nil, fmt.Errorf("cannot reshape %v to %v: element counts differ", in, target)
	}
	return out, nil
}
