//go:build cgo

package tensorgraph

/*
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include <math.h>

// llmserve_argmax_first writes, for each row of the contiguous F32 matrix
// src[0] (ne0 columns), the index of its FIRST maximum, as ONNX (with
// select_last_index=0, its default), ONNX Runtime, torch and numpy do.
// ggml_argmax keeps the last of tied maxima.
static void llmserve_argmax_first(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	(void)ud;
	const struct ggml_tensor * src = dst->src[0];
	const int64_t k = src->ne[0];
	const int64_t rows = ggml_nelements(dst);
	for (int64_t r = ith; r < rows; r += nth) {
		const float * x = (const float *)((const char *)src->data + r*src->nb[1]);
		int32_t best = 0;
		for (int64_t j = 1; j < k; j++) {
			if (x[j] > x[best]) {
				best = (int32_t)j;
			}
		}
		((int32_t *)dst->data)[r] = best;
	}
}

// llmserve_relu is max(x, 0) that keeps NaN, as ONNX Runtime does;
// ggml_relu computes x > 0 ? x : 0, which turns NaN into 0.
static void llmserve_relu(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * ud) {
	(void)ud;
	const int64_t n = ggml_nelements(dst);
	const int64_t per = (n + nth - 1) / nth;
	const int64_t lo = per * ith, hi = lo + per < n ? lo + per : n;
	const float * x = (const float *)a->data;
	float * y = (float *)dst->data;
	for (int64_t i = lo; i < hi; i++) {
		const float v = x[i];
		y[i] = (v > 0.0f || isnan(v)) ? v : 0.0f;
	}
}

static struct ggml_tensor * llmserve_argmax_first_op(struct ggml_context * ctx, struct ggml_tensor * a) {
	struct ggml_tensor * args[1] = {a};
	return ggml_custom_4d(ctx, GGML_TYPE_I32, a->ne[1], 1, 1, 1, args, 1, llmserve_argmax_first, GGML_N_TASKS_MAX, NULL);
}

static struct ggml_tensor * llmserve_relu_op(struct ggml_context * ctx, struct ggml_tensor * a) {
	return ggml_map_custom1(ctx, a, llmserve_relu, GGML_N_TASKS_MAX, NULL);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmserve/llmserve/engine/graph"
)

// gval is a value during graph building: its ggml tensor and numpy shape.
type gval struct {
	t     *C.struct_ggml_tensor
	shape []int64
}

// builder turns a checked graph into a ggml graph for one batch size.
type builder struct {
	m    *GraphModel
	ctx  *C.struct_ggml_context
	rows int64
	vals map[string]gval
}

// graphNodes bounds the ggml tensors and graph nodes one IR node may make.
const graphNodesPerOp = 16

func (m *GraphModel) build(rows int) (*builtGraph, error) {
	nodes := C.size_t(graphNodesPerOp*(len(m.g.Nodes)+len(m.g.Inputs)+len(m.g.Outputs)) + 64)
	size := nodes*C.ggml_tensor_overhead() + C.ggml_graph_overhead_custom(nodes, false)
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: size, mem_buffer: nil, no_alloc: true})
	if ctx == nil {
		return nil, errors.New("llamacpp: ggml_init failed")
	}
	b := &builtGraph{ctx: ctx}
	bl := &builder{m: m, ctx: ctx, rows: int64(rows), vals: map[string]gval{}}
	for _, in := range m.g.Inputs {
		shape := bl.actual(in.Shape)
		typ := C.enum_ggml_type(C.GGML_TYPE_F32)
		if in.DType == graph.I64 {
			typ = C.GGML_TYPE_I32 // Run checks the values fit
		}
		t := newTensor(ctx, typ, shape)
		C.ggml_set_input(t)
		bl.vals[in.Name] = gval{t, shape}
		b.inputs = append(b.inputs, t)
	}
	for i := range m.g.Nodes {
		n := &m.g.Nodes[i]
		vs, err := bl.nodeOutputs(n)
		if err != nil {
			b.free()
			return nil, &graph.Error{Node: n.Name, Op: n.Op, Err: err}
		}
		for j, v := range vs {
			if j < len(n.Outputs) && n.Outputs[j] != "" {
				bl.vals[n.Outputs[j]] = v
			}
		}
	}
	b.gf = C.ggml_new_graph_custom(ctx, nodes, false)
	for _, out := range m.g.Outputs {
		v := bl.vals[out.Name]
		t := v.t
		if !C.ggml_is_contiguous(t) || t.op == C.GGML_OP_NONE {
			t = C.ggml_cont(ctx, t)
		}
		C.ggml_set_output(t)
		C.ggml_build_forward_expand(b.gf, t)
		b.outputs = append(b.outputs, t)
	}
	b.galloc = C.ggml_gallocr_new(C.ggml_backend_cpu_buffer_type())
	if b.galloc == nil || !C.ggml_gallocr_alloc_graph(b.galloc, b.gf) {
		b.free()
		return nil, errors.New("llamacpp: allocating the compute graph failed")
	}
	return b, nil
}

// mulMat is ggml_mul_mat(a, b), computed the same way whatever b's row
// count. ggml's CPU mul_mat multiplies a single row of b (ne[1] = 1) with
// vec_dot (several partial sums per dot product) and two rows or more
// with llamafile's sgemm (one FMA chain per 8 lanes); the two round
// differently, so a single row is padded with a row of zeros and the
// product's first row kept: row 0 of a one-row batch then has the bits it
// has in any larger batch. From two rows on, the per-element arithmetic
// depends only on a's shape (sgemm's tile sizes change with the rows, its
// FMA chain per element does not). Only the product is padded, not the
// whole graph: a one-row batch computes one row up to here (a CNN's
// convolutions are most of its time).
func (bl *builder) mulMat(a, b *C.struct_ggml_tensor) *C.struct_ggml_tensor {
	if b.ne[1] != 1 {
		return C.ggml_mul_mat(bl.ctx, a, b)
	}
	y := C.ggml_mul_mat(bl.ctx, a, C.ggml_pad(bl.ctx, b, 0, 1, 0, 0))
	first := C.ggml_view_4d(bl.ctx, y, y.ne[0], 1, y.ne[2], y.ne[3], y.nb[1], y.nb[2], y.nb[3], 0)
	return C.ggml_cont(bl.ctx, first)
}

// actual replaces the batch dimension with the row count.
func (bl *builder) actual(shape []int64) []int64 {
	s := slices.Clone(shape)
	if len(s) > 0 && s[0] == graph.Batch {
		s[0] = bl.rows
	}
	return s
}

// value returns the tensor for a node input: a computed value or a
// constant in its plain form.
func (bl *builder) value(name string) (gval, error) {
	if v, ok := bl.vals[name]; ok {
		return v, nil
	}
	return bl.weight(name, "")
}

func (bl *builder) weight(name, form string) (gval, error) {
	t, ok := bl.m.weights[weightKey(name, form)]
	if !ok {
		return gval{}, fmt.Errorf("value %q is not available", name)
	}
	info := bl.m.g.Values[name]
	shape := info.Shape
	if form == "T" {
		shape = []int64{shape[1], shape[0]}
	}
	return gval{t, shape}, nil
}

// ne is a numpy shape as ggml's four dimensions.
func ne(shape []int64) [4]C.int64_t {
	var n [4]C.int64_t
	r := len(shape)
	for i := range 4 {
		n[i] = 1
		if i < r {
			n[i] = C.int64_t(shape[r-1-i])
		}
	}
	return n
}

// reshape gives v the numpy shape (same element count).
func (bl *builder) reshape(v gval, shape []int64) gval {
	t := v.t
	if !C.ggml_is_contiguous(t) {
		t = C.ggml_cont(bl.ctx, t)
	}
	n := ne(shape)
	return gval{C.ggml_reshape_4d(bl.ctx, t, n[0], n[1], n[2], n[3]), shape}
}

// toFront moves ggml dimension d to dimension 0, keeping the order of the
// others, and makes the result contiguous.
func (bl *builder) toFront(t *C.struct_ggml_tensor, d int) *C.struct_ggml_tensor {
	return bl.moveFront(t, d, false)
}

// fromFront undoes toFront.
func (bl *builder) fromFront(t *C.struct_ggml_tensor, d int) *C.struct_ggml_tensor {
	return bl.moveFront(t, d, true)
}

// moveFront is toFront, or with back its inverse permutation (dimension 0
// back to d), made contiguous.
func (bl *builder) moveFront(t *C.struct_ggml_tensor, d int, back bool) *C.struct_ggml_tensor {
	if d == 0 {
		return t
	}
	var p [4]C.int // ggml_permute's axes: where each dimension goes
	for i := range 4 {
		to := i
		switch {
		case i == d:
			to = 0
		case i < d:
			to = i + 1
		}
		if back {
			p[to] = C.int(i)
		} else {
			p[i] = C.int(to)
		}
	}
	return C.ggml_cont(bl.ctx, C.ggml_permute(bl.ctx, t, p[0], p[1], p[2], p[3]))
}

func (bl *builder) node(n *graph.Node) (gval, error) {
	ctx := bl.ctx
	outShape := bl.actual(bl.m.g.Values[n.Outputs[0]].Shape)
	in := func(i int) (gval, error) { return bl.value(n.Inputs[i]) }
	switch n.Op {
	case "Identity":
		return in(0)
	case "Relu", "Tanh", "Sigmoid", "Gelu":
		x, err := in(0)
		if err != nil {
			return gval{}, err
		}
		var t *C.struct_ggml_tensor
		switch n.Op {
		case "Relu":
			if bl.m.params.folded[n] {
				return x, nil // its BatchNormalization or Conv applied it
			}
			t = C.llmserve_relu_op(ctx, bl.contiguous(x.t))
		case "Tanh":
			t = C.ggml_tanh(ctx, x.t)
		case "Sigmoid":
			t = C.ggml_sigmoid(ctx, x.t)
		case "Gelu":
			if n.Str("approximate", "none") == "tanh" {
				// ggml_gelu reads an FP16 table (errors near 1e-3), so
				// the tanh form is built from exact operations:
				// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
				x3 := C.ggml_mul(ctx, C.ggml_mul(ctx, x.t, x.t), x.t)
				inner := C.ggml_add(ctx, x.t, C.ggml_scale(ctx, x3, 0.044715))
				th := C.ggml_tanh(ctx, C.ggml_scale(ctx, inner, C.float(math.Sqrt(2/math.Pi))))
				t = C.ggml_mul(ctx, C.ggml_scale(ctx, x.t, 0.5), C.ggml_scale_bias(ctx, th, 1, 1))
			} else {
				t = C.ggml_gelu_erf(ctx, x.t)
			}
		}
		return gval{t, x.shape}, nil
	case "Add", "Sub", "Mul", "Div":
		a, err := in(0)
		if err != nil {
			return gval{}, err
		}
		b, err := in(1)
		if err != nil {
			return gval{}, err
		}
		return gval{bl.binary(n.Op, a, b, outShape), outShape}, nil
	case "MatMul":
		if bl.m.g.Values[n.Inputs[1]].Batched {
			return bl.nodeOps(n, outShape)
		}
		a, err := in(0)
		if err != nil {
			return gval{}, err
		}
		w, err := bl.weight(n.Inputs[1], "T")
		if err != nil {
			return gval{}, err
		}
		return gval{bl.mulMat(w.t, bl.contiguous(a.t)), outShape}, nil
	case "Gemm":
		a, err := in(0)
		if err != nil {
			return gval{}, err
		}
		form := ""
		if n.Int("transB", 0) == 0 {
			form = "T"
		}
		w, err := bl.weight(n.Inputs[1], form)
		if err != nil {
			return gval{}, err
		}
		t := bl.mulMat(w.t, bl.contiguous(a.t))
		if alpha := n.Float("alpha", 1); alpha != 1 {
			t = C.ggml_scale(ctx, t, C.float(alpha))
		}
		if len(n.Inputs) > 2 && n.Inputs[2] != "" {
			beta := n.Float("beta", 1)
			c, err := bl.weight(n.Inputs[2], fmt.Sprintf("beta%08x", math.Float32bits(beta)))
			if err != nil {
				return gval{}, err
			}
			t = bl.binary("Add", gval{t, outShape}, c, outShape)
		}
		return gval{t, outShape}, nil
	case "Softmax":
		def := int64(-1)
		if bl.m.g.Opset != 0 && bl.m.g.Opset < 13 {
			def = 1
		}
		x, ax, d, err := bl.axisInput(n, def)
		if err != nil {
			return gval{}, err
		}
		if d == 0 { // the last axis: ggml's rows
			return gval{C.ggml_soft_max(ctx, bl.contiguous(x.t)), x.shape}, nil
		}
		if def == 1 {
			// Before opset 13: softmax over everything from axis on.
			flat := bl.reshape(x, []int64{prod(x.shape[:ax]), prod(x.shape[ax:])})
			return bl.reshape(gval{C.ggml_soft_max(ctx, flat.t), flat.shape}, x.shape), nil
		}
		t := bl.fromFront(C.ggml_soft_max(ctx, bl.toFront(bl.contiguous(x.t), d)), d)
		return gval{t, x.shape}, nil
	case "LayerNormalization":
		x, ax, _, err := bl.axisInput(n, -1)
		if err != nil {
			return gval{}, err
		}
		flat := bl.reshape(x, []int64{prod(x.shape[:ax]), prod(x.shape[ax:])})
		y := bl.reshape(gval{C.ggml_norm(ctx, flat.t, C.float(n.Float("epsilon", 1e-5))), flat.shape}, x.shape)
		for i, op := range []string{"Mul", "Add"} {
			if i+1 >= len(n.Inputs) || n.Inputs[i+1] == "" {
				continue
			}
			p, err := in(i + 1)
			if err != nil {
				return gval{}, err
			}
			p = bl.reshape(p, x.shape[ax:])
			y = gval{bl.binary(op, y, p, x.shape), x.shape}
		}
		return y, nil
	case "Flatten", "Reshape":
		x, err := in(0)
		if err != nil {
			return gval{}, err
		}
		return bl.reshape(x, outShape), nil
	case "Concat":
		x, _, d, err := bl.axisInput(n, 0)
		if err != nil {
			return gval{}, err
		}
		t := x.t
		for i := 1; i < len(n.Inputs); i++ {
			y, err := in(i)
			if err != nil {
				return gval{}, err
			}
			t = C.ggml_concat(ctx, t, y.t, C.int(d))
		}
		return gval{t, outShape}, nil
	case "ArgMax":
		x, ax, d, err := bl.axisInput(n, 0)
		if err != nil {
			return gval{}, err
		}
		t := bl.toFront(bl.contiguous(x.t), d)
		k := x.shape[ax]
		t = C.ggml_reshape_2d(ctx, t, C.int64_t(k), C.int64_t(prod(x.shape)/k))
		t = C.llmserve_argmax_first_op(ctx, t)
		n4 := ne(outShape)
		return gval{C.ggml_reshape_4d(ctx, t, n4[0], n4[1], n4[2], n4[3]), outShape}, nil
	}
	return bl.nodeOps(n, outShape)
}

// axisInput is n's first input and the axis its axis attribute (default
// def, checked at load) names, as a numpy axis and as the ggml dimension
// (ggml counts from the last).
func (bl *builder) axisInput(n *graph.Node, def int64) (x gval, ax, d int, err error) {
	x, err = bl.value(n.Inputs[0])
	if err != nil {
		return gval{}, 0, 0, err
	}
	ax, _ = graph.Axis(n.Int("axis", def), len(x.shape))
	return x, ax, len(x.shape) - 1 - ax, nil
}

func prod(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

func (bl *builder) contiguous(t *C.struct_ggml_tensor) *C.struct_ggml_tensor {
	if C.ggml_is_contiguous(t) {
		return t
	}
	return C.ggml_cont(bl.ctx, t)
}

// canRepeat reports whether b broadcasts into a as ggml does it (each of
// b's dimensions 1 or equal to a's).
func canRepeat(b, a []int64) bool {
	nb, na := ne(b), ne(a)
	for i := range 4 {
		if nb[i] != 1 && nb[i] != na[i] {
			return false
		}
	}
	return true
}

// binary applies an elementwise operator with numpy broadcasting: ggml
// broadcasts its second operand only, so a first operand smaller than the
// result is repeated to the result's shape (or, for Add and Mul, the
// operands swap).
func (bl *builder) binary(op string, a, b gval, out []int64) *C.struct_ggml_tensor {
	ctx := bl.ctx
	full := func(v gval) bool { return prod(v.shape) == prod(out) }
	if !full(a) && full(b) && (op == "Add" || op == "Mul") {
		a, b = b, a
	}
	if !full(a) {
		tmpl := newTensor(ctx, C.GGML_TYPE_F32, out)
		a = gval{C.ggml_repeat(ctx, bl.contiguous(a.t), tmpl), out}
	}
	bt := bl.contiguous(b.t)
	if !canRepeat(b.shape, out) || len(b.shape) != len(out) {
		// Align b's dimensions with the result's, from the right.
		shape := make([]int64, len(out))
		for i := range shape {
			shape[i] = 1
			if j := i - (len(out) - len(b.shape)); j >= 0 {
				shape[i] = b.shape[j]
			}
		}
		n := ne(shape)
		bt = C.ggml_reshape_4d(ctx, bt, n[0], n[1], n[2], n[3])
	}
	at := a.t
	switch op {
	case "Add":
		return C.ggml_add(ctx, at, bt)
	case "Sub":
		return C.ggml_sub(ctx, at, bt)
	case "Mul":
		return C.ggml_mul(ctx, at, bt)
	default:
		return C.ggml_div(ctx, at, bt)
	}
}
