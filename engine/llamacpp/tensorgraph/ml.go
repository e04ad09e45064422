//go:build cgo

package tensorgraph

/*
#pragma GCC optimize ("fp-contract=off")
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"

// The ai.onnx.ml operators as ggml custom operators. Each computes whole
// rows from a [rows][features] F32 input, the rows split among ggml's
// threads in contiguous chunks, and mirrors engine/graph's Row functions
// (ONNX Runtime's kernels) operation for operation, in float32 without
// fused multiply-adds, so that it gives engine/graph.Eval's results.
// Their parameters live in C memory (userdata) that the GraphModel frees
// on Close.

enum { POST_NONE, POST_LOGISTIC, POST_SOFTMAX, POST_SOFTMAX_ZERO, POST_PROBIT };
enum { AGG_SUM, AGG_AVERAGE, AGG_MIN, AGG_MAX };
enum { NORM_MAX, NORM_L1, NORM_L2 };

static void llmserve_rows(const struct ggml_tensor * dst, int ith, int nth, int64_t * lo, int64_t * hi) {
	const int64_t rows = dst->ne[1];
	const int64_t per = (rows + nth - 1) / nth;
	*lo = per * ith;
	*hi = *lo + per < rows ? *lo + per : rows;
}

static float llmserve_logistic(float x) {
	const float v = 1.0f / (1.0f + expf(-fabsf(x)));
	return x < 0 ? 1.0f - v : v;
}

static float llmserve_probit(float x) {
	x = 2.0f * x - 1.0f;
	const float sgn = x < 0 ? -1.0f : 1.0f;
	x = (1.0f - x) * (1.0f + x);
	const float lg = logf(x);
	const float v = 2.0f / ((float)M_PI * 0.147f) + 0.5f * lg;
	const float v2 = 1.0f / 0.147f * lg;
	const float v3 = -v + sqrtf(v * v - v2);
	return (float)M_SQRT2 * (sgn * sqrtf(v3));
}

static void llmserve_transform(int post, float * s, int64_t n) {
	switch (post) {
	case POST_LOGISTIC:
		for (int64_t j = 0; j < n; j++) s[j] = llmserve_logistic(s[j]);
		break;
	case POST_PROBIT:
		for (int64_t j = 0; j < n; j++) s[j] = llmserve_probit(s[j]);
		break;
	case POST_SOFTMAX:
	case POST_SOFTMAX_ZERO: {
		float m = -FLT_MAX;
		for (int64_t j = 0; j < n; j++) if (s[j] > m) m = s[j];
		const float exp_neg = expf(-m);
		float sum = 0.0f;
		for (int64_t j = 0; j < n; j++) {
			if (post == POST_SOFTMAX_ZERO && s[j] <= 1e-7f && s[j] >= -1e-7f) {
				s[j] = s[j] * exp_neg;
				continue;
			}
			s[j] = expf(s[j] - m);
			sum += s[j];
		}
		for (int64_t j = 0; j < n; j++) s[j] /= sum;
		break;
	}
	}
}

// Scaler: y = (x - offset) * scale.
typedef struct {
	int64_t n; // 1 or the columns
	float * offset;
	float * scale;
} llmserve_scaler;

static void llmserve_scaler_op(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * ud) {
	const llmserve_scaler * p = ud;
	int64_t lo, hi;
	llmserve_rows(dst, ith, nth, &lo, &hi);
	const int64_t cols = a->ne[0];
	for (int64_t r = lo; r < hi; r++) {
		const float * x = (const float *)((const char *)a->data + r * a->nb[1]);
		float * y = (float *)((char *)dst->data + r * dst->nb[1]);
		for (int64_t j = 0; j < cols; j++) {
			const int64_t k = p->n == 1 ? 0 : j;
			y[j] = (x[j] - p->offset[k]) * p->scale[k];
		}
	}
}

// Normalizer, the norm in userdata.
static void llmserve_normalizer_op(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * ud) {
	const int norm = (int)(intptr_t)ud;
	int64_t lo, hi;
	llmserve_rows(dst, ith, nth, &lo, &hi);
	const int64_t cols = a->ne[0];
	for (int64_t r = lo; r < hi; r++) {
		const float * x = (const float *)((const char *)a->data + r * a->nb[1]);
		float * y = (float *)((char *)dst->data + r * dst->nb[1]);
		float d = 0.0f;
		if (norm == NORM_MAX) {
			d = -FLT_MAX;
			for (int64_t j = 0; j < cols; j++) if (d < x[j]) d = x[j];
		} else if (norm == NORM_L1) {
			for (int64_t j = 0; j < cols; j++) d += fabsf(x[j]);
		} else {
			for (int64_t j = 0; j < cols; j++) d += x[j] * x[j];
		}
		if (d == 0.0f) {
			memcpy(y, x, cols * sizeof(float));
			continue;
		}
		for (int64_t j = 0; j < cols; j++) {
			if (norm == NORM_L2) {
				y[j] = sqrtf(x[j] * x[j] / d);
				if (x[j] < 0) y[j] = -y[j];
			} else {
				y[j] = x[j] / d;
			}
		}
	}
}

// LinearRegressor and LinearClassifier: a classifier's rows hold the
// scores, then the label's 8 bytes in two more columns.
typedef struct {
	int32_t classifier, post, second_class, n_labels;
	int64_t features, targets, outputs;
	float * coef;       // [targets][features]
	float * intercepts; // NULL: none
	int64_t * labels;
} llmserve_linear;

static void llmserve_linear_op(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	const llmserve_linear * l = ud;
	const struct ggml_tensor * a = dst->src[0];
	int64_t lo, hi;
	llmserve_rows(dst, ith, nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		const float * x = (const float *)((const char *)a->data + r * a->nb[1]);
		float * z = (float *)((char *)dst->data + r * dst->nb[1]);
		float * s = l->second_class ? z + 1 : z;
		for (int64_t j = 0; j < l->targets; j++) {
			double acc = 0;
			const float * c = l->coef + j * l->features;
			for (int64_t k = 0; k < l->features; k++) acc += (double)x[k] * (double)c[k];
			if (l->intercepts) acc += (double)l->intercepts[j];
			s[j] = (float)acc;
		}
		int64_t label = 0;
		if (l->classifier) {
			if (l->targets == 1) {
				label = s[0] > 0 ? 1 : 0;
				if (l->n_labels == 2) label = l->labels[label];
			} else {
				int64_t best = 0;
				for (int64_t j = 1; j < l->targets; j++) if (s[j] > s[best]) best = j;
				label = l->labels[best];
			}
		}
		if (l->second_class) {
			z[0] = 1.0f - z[1];
		} else if (l->targets == 1) {
			if (l->post == POST_PROBIT) s[0] = llmserve_probit(s[0]);
		} else {
			llmserve_transform(l->post, s, l->targets);
		}
		if (l->classifier) memcpy(z + l->outputs, &label, sizeof label);
	}
}

// TreeEnsembleRegressor and TreeEnsembleClassifier (engine/graph's
// TreeEnsemble, flattened); a classifier's rows end with the label as
// the linear classifier's do.
typedef struct {
	int32_t classifier, binary_case, all_positive, aggregate, post, n_base;
	int64_t features, targets;
	int32_t n_roots;
	int32_t * feature;
	float * threshold;
	uint8_t * mode;
	uint8_t * missing;
	int32_t * truen;
	int32_t * falsen;
	int32_t * wfirst;
	int32_t * wcount;
	int32_t * wtarget;
	float * wvalue;
	int32_t * roots;
	float * base;
	int64_t * labels;
	// The branch-free walk (llmserve_trees_walk), when every branch node
	// has the same mode (walk_mode, 1 to 6; 0: mixed, no such walk):
	// walk_true and walk_false are truen and falsen with each leaf leading
	// to itself, walk_feature is feature with leaves reading feature 0, and
	// depth is each root's longest path to a leaf.
	int32_t walk_mode;
	int32_t * walk_true;
	int32_t * walk_false;
	int32_t * walk_feature;
	int32_t * depth;
} llmserve_trees;

// llmserve_walk_rows is how many rows llmserve_trees_walk walks a tree
// for at once.
#define LLMSERVE_WALK_ROWS 8

// llmserve_tree_true is 1 where value v goes to the true child of
// branch node n (mode 1 to 6 against its threshold; NaN goes true where
// the node says missing), else 0: a number for the caller to pick the
// child by arithmetic, not a branch on the data. Inlined with a constant
// mode, the comparison is one.
static inline __attribute__((always_inline)) int llmserve_tree_true(const llmserve_trees * t, const int mode, const int32_t n, const float v) {
	const float th = t->threshold[n];
	int c = 0;
	switch (mode) {
	case 1: c = v <= th; break;
	case 2: c = v < th; break;
	case 3: c = v >= th; break;
	case 4: c = v > th; break;
	case 5: c = v == th; break;
	case 6: c = v != th; break;
	}
	return c | (t->missing[n] & (v != v));
}

// llmserve_trees_walk finds the leaf tree r leads each of the rows xs[0..8)
// to, as llmserve_tree_leaf does, for 8 rows at once: depth[r] steps of
// each row in turn, with no branch (a leaf leads to itself), so that the
// rows' dependent loads overlap instead of each step waiting on the last
// and a mispredicted branch. MODE is walk_mode, a constant where inlined.
static inline __attribute__((always_inline)) void llmserve_trees_walk(const llmserve_trees * t, int32_t r, const float * const * xs, int32_t * leaf, const int MODE) {
	int32_t i[LLMSERVE_WALK_ROWS];
	for (int k = 0; k < LLMSERVE_WALK_ROWS; k++) i[k] = t->roots[r];
	for (int32_t d = 0; d < t->depth[r]; d++) {
		for (int k = 0; k < LLMSERVE_WALK_ROWS; k++) {
			const int32_t n = i[k];
			const int c = llmserve_tree_true(t, MODE, n, xs[k][t->walk_feature[n]]);
			// Both children loaded and one picked by arithmetic: as a
			// select of two loads the compiler would branch, and the
			// branch is the data's.
			const int32_t tn = t->walk_true[n], fn = t->walk_false[n];
			i[k] = fn + ((tn - fn) & -c);
		}
	}
	memcpy(leaf, i, sizeof i);
}

static int32_t llmserve_tree_leaf(const llmserve_trees * t, int32_t i, const float * x) {
	while (t->mode[i] != 0) {
		const int c = llmserve_tree_true(t, t->mode[i], i, x[t->feature[i]]);
		// The child picked by arithmetic (as in llmserve_trees_walk).
		const int32_t tn = t->truen[i], fn = t->falsen[i];
		i = fn + ((tn - fn) & -c);
	}
	return i;
}

static void llmserve_write_scores(float * score, const uint8_t * has, int64_t n, int post, float * z, int second) {
	for (int64_t j = 0; j < n; j++) if (!has[j]) score[j] = 0.0f;
	if (n >= 2) {
		memcpy(z, score, n * sizeof(float));
		llmserve_transform(post, z, n);
		return;
	}
	const float s = score[0];
	if (post == POST_PROBIT) {
		z[0] = llmserve_probit(s);
	} else if (second == 0 || second == 1) {
		z[0] = 1.0f - s;
		z[1] = s;
	} else if ((second == 2 || second == 3) && post == POST_LOGISTIC) {
		z[0] = llmserve_logistic(-s);
		z[1] = llmserve_logistic(s);
	} else if (second == 2 || second == 3) {
		z[0] = -s;
		z[1] = s;
	} else {
		z[0] = s;
	}
}

// llmserve_aggregate is score s of a target with leaf weight w added by
// the ensemble's aggregate function; has: s already holds a weight.
static inline float llmserve_aggregate(const int aggregate, const int has, const float s, const float w) {
	if (aggregate == AGG_SUM || aggregate == AGG_AVERAGE) return s + w;
	if (!has || (aggregate == AGG_MIN && w < s) || (aggregate == AGG_MAX && w > s)) return w;
	return s;
}

// llmserve_trees_row computes one row; leaves, if not NULL, holds the leaf
// each tree leads x to (llmserve_trees_walk), else the trees are walked.
static int64_t llmserve_trees_row(const llmserve_trees * t, const float * x, float * z, float * score, uint8_t * has, const int32_t * leaves) {
	const int64_t n = t->targets;
	const float n_trees = (float)t->n_roots;
	memset(z, 0, n * sizeof(float));
	if (!t->classifier && n == 1) {
		float s = 0.0f;
		int h = 0;
		for (int32_t r = 0; r < t->n_roots; r++) {
			const float w = t->wvalue[t->wfirst[leaves ? leaves[r] : llmserve_tree_leaf(t, t->roots[r], x)]];
			s = llmserve_aggregate(t->aggregate, h, s, w);
			h = 1;
		}
		const float origin = t->n_base == 1 ? t->base[0] : 0.0f;
		if (t->aggregate == AGG_SUM) {
			s += origin;
		} else if (t->aggregate == AGG_AVERAGE) {
			s = s / n_trees + origin;
		} else if (h) {
			s += origin;
		} else {
			s = origin;
		}
		z[0] = t->post == POST_PROBIT ? llmserve_probit(s) : s;
		return 0;
	}
	memset(score, 0, n * sizeof(float));
	memset(has, 0, n);
	for (int32_t r = 0; r < t->n_roots; r++) {
		const int32_t l = leaves ? leaves[r] : llmserve_tree_leaf(t, t->roots[r], x);
		for (int32_t k = t->wfirst[l]; k < t->wfirst[l] + t->wcount[l]; k++) {
			const int32_t j = t->wtarget[k];
			const float w = t->wvalue[k];
			score[j] = llmserve_aggregate(t->aggregate, has[j], score[j], w);
			has[j] = 1;
		}
	}
	if (!t->classifier) {
		const int use_base = t->n_base == n;
		for (int64_t j = 0; j < n; j++) {
			const float b = use_base ? t->base[j] : 0.0f;
			if (t->aggregate == AGG_SUM) {
				score[j] += b;
			} else if (t->aggregate == AGG_AVERAGE) {
				score[j] = score[j] / n_trees + b;
			} else {
				score[j] = has[j] ? b + score[j] : b;
			}
		}
		llmserve_write_scores(score, has, n, t->post, z, -1);
		return 0;
	}
	if (n > 2) {
		for (int64_t k = 0; k < t->n_base && k < n; k++) {
			if (!has[k]) {
				has[k] = 1;
				score[k] = t->base[k];
			} else {
				score[k] += t->base[k];
			}
		}
		int64_t best = 0;
		for (int64_t j = 0; j < n; j++) {
			if (has[j] && (!has[best] || score[j] > score[best])) best = j;
		}
		llmserve_write_scores(score, has, n, t->post, z, -1);
		return t->labels[best];
	}
	int second = -1;
	int64_t size = 2;
	if (t->n_base == 2) {
		if (has[1]) {
			score[1] = t->base[1] + score[0];
			score[0] = -score[1];
		} else {
			score[1] += t->base[1];
			score[0] += t->base[0];
		}
	} else if (t->n_base == 1) {
		score[0] += t->base[0];
		if (!has[1]) size = 1;
	} else if (t->n_base == 0) {
		second = 3;
		if (!has[1]) size = 1;
	}
	float pos = 0.0f;
	if (size == 2 && has[1]) {
		pos = score[1];
	} else if (has[0]) {
		pos = score[0];
	}
	int64_t label = 0;
	if (t->binary_case && t->all_positive) {
		second = pos > 0.5f ? 0 : 1;
		label = t->labels[pos > 0.5f ? 1 : 0];
	} else if (t->binary_case) {
		second = pos > 0 ? 2 : 3;
		label = t->labels[pos > 0 ? 1 : 0];
	} else {
		label = pos > 0 ? 1 : 0;
	}
	llmserve_write_scores(score, has, size, t->post, z, second);
	return label;
}

static void llmserve_trees_op(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	const llmserve_trees * t = ud;
	const struct ggml_tensor * a = dst->src[0];
	int64_t lo, hi;
	llmserve_rows(dst, ith, nth, &lo, &hi);
	if (lo >= hi) return;
	float * score = malloc(t->targets * sizeof(float));
	uint8_t * has = malloc(t->targets);
	int32_t * leaves = t->walk_mode ? malloc(sizeof(int32_t) * LLMSERVE_WALK_ROWS * t->n_roots) : NULL;
	if (!score || !has || (t->walk_mode && !leaves)) abort();
	for (int64_t r0 = lo; r0 < hi; r0 += LLMSERVE_WALK_ROWS) {
		const int64_t nr = hi - r0 < LLMSERVE_WALK_ROWS ? hi - r0 : LLMSERVE_WALK_ROWS;
		// A full block's leaves, tree by tree; the rows of a last, partial
		// block (and of a batch of fewer than 8) walk each tree alone,
		// to the same leaves.
		const int walk = leaves && nr == LLMSERVE_WALK_ROWS;
		if (walk) {
			const float * xs[LLMSERVE_WALK_ROWS];
			for (int k = 0; k < LLMSERVE_WALK_ROWS; k++) xs[k] = (const float *)((const char *)a->data + (r0 + k) * a->nb[1]);
			for (int32_t tr = 0; tr < t->n_roots; tr++) {
				int32_t leaf[LLMSERVE_WALK_ROWS];
				switch (t->walk_mode) {
				case 1: llmserve_trees_walk(t, tr, xs, leaf, 1); break;
				case 2: llmserve_trees_walk(t, tr, xs, leaf, 2); break;
				case 3: llmserve_trees_walk(t, tr, xs, leaf, 3); break;
				case 4: llmserve_trees_walk(t, tr, xs, leaf, 4); break;
				case 5: llmserve_trees_walk(t, tr, xs, leaf, 5); break;
				default: llmserve_trees_walk(t, tr, xs, leaf, 6); break;
				}
				for (int64_t k = 0; k < nr; k++) leaves[k * t->n_roots + tr] = leaf[k];
			}
		}
		for (int64_t k = 0; k < nr; k++) {
			const int64_t r = r0 + k;
			const float * x = (const float *)((const char *)a->data + r * a->nb[1]);
			float * z = (float *)((char *)dst->data + r * dst->nb[1]);
			const int64_t label = llmserve_trees_row(t, x, z, score, has, walk ? leaves + k * t->n_roots : NULL);
			if (t->classifier) memcpy(z + t->targets, &label, sizeof label);
		}
	}
	free(score);
	free(has);
	free(leaves);
}

// llmserve_label_op copies the label a classifier wrote after its k
// scores (userdata) into an I64 tensor.
static void llmserve_label_op(struct ggml_tensor * dst, int ith, int nth, void * ud) {
	const int64_t k = (int64_t)(intptr_t)ud;
	const struct ggml_tensor * a = dst->src[0];
	const int64_t rows = dst->ne[0];
	const int64_t per = (rows + nth - 1) / nth;
	const int64_t lo = per * ith, hi = lo + per < rows ? lo + per : rows;
	for (int64_t r = lo; r < hi; r++) {
		memcpy((int64_t *)dst->data + r, (const char *)a->data + r * a->nb[1] + k * sizeof(float), sizeof(int64_t));
	}
}

static struct ggml_tensor * llmserve_scaler_node(struct ggml_context * ctx, struct ggml_tensor * a, void * ud) {
	return ggml_map_custom1(ctx, a, llmserve_scaler_op, GGML_N_TASKS_MAX, ud);
}

static struct ggml_tensor * llmserve_normalizer_node(struct ggml_context * ctx, struct ggml_tensor * a, int norm) {
	return ggml_map_custom1(ctx, a, llmserve_normalizer_op, GGML_N_TASKS_MAX, (void *)(intptr_t)norm);
}

static struct ggml_tensor * llmserve_rows_node(struct ggml_context * ctx, struct ggml_tensor * a, int64_t cols, int trees, void * ud) {
	struct ggml_tensor * args[1] = {a};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, cols, a->ne[1], 1, 1, args, 1, trees ? llmserve_trees_op : llmserve_linear_op, GGML_N_TASKS_MAX, ud);
}

static struct ggml_tensor * llmserve_label_node(struct ggml_context * ctx, struct ggml_tensor * packed, int64_t k) {
	struct ggml_tensor * args[1] = {packed};
	return ggml_custom_4d(ctx, GGML_TYPE_I64, packed->ne[1], 1, 1, 1, args, 1, llmserve_label_op, GGML_N_TASKS_MAX, (void *)(intptr_t)k);
}
*/
import "C"

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/llmserve/llmserve/engine/graph"
)

// nodeParams holds the C parameters of a graph's ai.onnx.ml and CNN
// nodes (their custom operators' userdata), by node; free releases
// them (GraphModel.Close).
type nodeParams struct {
	byNode map[*graph.Node]unsafe.Pointer // by node (names need not be unique)
	// folded holds the nodes that the kernel before them computes (their
	// only input's only reader; prepareCNN): they pass their input on.
	folded map[*graph.Node]bool
	allocs []unsafe.Pointer
}

// cCopy copies s into C memory owned by p (nil for an empty s).
func cCopy[T any](p *nodeParams, s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	var zero T
	c := C.malloc(C.size_t(len(s)) * C.size_t(unsafe.Sizeof(zero)))
	if c == nil {
		panic("llamacpp: out of C memory for a model's parameters")
	}
	copy(unsafe.Slice((*T)(c), len(s)), s)
	p.allocs = append(p.allocs, c)
	return c
}

func (p *nodeParams) alloc(size uintptr) unsafe.Pointer {
	c := C.calloc(1, C.size_t(size))
	if c == nil {
		panic("llamacpp: out of C memory for a model's parameters")
	}
	p.allocs = append(p.allocs, c)
	return c
}

func (p *nodeParams) free() {
	if p == nil {
		return
	}
	for _, c := range p.allocs {
		C.free(c)
	}
	p.allocs, p.byNode = nil, nil
}

// prepareNodes copies the parameters of g's ai.onnx.ml and CNN nodes into
// C memory.
func prepareNodes(g *graph.Checked) (*nodeParams, error) {
	p := &nodeParams{byNode: map[*graph.Node]unsafe.Pointer{}, folded: map[*graph.Node]bool{}}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		err := p.prepareCNN(g, n)
		if err == nil {
			err = p.prepareML(g, n)
		}
		if err != nil {
			p.free()
			return nil, &graph.Error{Node: n.Name, Op: n.Op, Err: err}
		}
	}
	return p, nil
}

// prepareML copies the parameters of n, if an ai.onnx.ml node, into C
// memory.
func (p *nodeParams) prepareML(g *graph.Checked, n *graph.Node) error {
	var features int64
	if len(n.Inputs) > 0 {
		if x, ok := g.Values[n.Inputs[0]]; ok && len(x.Shape) == 2 {
			features = x.Shape[1]
		}
	}
	switch n.Op {
	case "Scaler":
		s := (*C.llmserve_scaler)(p.alloc(C.sizeof_llmserve_scaler))
		off := n.Attrs["offset"].Floats
		s.n = C.int64_t(len(off))
		s.offset = (*C.float)(cCopy(p, off))
		s.scale = (*C.float)(cCopy(p, n.Attrs["scale"].Floats))
		p.byNode[n] = unsafe.Pointer(s)
	case "LinearClassifier", "LinearRegressor":
		l, err := graph.ParseLinear(n, features)
		if err != nil {
			return err
		}
		c := (*C.llmserve_linear)(p.alloc(C.sizeof_llmserve_linear))
		c.classifier, c.post, c.second_class = cBool(l.Classifier), C.int32_t(l.Post), cBool(l.SecondClass)
		c.n_labels = C.int32_t(len(l.Labels))
		c.features, c.targets, c.outputs = C.int64_t(l.Features), C.int64_t(l.Targets), C.int64_t(l.Outputs())
		c.coef = (*C.float)(cCopy(p, l.Coef))
		c.intercepts = (*C.float)(cCopy(p, l.Intercepts))
		c.labels = (*C.int64_t)(cCopy(p, l.Labels))
		p.byNode[n] = unsafe.Pointer(c)
	case "TreeEnsembleClassifier", "TreeEnsembleRegressor":
		t, err := graph.ParseTreeEnsemble(n, features)
		if err != nil {
			return err
		}
		c := (*C.llmserve_trees)(p.alloc(C.sizeof_llmserve_trees))
		c.classifier, c.binary_case, c.all_positive = cBool(t.Classifier), cBool(t.BinaryCase), cBool(t.AllPositive)
		c.aggregate, c.post, c.n_base = C.int32_t(t.Aggregate), C.int32_t(t.Post), C.int32_t(len(t.Base))
		c.features, c.targets, c.n_roots = C.int64_t(t.Features), C.int64_t(t.Targets), C.int32_t(len(t.Roots))
		c.feature = (*C.int32_t)(cCopy(p, t.Feature))
		c.threshold = (*C.float)(cCopy(p, t.Threshold))
		c.mode = (*C.uint8_t)(cCopy(p, t.Mode))
		c.missing = (*C.uint8_t)(cCopy(p, t.MissingTrue))
		c.truen = (*C.int32_t)(cCopy(p, t.True))
		c.falsen = (*C.int32_t)(cCopy(p, t.False))
		c.wfirst = (*C.int32_t)(cCopy(p, t.WeightFirst))
		c.wcount = (*C.int32_t)(cCopy(p, t.WeightCount))
		c.wtarget = (*C.int32_t)(cCopy(p, t.WeightTarget))
		c.wvalue = (*C.float)(cCopy(p, t.WeightValue))
		c.roots = (*C.int32_t)(cCopy(p, t.Roots))
		c.base = (*C.float)(cCopy(p, t.Base))
		c.labels = (*C.int64_t)(cCopy(p, t.Labels))
		if w := treeWalk(t); w != nil {
			c.walk_mode = C.int32_t(w.mode)
			c.walk_true, c.walk_false = (*C.int32_t)(cCopy(p, w.True)), (*C.int32_t)(cCopy(p, w.False))
			c.walk_feature, c.depth = (*C.int32_t)(cCopy(p, w.Feature)), (*C.int32_t)(cCopy(p, w.Depth))
		}
		p.byNode[n] = unsafe.Pointer(c)
	}
	return nil
}

// walk is what the branch-free tree walk (llmserve_trees_walk) needs.
type walk struct {
	mode        uint8   // every branch node's mode
	True, False []int32 // t.True and t.False, each leaf leading to itself
	Feature     []int32 // t.Feature, 0 for the leaves
	Depth       []int32 // each root's longest path to a leaf
}

// maxWalkDepth bounds the trees the branch-free walk takes: it steps every
// row as far as the deepest leaf, so a lopsided deep tree costs its depth
// on every path.
const maxWalkDepth = 32

// treeWalk returns the branch-free walk's arrays for t, or nil when its
// branch nodes have several modes or a tree is deeper than maxWalkDepth.
func treeWalk(t *graph.TreeEnsemble) *walk {
	w := &walk{True: slices.Clone(t.True), False: slices.Clone(t.False), Feature: slices.Clone(t.Feature)}
	for i, m := range t.Mode {
		switch {
		case m == 0:
			w.True[i], w.False[i], w.Feature[i] = int32(i), int32(i), 0
		case w.mode == 0:
			w.mode = m
		case m != w.mode:
			return nil
		}
	}
	if w.mode == 0 {
		return nil // leaves only: nothing to walk
	}
	depth := make([]int32, len(t.Mode)) // of each node, -1 while unknown
	for i := range depth {
		depth[i] = -1
	}
	var of func(i int32) int32
	of = func(i int32) int32 {
		if depth[i] < 0 {
			depth[i] = 0
			if t.Mode[i] != 0 {
				depth[i] = 1 + max(of(t.True[i]), of(t.False[i]))
			}
		}
		return depth[i]
	}
	for _, r := range t.Roots {
		d := of(r)
		if d > maxWalkDepth {
			return nil
		}
		w.Depth = append(w.Depth, d)
	}
	return w
}

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// nodeOutputs builds n: one value per output, for the operators built in
// files of their own (several outputs), or node's one.
func (bl *builder) nodeOutputs(n *graph.Node) ([]gval, error) {
	if !graph.FileOp(n.Op) {
		v, err := bl.node(n)
		return []gval{v}, err
	}
	switch n.Op {
	case "Scaler", "Normalizer", "ZipMap", "LinearClassifier", "LinearRegressor", "TreeEnsembleClassifier", "TreeEnsembleRegressor":
		return bl.mlNode(n)
	case "Conv", "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool":
		v, err := bl.cnnNode(n)
		return []gval{v}, err
	}
	v, err := bl.node(n)
	return []gval{v}, err
}

// mlNode builds an ai.onnx.ml node on its [rows, features] input.
func (bl *builder) mlNode(n *graph.Node) ([]gval, error) {
	ctx := bl.ctx
	x, err := bl.value(n.Inputs[0])
	if err != nil {
		return nil, err
	}
	xt := bl.contiguous(x.t)
	ud := bl.m.params.byNode[n]
	switch n.Op {
	case "ZipMap":
		return []gval{x}, nil
	case "Scaler":
		return []gval{{C.llmserve_scaler_node(ctx, xt, ud), x.shape}}, nil
	case "Normalizer":
		norm, err := graph.NormKind(n)
		if err != nil {
			return nil, err
		}
		return []gval{{C.llmserve_normalizer_node(ctx, xt, C.int(norm)), x.shape}}, nil
	}
	if ud == nil {
		return nil, fmt.Errorf("operator %s: parameters not prepared", n.Op)
	}
	trees := n.Op == "TreeEnsembleClassifier" || n.Op == "TreeEnsembleRegressor"
	var k int64
	if trees {
		k = int64((*C.llmserve_trees)(ud).targets)
	} else {
		k = int64((*C.llmserve_linear)(ud).outputs)
	}
	classifier := n.Op == "TreeEnsembleClassifier" || n.Op == "LinearClassifier"
	cols := k
	if classifier {
		cols += 2 // the label's 8 bytes
	}
	var treesFlag C.int
	if trees {
		treesFlag = 1
	}
	packed := C.llmserve_rows_node(ctx, xt, C.int64_t(cols), treesFlag, ud)
	scoreShape := []int64{bl.rows, k}
	if !classifier {
		return []gval{{packed, scoreShape}}, nil
	}
	scores := C.ggml_view_2d(ctx, packed, C.int64_t(k), C.int64_t(bl.rows), packed.nb[1], 0)
	label := C.llmserve_label_node(ctx, packed, C.int64_t(k))
	return []gval{{label, []int64{bl.rows}}, {scores, scoreShape}}, nil
}
