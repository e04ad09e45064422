package graph

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestOpsSorted(t *testing.T) {
	if !slices.IsSorted(Ops) || !slices.IsSorted(MLOps) {
		t.Errorf("Ops or MLOps is not sorted: %v, %v", Ops, MLOps)
	}
	err := (&Error{Node: "n", Op: "LSTM", Err: ErrUnsupported}).Error()
	if want := "(supported: " + strings.Join(Ops, ", ") + ") (ai.onnx.ml: " + strings.Join(MLOps, ", ") + ")"; !strings.Contains(err, want) {
		t.Errorf("error %q does not list the operators", err)
	}
}

func i64c(name string, shape []int64, v ...int64) Const {
	return Const{Name: name, DType: I64, Shape: shape, I64: v}
}

func nd(name, op string, inputs []string, out string, attrs ...any) Node {
	a := map[string]Attr{}
	for i := 0; i < len(attrs); i += 2 {
		a[attrs[i].(string)] = attrs[i+1].(Attr)
	}
	return Node{Name: name, Op: op, Inputs: inputs, Outputs: []string{out}, Attrs: a}
}

func ints(v ...int64) Attr { return Attr{Kind: AttrInts, Ints: v} }
func one(v int64) Attr     { return Attr{Kind: AttrInt, Int: v} }

// TestFold: shape arithmetic as exporters write it folds into constants,
// leaving only the nodes that compute on the batch; the batch stays
// symbolic.
func TestFold(t *testing.T) {
	x := Value{Name: "x", DType: F32, Shape: []int64{Batch, 2, 6}}
	// x.size(0) as torch exports it.
	batchDim := []Node{
		nd("shape", "Shape", []string{"x"}, "s"),
		nd("g0", "Gather", []string{"s", "zero"}, "n", "axis", one(0)),
		nd("u0", "Unsqueeze", []string{"n", "axes0"}, "nu"),
	}
	consts := []Const{i64c("zero", []int64{}, 0), i64c("axes0", []int64{1}, 0)}
	for _, tc := range []struct {
		name   string
		nodes  []Node
		consts []Const
		opset  int64
		// target is the folded value the last shape node computes, and
		// out the inferred output shape.
		target []int64
		out    []int64
	}{
		{
			name:   "view-batch-rest",
			nodes:  append(slices.Clone(batchDim), nd("cat", "Concat", []string{"nu", "rest"}, "t", "axis", one(0)), nd("r", "Reshape", []string{"x", "t"}, "y")),
			consts: []Const{i64c("rest", []int64{2}, 3, 4)},
			target: []int64{BatchDim, 3, 4}, out: []int64{Batch, 3, 4},
		},
		{
			name:   "view-batch-minus-one",
			nodes:  append(slices.Clone(batchDim), nd("cat", "Concat", []string{"nu", "rest"}, "t", "axis", one(0)), nd("r", "Reshape", []string{"x", "t"}, "y")),
			consts: []Const{i64c("rest", []int64{1}, -1)},
			target: []int64{BatchDim, -1}, out: []int64{Batch, 12},
		},
		{
			name: "slice-of-shape",
			nodes: []Node{
				nd("shape", "Shape", []string{"x"}, "s"),
				nd("sl", "Slice", []string{"s", "st", "en"}, "head"),
				nd("cat", "Concat", []string{"head", "rest"}, "t", "axis", one(0)),
				nd("r", "Reshape", []string{"x", "t"}, "y"),
			},
			consts: []Const{i64c("st", []int64{1}, 0), i64c("en", []int64{1}, 2), i64c("rest", []int64{2}, 3, 2)},
			target: []int64{BatchDim, 2, 3, 2}, out: []int64{Batch, 2, 3, 2},
		},
		{
			// torch's expand pattern: Where(Equal(shape, -1), ones, shape).
			name: "expand-where-equal",
			nodes: []Node{
				nd("cos", "ConstantOfShape", []string{"len"}, "ones", "value", one(1)),
				nd("eq", "Equal", []string{"want", "neg"}, "isneg"),
				nd("wh", "Where", []string{"isneg", "ones", "want"}, "t"),
				nd("e", "Expand", []string{"x", "t"}, "y"),
			},
			consts: []Const{i64c("len", []int64{1}, 3), i64c("want", []int64{3}, -1, 2, 6), i64c("neg", []int64{}, -1)},
			target: []int64{1, 2, 6}, out: []int64{Batch, 2, 6},
		},
		{
			name: "transposed-weight",
			nodes: []Node{
				nd("tr", "Transpose", []string{"w"}, "t", "perm", ints(1, 0)),
				nd("mm", "MatMul", []string{"x", "t"}, "y"),
			},
			consts: []Const{{Name: "w", DType: F32, Shape: []int64{3, 6}, F32: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}}},
			out:    []int64{Batch, 2, 3},
		},
		{
			name: "squeeze-cast-constant",
			nodes: []Node{
				nd("k", "Constant", nil, "k", "value_ints", ints(3, 4)),
				nd("sq", "Unsqueeze", []string{"k"}, "k2", "axes", ints(0)),
				nd("s2", "Squeeze", []string{"k2"}, "t", "axes", ints(0)),
				nd("cat", "Concat", []string{"zero1", "t"}, "t2", "axis", one(0)),
				nd("r", "Reshape", []string{"x", "t2"}, "y"),
			},
			opset:  11,
			consts: []Const{i64c("zero1", []int64{1}, 0)},
			target: []int64{0, 3, 4}, out: []int64{Batch, 3, 4},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Graph{
				Inputs:  []Value{x},
				Outputs: []Value{{Name: "y"}},
				Consts:  append(slices.Clone(consts), tc.consts...),
				Nodes:   tc.nodes,
			}
			c, err := Check(g, tc.opset)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Nodes) != 1 {
				t.Errorf("%d nodes left after folding, want 1: %+v", len(c.Nodes), c.Nodes)
			}
			last := c.Nodes[len(c.Nodes)-1]
			if tc.target != nil {
				k := c.Values[last.Inputs[1]].Const
				if k == nil || !slices.Equal(k.I64, tc.target) {
					t.Errorf("folded target %+v, want %v", k, tc.target)
				}
			}
			if !slices.Equal(c.Outputs[0].Shape, tc.out) {
				t.Errorf("output shape %v, want %v", c.Outputs[0].Shape, tc.out)
			}
			// The folded graph computes what the reference does.
			in := &Dense{Shape: []int64{2, 2, 6}, F32: make([]float32, 24)}
			for i := range in.F32 {
				in.F32[i] = float32(i)
			}
			out, err := Eval(c, map[string]*Dense{"x": in})
			if err != nil {
				t.Fatal(err)
			}
			if got := out["y"].Shape; got[0] != 2 {
				t.Errorf("evaluated shape %v keeps no batch of 2", got)
			}
		})
	}
}

// TestFoldTransposedWeight: the folded Transpose holds the transposed
// data.
func TestFoldTransposedWeight(t *testing.T) {
	g := &Graph{
		Inputs:  []Value{{Name: "x", DType: F32, Shape: []int64{Batch, 2}}},
		Outputs: []Value{{Name: "y"}},
		Consts:  []Const{{Name: "w", DType: F32, Shape: []int64{3, 2}, F32: []float32{1, 2, 3, 4, 5, 6}}},
		Nodes:   []Node{nd("tr", "Transpose", []string{"w"}, "t"), nd("mm", "MatMul", []string{"x", "t"}, "y")},
	}
	c, err := Check(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := c.Values["t"].Const
	if k == nil || !slices.Equal(k.Shape, []int64{2, 3}) || !slices.Equal(k.F32, []float32{1, 3, 5, 2, 4, 6}) {
		t.Errorf("folded %+v", k)
	}
}

// TestFoldErrors: computing with the batch size, or moving it, fails the
// load with the node named.
func TestFoldErrors(t *testing.T) {
	x := Value{Name: "x", DType: F32, Shape: []int64{Batch, 4}}
	for _, tc := range []struct {
		name   string
		nodes  []Node
		consts []Const
		want   string
	}{
		{"mul-batch", []Node{nd("s", "Shape", []string{"x"}, "s"), nd("m", "Mul", []string{"s", "two"}, "t"), nd("r", "Reshape", []string{"x", "t"}, "y")},
			[]Const{i64c("two", []int64{}, 2)}, `node "m" (Mul): the value depends on the batch size`},
		{"batch-moves", []Node{nd("s", "Shape", []string{"x"}, "s"), nd("cat", "Concat", []string{"zero1", "s"}, "t", "axis", one(0)), nd("r", "Reshape", []string{"x", "t"}, "y")},
			[]Const{i64c("zero1", []int64{1}, 0)}, `node "r" (Reshape): target shape puts the batch size at position 1`},
		{"constant-of-batch-shape", []Node{nd("s", "Shape", []string{"x"}, "s"), nd("c", "ConstantOfShape", []string{"s"}, "y")},
			nil, `node "c" (ConstantOfShape): the value depends on the batch size`},
		{"gather-out-of-range", []Node{nd("s", "Shape", []string{"x"}, "s"), nd("g", "Gather", []string{"s", "five"}, "y")},
			[]Const{i64c("five", []int64{}, 5)}, `node "g" (Gather): index 5 is out of range`},
		{"gather-batch-axis", []Node{nd("g", "Gather", []string{"x", "zero"}, "y", "axis", one(0))},
			[]Const{i64c("zero", []int64{}, 0)}, "axis 0 is the batch"},
		{"slice-batch-rows", []Node{nd("s", "Slice", []string{"x", "st", "en"}, "y")},
			[]Const{i64c("st", []int64{1}, 0), i64c("en", []int64{1}, 1)}, "axis 0 is the batch"},
		{"slice-reversed", []Node{nd("s", "Slice", []string{"x", "st", "en", "ax", "sp"}, "y")},
			[]Const{i64c("st", []int64{1}, -1), i64c("en", []int64{1}, -100), i64c("ax", []int64{1}, 1), i64c("sp", []int64{1}, -1)}, "steps [1 -1] on a batched value"},
		{"transpose-batch", []Node{nd("t", "Transpose", []string{"x"}, "y", "perm", ints(1, 0))}, nil, "batch dimension would not stay first"},
		{"reduce-batch", []Node{nd("r", "ReduceMean", []string{"x"}, "y", "axes", ints(0))}, nil, "axis 0 is the batch"},
		{"cast-to-double", []Node{nd("c", "Cast", []string{"x"}, "y", "to", one(11))}, nil, "attribute to=11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Graph{Inputs: []Value{x}, Outputs: []Value{{Name: "y"}}, Consts: tc.consts, Nodes: tc.nodes}
			_, err := Check(g, 0)
			var ge *Error
			if err == nil || !errors.As(err, &ge) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a *graph.Error containing %q", err, tc.want)
			}
		})
	}
}

// TestEvalOps checks the reference itself on hand-computed values.
func TestEvalOps(t *testing.T) {
	x := &Dense{Shape: []int64{1, 2, 3}, F32: []float32{1, 2, 3, 4, 5, 6}}
	for _, tc := range []struct {
		name  string
		node  Node
		extra []Const
		shape []int64
		want  []float32
	}{
		{"transpose", nd("t", "Transpose", []string{"x"}, "y", "perm", ints(0, 2, 1)), nil, []int64{1, 3, 2}, []float32{1, 4, 2, 5, 3, 6}},
		{"reducemean-last", nd("r", "ReduceMean", []string{"x"}, "y", "axes", ints(-1)), nil, []int64{1, 2, 1}, []float32{2, 5}},
		{"reducesum-middle", nd("r", "ReduceSum", []string{"x", "ax"}, "y", "keepdims", one(0)), []Const{i64c("ax", []int64{1}, 1)}, []int64{1, 3}, []float32{5, 7, 9}},
		{"pow", nd("p", "Pow", []string{"x", "two"}, "y"), []Const{{Name: "two", DType: F32, Shape: []int64{}, F32: []float32{2}}}, []int64{1, 2, 3}, []float32{1, 4, 9, 16, 25, 36}},
		{"clip", nd("c", "Clip", []string{"x", "lo", "hi"}, "y"), []Const{{Name: "lo", DType: F32, Shape: []int64{}, F32: []float32{2}}, {Name: "hi", DType: F32, Shape: []int64{}, F32: []float32{4}}}, []int64{1, 2, 3}, []float32{2, 2, 3, 4, 4, 4}},
		{"where", nd("w", "Where", []string{"cond", "x", "zero"}, "y"), []Const{i64c("cond", []int64{3}, 1, 0, 1), {Name: "zero", DType: F32, Shape: []int64{}, F32: []float32{0}}}, []int64{1, 2, 3}, []float32{1, 0, 3, 4, 0, 6}},
		{"expand", nd("e", "Expand", []string{"x", "shp"}, "y"), []Const{i64c("shp", []int64{2}, 2, 1)}, []int64{1, 2, 3}, []float32{1, 2, 3, 4, 5, 6}},
		{"gather-embedding", nd("g", "Gather", []string{"table", "ids"}, "y"), nil, []int64{1, 2, 2}, []float32{5, 6, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inputs := []Value{{Name: "x", DType: F32, Shape: []int64{Batch, 2, 3}}}
			vals := map[string]*Dense{"x": x}
			consts := tc.extra
			if tc.name == "gather-embedding" {
				inputs = []Value{{Name: "ids", DType: I64, Shape: []int64{Batch, 2}}}
				vals = map[string]*Dense{"ids": {Shape: []int64{1, 2}, I64: []int64{-1, 0}}}
				consts = []Const{{Name: "table", DType: F32, Shape: []int64{3, 2}, F32: []float32{1, 2, 3, 4, 5, 6}}}
			}
			c, err := Check(&Graph{Inputs: inputs, Outputs: []Value{{Name: "y"}}, Consts: consts, Nodes: []Node{tc.node}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Eval(c, vals)
			if err != nil {
				t.Fatal(err)
			}
			if y := out["y"]; !slices.Equal(y.Shape, tc.shape) || !slices.Equal(y.F32, tc.want) {
				t.Errorf("got %v %v, want %v %v", y.Shape, y.F32, tc.shape, tc.want)
			}
		})
	}
}
