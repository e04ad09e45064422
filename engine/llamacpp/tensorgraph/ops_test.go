//go:build cgo

package tensorgraph

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/engine/graph"
)

// The operators of ops.go, each run through ggml and compared
// with graph.Eval, at one row (padded to two) and three.

func intsAttr(v ...int64) graph.Attr { return graph.Attr{Kind: graph.AttrInts, Ints: v} }
func intAttr(v int64) graph.Attr     { return graph.Attr{Kind: graph.AttrInt, Int: v} }
func floatAttr(v float32) graph.Attr { return graph.Attr{Kind: graph.AttrFloat, Float: v} }
func f32In(name string, shape ...int64) graph.Value {
	return graph.Value{Name: name, DType: graph.F32, Shape: append([]int64{graph.Batch}, shape...)}
}
func i64In(name string, shape ...int64) graph.Value {
	return graph.Value{Name: name, DType: graph.I64, Shape: append([]int64{graph.Batch}, shape...)}
}
func i64Const(name string, shape []int64, v ...int64) graph.Const {
	return graph.Const{Name: name, DType: graph.I64, Shape: shape, I64: v}
}

// f32Const is a constant of normal random values (plus add).
func f32Const(rng *rand.Rand, name string, add float64, shape ...int64) graph.Const {
	k := graph.Const{Name: name, DType: graph.F32, Shape: shape}
	k.F32 = make([]float32, k.Elements())
	for i := range k.F32 {
		k.F32[i] = float32(rng.NormFloat64() + add)
	}
	return k
}

type opsCase struct {
	name   string
	opset  int64
	inputs []graph.Value
	consts []graph.Const
	nodes  []graph.Node
}

func node(op string, a map[string]graph.Attr, inputs ...string) graph.Node {
	return graph.Node{Name: strings.ToLower(op), Op: op, Inputs: inputs, Outputs: []string{"out"}, Attrs: a}
}

func opsCases(rng *rand.Rand) []opsCase {
	one := func(name string, opset int64, n graph.Node, inputs []graph.Value, consts ...graph.Const) opsCase {
		return opsCase{name: name, opset: opset, inputs: inputs, consts: consts, nodes: []graph.Node{n}}
	}
	x := func(shape ...int64) []graph.Value { return []graph.Value{f32In("x", shape...)} }
	scalar := func(name string, v float32) graph.Const {
		return graph.Const{Name: name, DType: graph.F32, Shape: []int64{}, F32: []float32{v}}
	}
	m := func(kv ...any) map[string]graph.Attr {
		a := map[string]graph.Attr{}
		for i := 0; i < len(kv); i += 2 {
			a[kv[i].(string)] = kv[i+1].(graph.Attr)
		}
		return a
	}
	return []opsCase{
		one("erf", 0, node("Erf", nil, "x"), x(7)),
		one("sqrt", 0, node("Sqrt", nil, "x"), x(2, 3)),
		one("leakyrelu", 0, node("LeakyRelu", m("alpha", floatAttr(0.1)), "x"), x(8)),
		one("leakyrelu-default", 0, node("LeakyRelu", nil, "x"), x(8)),
		one("hardsigmoid", 0, node("HardSigmoid", m("alpha", floatAttr(0.3), "beta", floatAttr(0.4)), "x"), x(8)),
		one("clip-inputs", 13, node("Clip", nil, "x", "lo", "hi"), x(8), scalar("lo", 0), scalar("hi", 1.5)),
		one("clip-max-only", 13, node("Clip", nil, "x", "", "hi"), x(8), scalar("hi", 0.5)),
		one("clip-attrs-opset6", 6, node("Clip", m("min", floatAttr(-1), "max", floatAttr(1)), "x"), x(8)),
		one("pow-square", 13, node("Pow", nil, "x", "e"), x(6), scalar("e", 2)),
		one("pow-vector", 13, node("Pow", nil, "x", "e"), x(2, 3), f32Const(rng, "e", 0, 3)),
		one("pow-base-const", 13, node("Pow", nil, "b", "x"), x(4), f32Const(rng, "b", 3, 4)),
		one("cast-to-i64", 13, node("Cast", m("to", intAttr(7)), "x"), x(5)),
		one("cast-i64-to-f32", 13, node("Cast", m("to", intAttr(1)), "ids"), []graph.Value{i64In("ids", 5)}),
		one("transpose-heads", 13, node("Transpose", m("perm", intsAttr(0, 2, 1, 3)), "x"), x(3, 2, 4)),
		one("transpose-keys", 13, node("Transpose", m("perm", intsAttr(0, 2, 3, 1)), "x"), x(3, 2, 4)),
		one("transpose-rank3", 13, node("Transpose", m("perm", intsAttr(0, 2, 1)), "x"), x(3, 5)),
		one("where-const-cond", 13, node("Where", nil, "cond", "x", "y"), x(2, 4), i64Const("cond", []int64{4}, 1, 0, 0, 1), f32Const(rng, "y", 0, 4)),
		one("expand", 13, node("Expand", nil, "x", "shape"), x(1, 4), i64Const("shape", []int64{3}, 1, 3, 4)),
		one("expand-rank-up", 13, node("Expand", nil, "x", "shape"), x(3, 1), i64Const("shape", []int64{2}, 3, 5)),
		one("reducemean-last-attr", 13, node("ReduceMean", m("axes", intsAttr(-1)), "x"), x(3, 6)),
		one("reducemean-input-opset18", 18, node("ReduceMean", nil, "x", "axes"), x(3, 6), i64Const("axes", []int64{1}, -1)),
		one("reducemean-middle-nokeep", 13, node("ReduceMean", m("axes", intsAttr(1), "keepdims", intAttr(0)), "x"), x(3, 4)),
		one("reducemean-two-axes", 13, node("ReduceMean", m("axes", intsAttr(1, 3)), "x"), x(2, 3, 4)),
		one("reducesum-input", 13, node("ReduceSum", nil, "x", "axes"), x(3, 4), i64Const("axes", []int64{1}, 1)),
		one("reducesum-attr-opset11", 11, node("ReduceSum", m("axes", intsAttr(2), "keepdims", intAttr(0)), "x"), x(3, 4)),
		one("gather-embedding", 13, node("Gather", nil, "table", "ids"), []graph.Value{i64In("ids", 3)}, f32Const(rng, "table", 0, 10, 4)),
		one("gather-rank1-table", 13, node("Gather", m("axis", intAttr(0)), "table", "ids"), []graph.Value{i64In("ids", 2, 3)}, f32Const(rng, "table", 0, 10)),
		one("gather-batched-scalar", 13, node("Gather", m("axis", intAttr(1)), "x", "i"), x(3, 4), i64Const("i", []int64{}, 0)),
		one("gather-batched-vector", 13, node("Gather", m("axis", intAttr(2)), "x", "i"), x(2, 5), i64Const("i", []int64{3}, 4, -1, 1)),
		one("gather-batched-last", 13, node("Gather", m("axis", intAttr(-1)), "x", "i"), x(3, 4), i64Const("i", []int64{2, 1}, 3, 0)),
		one("slice", 13, node("Slice", nil, "x", "st", "en", "ax"), x(4, 6), i64Const("st", []int64{2}, 1, 2), i64Const("en", []int64{2}, 3, 1<<40), i64Const("ax", []int64{2}, 1, 2)),
		one("slice-steps", 13, node("Slice", nil, "x", "st", "en", "ax", "sp"), x(5, 3), i64Const("st", []int64{1}, 0), i64Const("en", []int64{1}, 5), i64Const("ax", []int64{1}, -2), i64Const("sp", []int64{1}, 2)),
		one("slice-whole-batch", 13, node("Slice", nil, "x", "st", "en", "ax", "sp"), x(5, 4), i64Const("st", []int64{2}, 0, 1), i64Const("en", []int64{2}, math.MaxInt64, 5), i64Const("ax", []int64{2}, 0, 1), i64Const("sp", []int64{2}, 1, 2)),
		one("unsqueeze-input", 13, node("Unsqueeze", nil, "x", "axes"), x(3), i64Const("axes", []int64{2}, 1, 2)),
		one("unsqueeze-attr-opset11", 11, node("Unsqueeze", m("axes", intsAttr(-1)), "x"), x(3)),
		one("squeeze", 13, node("Squeeze", nil, "x", "axes"), x(1, 3), i64Const("axes", []int64{1}, 1)),
		one("matmul-batched", 13, node("MatMul", nil, "x", "y"), []graph.Value{f32In("x", 2, 3, 4), f32In("y", 2, 4, 5)}),
		one("matmul-batched-rank3", 13, node("MatMul", nil, "x", "y"), []graph.Value{f32In("x", 3, 4), f32In("y", 4, 2)}),
		one("cast-to-bool", 13, node("Cast", m("to", intAttr(9)), "x"), x(5)),
		one("cast-i64-to-bool", 13, node("Cast", m("to", intAttr(9)), "ids"), []graph.Value{i64In("ids", 5)}),
		one("expand-i64", 13, node("Expand", nil, "ids", "shape"), []graph.Value{i64In("ids", 1, 4)}, i64Const("shape", []int64{3}, 1, 3, 4)),
		{
			// transformers' _prepare_4d_attention_mask: mask[:, None,
			// None, :].expand(b, 1, t, s), 1 - it, masked_fill where true.
			name: "hf-4d-mask", opset: 17, inputs: []graph.Value{i64In("mask", 4)},
			consts: []graph.Const{i64Const("axes", []int64{2}, 1, 2), i64Const("shape", []int64{4}, 1, 1, 4, 4), scalar("one", 1), scalar("min", -3.4e38)},
			nodes: []graph.Node{
				{Name: "u", Op: "Unsqueeze", Inputs: []string{"mask", "axes"}, Outputs: []string{"m4"}},
				{Name: "e", Op: "Expand", Inputs: []string{"m4", "shape"}, Outputs: []string{"me"}},
				{Name: "c", Op: "Cast", Inputs: []string{"me"}, Outputs: []string{"mf"}, Attrs: m("to", intAttr(1))},
				{Name: "s", Op: "Sub", Inputs: []string{"one", "mf"}, Outputs: []string{"inv"}},
				{Name: "b", Op: "Cast", Inputs: []string{"inv"}, Outputs: []string{"cond"}, Attrs: m("to", intAttr(9))},
				{Name: "w", Op: "Where", Inputs: []string{"cond", "min", "inv"}, Outputs: []string{"out"}},
			},
		},
		one("equal-ids", 13, node("Equal", nil, "ids", "pad"), []graph.Value{i64In("ids", 6)}, i64Const("pad", []int64{}, 3)),
		one("equal-f32", 13, node("Equal", nil, "x", "y"), []graph.Value{f32In("x", 4), f32In("y", 1)}),
		{
			// torch.where(mask == 0, -1e4, scores): a batched condition.
			name: "where-batched-cond", opset: 13, inputs: []graph.Value{i64In("mask", 4), f32In("x", 3, 4)},
			consts: []graph.Const{i64Const("zero", []int64{}, 0), scalar("big", -1e4), i64Const("axes", []int64{1}, 1)},
			nodes: []graph.Node{
				{Name: "eq", Op: "Equal", Inputs: []string{"mask", "zero"}, Outputs: []string{"c"}},
				{Name: "u", Op: "Unsqueeze", Inputs: []string{"c", "axes"}, Outputs: []string{"cu"}},
				{Name: "w", Op: "Where", Inputs: []string{"cu", "big", "x"}, Outputs: []string{"out"}},
			},
		},
		{
			// Cast of an I64 attention mask after Unsqueeze, as BERT
			// exports build the extended mask.
			name: "mask", opset: 13, inputs: []graph.Value{i64In("mask", 4)},
			consts: []graph.Const{i64Const("axes", []int64{2}, 1, 2)},
			nodes: []graph.Node{
				{Name: "u", Op: "Unsqueeze", Inputs: []string{"mask", "axes"}, Outputs: []string{"m"}},
				{Name: "c", Op: "Cast", Inputs: []string{"m"}, Outputs: []string{"out"}, Attrs: m("to", intAttr(1))},
			},
		},
		{
			// x.view(x.size(0), 3, 4) as PyTorch exports it: folded.
			name: "reshape-from-shape", opset: 13, inputs: x(12),
			consts: []graph.Const{i64Const("zero", []int64{}, 0), i64Const("axes0", []int64{1}, 0), i64Const("rest", []int64{2}, 3, 4)},
			nodes: []graph.Node{
				{Name: "s", Op: "Shape", Inputs: []string{"x"}, Outputs: []string{"s"}},
				{Name: "g", Op: "Gather", Inputs: []string{"s", "zero"}, Outputs: []string{"n"}, Attrs: m("axis", intAttr(0))},
				{Name: "u", Op: "Unsqueeze", Inputs: []string{"n", "axes0"}, Outputs: []string{"nu"}},
				{Name: "c", Op: "Concat", Inputs: []string{"nu", "rest"}, Outputs: []string{"target"}, Attrs: m("axis", intAttr(0))},
				{Name: "r", Op: "Reshape", Inputs: []string{"x", "target"}, Outputs: []string{"out"}},
			},
		},
	}
}

func opsInputs(rng *rand.Rand, c *graph.Checked, rows int) ([]GraphInput, map[string]*graph.Dense) {
	var data []GraphInput
	dense := map[string]*graph.Dense{}
	for _, in := range c.Inputs {
		shape := append([]int64{int64(rows)}, in.Shape[1:]...)
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		d := &graph.Dense{Shape: shape}
		var gi GraphInput
		if in.DType == graph.I64 {
			gi.I64 = make([]int64, n)
			for i := range gi.I64 {
				gi.I64[i] = rng.Int64N(20) - 10 // ids of a 10-row table, negative ones too
			}
			d.I64 = gi.I64
		} else {
			gi.F32 = make([]float32, n)
			for i := range gi.F32 {
				gi.F32[i] = float32(rng.NormFloat64() * 2)
			}
			d.F32 = gi.F32
		}
		data = append(data, gi)
		dense[in.Name] = d
	}
	return data, dense
}

func TestGraphMoreOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range opsCases(rng) {
		t.Run(tc.name, func(t *testing.T) {
			g := &graph.Graph{Inputs: tc.inputs, Consts: tc.consts, Nodes: tc.nodes, Outputs: []graph.Value{{Name: "out"}}}
			c, m := loadGraph(t, g, tc.opset)
			for _, rows := range []int{1, 3} {
				data, dense := opsInputs(rng, c, rows)
				want, err := graph.Eval(c, dense)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.RunInputs(context.Background(), rows, data)
				if err != nil {
					t.Fatal(err)
				}
				matchReference(t, rows, got[0], want["out"], true)
			}
		})
	}
}

// TestGraphGatherRange: ids outside the table, or outside int32, fail the
// Run rather than read outside the table.
func TestGraphGatherRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	g := &graph.Graph{
		Inputs:  []graph.Value{i64In("ids", 2)},
		Consts:  []graph.Const{f32Const(rng, "table", 0, 10, 4)},
		Nodes:   []graph.Node{node("Gather", nil, "table", "ids")},
		Outputs: []graph.Value{{Name: "out"}},
	}
	_, m := loadGraph(t, g, 13)
	for _, ids := range [][]int64{{0, 10}, {-11, 0}, {1 << 40, 0}} {
		_, err := m.RunInputs(context.Background(), 1, []GraphInput{{I64: ids}})
		if err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("ids %v: error %v, want out of range", ids, err)
		}
	}
	if _, err := m.RunInputs(context.Background(), 1, []GraphInput{{I64: []int64{-10, 9}}}); err != nil {
		t.Errorf("ids -10, 9: %v", err)
	}
}
