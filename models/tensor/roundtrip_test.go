package tensor

import (
	"reflect"
	"testing"

	"github.com/llmserve/llmserve/engine/graph"
)

// richGraph uses every attribute kind, a scalar and an I64 constant, an
// omitted optional input, an ai.onnx.ml operator and node outputs that
// are not graph outputs.
func richGraph() *graph.Graph {
	return &graph.Graph{
		Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, 2, 3}}},
		Outputs: []graph.Value{{Name: "y", DType: graph.F32, Shape: []int64{graph.Batch, 6}}, {Name: "z", DType: graph.I64, Shape: []int64{graph.Batch}}},
		Consts: []graph.Const{
			{Name: "s", DType: graph.F32, Shape: []int64{}, F32: []float32{0.5}},
			{Name: "shape", DType: graph.I64, Shape: []int64{2}, I64: []int64{0, -1}},
			{Name: "w", DType: graph.F32, Shape: []int64{6, 6}, F32: make([]float32, 36)},
		},
		Nodes: []graph.Node{
			{Name: "mul", Op: "Mul", Inputs: []string{"x", "s"}, Outputs: []string{"m"}, Attrs: map[string]graph.Attr{}},
			{Name: "reshape", Op: "Reshape", Inputs: []string{"m", "shape"}, Outputs: []string{"r"}, Attrs: map[string]graph.Attr{}},
			{Name: "gemm", Op: "Gemm", Inputs: []string{"r", "w", ""}, Outputs: []string{"y"}, Attrs: map[string]graph.Attr{
				"alpha":  {Kind: graph.AttrFloat, Float: 0.25},
				"transB": {Kind: graph.AttrInt, Int: 1},
				"note":   {Kind: graph.AttrString, String: "ignored"},
				"ints":   {Kind: graph.AttrInts, Ints: []int64{1, -2, 3}},
				"floats": {Kind: graph.AttrFloats, Floats: []float32{1.5, -2}},
				"strs":   {Kind: graph.AttrStrings, Strings: []string{"a", "", "c"}},
			}},
			// An ai.onnx.ml node (its domain and opset in ONNX).
			{Name: "zipmap", Op: "ZipMap", Inputs: []string{"y"}, Outputs: []string{"p"}, Attrs: map[string]graph.Attr{
				"classlabels_strings": {Kind: graph.AttrStrings, Strings: []string{"a", "b", "c", "d", "e", "f"}},
			}},
			{Name: "argmax", Op: "ArgMax", Inputs: []string{"y"}, Outputs: []string{"z"}, Attrs: map[string]graph.Attr{
				"axis": {Kind: graph.AttrInt, Int: -1}, "keepdims": {Kind: graph.AttrInt, Int: 0},
			}},
		},
	}
}

// TestRoundTrip: a graph written as ONNX or GGUF reads back unchanged, and
// checks.
func TestRoundTrip(t *testing.T) {
	want := richGraph()
	for _, tc := range []struct {
		name   string
		encode func(*graph.Graph) ([]byte, error)
		decode func([]byte) (*graph.Graph, int64, error)
	}{
		{"ONNX", EncodeONNX, DecodeONNX},
		{"GGUF", func(g *graph.Graph) ([]byte, error) { return EncodeGGUF(g, onnxOpset) }, DecodeGGUF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.encode(richGraph())
			if err != nil {
				t.Fatal(err)
			}
			got, opset, err := tc.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if opset != onnxOpset {
				t.Errorf("opset %d", opset)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read back\n%+v\nwant\n%+v", got, want)
			}
			if _, err := graph.Check(got, opset); err != nil {
				t.Error(err)
			}
		})
	}
}
