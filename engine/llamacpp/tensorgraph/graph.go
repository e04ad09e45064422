//go:build cgo

package tensorgraph

/*
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/engine/llamacpp"
)

// ErrModelClosed is returned by a Run after Close (the binding's
// sentinel, so callers test one error whichever package ran the model).
var ErrModelClosed = llamacpp.ErrModelClosed

// GraphModel is a tensor graph ready to run on ggml's CPU backend: its
// constants live in one ggml context, uploaded once and only read after;
// every concurrent Run takes a runner of its own (a ggml graph per batch
// size, with its compute buffer), so Runs share nothing they write.
type GraphModel struct {
	g       *graph.Checked
	threads int
	parts   int         // GraphOptions.Parts
	params  *nodeParams // custom operators' parameters: ai.onnx.ml and CNN nodes (ml.go)
	wctx    *C.struct_ggml_context
	weights map[string]*C.struct_ggml_tensor // by constant name and prepared form
	// indexBound is, for an I64 input that Gather uses as indices, the
	// size of the gathered axis: its values must be in [-bound, bound).
	indexBound map[int]int64

	mu      sync.RWMutex // Run holds it shared, Close exclusively
	closed  bool         // guarded by mu
	poolMu  sync.Mutex
	runners []*graphRunner // idle runners, guarded by poolMu
	all     []*graphRunner // every runner, guarded by poolMu
}

// weightKey names a constant in the form an operator wants it.
func weightKey(name, form string) string { return name + "\x00" + form }

// LoadGraph uploads a checked graph's constants into ggml memory.
func LoadGraph(g *graph.Checked, opts GraphOptions) (*GraphModel, error) {
	llamacpp.Init()
	C.ggml_cpu_init()
	initWideKernels()
	threads := opts.Threads
	if threads <= 0 {
		threads = 1
	}
	type prepared struct {
		key   string
		shape []int64 // numpy order
		data  []float32
	}
	var preps []prepared
	seen := map[string]bool{}
	add := func(name, form string, shape []int64, data []float32) {
		k := weightKey(name, form)
		if seen[k] {
			return
		}
		seen[k] = true
		preps = append(preps, prepared{k, shape, data})
	}
	consts := map[string]*graph.Const{}
	for i := range g.Consts {
		consts[g.Consts[i].Name] = &g.Consts[i]
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		for j, in := range n.Inputs {
			k, ok := consts[in]
			if ok && k.DType == graph.I64 && (n.Op == "Where" && j == 0 || n.Op == "Equal") {
				// Where's condition and Equal's integers, as F32 for the
				// kernels (exact up to 2^24).
				f := make([]float32, len(k.I64))
				for e, v := range k.I64 {
					f[e] = float32(v)
				}
				add(in, "f", k.Shape, f)
				continue
			}
			if ok && n.Op == "Gather" && j == 1 && g.Values[n.Inputs[0]].Batched {
				// Constant indices into a batched value, as F32 (exact:
				// Check bounds them by the axis size).
				f := make([]float32, len(k.I64))
				for e, v := range k.I64 {
					f[e] = float32(v)
				}
				add(in, "idx", k.Shape, f)
				continue
			}
			if !ok || k.DType != graph.F32 {
				continue
			}
			switch {
			case n.Op == "MatMul" && j == 1, n.Op == "Gemm" && j == 1 && n.Int("transB", 0) == 0:
				// ggml_mul_mat wants the weights as [N][K] rows.
				add(in, "T", []int64{k.Shape[1], k.Shape[0]}, transpose(k.F32, int(k.Shape[0]), int(k.Shape[1])))
			case n.Op == "Gemm" && j == 2:
				beta := n.Float("beta", 1)
				scaled := make([]float32, len(k.F32))
				for e, v := range k.F32 {
					scaled[e] = beta * v
				}
				add(in, fmt.Sprintf("beta%08x", math.Float32bits(beta)), k.Shape, scaled)
			default:
				add(in, "", k.Shape, k.F32)
			}
		}
	}
	size := C.size_t(len(preps)+1) * C.ggml_tensor_overhead()
	for _, p := range preps {
		size += C.size_t(len(p.data))*4 + 64
	}
	m := &GraphModel{g: g, threads: threads, parts: opts.Parts, weights: map[string]*C.struct_ggml_tensor{}, indexBound: map[int]int64{}}
	for i, in := range g.Inputs {
		for _, n := range g.Nodes {
			if n.Op == "Gather" && len(n.Inputs) > 1 && n.Inputs[1] == in.Name {
				k := g.Values[n.Inputs[0]].Shape[0]
				if b, ok := m.indexBound[i]; !ok || k < b {
					m.indexBound[i] = k
				}
			}
		}
	}
	m.wctx = C.ggml_init(C.struct_ggml_init_params{mem_size: size, mem_buffer: nil, no_alloc: false})
	if m.wctx == nil {
		return nil, errors.New("llamacpp: ggml_init for the weights failed")
	}
	for _, p := range preps {
		t := newTensor(m.wctx, C.GGML_TYPE_F32, p.shape)
		if len(p.data) > 0 {
			C.memcpy(t.data, unsafe.Pointer(&p.data[0]), C.size_t(len(p.data)*4))
		}
		m.weights[p.key] = t
	}
	var err error
	if m.params, err = prepareNodes(g); err != nil {
		C.ggml_free(m.wctx)
		return nil, err
	}
	return m, nil
}

func transpose(a []float32, rows, cols int) []float32 {
	t := make([]float32, len(a))
	for r := range rows {
		for c := range cols {
			t[c*rows+r] = a[r*cols+c]
		}
	}
	return t
}

// newTensor creates a tensor of the numpy-order shape (ggml's ne reversed).
func newTensor(ctx *C.struct_ggml_context, typ C.enum_ggml_type, shape []int64) *C.struct_ggml_tensor {
	n := ne(shape)
	return C.ggml_new_tensor(ctx, typ, C.int(max(len(shape), 1)), &n[0])
}

// Run computes one batch of rows of a graph whose inputs are all F32.
// inputs has one slice per graph input, in order, each holding rows times
// the input's row size elements.
func (m *GraphModel) Run(ctx context.Context, rows int, inputs [][]float32) ([]GraphOutput, error) {
	typed := make([]GraphInput, len(inputs))
	for i, in := range inputs {
		typed[i].F32 = in
	}
	return m.RunInputs(ctx, rows, typed)
}

// RunInputs computes one batch of rows. inputs has one value per graph
// input, in order, in the input's element type, each holding rows times
// the input's row size elements. I64 inputs are computed as int32: a
// value outside its range, or an index out of range of the axis a Gather
// takes it for, fails the Run.
func (m *GraphModel) RunInputs(ctx context.Context, rows int, inputs []GraphInput) ([]GraphOutput, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrModelClosed
	}
	if rows < 1 {
		return nil, fmt.Errorf("llamacpp: batch of %d rows", rows)
	}
	if len(inputs) != len(m.g.Inputs) {
		return nil, fmt.Errorf("llamacpp: %d inputs, the graph takes %d", len(inputs), len(m.g.Inputs))
	}
	for i, in := range m.g.Inputs {
		got := len(inputs[i].F32)
		if in.DType == graph.I64 {
			got = len(inputs[i].I64)
			lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
			if b, ok := m.indexBound[i]; ok {
				lo, hi = -b, b-1
			}
			for _, v := range inputs[i].I64 {
				if v < lo || v > hi {
					return nil, fmt.Errorf("llamacpp: input %q: value %d is out of range [%d, %d]", in.Name, v, lo, hi)
				}
			}
		}
		if want := int64(rows) * rowSize(in.Shape); int64(got) != want {
			return nil, fmt.Errorf("llamacpp: input %q has %d elements, want %d", in.Name, got, want)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if parts := min(m.parts, rows/SplitRows); parts > 1 {
		return m.runParts(parts, rows, inputs)
	}
	r := m.runner()
	defer m.release(r)
	return r.run(rows, inputs)
}

// runParts cuts a Run into pieces of SplitRows consecutive rows (the last
// one takes the rest, up to 2×SplitRows-1), computes them on up to parts
// runners at once, each taking the next piece when done with its last, and
// joins their outputs in order. Pieces of one size keep each runner's
// intermediate tensors small, and a runner whose core is taken by other
// work leaves more pieces to the others instead of holding up a fixed half.
func (m *GraphModel) runParts(parts, rows int, inputs []GraphInput) ([]GraphOutput, error) {
	pieces := rows / SplitRows
	outs := make([][]GraphOutput, pieces)
	errs := make([]error, pieces)
	piece := func(p int) {
		at, n := p*SplitRows, SplitRows
		if p == pieces-1 {
			n = rows - at
		}
		sub := make([]GraphInput, len(inputs))
		for i, in := range m.g.Inputs {
			k := int(rowSize(in.Shape))
			if in.DType == graph.I64 {
				sub[i].I64 = inputs[i].I64[at*k : (at+n)*k]
			} else {
				sub[i].F32 = inputs[i].F32[at*k : (at+n)*k]
			}
		}
		r := m.runner()
		defer m.release(r)
		outs[p], errs[p] = r.run(n, sub)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parts, pieces) {
		wg.Go(func() {
			for p := int(next.Add(1)) - 1; p < pieces; p = int(next.Add(1)) - 1 {
				piece(p)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	joined := make([]GraphOutput, len(outs[0]))
	for i := range joined {
		// Sized once, not grown piece by piece.
		nf, ni := 0, 0
		for _, o := range outs {
			nf += len(o[i].F32)
			ni += len(o[i].I64)
		}
		if nf > 0 {
			joined[i].F32 = make([]float32, 0, nf)
		}
		if ni > 0 {
			joined[i].I64 = make([]int64, 0, ni)
		}
		for _, o := range outs {
			joined[i].F32 = append(joined[i].F32, o[i].F32...)
			joined[i].I64 = append(joined[i].I64, o[i].I64...)
		}
	}
	return joined, nil
}

func rowSize(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape[1:] {
		n *= d
	}
	return n
}

func (m *GraphModel) runner() *graphRunner {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	if n := len(m.runners); n > 0 {
		r := m.runners[n-1]
		m.runners = m.runners[:n-1]
		return r
	}
	r := &graphRunner{m: m, graphs: map[int]*builtGraph{}}
	m.all = append(m.all, r)
	return r
}

func (m *GraphModel) release(r *graphRunner) {
	m.poolMu.Lock()
	m.runners = append(m.runners, r)
	m.poolMu.Unlock()
}

// Close frees the weights and every runner; it waits for running Runs.
// Calling it again does nothing.
func (m *GraphModel) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.poolMu.Lock()
	for _, r := range m.all {
		r.free()
	}
	m.all, m.runners = nil, nil
	m.poolMu.Unlock()
	C.ggml_free(m.wctx)
	m.wctx = nil
	m.params.free()
	return nil
}

// graphRunner is used by one Run at a time.
type graphRunner struct {
	m        *GraphModel
	graphs   map[int]*builtGraph // by row count
	work     unsafe.Pointer      // C memory for ggml_graph_compute
	workSize C.size_t
	// pool is the runner's persistent ggml thread pool when threads > 1,
	// paused between Runs (its workers sleep instead of spinning).
	pool *C.struct_ggml_threadpool
}

// maxCachedGraphs bounds the graphs a runner keeps; past it the cache is
// emptied (batch sizes vary within max_batch_size, so it rarely is).
const maxCachedGraphs = 64

// builtGraph is the ggml graph for one batch size.
type builtGraph struct {
	ctx     *C.struct_ggml_context
	galloc  C.ggml_gallocr_t
	gf      *C.struct_ggml_cgraph
	inputs  []*C.struct_ggml_tensor
	outputs []*C.struct_ggml_tensor
}

func (b *builtGraph) free() {
	if b.galloc != nil {
		C.ggml_gallocr_free(b.galloc)
	}
	if b.ctx != nil {
		C.ggml_free(b.ctx)
	}
}

func (r *graphRunner) free() {
	for _, b := range r.graphs {
		b.free()
	}
	r.graphs = nil
	if r.pool != nil {
		C.ggml_threadpool_free(r.pool)
		r.pool = nil
	}
	if r.work != nil {
		C.free(r.work)
		r.work = nil
	}
}

func (r *graphRunner) run(rows int, inputs []GraphInput) ([]GraphOutput, error) {
	b, ok := r.graphs[rows]
	if !ok {
		var err error
		if b, err = r.m.build(rows); err != nil {
			return nil, err
		}
		if len(r.graphs) >= maxCachedGraphs {
			for k, old := range r.graphs {
				old.free()
				delete(r.graphs, k)
			}
		}
		r.graphs[rows] = b
	}
	for i, t := range b.inputs {
		if t.data == nil {
			continue // an input no output depends on has no memory
		}
		nbytes := C.size_t(C.ggml_nbytes(t))
		given := C.size_t(len(inputs[i].F32) * 4)
		switch {
		case r.m.g.Inputs[i].DType == graph.I64:
			given = C.size_t(len(inputs[i].I64) * 4)
			dst := unsafe.Slice((*int32)(t.data), len(inputs[i].I64))
			for e, v := range inputs[i].I64 {
				dst[e] = int32(v) // RunInputs checked the range
			}
		case given > 0:
			C.memcpy(t.data, unsafe.Pointer(&inputs[i].F32[0]), given)
		}
		if nbytes > given {
			C.memset(unsafe.Add(t.data, given), 0, nbytes-given)
		}
	}
	if r.m.threads > 1 && r.pool == nil {
		if r.pool = newThreadPool(r.m.threads, 0); r.pool == nil {
			return nil, errors.New("llamacpp: creating the ggml thread pool failed")
		}
	}
	plan := C.ggml_graph_plan(b.gf, C.int(r.m.threads), r.pool)
	if plan.work_size > r.workSize {
		if r.work != nil {
			C.free(r.work)
		}
		r.work = C.malloc(plan.work_size)
		if r.work == nil {
			r.workSize = 0
			return nil, errors.New("llamacpp: out of memory for the compute buffer")
		}
		r.workSize = plan.work_size
	}
	plan.work_data = (*C.uint8_t)(r.work)
	st := C.ggml_graph_compute(b.gf, &plan)
	if r.pool != nil {
		C.ggml_threadpool_pause(r.pool)
	}
	if st != C.GGML_STATUS_SUCCESS {
		return nil, fmt.Errorf("llamacpp: ggml_graph_compute failed with status %d", int(st))
	}
	outs := make([]GraphOutput, len(b.outputs))
	for i, t := range b.outputs {
		n := int(int64(rows) * rowSize(r.m.g.Outputs[i].Shape))
		switch t._type {
		case C.GGML_TYPE_F32:
			outs[i].F32 = make([]float32, n)
			if n > 0 {
				C.memcpy(unsafe.Pointer(&outs[i].F32[0]), t.data, C.size_t(n*4))
			}
		case C.GGML_TYPE_I64:
			outs[i].I64 = make([]int64, n)
			if n > 0 {
				C.memcpy(unsafe.Pointer(&outs[i].I64[0]), t.data, C.size_t(n*8))
			}
		case C.GGML_TYPE_I32:
			src := unsafe.Slice((*int32)(t.data), n)
			outs[i].I64 = make([]int64, n)
			for e, v := range src {
				outs[i].I64[e] = int64(v)
			}
		default:
			return nil, fmt.Errorf("llamacpp: output %q has ggml type %d", r.m.g.Outputs[i].Name, int(t._type))
		}
	}
	return outs, nil
}

// newThreadPool starts a ggml thread pool of threads workers (poll: how
// long they spin before sleeping, ggml's scale 0-100).
func newThreadPool(threads, poll int) *C.struct_ggml_threadpool {
	tp := C.ggml_threadpool_params_default(C.int(threads))
	tp.poll = C.uint32_t(poll)
	return C.ggml_threadpool_new(&tp)
}
