package graph

import (
	"fmt"
	"math"
	"slices"
)

// Dense is a value in Eval: its actual shape (the batch resolved) and F32
// or I64 data, row-major.
type Dense struct {
	Shape []int64
	F32   []float32
	I64   []int64
}

// Eval computes a checked graph in pure Go, straightforwardly and in
// float64 where it sums, as the reference the ggml executor is tested
// against. inputs holds one value per graph input, by name; the result
// holds the graph outputs by name.
func Eval(c *Checked, inputs map[string]*Dense) (map[string]*Dense, error) {
	vals := map[string]*Dense{}
	for i := range c.Consts {
		k := &c.Consts[i]
		vals[k.Name] = &Dense{Shape: k.Shape, F32: k.F32, I64: k.I64}
	}
	for _, in := range c.Inputs {
		d, ok := inputs[in.Name]
		if !ok {
			return nil, fmt.Errorf("input %q is missing", in.Name)
		}
		data := len(d.F32)
		if in.DType == I64 {
			data = len(d.I64)
		}
		if int64(data) != elements(d.Shape) || len(d.Shape) != len(in.Shape) {
			return nil, fmt.Errorf("input %q: shape %v does not match its data or %v", in.Name, d.Shape, in.Shape)
		}
		vals[in.Name] = d
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		ins := make([]*Dense, len(n.Inputs))
		for j, name := range n.Inputs {
			if name != "" {
				ins[j] = vals[name]
			}
		}
		var outs []*Dense
		var err error
		if f, ok := opFiles[n.Op]; ok {
			outs, err = f.eval(c, n, ins)
		} else {
			var out *Dense
			out, err = evalNode(c, n, ins)
			outs = []*Dense{out}
		}
		if err != nil {
			return nil, &Error{Node: n.Name, Op: n.Op, Err: err}
		}
		for j, out := range outs {
			if j < len(n.Outputs) && n.Outputs[j] != "" {
				vals[n.Outputs[j]] = out
			}
		}
	}
	res := map[string]*Dense{}
	for _, o := range c.Outputs {
		res[o.Name] = vals[o.Name]
	}
	return res, nil
}

// strides of a row-major shape.
func strides(shape []int64) []int64 {
	s := make([]int64, len(shape))
	n := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = n
		n *= shape[i]
	}
	return s
}

// split returns the sizes before, at and after axis.
func split(shape []int64, ax int) (outer, k, inner int64) {
	return elements(shape[:ax]), shape[ax], elements(shape[ax+1:])
}

func evalNode(c *Checked, n *Node, in []*Dense) (*Dense, error) {
	x := in[0]
	switch n.Op {
	case "Identity":
		return x, nil
	case "Relu", "Tanh", "Sigmoid", "Gelu", "Erf", "Sqrt", "LeakyRelu", "HardSigmoid", "Clip":
		f, err := c.unaryFunc(n)
		if err != nil {
			return nil, err
		}
		return mapF32(x, f), nil
	case "Add", "Sub", "Mul", "Div":
		return broadcastArith(n.Op, x, in[1])
	case "MatMul", "Gemm":
		w := in[1]
		if n.Op == "MatMul" && len(w.Shape) > 2 {
			return batchedMatMul(x, w), nil
		}
		kk, nn := w.Shape[0], w.Shape[1]
		wt := func(k, j int64) float32 { return w.F32[k*nn+j] }
		alpha, beta := float64(1), float64(1)
		if n.Op == "Gemm" {
			alpha, beta = float64(n.Float("alpha", 1)), float64(n.Float("beta", 1))
			if n.Int("transB", 0) != 0 {
				kk, nn = nn, kk
				wt = func(k, j int64) float32 { return w.F32[j*kk+k] }
			}
		}
		rows := elements(x.Shape) / kk
		y := make([]float32, rows*nn)
		for r := range rows {
			for j := range nn {
				var s float64
				for k := range kk {
					s += float64(x.F32[r*kk+k]) * float64(wt(k, j))
				}
				y[r*nn+j] = float32(alpha * s)
			}
		}
		shape := append(slices.Clone(x.Shape[:len(x.Shape)-1]), nn)
		out := &Dense{Shape: shape, F32: y}
		if n.Op == "Gemm" && len(in) > 2 && in[2] != nil {
			cb := &Dense{Shape: in[2].Shape, F32: make([]float32, len(in[2].F32))}
			for i, v := range in[2].F32 {
				cb.F32[i] = float32(beta * float64(v))
			}
			return broadcastArith("Add", out, cb)
		}
		return out, nil
	case "Softmax":
		def := int64(-1)
		if c.Opset != 0 && c.Opset < 13 {
			def = 1
		}
		ax, _ := Axis(n.Int("axis", def), len(x.Shape))
		outer, k, inner := split(x.Shape, ax)
		if def == 1 {
			outer, k, inner = elements(x.Shape[:ax]), elements(x.Shape[ax:]), 1
		}
		y := make([]float32, len(x.F32))
		for o := range outer {
			for i := range inner {
				at := func(j int64) int64 { return (o*k+j)*inner + i }
				m := math.Inf(-1)
				for j := range k {
					m = max(m, float64(x.F32[at(j)]))
				}
				var s float64
				for j := range k {
					s += math.Exp(float64(x.F32[at(j)]) - m)
				}
				for j := range k {
					y[at(j)] = float32(math.Exp(float64(x.F32[at(j)])-m) / s)
				}
			}
		}
		return &Dense{Shape: x.Shape, F32: y}, nil
	case "LayerNormalization":
		ax, _ := Axis(n.Int("axis", -1), len(x.Shape))
		eps := float64(n.Float("epsilon", 1e-5))
		k := elements(x.Shape[ax:])
		y := make([]float32, len(x.F32))
		for o := range int64(len(x.F32)) / k {
			row := x.F32[o*k : (o+1)*k]
			var mean, vr float64
			for _, v := range row {
				mean += float64(v)
			}
			mean /= float64(k)
			for _, v := range row {
				vr += (float64(v) - mean) * (float64(v) - mean)
			}
			vr /= float64(k)
			for j, v := range row {
				f := (float64(v) - mean) / math.Sqrt(vr+eps)
				f *= float64(in[1].F32[j])
				if len(in) > 2 && in[2] != nil {
					f += float64(in[2].F32[j])
				}
				y[o*k+int64(j)] = float32(f)
			}
		}
		return &Dense{Shape: x.Shape, F32: y}, nil
	case "Flatten":
		return &Dense{Shape: []int64{x.Shape[0], elements(x.Shape[1:])}, F32: x.F32}, nil
	case "Reshape":
		if !c.batched(n.Inputs[0]) {
			shape, err := constReshape(x.Shape, in[1].I64, n.Int("allowzero", 0) != 0)
			return &Dense{Shape: shape, F32: x.F32, I64: x.I64}, err
		}
		shape, err := ReshapeTarget(append([]int64{Batch}, x.Shape[1:]...), in[1].I64, false)
		if err != nil {
			return nil, err
		}
		shape[0] = x.Shape[0]
		return &Dense{Shape: shape, F32: x.F32, I64: x.I64}, nil
	case "Concat":
		ax, _ := Axis(n.Int("axis", 0), len(x.Shape))
		shape := slices.Clone(x.Shape)
		shape[ax] = 0
		for _, d := range in {
			shape[ax] += d.Shape[ax]
		}
		outer, _, inner := split(shape, ax)
		var y []float32
		var yi []int64
		for o := range outer {
			for _, d := range in {
				k := d.Shape[ax]
				if d.I64 != nil {
					yi = append(yi, d.I64[o*k*inner:(o+1)*k*inner]...)
					continue
				}
				y = append(y, d.F32[o*k*inner:(o+1)*k*inner]...)
			}
		}
		return &Dense{Shape: shape, F32: y, I64: yi}, nil
	case "ArgMax":
		ax, _ := Axis(n.Int("axis", 0), len(x.Shape))
		outer, k, inner := split(x.Shape, ax)
		y := make([]int64, outer*inner)
		for o := range outer {
			for i := range inner {
				best := int64(0)
				for j := range k {
					if x.F32[(o*k+j)*inner+i] > x.F32[(o*k+best)*inner+i] {
						best = j
					}
				}
				y[o*inner+i] = best
			}
		}
		shape := slices.Clone(x.Shape)
		if n.Int("keepdims", 1) != 0 {
			shape[ax] = 1
		} else {
			shape = slices.Delete(shape, ax, ax+1)
		}
		return &Dense{Shape: shape, I64: y}, nil
	}
	return evalShapeOps(c, n, in)
}

// arith is Add, Sub, Mul or Div (any other op) of u and v, for FLOAT
// and INT64 operands alike.
func arith[T float32 | int64](op string, u, v T) T {
	switch op {
	case "Add":
		return u + v
	case "Sub":
		return u - v
	case "Mul":
		return u * v
	}
	return u / v
}

// unaryFunc is the function of an elementwise float node n (the ops of
// Activation and Clip), with its attributes and constant inputs checked:
// shape inference checks them, Eval maps the input through it.
func (c *Checked) unaryFunc(n *Node) (func(float64) float64, error) {
	switch n.Op {
	case "Gelu":
		if a := n.Str("approximate", "none"); a != "none" && a != "tanh" {
			return nil, unsupportedAttr("approximate=%q", a)
		}
	case "Clip":
		b, err := clipBounds(c, n)
		if err != nil {
			return nil, err
		}
		lo, hi := float64(b[0]), float64(b[1])
		return func(f float64) float64 {
			if math.IsNaN(f) {
				return f
			}
			return min(max(f, lo), hi)
		}, nil
	}
	return Activation(n), nil
}

// Activation is the function of a Relu, Tanh, Sigmoid, Gelu (with its
// approximate attribute), Erf, Sqrt, LeakyRelu or HardSigmoid node n (with
// their alpha and beta), in float64: what Eval computes, and the MLP's
// pure-Go reference with it. Any other op is the identity.
func Activation(n *Node) func(float64) float64 {
	switch n.Op {
	case "Relu":
		return func(f float64) float64 { return max(f, 0) }
	case "Tanh":
		return math.Tanh
	case "Sigmoid":
		return func(f float64) float64 { return 1 / (1 + math.Exp(-f)) }
	case "Gelu":
		if n.Str("approximate", "none") == "tanh" {
			return func(f float64) float64 { return 0.5 * f * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(f+0.044715*f*f*f))) }
		}
		return func(f float64) float64 { return 0.5 * f * (1 + math.Erf(f/math.Sqrt2)) }
	case "Erf":
		return math.Erf
	case "Sqrt":
		return math.Sqrt
	case "LeakyRelu":
		alpha := float64(n.Float("alpha", 0.01))
		return func(f float64) float64 {
			if f < 0 {
				return alpha * f
			}
			return f
		}
	case "HardSigmoid":
		alpha, beta := float64(n.Float("alpha", 0.2)), float64(n.Float("beta", 0.5))
		return func(f float64) float64 { return max(0, min(1, alpha*f+beta)) }
	}
	return func(f float64) float64 { return f }
}
