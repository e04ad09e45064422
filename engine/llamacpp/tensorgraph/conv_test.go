//go:build cgo

package tensorgraph

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llmserve/llmserve/engine/graph"
)

// cnnCase is one CNN operator on an input of shape x, with random
// constant inputs c1, c2, ... of the given shapes.
type cnnCase struct {
	name   string
	op     string
	attrs  map[string]graph.Attr
	x      []int64            // the input's shape
	consts map[string][]int64 // constant inputs after x, in order c1, c2, ...
}

func cnnCases() []cnnCase {
	B := int64(graph.Batch)
	pads := func(p ...int64) graph.Attr { return ints(p...) }
	return []cnnCase{
		{"conv-pad1", "Conv", map[string]graph.Attr{"kernel_shape": ints(3, 3), "pads": pads(1, 1, 1, 1)}, []int64{B, 1, 8, 8}, map[string][]int64{"c1": {4, 1, 3, 3}, "c2": {4}}},
		{"conv-stride2", "Conv", map[string]graph.Attr{"strides": ints(2, 2), "pads": pads(1, 1, 1, 1)}, []int64{B, 3, 9, 7}, map[string][]int64{"c1": {5, 3, 3, 3}, "c2": {5}}},
		{"conv-8-out-tiles", "Conv", map[string]graph.Attr{"kernel_shape": ints(3, 3), "pads": pads(1, 1, 1, 1)}, []int64{B, 2, 9, 11}, map[string][]int64{"c1": {8, 2, 3, 3}, "c2": {8}}},
		{"conv-16-out-stride2-tiles", "Conv", map[string]graph.Attr{"strides": ints(2, 2), "pads": pads(1, 1, 1, 1)}, []int64{B, 3, 15, 17}, map[string][]int64{"c1": {16, 3, 3, 3}, "c2": {16}}},
		{"conv-8-out-wide-rows", "Conv", map[string]graph.Attr{"kernel_shape": ints(3, 3), "pads": pads(1, 1, 1, 1)}, []int64{B, 1, 5, 19}, map[string][]int64{"c1": {8, 1, 3, 3}, "c2": {8}}},
		{"conv-16-out-rows-of-21", "Conv", map[string]graph.Attr{"kernel_shape": ints(3, 3), "pads": pads(1, 1, 1, 1)}, []int64{B, 2, 4, 21}, map[string][]int64{"c1": {16, 2, 3, 3}, "c2": {16}}},
		{"conv-16-out-stride2-rows-of-15", "Conv", map[string]graph.Attr{"strides": ints(2, 2), "pads": pads(1, 1, 1, 1)}, []int64{B, 2, 5, 29}, map[string][]int64{"c1": {16, 2, 3, 3}, "c2": {16}}},
		{"conv-32-out-stride2", "Conv", map[string]graph.Attr{"strides": ints(2, 2), "pads": pads(1, 1, 1, 1)}, []int64{B, 2, 6, 15}, map[string][]int64{"c1": {32, 2, 3, 3}, "c2": {32}}},
		{"conv-32-out-1x1", "Conv", nil, []int64{B, 3, 3, 4}, map[string][]int64{"c1": {32, 3, 1, 1}}},
		{"conv-24-out-stride2", "Conv", map[string]graph.Attr{"strides": ints(2, 2), "pads": pads(0, 1, 2, 0)}, []int64{B, 2, 9, 8}, map[string][]int64{"c1": {24, 2, 3, 3}, "c2": {24}}},
		{"conv-grouped-8-out-rows", "Conv", map[string]graph.Attr{"group": integer(2), "kernel_shape": ints(3, 3), "pads": pads(1, 1, 1, 1)}, []int64{B, 4, 5, 10}, map[string][]int64{"c1": {16, 2, 3, 3}, "c2": {16}}},
		{"conv-grouped-16-out-stride2", "Conv", map[string]graph.Attr{"group": integer(2), "strides": ints(2, 2), "pads": pads(1, 1, 1, 1)}, []int64{B, 4, 9, 9}, map[string][]int64{"c1": {32, 2, 3, 3}, "c2": {32}}},
		{"conv-inf-weight", "Conv", map[string]graph.Attr{"kernel_shape": ints(3, 3), "pads": pads(1, 1, 1, 1)}, []int64{B, 1, 4, 9}, map[string][]int64{"c1": {8, 1, 3, 3}, "c2": {8}}},
		{"conv-1x1-no-bias", "Conv", nil, []int64{B, 6, 4, 4}, map[string][]int64{"c1": {2, 6, 1, 1}}},
		{"conv-dilated-asymmetric", "Conv", map[string]graph.Attr{"dilations": ints(2, 1), "pads": pads(0, 1, 2, 0)}, []int64{B, 2, 7, 6}, map[string][]int64{"c1": {3, 2, 3, 2}, "c2": {3}}},
		{"conv-same-upper", "Conv", map[string]graph.Attr{"auto_pad": str("SAME_UPPER"), "strides": ints(2, 2)}, []int64{B, 2, 6, 5}, map[string][]int64{"c1": {3, 2, 2, 2}}},
		{"conv-depthwise", "Conv", map[string]graph.Attr{"group": integer(4), "kernel_shape": ints(3, 3), "pads": pads(1, 1, 1, 1)}, []int64{B, 4, 6, 6}, map[string][]int64{"c1": {4, 1, 3, 3}, "c2": {4}}},
		{"conv-grouped-strided", "Conv", map[string]graph.Attr{"group": integer(2), "strides": ints(2, 1), "pads": pads(0, 1, 1, 0)}, []int64{B, 4, 7, 5}, map[string][]int64{"c1": {6, 2, 2, 3}}},
		{"batchnorm", "BatchNormalization", map[string]graph.Attr{"epsilon": {Kind: graph.AttrFloat, Float: 1e-3}}, []int64{B, 3, 4, 5}, map[string][]int64{"c1": {3}, "c2": {3}, "c3": {3}, "c4": {3}}},
		{"batchnorm-2d", "BatchNormalization", nil, []int64{B, 4}, map[string][]int64{"c1": {4}, "c2": {4}, "c3": {4}, "c4": {4}}},
		{"maxpool", "MaxPool", map[string]graph.Attr{"kernel_shape": ints(2, 2), "strides": ints(2, 2)}, []int64{B, 3, 8, 8}, nil},
		{"maxpool-2x2-wide-rows", "MaxPool", map[string]graph.Attr{"kernel_shape": ints(2, 2), "strides": ints(2, 2)}, []int64{B, 3, 7, 21}, nil},
		{"maxpool-2x2-rows-of-20", "MaxPool", map[string]graph.Attr{"kernel_shape": ints(2, 2), "strides": ints(2, 2)}, []int64{B, 2, 5, 41}, nil},
		{"maxpool-pad-dilated-ceil", "MaxPool", map[string]graph.Attr{"kernel_shape": ints(3, 3), "strides": ints(2, 2), "pads": pads(1, 1, 1, 1), "dilations": ints(1, 2), "ceil_mode": integer(1)}, []int64{B, 2, 8, 9}, nil},
		{"avgpool-exclude-pad", "AveragePool", map[string]graph.Attr{"kernel_shape": ints(3, 3), "strides": ints(2, 2), "pads": pads(1, 1, 1, 1)}, []int64{B, 4, 7, 7}, nil},
		{"avgpool-exclude-pad-planes-of-8", "AveragePool", map[string]graph.Attr{"kernel_shape": ints(3, 3), "strides": ints(2, 2), "pads": pads(1, 1, 1, 1)}, []int64{B, 11, 7, 6}, nil},
		{"avgpool-include-pad", "AveragePool", map[string]graph.Attr{"kernel_shape": ints(3, 2), "pads": pads(1, 0, 1, 1), "count_include_pad": integer(1)}, []int64{B, 2, 5, 6}, nil},
		{"global-avgpool", "GlobalAveragePool", nil, []int64{B, 5, 4, 3}, nil},
		{"clip", "Clip", nil, []int64{B, 2, 3, 3}, map[string][]int64{"c1": {}, "c2": {}}},
		{"leakyrelu", "LeakyRelu", map[string]graph.Attr{"alpha": {Kind: graph.AttrFloat, Float: 0.1}}, []int64{B, 2, 3, 3}, nil},
		{"hardsigmoid", "HardSigmoid", map[string]graph.Attr{"alpha": {Kind: graph.AttrFloat, Float: 0.2}, "beta": {Kind: graph.AttrFloat, Float: 0.5}}, []int64{B, 7}, nil},
	}
}

// graph is the case's one-node graph with random constants.
func (tc cnnCase) graph(rng *rand.Rand) *graph.Graph {
	g := &graph.Graph{
		Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: tc.x}},
		Outputs: []graph.Value{{Name: "out"}},
		Nodes:   []graph.Node{{Name: tc.name, Op: tc.op, Inputs: []string{"x"}, Outputs: []string{"out"}, Attrs: tc.attrs}},
	}
	for i := 1; i <= len(tc.consts); i++ {
		name := []string{"", "c1", "c2", "c3", "c4"}[i]
		k := graph.Const{Name: name, DType: graph.F32, Shape: tc.consts[name]}
		k.F32 = randFloats(rng, int(k.Elements()))
		switch {
		case tc.op == "BatchNormalization" && i == 4: // variance
			for j := range k.F32 {
				k.F32[j] = 0.5 + float32(math.Abs(float64(k.F32[j])))
			}
		case tc.name == "conv-inf-weight" && i == 1: // the padded kernel would add 0 * Inf at the edges
			k.F32[0] = float32(math.Inf(1))
		case tc.op == "Clip":
			k.F32[0] = []float32{-0.5, 1.5}[i-1]
		}
		g.Consts = append(g.Consts, k)
		g.Nodes[0].Inputs = append(g.Nodes[0].Inputs, name)
	}
	return g
}

// withNaN puts a NaN in the input of the operators that must keep it (as
// ONNX Runtime keeps it).
func (tc cnnCase) withNaN(data [][]float32) {
	switch tc.op {
	case "Clip", "LeakyRelu", "HardSigmoid", "MaxPool":
		data[0][1] = float32(math.NaN())
	}
}

// TestGraphCNNOps runs the CNN operators through ggml and compares them
// with graph.Eval (float64 sums) within 1e-5, for one, three and nine
// images (the planes split among the threads); NaN stays NaN.
func TestGraphCNNOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range cnnCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, m := loadGraph(t, tc.graph(rng), 0)
			for _, rows := range []int{1, 3, 9} {
				data, dense := randomInputs(rng, c, rows)
				tc.withNaN(data)
				want, err := graph.Eval(c, dense)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Run(context.Background(), rows, data)
				if err != nil {
					t.Fatal(err)
				}
				matchReference(t, rows, got[0], want["out"], true)
				matchRowsAlone(t, m, rows, data[0], got[0].F32)
			}
		})
	}
}

// TestGraphCNNWideKernels: on a processor with AVX-512F, every CNN
// operator gives the same bits with the 16-lane kernels as with the
// 8-lane ones, for one, three and nine images (TestGraphCNNOps checks
// the machine's own kernels against the reference; this, that the two
// kinds of machine agree to the bit).
func TestGraphCNNWideKernels(t *testing.T) {
	was := setWideKernels(true)
	defer setWideKernels(was)
	if !setWideKernels(true) {
		t.Skip("the processor has no AVX-512F")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range cnnCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, m := loadGraph(t, tc.graph(rng), 0)
			for _, rows := range []int{1, 3, 9} {
				data, _ := randomInputs(rng, c, rows)
				tc.withNaN(data)
				var outs [2][]float32
				for i, wide := range []bool{false, true} {
					setWideKernels(wide)
					got, err := m.Run(context.Background(), rows, data)
					if err != nil {
						t.Fatal(err)
					}
					outs[i] = got[0].F32
				}
				sameBits(t, fmt.Sprintf("rows %d, 8 lanes against 16", rows), outs[0], outs[1])
			}
		})
	}
}

// TestGraphFoldedNodes: a BatchNormalization or Relu that alone reads a
// direct Conv's output is applied by the Conv's kernel, and a Relu that
// alone reads a BatchNormalization by its affine kernel; one whose input
// is read elsewhere too (here: a graph output) is not folded. Every
// output matches graph.Eval within 1e-5, NaN kept, for one, three and
// nine rows; each row alone gives the bits it gave in the batch; on a
// processor with AVX-512F the 16-lane kernels give the 8-lane ones' bits.
func TestGraphFoldedNodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		name    string
		ops     []string // after the input, each reading the one before
		outputs []string // the graph's outputs, by node
		folded  []bool   // by node
	}{
		{"bn-relu", []string{"BatchNormalization", "Relu"}, []string{"relu"}, []bool{false, true}},
		{"bn-also-an-output", []string{"BatchNormalization", "Relu"}, []string{"relu", "bn"}, []bool{false, false}},
		{"conv-bn-relu", []string{"Conv", "BatchNormalization", "Relu"}, []string{"relu"}, []bool{false, true, true}},
		{"conv-bn", []string{"Conv", "BatchNormalization"}, []string{"bn"}, []bool{false, true}},
		{"conv-relu", []string{"Conv", "Relu"}, []string{"relu"}, []bool{false, true}},
		{"conv-also-an-output", []string{"Conv", "BatchNormalization", "Relu"}, []string{"relu", "conv"}, []bool{false, false, true}},
		{"conv-bn-also-an-output", []string{"Conv", "BatchNormalization", "Relu"}, []string{"relu", "bn"}, []bool{false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			B := int64(graph.Batch)
			names := map[string]string{"Conv": "conv", "BatchNormalization": "bn", "Relu": "relu"}
			g := &graph.Graph{Inputs: []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{B, 3, 5, 18}}}}
			channels := int64(3)
			prev := "x"
			for _, op := range tc.ops {
				name := names[op]
				node := graph.Node{Name: name, Op: op, Inputs: []string{prev}, Outputs: []string{name}}
				consts := map[string][]int64{}
				switch op {
				case "Conv":
					channels = 16
					node.Attrs = map[string]graph.Attr{"kernel_shape": ints(3, 3), "pads": ints(1, 1, 1, 1)}
					consts = map[string][]int64{"w": {16, 3, 3, 3}, "b": {16}}
					node.Inputs = append(node.Inputs, "w", "b")
				case "BatchNormalization":
					for _, k := range []string{"s", "sh", "m", "v"} {
						consts[k] = []int64{channels}
						node.Inputs = append(node.Inputs, k)
					}
				}
				for _, k := range node.Inputs[1:] {
					c := graph.Const{Name: k, DType: graph.F32, Shape: consts[k]}
					c.F32 = randFloats(rng, int(c.Elements()))
					if k == "v" {
						for j := range c.F32 {
							c.F32[j] = 0.5 + float32(math.Abs(float64(c.F32[j])))
						}
					}
					g.Consts = append(g.Consts, c)
				}
				g.Nodes = append(g.Nodes, node)
				prev = name
			}
			for _, o := range tc.outputs {
				g.Outputs = append(g.Outputs, graph.Value{Name: o})
			}
			c, m := loadGraph(t, g, 0)
			for i, want := range tc.folded {
				if got := m.params.folded[&c.Nodes[i]]; got != want {
					t.Fatalf("%s folded into the kernel before it: %v, want %v", c.Nodes[i].Name, got, want)
				}
			}
			for _, rows := range []int{1, 3, 9} {
				data, dense := randomInputs(rng, c, rows)
				data[0][1] = float32(math.NaN())
				want, err := graph.Eval(c, dense)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Run(context.Background(), rows, data)
				if err != nil {
					t.Fatal(err)
				}
				for o, name := range tc.outputs {
					matchReference(t, rows, got[o], want[name], true)
				}
				matchRowsAlone(t, m, rows, data[0], got[0].F32)
				wide := setWideKernels(false)
				narrow, err := m.Run(context.Background(), rows, data)
				setWideKernels(wide)
				if err != nil {
					t.Fatal(err)
				}
				sameBits(t, fmt.Sprintf("rows %d, 8 lanes against the machine's (wide: %v)", rows, wide), narrow[0].F32, got[0].F32)
			}
		})
	}
}

// matchRowsAlone fails t unless each of the rows rows of input x, run
// alone, gives the bits it gave in the batch (out, the batch's first
// output): the kernels take planes 8 or 16 at a time and the rest one by
// one, so a plane's kernel depends on where the batch puts it.
func matchRowsAlone(t *testing.T, m *GraphModel, rows int, x, out []float32) {
	t.Helper()
	in, n := len(x)/rows, len(out)/rows
	for r := range rows {
		alone, err := m.Run(context.Background(), 1, [][]float32{x[r*in : (r+1)*in]})
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("rows %d: row %d alone against the batch", rows, r), alone[0].F32, out[r*n:(r+1)*n])
	}
}

// sameBits fails t unless a and b hold the same float32 bits.
func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values against %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: [%d] = %v against %v", what, i, a[i], b[i])
		}
	}
}
