package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Shape inference for the elementwise, reduction, data-movement and
// shape operators (the ones infer.go does not cover).

var errBatchMoves = errors.New("the batch dimension would not stay first")

// errBatchValue is computing with a folded BatchDim.
var errBatchValue = fmt.Errorf("the value depends on the batch size, which is known only at run time: %w", ErrUnsupported)

// ONNX TensorProto element types Cast takes.
const (
	onnxFloat = 1
	onnxInt64 = 7
	onnxBool  = 9
)

// bounded reports whether shape holds at most MaxRowElements elements,
// without overflowing on the way.
func bounded(shape []int64) bool {
	n := int64(1)
	for _, d := range shape {
		if d < 0 && d != Batch {
			return false
		}
		if d > 0 {
			if n > MaxRowElements/d {
				return false
			}
			n *= d
		}
	}
	return true
}

// allConst reports whether every given input of n is a constant.
func (c *Checked) allConst(n *Node) bool {
	for _, name := range n.Inputs {
		if name == "" {
			continue
		}
		if info, ok := c.Values[name]; !ok || info.Const == nil {
			return false
		}
	}
	return true
}

// constInts is input i as INT64 constant data (a scalar or 1-D).
func (c *Checked) constInts(n *Node, i int) ([]int64, error) {
	info, err := c.input(n, i)
	if err != nil {
		return nil, err
	}
	if info.Const == nil || info.DType != I64 || len(info.Shape) > 1 {
		return nil, fmt.Errorf("input %q must be a constant INT64 scalar or 1-D tensor: %w", n.Inputs[i], ErrUnsupported)
	}
	return info.Const.I64, nil
}

// axesOf is the axes of n: the attribute (older opsets) or input i
// (newer ones); ok is false when neither is given.
func (c *Checked) axesOf(n *Node, i int) (axes []int64, ok bool, err error) {
	if a, has := n.Attrs["axes"]; has {
		return a.Ints, true, nil
	}
	if !optional(n, i) {
		return nil, false, nil
	}
	axes, err = c.constInts(n, i)
	return axes, err == nil, err
}

// squeezeArgs is a Squeeze's or Unsqueeze's data (input 0) and axes
// (ok: given, by input 1 or, before opset 13, the attribute).
func (c *Checked) squeezeArgs(n *Node) (x *Info, axes []int64, ok bool, err error) {
	if x, err = c.input(n, 0); err != nil {
		return nil, nil, false, err
	}
	axes, ok, err = c.axesOf(n, 1)
	return x, axes, ok, err
}

// normAxes normalizes axes for rank r: in range, no repeats, sorted.
func normAxes(axes []int64, r int) ([]int, error) {
	out := make([]int, 0, len(axes))
	for _, a := range axes {
		ax, err := Axis(a, r)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, ax) {
			return nil, fmt.Errorf("axis %d is repeated in %v", a, axes)
		}
		out = append(out, ax)
	}
	slices.Sort(out)
	return out, nil
}

// constScalar is input i as an F32 constant of one element.
func (c *Checked) constScalar(n *Node, i int) (float32, error) {
	info, err := c.floatInput(n, i)
	if err != nil {
		return 0, err
	}
	if info.Const == nil || elements(info.Shape) != 1 {
		return 0, fmt.Errorf("input %q must be a constant scalar: %w", n.Inputs[i], ErrUnsupported)
	}
	return info.Const.F32[0], nil
}

func (c *Checked) inferShapeOps(n *Node) (*Info, error) {
	switch n.Op {
	case "Pow":
		a, b, err := c.floatPair(n)
		if err != nil {
			return nil, err
		}
		return elementwise(F32, a, b)
	case "Cast":
		x, err := c.input(n, 0)
		if err != nil {
			return nil, err
		}
		to, ok := n.Attrs["to"]
		if !ok {
			return nil, errors.New("attribute to is required")
		}
		switch to.Int {
		case onnxFloat:
			return &Info{DType: F32, Shape: x.Shape, Batched: x.Batched}, nil
		case onnxInt64, onnxBool:
			return &Info{DType: I64, Shape: x.Shape, Batched: x.Batched}, nil
		}
		return nil, unsupportedAttr("to=%d (FLOAT, INT64 and BOOL are supported)", to.Int)
	case "Transpose":
		x, err := c.input(n, 0)
		if err != nil {
			return nil, err
		}
		perm, err := transposePerm(n, len(x.Shape))
		if err != nil {
			return nil, err
		}
		if x.Batched {
			if perm[0] != 0 {
				return nil, fmt.Errorf("perm %v: %w", perm, errBatchMoves)
			}
			if x.DType != F32 {
				return nil, fmt.Errorf("transposing a batched %v value: %w", x.DType, ErrUnsupported)
			}
		}
		shape := make([]int64, len(perm))
		for i, p := range perm {
			shape[i] = x.Shape[p]
		}
		return &Info{DType: x.DType, Shape: shape, Batched: x.Batched}, nil
	case "Shape":
		x, err := c.input(n, 0)
		if err != nil {
			return nil, err
		}
		r := int64(len(x.Shape))
		clampIdx := func(v int64) int64 {
			if v < 0 {
				v += r
			}
			return min(max(v, 0), r)
		}
		start, end := clampIdx(n.Int("start", 0)), clampIdx(n.Int("end", r))
		dims := []int64{}
		for i := start; i < end; i++ {
			d := x.Shape[i]
			if d == Batch {
				d = BatchDim
			}
			dims = append(dims, d)
		}
		k := &Const{DType: I64, Shape: []int64{int64(len(dims))}, I64: dims}
		return &Info{DType: I64, Shape: k.Shape, Const: k}, nil
	case "Constant":
		var k *Const
		for name, a := range n.Attrs {
			switch {
			case name == "value_float" && a.Kind == AttrFloat:
				k = &Const{DType: F32, Shape: []int64{}, F32: []float32{a.Float}}
			case name == "value_floats" && a.Kind == AttrFloats:
				k = &Const{DType: F32, Shape: []int64{int64(len(a.Floats))}, F32: a.Floats}
			case name == "value_int" && a.Kind == AttrInt:
				k = &Const{DType: I64, Shape: []int64{}, I64: []int64{a.Int}}
			case name == "value_ints" && a.Kind == AttrInts:
				k = &Const{DType: I64, Shape: []int64{int64(len(a.Ints))}, I64: a.Ints}
			default:
				return nil, unsupportedAttr("%s", name)
			}
		}
		if k == nil || len(n.Attrs) != 1 {
			return nil, errors.New("a Constant node needs exactly one value attribute")
		}
		return &Info{DType: k.DType, Shape: k.Shape, Const: k}, nil
	case "ConstantOfShape":
		dims, err := c.constInts(n, 0)
		if err != nil {
			return nil, err
		}
		total := int64(1)
		for _, d := range dims {
			if d == BatchDim {
				return nil, errBatchValue
			}
			if d < 0 || (d > 0 && total > MaxRowElements/d) {
				return nil, fmt.Errorf("shape %v is negative or too large", dims)
			}
			total *= d
		}
		dt := F32
		if a, ok := n.Attrs["value"]; ok && a.Kind == AttrInt {
			dt = I64
		}
		return &Info{DType: dt, Shape: slices.Clone(dims)}, nil
	case "Gather":
		return c.inferGather(n)
	case "Unsqueeze":
		x, axes, ok, err := c.squeezeArgs(n)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.New("axes are required")
		}
		r := len(x.Shape) + len(axes)
		if r > MaxRank {
			return nil, fmt.Errorf("result has %d dimensions, at most %d", r, MaxRank)
		}
		ax, err := normAxes(axes, r)
		if err != nil {
			return nil, err
		}
		if x.Batched && len(ax) > 0 && ax[0] == 0 {
			return nil, errBatchAxis
		}
		shape := make([]int64, 0, r)
		j := 0
		for i := range r {
			if slices.Contains(ax, i) {
				shape = append(shape, 1)
				continue
			}
			shape = append(shape, x.Shape[j])
			j++
		}
		return &Info{DType: x.DType, Shape: shape, Batched: x.Batched}, nil
	case "Squeeze":
		x, axes, ok, err := c.squeezeArgs(n)
		if err != nil {
			return nil, err
		}
		var ax []int
		if ok {
			if ax, err = normAxes(axes, len(x.Shape)); err != nil {
				return nil, err
			}
		} else {
			for i, d := range x.Shape {
				if d == 1 && (!x.Batched || i != 0) {
					ax = append(ax, i)
				}
			}
		}
		var shape []int64
		for i, d := range x.Shape {
			if !slices.Contains(ax, i) {
				shape = append(shape, d)
				continue
			}
			if x.Batched && i == 0 {
				return nil, errBatchAxis
			}
			if d != 1 {
				return nil, fmt.Errorf("axis %d has size %d, not 1", i, d)
			}
		}
		if shape == nil {
			shape = []int64{}
		}
		return &Info{DType: x.DType, Shape: shape, Batched: x.Batched}, nil
	case "Slice":
		x, err := c.input(n, 0)
		if err != nil {
			return nil, err
		}
		sl, err := c.sliceOf(n, x.Shape)
		if err != nil {
			return nil, err
		}
		if x.Batched {
			if x.DType != F32 {
				return nil, fmt.Errorf("slicing a batched %v value: %w", x.DType, ErrUnsupported)
			}
			for d, step := range sl.step {
				if step < 0 || (d == len(sl.step)-1 && step != 1) {
					return nil, fmt.Errorf("steps %v on a batched value (positive, and 1 on the last axis): %w", sl.step, ErrUnsupported)
				}
			}
		}
		return &Info{DType: x.DType, Shape: sl.shape, Batched: x.Batched}, nil
	case "Equal":
		a, b, err := c.inputPair(n)
		if err != nil {
			return nil, err
		}
		if a.DType != b.DType {
			return nil, fmt.Errorf("inputs are %v and %v", a.DType, b.DType)
		}
		return elementwise(I64, a, b)
	case "Where":
		cond, x, err := c.inputPair(n)
		if err != nil {
			return nil, err
		}
		y, err := c.input(n, 2)
		if err != nil {
			return nil, err
		}
		if x.DType != y.DType {
			return nil, fmt.Errorf("inputs X and Y are %v and %v", x.DType, y.DType)
		}
		if cond.DType != I64 {
			return nil, fmt.Errorf("the condition is %v, want a boolean", cond.DType)
		}
		batched := cond.Batched || x.Batched || y.Batched
		if batched && x.DType != F32 {
			return nil, fmt.Errorf("where on batched values takes F32 values: %w", ErrUnsupported)
		}
		shape, err := Broadcast(cond.Shape, x.Shape)
		if err != nil {
			return nil, err
		}
		if shape, err = Broadcast(shape, y.Shape); err != nil {
			return nil, err
		}
		return &Info{DType: x.DType, Shape: shape, Batched: batched}, nil
	case "Expand":
		x, err := c.input(n, 0)
		if err != nil {
			return nil, err
		}
		target, err := c.constInts(n, 1)
		if err != nil {
			return nil, err
		}
		t := slices.Clone(target)
		for i, d := range t {
			switch {
			case d == BatchDim && i == 0 && x.Batched && len(t) == len(x.Shape):
				t[i] = Batch
			case d == BatchDim:
				return nil, errBatchValue
			case d < 1 && (d != Batch || i != 0):
				return nil, fmt.Errorf("target shape %v has a dimension below 1", target)
			}
		}
		shape, err := Broadcast(x.Shape, t)
		if err != nil {
			return nil, err
		}
		if !bounded(shape[min(1, len(shape)):]) || (!x.Batched && !bounded(shape)) {
			return nil, fmt.Errorf("shape %v is too large", shape)
		}
		return &Info{DType: x.DType, Shape: shape, Batched: x.Batched}, nil
	case "ReduceMean", "ReduceSum":
		x, err := c.floatInput(n, 0)
		if err != nil {
			return nil, err
		}
		ax, err := c.reduceAxes(n, len(x.Shape))
		if err != nil {
			return nil, err
		}
		if x.Batched && len(ax) > 0 && ax[0] == 0 {
			return nil, errBatchAxis
		}
		return &Info{DType: F32, Shape: reducedShape(x.Shape, ax, n.Int("keepdims", 1) != 0), Batched: x.Batched}, nil
	}
	return nil, &Error{Node: n.Name, Op: n.Op, Err: ErrUnsupported}
}

// reduceAxes is the normalized axes a ReduceMean or ReduceSum reduces; nil
// (with noop_with_empty_axes=1) means none.
func (c *Checked) reduceAxes(n *Node, r int) ([]int, error) {
	axes, ok, err := c.axesOf(n, 1)
	if err != nil {
		return nil, err
	}
	if !ok || len(axes) == 0 {
		if n.Int("noop_with_empty_axes", 0) != 0 {
			return nil, nil
		}
		all := make([]int, r)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	return normAxes(axes, r)
}

func reducedShape(shape []int64, ax []int, keep bool) []int64 {
	out := []int64{}
	for i, d := range shape {
		switch {
		case !slices.Contains(ax, i):
			out = append(out, d)
		case keep:
			out = append(out, 1)
		}
	}
	return out
}

// clipBounds is Clip's min and max: attributes before opset 11, constant
// scalar inputs after; an absent bound is ±Inf.
func clipBounds(c *Checked, n *Node) ([2]float32, error) {
	b := [2]float32{float32Inf(-1), float32Inf(1)}
	for i, name := range []string{"min", "max"} {
		if a, ok := n.Attrs[name]; ok {
			b[i] = a.Float
			continue
		}
		if optional(n, i+1) {
			v, err := c.constScalar(n, i+1)
			if err != nil {
				return b, err
			}
			b[i] = v
		}
	}
	return b, nil
}

// transposePerm is Transpose's perm (the reversed axes by default),
// checked to be a permutation of rank r.
func transposePerm(n *Node, r int) ([]int, error) {
	perm := make([]int, r)
	a, ok := n.Attrs["perm"]
	if !ok {
		for i := range perm {
			perm[i] = r - 1 - i
		}
		return perm, nil
	}
	if len(a.Ints) != r {
		return nil, fmt.Errorf("perm %v has %d entries for rank %d", a.Ints, len(a.Ints), r)
	}
	seen := make([]bool, r)
	for i, p := range a.Ints {
		if p < 0 || p >= int64(r) || seen[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of %d axes", a.Ints, r)
		}
		seen[p] = true
		perm[i] = int(p)
	}
	return perm, nil
}

func (c *Checked) inferGather(n *Node) (*Info, error) {
	data, idx, err := c.inputPair(n)
	if err != nil {
		return nil, err
	}
	if idx.DType != I64 {
		return nil, fmt.Errorf("the indices are %v, want INT64", idx.DType)
	}
	ax, err := Axis(n.Int("axis", 0), len(data.Shape))
	if err != nil {
		return nil, err
	}
	shape := slices.Concat(data.Shape[:ax], idx.Shape, data.Shape[ax+1:])
	switch {
	case data.Batched && idx.Batched:
		return nil, fmt.Errorf("gathering from a batched value with batched indices: %w", ErrUnsupported)
	case data.Batched && ax == 0:
		return nil, errBatchAxis
	case data.Batched && data.DType != F32:
		return nil, fmt.Errorf("gathering from a batched %v value: %w", data.DType, ErrUnsupported)
	case idx.Batched && (ax != 0 || data.DType != F32):
		return nil, fmt.Errorf("batched indices gather F32 constant data along axis 0 (an embedding lookup): %w", ErrUnsupported)
	case !idx.Batched:
		// Folded: check the indices now.
		for _, i := range idx.Const.I64 {
			if i < -data.Shape[ax] || i >= data.Shape[ax] {
				if i == BatchDim {
					return nil, errBatchValue
				}
				return nil, fmt.Errorf("index %d is out of range for axis %d of %v", i, ax, data.Shape)
			}
		}
	}
	return &Info{DType: data.DType, Shape: shape, Batched: idx.Batched || data.Batched}, nil
}

// inferBatchedMatMul is MatMul of two batched values: the same leading
// dimensions (the batch first), a [..., M, K] times b [..., K, N].
func (c *Checked) inferBatchedMatMul(a, b *Info) (*Info, error) {
	r := len(a.Shape)
	if !a.Batched || len(b.Shape) != r || r < 3 {
		return nil, fmt.Errorf("MatMul of batched values needs both batched, of the same rank, 3 or more; got %v and %v: %w", a.Shape, b.Shape, ErrUnsupported)
	}
	if !slices.Equal(a.Shape[:r-2], b.Shape[:r-2]) || a.Shape[r-1] != b.Shape[r-2] {
		return nil, fmt.Errorf("shapes %v and %v do not multiply", a.Shape, b.Shape)
	}
	shape := append(slices.Clone(a.Shape[:r-1]), b.Shape[r-1])
	return &Info{DType: F32, Shape: shape, Batched: true}, nil
}

func (c *Checked) inferConstConcat(n *Node) (*Info, error) {
	var shape []int64
	var dt DType
	for i := range n.Inputs {
		x, err := c.input(n, i)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			shape, dt = slices.Clone(x.Shape), x.DType
			if _, err := Axis(n.Int("axis", 0), len(shape)); err != nil {
				return nil, err
			}
			continue
		}
		ax, _ := Axis(n.Int("axis", 0), len(shape))
		if x.DType != dt || len(x.Shape) != len(shape) {
			return nil, fmt.Errorf("input %q (%v %v) does not concatenate with %v %v", n.Inputs[i], x.DType, x.Shape, dt, shape)
		}
		for d := range shape {
			if d != ax && shape[d] != x.Shape[d] {
				return nil, fmt.Errorf("input %q has shape %v, which differs from %v outside axis %d", n.Inputs[i], x.Shape, shape, ax)
			}
		}
		shape[ax] += x.Shape[ax]
	}
	return &Info{DType: dt, Shape: shape}, nil
}

// constReshape is Reshape's result shape for a constant of shape in.
func constReshape(in, target []int64, allowZero bool) ([]int64, error) {
	out := slices.Clone(target)
	infer := -1
	known := int64(1)
	for i, d := range out {
		switch {
		case d == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("target shape %v copies dimension %d, which the input %v lacks", target, i, in)
			}
			out[i] = in[i]
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("target shape %v has more than one -1", target)
			}
			infer = i
			continue
		case d == BatchDim:
			return nil, errBatchValue
		case d < -1:
			return nil, fmt.Errorf("target shape %v has a negative dimension", target)
		}
		known *= out[i]
	}
	return inferDim(out, infer, known, elements(in), in, target)
}

// slice is a resolved Slice: per axis of the input, start and step, and
// the result shape.
type slice struct {
	start, step []int64
	shape       []int64
}

// SliceParams resolves Slice node n of c for an input of the given
// actual shape: per axis, the first index taken, the step and the
// result's size.
func (c *Checked) SliceParams(n *Node, shape []int64) (start, step, out []int64, err error) {
	s, err := c.sliceOf(n, shape)
	if err != nil {
		return nil, nil, nil, err
	}
	return s.start, s.step, s.shape, nil
}

func (c *Checked) sliceOf(n *Node, shape []int64) (*slice, error) {
	r := len(shape)
	var starts, ends, axes, steps []int64
	if a, ok := n.Attrs["starts"]; ok { // before opset 10
		starts, ends, axes = a.Ints, n.Attrs["ends"].Ints, n.Attrs["axes"].Ints
	} else {
		var err error
		if starts, err = c.constInts(n, 1); err != nil {
			return nil, err
		}
		if ends, err = c.constInts(n, 2); err != nil {
			return nil, err
		}
		if optional(n, 3) {
			if axes, err = c.constInts(n, 3); err != nil {
				return nil, err
			}
		}
		if optional(n, 4) {
			if steps, err = c.constInts(n, 4); err != nil {
				return nil, err
			}
		}
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if steps == nil {
		steps = slices.Repeat([]int64{1}, len(starts))
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("starts %v, ends %v, axes %v and steps %v differ in length", starts, ends, axes, steps)
	}
	s := &slice{start: make([]int64, r), step: slices.Repeat([]int64{1}, r), shape: slices.Clone(shape)}
	seen := map[int]bool{}
	for i := range starts {
		ax, err := Axis(axes[i], r)
		if err != nil {
			return nil, err
		}
		if seen[ax] {
			return nil, fmt.Errorf("axis %d is repeated in %v", axes[i], axes)
		}
		seen[ax] = true
		d, st, en, step := shape[ax], starts[i], ends[i], steps[i]
		if step == 0 {
			return nil, errors.New("a step is 0")
		}
		step = min(max(step, -1<<40), 1<<40) // no overflow below; the count is the same
		if d == Batch {
			// The whole batch (0 to the end, as exporters write x[:, ...])
			// is the only slice of it that keeps rows independent.
			if st != 0 || en < math.MaxInt32 || step != 1 {
				return nil, fmt.Errorf("starts %v, ends %v on axis 0: %w", starts, ends, errBatchAxis)
			}
			continue
		}
		if st < 0 {
			st += d
		}
		if en < 0 {
			en += d
		}
		var count int64
		if step > 0 {
			st, en = min(max(st, 0), d), min(max(en, 0), d)
			if en > st {
				count = (en - st + step - 1) / step
			}
		} else {
			st, en = min(max(st, -1), d-1), min(max(en, -1), d-1)
			if st > en {
				count = (st - en - step - 1) / -step
			}
		}
		s.start[ax], s.step[ax], s.shape[ax] = st, step, count
	}
	return s, nil
}

// fold computes n, whose inputs are constants, into a constant of the
// shape infer found.
func (c *Checked) fold(n *Node, out *Info) (k *Const, err error) {
	if !bounded(out.Shape) {
		return nil, fmt.Errorf("folding to shape %v: too large", out.Shape)
	}
	ins := make([]*Dense, len(n.Inputs))
	for j, name := range n.Inputs {
		if name == "" {
			continue
		}
		info, ok := c.Values[name]
		if !ok || info.Const == nil {
			return nil, fmt.Errorf("input %q is not a constant", name)
		}
		kc := info.Const
		ins[j] = &Dense{Shape: kc.Shape, F32: kc.F32, I64: kc.I64}
	}
	c.Values[n.Outputs[0]] = out // Squeeze and Unsqueeze read their shape
	defer func() {
		if r := recover(); r != nil {
			k, err = nil, fmt.Errorf("folding the constant: %v", r)
		}
	}()
	d, err := evalNode(c, n, ins)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(d.Shape, out.Shape) {
		return nil, fmt.Errorf("folding gave shape %v, want %v", d.Shape, out.Shape)
	}
	k = &Const{DType: out.DType, Shape: slices.Clone(out.Shape), F32: d.F32, I64: d.I64}
	if out.DType == F32 && k.F32 == nil {
		k.F32 = []float32{}
	}
	if out.DType == I64 && k.I64 == nil {
		k.I64 = []int64{}
	}
	return k, nil
}
