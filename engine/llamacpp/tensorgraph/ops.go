//go:build cgo

package tensorgraph

/*
#include "ggml.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

// Elementwise kernels ggml lacks, or has with other NaN or rounding
// behaviour than ONNX Runtime's. The operator's two float parameters
// travel in the userdata pointer's bits (low 32: the first), so nothing
// outlives the graph.

enum { LLMS_ERF, LLMS_LEAKY, LLMS_HARDSIGMOID, LLMS_CLIP };

static inline float llms_param(void * ud, int i) {
	uint64_t bits = (uint64_t)(uintptr_t)ud;
	uint32_t b = (uint32_t)(i == 0 ? bits : bits >> 32);
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static inline void llms_span(const struct ggml_tensor * dst, int ith, int nth, int64_t * lo, int64_t * hi) {
	const int64_t n = ggml_nelements(dst);
	const int64_t per = (n + nth - 1) / nth;
	*lo = per * ith;
	*hi = *lo + per < n ? *lo + per : n;
}

#define LLMS_UNARY(name, expr) \
static void name(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * ud) { \
	int64_t lo, hi; \
	llms_span(dst, ith, nth, &lo, &hi); \
	const float * x = (const float *)a->data; \
	float * y = (float *)dst->data; \
	const float p0 = llms_param(ud, 0), p1 = llms_param(ud, 1); \
	(void)p0; (void)p1; \
	for (int64_t i = lo; i < hi; i++) { \
		const float v = x[i]; \
		y[i] = (expr); \
	} \
}

// erf in double, rounded once, as the reference evaluator computes it.
LLMS_UNARY(llms_erf, (float)erf((double)v))
// ONNX: x >= 0 ? x : alpha*x (NaN stays NaN).
LLMS_UNARY(llms_leaky, v < 0 ? p0 * v : v)
// max(0, min(1, alpha*x + beta)), NaN kept, as fmaxf(0, fminf(1, t))
// (a NaN t, from 0 * Inf, gives 1) in compares the compiler vectorizes
// rather than calls.
static inline float llms_hardsigmoid_one(float v, float alpha, float beta) {
	const float t = alpha * v + beta;
	const float u = t < 1.0f ? t : 1.0f;
	return u > 0.0f ? u : 0.0f;
}
LLMS_UNARY(llms_hardsigmoid, isnan(v) ? v : llms_hardsigmoid_one(v, p0, p1))
// min(max(x, lo), hi), NaN kept, as std::min/std::max order it
// (std::max(v, lo) is v < lo ? lo : v), in compares the compiler
// vectorizes rather than calls to fmaxf and fminf.
static inline float llms_clip_one(float v, float lo, float hi) {
	const float t = v < lo ? lo : v;
	return hi < t ? hi : t;
}
LLMS_UNARY(llms_clip, isnan(v) ? v : llms_clip_one(v, p0, p1))

// llms_at is element i of a contiguous F32 or I32 tensor.
static inline double llms_at(const struct ggml_tensor * t, int64_t i) {
	return t->type == GGML_TYPE_I32 ? (double)((const int32_t *)t->data)[i] : (double)((const float *)t->data)[i];
}

// llms_f32 is element i of a contiguous F32 tensor.
static inline float llms_f32(const struct ggml_tensor * t, int64_t i) {
	return ((const float *)t->data)[i];
}

// LLMS_MAP defines an elementwise kernel for ggml_custom_4d (llms_map_op):
// y[i] = expr, y being dst's data as type T, a, b and c its sources
// (those it has: contiguous and of dst's shape).
#define LLMS_MAP(name, T, expr) \
static void name(struct ggml_tensor * dst, int ith, int nth, void * ud) { \
	(void)ud; \
	int64_t lo, hi; \
	llms_span(dst, ith, nth, &lo, &hi); \
	const struct ggml_tensor * a = dst->src[0], * b = dst->src[1], * c = dst->src[2]; \
	(void)b; (void)c; \
	T * y = (T *)dst->data; \
	for (int64_t i = lo; i < hi; i++) { \
		y[i] = (expr); \
	} \
}

// llms_pow is a^b in double.
LLMS_MAP(llms_pow, float, (float)pow((double)llms_f32(a, i), (double)llms_f32(b, i)))
// llms_where picks a where c (F32 or I32) is non-zero, else b.
LLMS_MAP(llms_where, float, llms_at(c, i) != 0 ? llms_f32(a, i) : llms_f32(b, i))
// llms_equal is 1 where a and b (F32 or I32) are equal, else 0, as I32.
LLMS_MAP(llms_equal, int32_t, llms_at(a, i) == llms_at(b, i))
// llms_nonzero is 1 where a (F32 or I32) is not 0, else 0, as I32: a Cast
// to BOOL (NaN is true, as in C and ONNX Runtime).
LLMS_MAP(llms_nonzero, int32_t, llms_at(a, i) != 0)

// llms_map_op is the LLMS_MAP kernel f over the n sources in args (the
// first gives the shape), as a tensor of type.
static struct ggml_tensor * llms_map_op(struct ggml_context * ctx, enum ggml_type type, ggml_custom_op_t f, struct ggml_tensor ** args, int n) {
	const struct ggml_tensor * a = args[0];
	return ggml_custom_4d(ctx, type, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, n, f, GGML_N_TASKS_MAX, NULL);
}

static struct ggml_tensor * llms_pow_op(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
	struct ggml_tensor * args[2] = {a, b};
	return llms_map_op(ctx, GGML_TYPE_F32, llms_pow, args, 2);
}

static struct ggml_tensor * llms_where_op(struct ggml_context * ctx, struct ggml_tensor * c, struct ggml_tensor * a, struct ggml_tensor * b) {
	struct ggml_tensor * args[3] = {a, b, c};
	return llms_map_op(ctx, GGML_TYPE_F32, llms_where, args, 3);
}

static struct ggml_tensor * llms_equal_op(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
	struct ggml_tensor * args[2] = {a, b};
	return llms_map_op(ctx, GGML_TYPE_I32, llms_equal, args, 2);
}

static struct ggml_tensor * llms_nonzero_op(struct ggml_context * ctx, struct ggml_tensor * a) {
	struct ggml_tensor * args[1] = {a};
	return llms_map_op(ctx, GGML_TYPE_I32, llms_nonzero, args, 1);
}

// llms_gather writes row ids[r] of the table src[0] (rows of ne0 floats)
// as row r of dst; src[1] holds the I32 ids. A negative id counts from
// the end (ONNX); an id out of range gives a row of NaN (Run refuses such
// ids in its inputs, so this only guards memory).
static void llms_gather(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	(void)ud;
	const struct ggml_tensor * table = dst->src[0];
	const struct ggml_tensor * ids = dst->src[1];
	const int64_t width = table->ne[0], rows = table->ne[1], n = dst->ne[1];
	for (int64_t r = ith; r < n; r += nth) {
		int64_t id = ((const int32_t *)ids->data)[r];
		if (id < 0) {
			id += rows;
		}
		float * y = (float *)((char *)dst->data + r*dst->nb[1]);
		if (id < 0 || id >= rows) {
			for (int64_t j = 0; j < width; j++) {
				y[j] = NAN;
			}
			continue;
		}
		memcpy(y, (const char *)table->data + id*table->nb[1], width*sizeof(float));
	}
}

// llms_gather_axis gathers along the middle of src[0], contiguous and
// viewed as [outer][k][inner] (ggml ne {inner, k, outer}), at the indices
// src[1] holds as F32 (constants, checked at load); negative ones count
// from the end.
static void llms_gather_axis(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	(void)ud;
	const struct ggml_tensor * data = dst->src[0];
	const struct ggml_tensor * idx = dst->src[1];
	const int64_t inner = data->ne[0], k = data->ne[1], outer = data->ne[2], n = dst->ne[1];
	for (int64_t r = ith; r < outer*n; r += nth) {
		const int64_t o = r / n, j = r % n;
		int64_t id = (int64_t)((const float *)idx->data)[j];
		if (id < 0) {
			id += k;
		}
		float * y = (float *)dst->data + (o*n + j)*inner;
		if (id < 0 || id >= k) {
			for (int64_t e = 0; e < inner; e++) {
				y[e] = NAN;
			}
			continue;
		}
		memcpy(y, (const float *)data->data + (o*k + id)*inner, inner*sizeof(float));
	}
}

static struct ggml_tensor * llms_gather_axis_op(struct ggml_context * ctx, struct ggml_tensor * data, struct ggml_tensor * idx) {
	struct ggml_tensor * args[2] = {data, idx};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, data->ne[0], ggml_nelements(idx), data->ne[2], 1, args, 2, llms_gather_axis, GGML_N_TASKS_MAX, NULL);
}

static struct ggml_tensor * llms_unary_op(struct ggml_context * ctx, struct ggml_tensor * a, int op, uint64_t params) {
	ggml_custom1_op_t f = llms_erf;
	switch (op) {
	case LLMS_LEAKY: f = llms_leaky; break;
	case LLMS_HARDSIGMOID: f = llms_hardsigmoid; break;
	case LLMS_CLIP: f = llms_clip; break;
	}
	return ggml_map_custom1(ctx, a, f, GGML_N_TASKS_MAX, (void *)(uintptr_t)params);
}

static struct ggml_tensor * llms_gather_op(struct ggml_context * ctx, struct ggml_tensor * table, struct ggml_tensor * ids) {
	struct ggml_tensor * args[2] = {table, ids};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, table->ne[0], ggml_nelements(ids), 1, 1, args, 2, llms_gather, GGML_N_TASKS_MAX, NULL);
}
*/
import "C"

import (
	"fmt"
	"math"
	"slices"

	"github.com/llmserve/llmserve/engine/graph"
)

// params packs two float parameters for a custom kernel.
func params(a, b float32) C.uint64_t {
	return C.uint64_t(uint64(math.Float32bits(a)) | uint64(math.Float32bits(b))<<32)
}

// permute applies the numpy transpose perm to v and makes it contiguous.
func (bl *builder) permute(v gval, perm []int) gval {
	r := len(perm)
	// ggml_permute sends source dimension i to axes[i]; numpy output
	// dimension j takes input dimension perm[j], i.e. ggml source
	// r-1-perm[j] goes to ggml r-1-j.
	axes := [4]C.int{0, 1, 2, 3}
	for j, p := range perm {
		axes[r-1-p] = C.int(r - 1 - j)
	}
	shape := make([]int64, r)
	for j, p := range perm {
		shape[j] = v.shape[p]
	}
	t := C.ggml_permute(bl.ctx, bl.contiguous(v.t), axes[0], axes[1], axes[2], axes[3])
	return gval{C.ggml_cont(bl.ctx, t), shape}
}

// full repeats v to shape (numpy broadcasting) and makes it contiguous.
func (bl *builder) full(v gval, shape []int64) *C.struct_ggml_tensor {
	aligned := make([]int64, len(shape))
	for i := range aligned {
		aligned[i] = 1
		if j := i - (len(shape) - len(v.shape)); j >= 0 {
			aligned[i] = v.shape[j]
		}
	}
	x := bl.reshape(v, aligned)
	if prod(aligned) == prod(shape) {
		return bl.contiguous(x.t)
	}
	return C.ggml_repeat(bl.ctx, x.t, newTensor(bl.ctx, C.GGML_TYPE_F32, shape))
}

// nodeOps builds the operators of ops.go.
func (bl *builder) nodeOps(n *graph.Node, outShape []int64) (gval, error) {
	ctx := bl.ctx
	in := func(i int) (gval, error) { return bl.value(n.Inputs[i]) }
	switch n.Op {
	case "Where":
		// The condition is computed (Equal's I32) or constant (its F32
		// form).
		t, err := bl.fullInputs(n, outShape, bl.operand, bl.value, bl.value)
		if err != nil {
			return gval{}, err
		}
		return gval{C.llms_where_op(ctx, t[0], t[1], t[2]), outShape}, nil
	case "Equal":
		t, err := bl.fullInputs(n, outShape, bl.operand, bl.operand)
		if err != nil {
			return gval{}, err
		}
		return gval{C.llms_equal_op(ctx, t[0], t[1]), outShape}, nil
	}
	x, err := in(0)
	if err != nil {
		return gval{}, err
	}
	switch n.Op {
	case "Erf":
		return gval{C.llms_unary_op(ctx, bl.contiguous(x.t), C.LLMS_ERF, 0), x.shape}, nil
	case "Sqrt":
		return gval{C.ggml_sqrt(ctx, x.t), x.shape}, nil
	case "LeakyRelu":
		p := params(n.Float("alpha", 0.01), 0)
		return gval{C.llms_unary_op(ctx, bl.contiguous(x.t), C.LLMS_LEAKY, p), x.shape}, nil
	case "HardSigmoid":
		p := params(n.Float("alpha", 0.2), n.Float("beta", 0.5))
		return gval{C.llms_unary_op(ctx, bl.contiguous(x.t), C.LLMS_HARDSIGMOID, p), x.shape}, nil
	case "Clip":
		lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
		for i, name := range []string{"min", "max"} {
			b := &lo
			if i == 1 {
				b = &hi
			}
			if a, ok := n.Attrs[name]; ok {
				*b = a.Float
			} else if len(n.Inputs) > i+1 && n.Inputs[i+1] != "" {
				*b = bl.m.g.Values[n.Inputs[i+1]].Const.F32[0]
			}
		}
		return gval{C.llms_unary_op(ctx, bl.contiguous(x.t), C.LLMS_CLIP, params(lo, hi)), x.shape}, nil
	case "Pow":
		y, err := in(1)
		if err != nil {
			return gval{}, err
		}
		return gval{C.llms_pow_op(ctx, bl.full(x, outShape), bl.full(y, outShape)), outShape}, nil
	case "Expand":
		return gval{bl.full(x, outShape), outShape}, nil
	case "Cast":
		switch to, src := n.Int("to", 0), x.t._type; {
		case to == 9: // BOOL: 0 or 1
			return gval{C.llms_nonzero_op(ctx, bl.contiguous(x.t)), x.shape}, nil
		case to == 1 && src == C.GGML_TYPE_I32:
			return gval{C.ggml_cast(ctx, x.t, C.GGML_TYPE_F32), x.shape}, nil
		case to == 7 && src == C.GGML_TYPE_F32:
			return gval{C.ggml_cast(ctx, x.t, C.GGML_TYPE_I32), x.shape}, nil
		}
		return x, nil
	case "Transpose":
		perm := make([]int, len(x.shape))
		if a, ok := n.Attrs["perm"]; ok {
			for i, p := range a.Ints {
				perm[i] = int(p)
			}
		} else {
			for i := range perm {
				perm[i] = len(perm) - 1 - i
			}
		}
		return bl.permute(x, perm), nil
	case "Slice":
		return bl.slice(n, x, outShape)
	case "Unsqueeze", "Squeeze":
		return bl.reshape(x, outShape), nil
	case "Gather":
		if bl.m.g.Values[n.Inputs[0]].Batched {
			// Constant indices into a batched value (x[:, 0]).
			idx, err := bl.weight(n.Inputs[1], "idx")
			if err != nil {
				return gval{}, err
			}
			ax, _ := graph.Axis(n.Int("axis", 0), len(x.shape))
			outer, k, inner := prod(x.shape[:ax]), x.shape[ax], prod(x.shape[ax+1:])
			data := bl.reshape(x, []int64{outer, k, inner})
			t := C.llms_gather_axis_op(ctx, data.t, idx.t)
			return bl.reshape(gval{t, []int64{outer, prod(idx.shape), inner}}, outShape), nil
		}
		// An embedding lookup: constant table, batched I32 ids.
		ids, err := in(1)
		if err != nil {
			return gval{}, err
		}
		rows := x.shape[0]
		table := bl.reshape(x, []int64{rows, prod(x.shape[1:])})
		flat := bl.reshape(ids, []int64{prod(ids.shape)})
		t := C.llms_gather_op(ctx, table.t, flat.t)
		return bl.reshape(gval{t, []int64{prod(ids.shape), prod(x.shape[1:])}}, outShape), nil
	case "ReduceMean", "ReduceSum":
		// Move the reduced axes last, reduce the rows, and take the
		// result's shape (the kept axes keep their order).
		var kept, reduced []int
		if err := reduceSplit(n, bl.m.g, &kept, &reduced); err != nil {
			return gval{}, err
		}
		if len(reduced) == 0 {
			return x, nil
		}
		v := x
		if perm := slices.Concat(kept, reduced); !isIdentity(perm) {
			v = bl.permute(x, perm)
		}
		k := int64(1)
		for _, a := range reduced {
			k *= x.shape[a]
		}
		flat := bl.reshape(v, []int64{prod(x.shape) / k, k})
		var t *C.struct_ggml_tensor
		if n.Op == "ReduceMean" {
			t = C.ggml_mean(ctx, flat.t)
		} else {
			t = C.ggml_sum_rows(ctx, flat.t)
		}
		return bl.reshape(gval{t, []int64{prod(x.shape) / k, 1}}, outShape), nil
	case "MatMul":
		// Both batched: a [..., M, K] times b [..., K, N].
		b, err := in(1)
		if err != nil {
			return gval{}, err
		}
		r := len(b.shape)
		perm := make([]int, r)
		for i := range perm {
			perm[i] = i
		}
		perm[r-2], perm[r-1] = r-1, r-2
		bt := bl.permute(b, perm)
		return gval{bl.mulMat(bt.t, bl.contiguous(x.t)), outShape}, nil
	}
	return gval{}, fmt.Errorf("operator %s: %w", n.Op, graph.ErrUnsupported)
}

// slice is Slice of a batched value as a strided view (the last axis
// has step 1), made contiguous.
func (bl *builder) slice(n *graph.Node, x gval, outShape []int64) (gval, error) {
	r := len(x.shape)
	starts, steps := make([]int64, r), make([]int64, r)
	for i := range steps {
		steps[i] = 1
	}
	// Check resolved the slice; recompute it on the actual shape.
	st, sp, _, err := bl.m.g.SliceParams(n, x.shape)
	if err != nil {
		return gval{}, err
	}
	copy(starts, st)
	copy(steps, sp)
	xt := bl.contiguous(x.t)
	var ne, nb [4]C.size_t
	var offset C.size_t
	stride := C.size_t(4)
	for i := range 4 {
		ne[i], nb[i] = 1, stride
		if i < r {
			d := r - 1 - i
			ne[i] = C.size_t(outShape[d])
			nb[i] = stride * C.size_t(steps[d])
			offset += C.size_t(starts[d]) * stride
			stride *= C.size_t(x.shape[d])
		}
	}
	v := C.ggml_view_4d(bl.ctx, xt, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]), nb[1], nb[2], nb[3], offset)
	return gval{C.ggml_cont(bl.ctx, v), outShape}, nil
}

// operand is a computed value or a constant, an I64 constant in its F32
// form.
func (bl *builder) operand(name string) (gval, error) {
	if v, ok := bl.vals[name]; ok {
		return v, nil
	}
	if info := bl.m.g.Values[name]; info != nil && info.DType == graph.I64 {
		return bl.weight(name, "f")
	}
	return bl.weight(name, "")
}

// fullInputs is n's first inputs, the i-th read by read[i] (value, or
// operand to take an I64 constant in its F32 form), each repeated to
// outShape (full).
func (bl *builder) fullInputs(n *graph.Node, outShape []int64, read ...func(string) (gval, error)) ([]*C.struct_ggml_tensor, error) {
	ts := make([]*C.struct_ggml_tensor, len(read))
	for i, rd := range read {
		v, err := rd(n.Inputs[i])
		if err != nil {
			return nil, err
		}
		ts[i] = bl.full(v, outShape)
	}
	return ts, nil
}

// reduceSplit fills kept and reduced with the axes a ReduceMean or
// ReduceSum keeps and reduces, from its axes attribute or input.
func reduceSplit(n *graph.Node, g *graph.Checked, kept, reduced *[]int) error {
	r := len(g.Values[n.Inputs[0]].Shape)
	var axes []int64
	if a, ok := n.Attrs["axes"]; ok {
		axes = a.Ints
	} else if len(n.Inputs) > 1 && n.Inputs[1] != "" {
		axes = g.Values[n.Inputs[1]].Const.I64
	}
	*kept, *reduced = (*kept)[:0], (*reduced)[:0]
	if len(axes) == 0 && n.Int("noop_with_empty_axes", 0) != 0 {
		for i := range r {
			*kept = append(*kept, i)
		}
		return nil
	}
	for _, a := range axes {
		ax, err := graph.Axis(a, r)
		if err != nil {
			return err
		}
		*reduced = append(*reduced, ax)
	}
	if len(axes) == 0 {
		return fmt.Errorf("reducing every axis, the batch too: %w", graph.ErrUnsupported)
	}
	slices.Sort(*reduced)
	for i := range r {
		if !slices.Contains(*reduced, i) {
			*kept = append(*kept, i)
		}
	}
	return nil
}

func isIdentity(perm []int) bool {
	for i, p := range perm {
		if p != i {
			return false
		}
	}
	return true
}
