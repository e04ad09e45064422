package graph

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestBroadcast(t *testing.T) {
	for _, tc := range []struct {
		a, b, want []int64
		err        string
	}{
		{[]int64{Batch, 4}, []int64{4}, []int64{Batch, 4}, ""},
		{[]int64{4}, []int64{Batch, 4}, []int64{Batch, 4}, ""},
		{[]int64{Batch, 3, 1}, []int64{1, 4}, []int64{Batch, 3, 4}, ""},
		{[]int64{Batch, 4}, []int64{1, 4}, []int64{Batch, 4}, ""},
		{[]int64{Batch, 4}, []int64{}, []int64{Batch, 4}, ""},
		{[]int64{Batch, 4}, []int64{3}, nil, "do not broadcast"},
		{[]int64{Batch, 4}, []int64{2, 4}, nil, "do not broadcast"},
		{[]int64{Batch, 4}, []int64{2, 1, 4}, nil, "batch"},
	} {
		got, err := Broadcast(tc.a, tc.b)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Broadcast(%v, %v): error %v, want %q", tc.a, tc.b, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Broadcast(%v, %v) = %v, %v; want %v", tc.a, tc.b, got, err, tc.want)
		}
	}
}

func TestReshapeTarget(t *testing.T) {
	for _, tc := range []struct {
		in, target, want []int64
		err              string
	}{
		{[]int64{Batch, 12}, []int64{0, 3, 4}, []int64{Batch, 3, 4}, ""},
		{[]int64{Batch, 3, 4}, []int64{-1, 12}, []int64{Batch, 12}, ""},
		{[]int64{Batch, 12}, []int64{0, -1, 6}, []int64{Batch, 2, 6}, ""},
		{[]int64{Batch, 12}, []int64{1, 12}, nil, "batch"},
		{[]int64{Batch, 12}, []int64{0, 5}, nil, "cannot reshape"},
		{[]int64{Batch, 12}, []int64{-1, -1}, nil, "more than one -1"},
		{[]int64{Batch, 12}, []int64{0, -5}, nil, "negative"},
	} {
		got, err := ReshapeTarget(tc.in, tc.target, false)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ReshapeTarget(%v, %v): error %v, want %q", tc.in, tc.target, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ReshapeTarget(%v, %v) = %v, %v; want %v", tc.in, tc.target, got, err, tc.want)
		}
	}
}

// mlpGraph is input [B,4] -> MatMul w [4,3] -> out.
func mlpGraph() *Graph {
	return &Graph{
		Inputs:  []Value{{Name: "x", DType: F32, Shape: []int64{Batch, 4}}},
		Outputs: []Value{{Name: "y"}},
		Consts:  []Const{{Name: "w", DType: F32, Shape: []int64{4, 3}, F32: make([]float32, 12)}},
		Nodes:   []Node{{Name: "mm", Op: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"y"}}},
	}
}

func TestCheck(t *testing.T) {
	c, err := Check(mlpGraph(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Outputs[0]; got.DType != F32 || !slices.Equal(got.Shape, []int64{Batch, 3}) {
		t.Errorf("inferred output %+v", got)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Graph)
		want   string
	}{
		{"unsupported-op", func(g *Graph) { g.Nodes[0].Op = "LSTM" }, `node "mm": operator LSTM is not supported (supported: Add,`},
		{"missing-initializer", func(g *Graph) { g.Consts = nil }, `input "w" is not defined`},
		{"short-constant", func(g *Graph) { g.Consts[0].F32 = g.Consts[0].F32[:5] }, "holds 12 elements, data has 5"},
		{"overflowing-constant", func(g *Graph) { g.Consts[0].Shape = []int64{1 << 32, 1 << 32, 4} }, "bad shape"},
		{"wrong-shapes", func(g *Graph) { g.Inputs[0].Shape = []int64{Batch, 5} }, "do not multiply"},
		{"fixed-batch", func(g *Graph) { g.Inputs[0].Shape = []int64{1, 4} }, "must be the batch"},
		{"huge-row", func(g *Graph) { g.Inputs[0].Shape = []int64{Batch, 1 << 20, 1 << 20} }, "elements per row"},
		{"no-output", func(g *Graph) { g.Outputs[0].Name = "z" }, `output "z" is not computed`},
		{"output-shape", func(g *Graph) { g.Outputs[0].Shape = []int64{Batch, 4} }, "declared shape"},
		{"const-output", func(g *Graph) { g.Outputs[0].Name = "w" }, "does not depend on an input"},
		{"bad-attribute", func(g *Graph) {
			g.Nodes[0] = Node{Name: "g", Op: "Gelu", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: map[string]Attr{"approximate": {Kind: AttrString, String: "fast"}}}
		}, `attribute approximate="fast"`},
		{"computed-weights", func(g *Graph) {
			g.Inputs = append(g.Inputs, Value{Name: "w2", DType: F32, Shape: []int64{Batch, 3}})
			g.Nodes[0].Inputs[1] = "w2"
		}, `node "mm" (MatMul): MatMul of batched values needs both batched, of the same rank, 3 or more; got [-1 4] and [-1 3]: not supported`},
		{"duplicate-output", func(g *Graph) { g.Nodes[0].Outputs = []string{"x"} }, "defined twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mlpGraph()
			tc.mutate(g)
			_, err := Check(g, 0)
			var ge *Error
			if err == nil || !errors.As(err, &ge) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a *graph.Error containing %q", err, tc.want)
			}
		})
	}
}
