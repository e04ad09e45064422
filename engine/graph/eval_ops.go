package graph

import (
	"fmt"
	"math"
	"slices"
)

// Eval of the operators ops.go infers.

func float32Inf(sign int) float32 { return float32(math.Inf(sign)) }

// batched reports whether the named value depends on a graph input.
func (c *Checked) batched(name string) bool {
	info, ok := c.Values[name]
	return ok && info.Batched
}

// broadcastIndex returns, for a value of shape s broadcast to out, the
// flat index into s of each flat index of out.
func broadcastIndex(s, out []int64) []int64 {
	r := len(out)
	p := make([]int64, r)
	for i := range p {
		p[i] = 1
		if j := i - (r - len(s)); j >= 0 {
			p[i] = s[j]
		}
	}
	sp, so := strides(p), strides(out)
	idx := make([]int64, elements(out))
	for e := range int64(len(idx)) {
		var k int64
		for d := range r {
			if p[d] != 1 {
				k += e / so[d] % out[d] * sp[d]
			}
		}
		idx[e] = k
	}
	return idx
}

// broadcastShape is the numpy broadcast of actual shapes.
func broadcastShape(shapes ...[]int64) ([]int64, error) {
	out := []int64{}
	for _, s := range shapes {
		var ok bool
		if out, ok = broadcastDims(out, s); !ok {
			return nil, fmt.Errorf("shapes %v do not broadcast", shapes)
		}
	}
	return out, nil
}

// broadcastArith is Add, Sub, Mul or Div on FLOAT values, or on INT64
// values (shapes folded at load time) where either is INT64; integer Div
// truncates, as ONNX Runtime's does.
func broadcastArith(op string, a, b *Dense) (*Dense, error) {
	ints := a.I64 != nil || b.I64 != nil
	if ints && (a.I64 == nil && len(a.F32) > 0 || b.I64 == nil && len(b.F32) > 0) {
		return nil, fmt.Errorf("%s mixes INT64 and FLOAT", op)
	}
	// Shapes here are actual: broadcastShape sees no Batch marks.
	out, err := broadcastShape(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	ia, ib := broadcastIndex(a.Shape, out), broadcastIndex(b.Shape, out)
	if !ints {
		y := make([]float32, len(ia))
		for e := range y {
			y[e] = arith(op, a.F32[ia[e]], b.F32[ib[e]])
		}
		return &Dense{Shape: out, F32: y}, nil
	}
	y := make([]int64, len(ia))
	for e := range y {
		u, v := a.I64[ia[e]], b.I64[ib[e]]
		if u == BatchDim || v == BatchDim {
			return nil, errBatchValue
		}
		if op == "Div" && v == 0 {
			return nil, fmt.Errorf("integer division by zero")
		}
		y[e] = arith(op, u, v)
	}
	return &Dense{Shape: out, I64: y}, nil
}

// batchedMatMul is a [..., M, K] times b [..., K, N] with the same leading
// dimensions, summed in float64.
func batchedMatMul(a, b *Dense) *Dense {
	r := len(a.Shape)
	m, k, nn := a.Shape[r-2], a.Shape[r-1], b.Shape[r-1]
	mats := elements(a.Shape[:r-2])
	y := make([]float32, mats*m*nn)
	for p := range mats {
		for i := range m {
			for j := range nn {
				var s float64
				for q := range k {
					s += float64(a.F32[(p*m+i)*k+q]) * float64(b.F32[(p*k+q)*nn+j])
				}
				y[(p*m+i)*nn+j] = float32(s)
			}
		}
	}
	shape := append(slices.Clone(a.Shape[:r-1]), nn)
	return &Dense{Shape: shape, F32: y}
}

func mapF32(x *Dense, f func(float64) float64) *Dense {
	y := make([]float32, len(x.F32))
	for i, v := range x.F32 {
		y[i] = float32(f(float64(v)))
	}
	return &Dense{Shape: x.Shape, F32: y}
}

func evalShapeOps(c *Checked, n *Node, in []*Dense) (*Dense, error) {
	x := in[0]
	switch n.Op {
	case "Pow":
		out, err := broadcastShape(x.Shape, in[1].Shape)
		if err != nil {
			return nil, err
		}
		ia, ib := broadcastIndex(x.Shape, out), broadcastIndex(in[1].Shape, out)
		y := make([]float32, len(ia))
		for e := range y {
			y[e] = float32(math.Pow(float64(x.F32[ia[e]]), float64(in[1].F32[ib[e]])))
		}
		return &Dense{Shape: out, F32: y}, nil
	case "Cast":
		to := n.Int("to", 0)
		switch {
		case x.I64 != nil && to == onnxFloat:
			y := make([]float32, len(x.I64))
			for i, v := range x.I64 {
				if v == BatchDim {
					return nil, errBatchValue
				}
				y[i] = float32(v)
			}
			return &Dense{Shape: x.Shape, F32: y}, nil
		case x.I64 != nil && to == onnxBool:
			y := make([]int64, len(x.I64))
			for i, v := range x.I64 {
				if v != 0 {
					y[i] = 1
				}
			}
			return &Dense{Shape: x.Shape, I64: y}, nil
		case x.I64 != nil || to == onnxFloat:
			return x, nil
		}
		y := make([]int64, len(x.F32))
		for i, v := range x.F32 {
			switch {
			case to == onnxBool && v != 0:
				y[i] = 1
			case to != onnxBool:
				y[i] = int64(v) // truncates toward zero, as C's cast
			}
		}
		return &Dense{Shape: x.Shape, I64: y}, nil
	case "Transpose":
		perm, err := transposePerm(n, len(x.Shape))
		if err != nil {
			return nil, err
		}
		shape := make([]int64, len(perm))
		for i, p := range perm {
			shape[i] = x.Shape[p]
		}
		st, so := strides(x.Shape), strides(shape)
		src := make([]int64, elements(shape))
		for e := range int64(len(src)) {
			var k int64
			for d, p := range perm {
				k += e / so[d] % shape[d] * st[p]
			}
			src[e] = k
		}
		return take(x, shape, src), nil
	case "ConstantOfShape":
		shape := slices.Clone(x.I64)
		total := elements(shape)
		if a, ok := n.Attrs["value"]; ok && a.Kind == AttrInt {
			return &Dense{Shape: shape, I64: slices.Repeat([]int64{a.Int}, int(total))}, nil
		}
		return &Dense{Shape: shape, F32: slices.Repeat([]float32{n.Float("value", 0)}, int(total))}, nil
	case "Gather":
		ax, err := Axis(n.Int("axis", 0), len(x.Shape))
		if err != nil {
			return nil, err
		}
		idx := in[1]
		outer, k, inner := split(x.Shape, ax)
		shape := slices.Concat(x.Shape[:ax], idx.Shape, x.Shape[ax+1:])
		src := make([]int64, 0, elements(shape))
		for o := range outer {
			for _, i := range idx.I64 {
				if i < 0 {
					i += k
				}
				if i < 0 || i >= k {
					return nil, fmt.Errorf("index %d is out of range for axis %d of %v", i, ax, x.Shape)
				}
				for j := range inner {
					src = append(src, (o*k+i)*inner+j)
				}
			}
		}
		return take(x, shape, src), nil
	case "Unsqueeze", "Squeeze":
		shape := c.Values[n.Outputs[0]].Shape
		if c.batched(n.Outputs[0]) {
			shape = slices.Clone(shape)
			shape[0] = x.Shape[0]
		}
		return &Dense{Shape: shape, F32: x.F32, I64: x.I64}, nil
	case "Slice":
		s, err := c.sliceOf(n, x.Shape)
		if err != nil {
			return nil, err
		}
		st, so := strides(x.Shape), strides(s.shape)
		src := make([]int64, elements(s.shape))
		for e := range int64(len(src)) {
			var k int64
			for d := range s.shape {
				k += (s.start[d] + e/so[d]%s.shape[d]*s.step[d]) * st[d]
			}
			src[e] = k
		}
		return take(x, s.shape, src), nil
	case "Equal":
		b := in[1]
		out, err := broadcastShape(x.Shape, b.Shape)
		if err != nil {
			return nil, err
		}
		ia, ib := broadcastIndex(x.Shape, out), broadcastIndex(b.Shape, out)
		y := make([]int64, len(ia))
		for e := range y {
			var eq bool
			if x.I64 != nil {
				u, v := x.I64[ia[e]], b.I64[ib[e]]
				switch {
				case u == BatchDim && v == BatchDim:
					eq = true
				case u == BatchDim || v == BatchDim:
					// The batch size is 1 or more: unequal to anything
					// below 1, unknown otherwise.
					if max(u, v) >= 1 {
						return nil, errBatchValue
					}
				default:
					eq = u == v
				}
			} else {
				eq = x.F32[ia[e]] == b.F32[ib[e]]
			}
			if eq {
				y[e] = 1
			}
		}
		return &Dense{Shape: out, I64: y}, nil
	case "Where":
		cond, a, b := in[0], in[1], in[2]
		out, err := broadcastShape(cond.Shape, a.Shape, b.Shape)
		if err != nil {
			return nil, err
		}
		ic, ia, ib := broadcastIndex(cond.Shape, out), broadcastIndex(a.Shape, out), broadcastIndex(b.Shape, out)
		y := &Dense{Shape: out}
		for e := range ic {
			pick, i := b, ib[e]
			if cond.I64[ic[e]] != 0 {
				pick, i = a, ia[e]
			}
			if a.I64 != nil || b.I64 != nil {
				y.I64 = append(y.I64, pick.I64[i])
			} else {
				y.F32 = append(y.F32, pick.F32[i])
			}
		}
		return y, nil
	case "Expand":
		t := slices.Clone(in[1].I64)
		for i, d := range t {
			if d == BatchDim || d == Batch {
				t[i] = 1
			}
		}
		out, err := broadcastShape(x.Shape, t)
		if err != nil {
			return nil, err
		}
		return take(x, out, broadcastIndex(x.Shape, out)), nil
	case "ReduceMean", "ReduceSum":
		ax, err := c.reduceAxes(n, len(x.Shape))
		if err != nil {
			return nil, err
		}
		if ax == nil {
			return x, nil
		}
		keep := reducedShape(x.Shape, ax, true)
		sums := make([]float64, elements(keep))
		dst := broadcastIndex(keep, x.Shape) // x's element -> its reduced slot
		for e, v := range x.F32 {
			sums[dst[e]] += float64(v)
		}
		count := float64(elements(x.Shape) / max(elements(keep), 1))
		y := make([]float32, len(sums))
		for i, s := range sums {
			if n.Op == "ReduceMean" {
				s /= count
			}
			y[i] = float32(s)
		}
		return &Dense{Shape: reducedShape(x.Shape, ax, n.Int("keepdims", 1) != 0), F32: y}, nil
	}
	return nil, ErrUnsupported
}

// take is x's elements at src, as shape.
func take(x *Dense, shape []int64, src []int64) *Dense {
	y := &Dense{Shape: shape}
	if x.I64 != nil {
		y.I64 = make([]int64, len(src))
		for e, k := range src {
			y.I64[e] = x.I64[k]
		}
		return y
	}
	y.F32 = make([]float32, len(src))
	for e, k := range src {
		y.F32[e] = x.F32[k]
	}
	return y
}
