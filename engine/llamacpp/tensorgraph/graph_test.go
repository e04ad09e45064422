//go:build cgo

package tensorgraph

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/llmserve/llmserve/engine/graph"
)

func attrs(kv ...any) map[string]graph.Attr {
	m := map[string]graph.Attr{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case int:
			m[kv[i].(string)] = graph.Attr{Kind: graph.AttrInt, Int: int64(v)}
		case float64:
			m[kv[i].(string)] = graph.Attr{Kind: graph.AttrFloat, Float: float32(v)}
		case string:
			m[kv[i].(string)] = graph.Attr{Kind: graph.AttrString, String: v}
		}
	}
	return m
}

// opCase is one operator applied to graph inputs ("x", "y") and random
// constants ("w", "c", ...).
type opCase struct {
	name   string
	op     string
	attrs  map[string]graph.Attr
	inputs []string
	vals   map[string][]int64 // shapes of inputs (batched) and constants
	batch  map[string]bool    // which of vals are graph inputs
	opset  int64
	shape  []int64 // the I64 constant "shape", for Reshape
}

func in(shapes ...any) (map[string][]int64, map[string]bool) {
	vals, batch := map[string][]int64{}, map[string]bool{}
	for i := 0; i < len(shapes); i += 2 {
		name := shapes[i].(string)
		vals[name] = shapes[i+1].([]int64)
		batch[name] = len(vals[name]) > 0 && vals[name][0] == graph.Batch
	}
	return vals, batch
}

func opCases() []opCase {
	B := int64(graph.Batch)
	c := func(name, op string, a map[string]graph.Attr, inputs []string, shapes ...any) opCase {
		v, b := in(shapes...)
		return opCase{name: name, op: op, attrs: a, inputs: inputs, vals: v, batch: b}
	}
	cases := []opCase{
		c("add-bias", "Add", nil, []string{"x", "c"}, "x", []int64{B, 4}, "c", []int64{4}),
		c("add-bias-first", "Add", nil, []string{"c", "x"}, "x", []int64{B, 4}, "c", []int64{1, 4}),
		c("add-two-inputs", "Add", nil, []string{"x", "y"}, "x", []int64{B, 4}, "y", []int64{B, 4}),
		c("sub-const-first", "Sub", nil, []string{"c", "x"}, "x", []int64{B, 4}, "c", []int64{4}),
		c("sub", "Sub", nil, []string{"x", "y"}, "x", []int64{B, 3}, "y", []int64{B, 3}),
		c("mul-outer", "Mul", nil, []string{"x", "c"}, "x", []int64{B, 3, 1}, "c", []int64{1, 4}),
		c("mul-scalar", "Mul", nil, []string{"x", "c"}, "x", []int64{B, 5}, "c", []int64{}),
		c("div", "Div", nil, []string{"x", "c"}, "x", []int64{B, 4}, "c", []int64{4}),
		c("div-const-first", "Div", nil, []string{"c", "x"}, "x", []int64{B, 2, 3}, "c", []int64{3}),
		c("matmul", "MatMul", nil, []string{"x", "w"}, "x", []int64{B, 16}, "w", []int64{16, 8}),
		c("matmul-odd", "MatMul", nil, []string{"x", "w"}, "x", []int64{B, 5}, "w", []int64{5, 3}),
		c("matmul-rank3", "MatMul", nil, []string{"x", "w"}, "x", []int64{B, 2, 8}, "w", []int64{8, 4}),
		c("gemm", "Gemm", nil, []string{"x", "w", "c"}, "x", []int64{B, 8}, "w", []int64{8, 4}, "c", []int64{4}),
		c("gemm-transB-alpha-beta", "Gemm", attrs("transB", 1, "alpha", 0.5, "beta", 2.0), []string{"x", "w", "c"}, "x", []int64{B, 8}, "w", []int64{4, 8}, "c", []int64{1, 4}),
		c("gemm-no-bias", "Gemm", attrs("transB", 1), []string{"x", "w"}, "x", []int64{B, 6}, "w", []int64{3, 6}),
		c("relu", "Relu", nil, []string{"x"}, "x", []int64{B, 7}),
		c("tanh", "Tanh", nil, []string{"x"}, "x", []int64{B, 7}),
		c("sigmoid", "Sigmoid", nil, []string{"x"}, "x", []int64{B, 7}),
		c("gelu-erf", "Gelu", nil, []string{"x"}, "x", []int64{B, 9}),
		c("gelu-tanh", "Gelu", attrs("approximate", "tanh"), []string{"x"}, "x", []int64{B, 9}),
		c("softmax", "Softmax", nil, []string{"x"}, "x", []int64{B, 6}),
		c("softmax-axis1-rank3", "Softmax", attrs("axis", 1), []string{"x"}, "x", []int64{B, 3, 4}),
		c("layernorm", "LayerNormalization", attrs("epsilon", 1e-3), []string{"x", "s", "c"}, "x", []int64{B, 6}, "s", []int64{6}, "c", []int64{6}),
		c("layernorm-axis1", "LayerNormalization", attrs("axis", 1), []string{"x", "s"}, "x", []int64{B, 3, 4}, "s", []int64{3, 4}),
		c("flatten", "Flatten", nil, []string{"x"}, "x", []int64{B, 3, 4}),
		c("concat", "Concat", attrs("axis", 1), []string{"x", "y"}, "x", []int64{B, 2}, "y", []int64{B, 3}),
		c("concat-last-rank3", "Concat", attrs("axis", -1), []string{"x", "y"}, "x", []int64{B, 2, 2}, "y", []int64{B, 2, 3}),
		c("argmax", "ArgMax", attrs("axis", 1), []string{"x"}, "x", []int64{B, 5}),
		c("argmax-middle", "ArgMax", attrs("axis", 1, "keepdims", 0), []string{"x"}, "x", []int64{B, 3, 4}),
		c("identity", "Identity", nil, []string{"x"}, "x", []int64{B, 3}),
	}
	legacy := c("softmax-opset11-axis1", "Softmax", attrs("axis", 1), []string{"x"}, "x", []int64{B, 3, 4})
	legacy.opset = 11
	cases = append(cases, legacy)
	for _, s := range [][]int64{{0, 3, 4}, {-1, 12}, {0, -1}} {
		r := c("reshape", "Reshape", nil, []string{"x", "shape"}, "x", []int64{B, 12})
		if s[1] == 12 {
			r.vals["x"] = []int64{B, 3, 4}
		}
		r.shape = s
		cases = append(cases, r)
	}
	return cases
}

func (tc opCase) graph(rng *rand.Rand) *graph.Graph {
	g := &graph.Graph{
		Nodes:   []graph.Node{{Name: tc.name, Op: tc.op, Inputs: tc.inputs, Outputs: []string{"out"}, Attrs: tc.attrs}},
		Outputs: []graph.Value{{Name: "out"}},
	}
	for _, name := range tc.inputs {
		switch {
		case name == "shape":
			g.Consts = append(g.Consts, graph.Const{Name: name, DType: graph.I64, Shape: []int64{int64(len(tc.shape))}, I64: tc.shape})
		case tc.batch[name]:
			g.Inputs = append(g.Inputs, graph.Value{Name: name, DType: graph.F32, Shape: tc.vals[name]})
		default:
			k := graph.Const{Name: name, DType: graph.F32, Shape: tc.vals[name]}
			k.F32 = make([]float32, k.Elements())
			for i := range k.F32 {
				k.F32[i] = float32(rng.NormFloat64())
				if tc.op == "Div" {
					k.F32[i] = 0.5 + float32(rng.Float64()) // keep away from zero
				}
			}
			g.Consts = append(g.Consts, k)
		}
	}
	return g
}

func loadGraph(t testing.TB, g *graph.Graph, opset int64) (*graph.Checked, *GraphModel) {
	t.Helper()
	c, err := graph.Check(g, opset)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadGraph(c, GraphOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return c, m
}

func randomInputs(rng *rand.Rand, c *graph.Checked, rows int) ([][]float32, map[string]*graph.Dense) {
	var data [][]float32
	dense := map[string]*graph.Dense{}
	for _, in := range c.Inputs {
		shape := append([]int64{int64(rows)}, in.Shape[1:]...)
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 2)
			if in.Name == "x" && c.Nodes[0].Op == "Div" && c.Nodes[0].Inputs[1] == "x" {
				x[i] = 0.5 + float32(rng.Float64())
			}
		}
		data = append(data, x)
		dense[in.Name] = &graph.Dense{Shape: shape, F32: x}
	}
	return data, dense
}

// TestGraphOps runs every operator through ggml and compares it with the
// pure-Go reference (graph.Eval) within 1e-5.
func TestGraphOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range opCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, m := loadGraph(t, tc.graph(rng), tc.opset)
			for _, rows := range []int{1, 3} {
				data, dense := randomInputs(rng, c, rows)
				want, err := graph.Eval(c, dense)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Run(context.Background(), rows, data)
				if err != nil {
					t.Fatal(err)
				}
				matchReference(t, rows, got[0], want["out"], false)
			}
		})
	}
}

// TestGraphConcurrentRuns: 32 goroutines running one model at once get
// exactly the results of sequential runs.
func TestGraphConcurrentRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := opCases()[12].graph(rng) // gemm
	c, m := loadGraph(t, g, 0)
	const n = 32
	inputs := make([][][]float32, n)
	want := make([][]float32, n)
	for i := range n {
		inputs[i], _ = randomInputs(rng, c, 1+i%5)
		out, err := m.Run(context.Background(), 1+i%5, inputs[i])
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out[0].F32
	}
	var wg sync.WaitGroup
	errs := make([]string, n)
	for i := range n {
		wg.Go(func() {
			for range 3 {
				out, err := m.Run(context.Background(), 1+i%5, inputs[i])
				if err != nil {
					errs[i] = err.Error()
					return
				}
				for j := range want[i] {
					if math.Float32bits(out[0].F32[j]) != math.Float32bits(want[i][j]) {
						errs[i] = "results differ from the sequential run"
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("goroutine %d: %s", i, e)
		}
	}
}

func TestGraphRunAfterCloseAndCanceled(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	c, m := loadGraph(t, opCases()[15].graph(rng), 0) // relu
	data, _ := randomInputs(rng, c, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Run(ctx, 2, data); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: err = %v", err)
	}
	if _, err := m.Run(context.Background(), 3, data); err == nil {
		t.Error("wrong element count: no error")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(context.Background(), 2, data); !errors.Is(err, ErrModelClosed) {
		t.Errorf("after Close: err = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestGraphOpsBatchInvariant: for every operator, each row of a batch of
// 9 is bit-identical to the same row computed alone.
func TestGraphOpsBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range opCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, m := loadGraph(t, tc.graph(rng), tc.opset)
			const rows = 9
			data, _ := randomInputs(rng, c, rows)
			full, err := m.Run(context.Background(), rows, data)
			if err != nil {
				t.Fatal(err)
			}
			for r := range rows {
				one := make([][]float32, len(data))
				for i, in := range c.Inputs {
					n := int(rowSize(in.Shape))
					one[i] = data[i][r*n : (r+1)*n]
				}
				got, err := m.Run(context.Background(), 1, one)
				if err != nil {
					t.Fatal(err)
				}
				n := int(rowSize(c.Outputs[0].Shape))
				for j := range n {
					switch {
					case got[0].I64 != nil:
						if got[0].I64[j] != full[0].I64[r*n+j] {
							t.Fatalf("row %d element %d: alone %d, in the batch %d", r, j, got[0].I64[j], full[0].I64[r*n+j])
						}
					case math.Float32bits(got[0].F32[j]) != math.Float32bits(full[0].F32[r*n+j]):
						t.Fatalf("row %d element %d: alone %v, in the batch %v", r, j, got[0].F32[j], full[0].F32[r*n+j])
					}
				}
			}
		})
	}
}

// TestGraphArgMaxTiesFirst: tied maxima give the first index, as ONNX
// (select_last_index=0), ONNX Runtime, torch and numpy do, on ggml and in
// the Go reference alike; ggml_argmax alone keeps the last one.
func TestGraphArgMaxTiesFirst(t *testing.T) {
	B := int64(graph.Batch)
	for _, tc := range []struct {
		name  string
		pre   string // an operator applied before ArgMax, or ""
		shape []int64
		axis  int
		x     []float32
		want  []int64
	}{
		{"rows", "", []int64{B, 4}, 1, []float32{1, 3, 3, 0, 5, 5, 5, 5, 0, 0, 0, 1, -1, -1, -2, -1}, []int64{1, 0, 3, 0}},
		// A saturated logistic regression: every class scores 1 in FP32.
		{"saturated-sigmoid", "Sigmoid", []int64{B, 3}, 1, []float32{40, 50, 60, 2, 30, 30}, []int64{0, 1}},
		// Axis 1 of [B, 3, 2]: column maxima tied between rows 0 and 2.
		{"middle-axis", "", []int64{B, 3, 2}, 1, []float32{7, 1, 2, 4, 7, 4}, []int64{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &graph.Graph{
				Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: tc.shape}},
				Outputs: []graph.Value{{Name: "out"}},
			}
			src := "x"
			if tc.pre != "" {
				g.Nodes = append(g.Nodes, graph.Node{Name: "pre", Op: tc.pre, Inputs: []string{"x"}, Outputs: []string{"p"}})
				src = "p"
			}
			g.Nodes = append(g.Nodes, graph.Node{Name: "argmax", Op: "ArgMax", Inputs: []string{src}, Outputs: []string{"out"},
				Attrs: attrs("axis", tc.axis, "keepdims", 0)})
			c, m := loadGraph(t, g, 0)
			per := int64(1)
			for _, d := range tc.shape[1:] {
				per *= d
			}
			rows := len(tc.x) / int(per)
			shape := append([]int64{int64(rows)}, tc.shape[1:]...)
			ref, err := graph.Eval(c, map[string]*graph.Dense{"x": {Shape: shape, F32: tc.x}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Run(context.Background(), rows, [][]float32{tc.x})
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				if ref["out"].I64[i] != w || got[0].I64[i] != w {
					t.Fatalf("label %d: ggml %d, reference %d, want %d (the first of tied maxima)", i, got[0].I64[i], ref["out"].I64[i], w)
				}
			}
		})
	}
}

// TestGraphReluNaN: Relu keeps NaN, as ONNX Runtime does (ggml_relu alone
// turns it into 0), and maps ±Inf as max(x, 0), on ggml and in graph.Eval.
func TestGraphReluNaN(t *testing.T) {
	g := &graph.Graph{
		Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, 6}}},
		Nodes:   []graph.Node{{Name: "relu", Op: "Relu", Inputs: []string{"x"}, Outputs: []string{"out"}}},
		Outputs: []graph.Value{{Name: "out"}},
	}
	c, m := loadGraph(t, g, 0)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x := []float32{nan, -1, 2, -inf, inf, -3, 0.5, nan, -nan, 0, -2, 7}
	want := []float32{nan, 0, 2, 0, inf, 0, 0.5, nan, nan, 0, 0, 7}
	ref, err := graph.Eval(c, map[string]*graph.Dense{"x": {Shape: []int64{2, 6}, F32: x}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Run(context.Background(), 2, [][]float32{x})
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b float32) bool { return a == b || (a != a && b != b) }
	for i, w := range want {
		if !same(got[0].F32[i], w) || !same(ref["out"].F32[i], w) {
			t.Fatalf("Relu(%v): ggml %v, reference %v, want %v", x[i], got[0].F32[i], ref["out"].F32[i], w)
		}
	}
}

// matchReference fails t unless got, a Run's output of rows rows, is the
// pure-Go reference w: I64 exactly, F32 equal or within 1e-5 (relative
// beyond 1).
// A NaN matches only a NaN of the reference, and only with bothNaN.
func matchReference(t *testing.T, rows int, got GraphOutput, w *graph.Dense, bothNaN bool) {
	t.Helper()
	if w.I64 != nil {
		if len(got.I64) != len(w.I64) {
			t.Fatalf("rows %d: %d values, want %d", rows, len(got.I64), len(w.I64))
		}
		for i := range w.I64 {
			if got.I64[i] != w.I64[i] {
				t.Fatalf("rows %d: out[%d] = %d, want %d", rows, i, got.I64[i], w.I64[i])
			}
		}
		return
	}
	if len(got.F32) != len(w.F32) {
		t.Fatalf("rows %d: %d values, want %d", rows, len(got.F32), len(w.F32))
	}
	for i := range w.F32 {
		g, r := float64(got.F32[i]), float64(w.F32[i])
		if g == r || bothNaN && math.IsNaN(g) && math.IsNaN(r) {
			continue // equal (infinities too), or NaN where NaN is kept
		}
		if d := math.Abs(g - r); d > 1e-5*max(1, math.Abs(r)) || math.IsNaN(d) {
			t.Fatalf("rows %d: out[%d] = %v, reference %v", rows, i, g, r)
		}
	}
}
