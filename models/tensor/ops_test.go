package tensor

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/proto/onnxpb"
)

// embeddingGraph is token ids [B,3] -> Gather on a [5,2] table -> [B,3,2].
func embeddingGraph() *graph.Graph {
	return &graph.Graph{
		Inputs:  []graph.Value{{Name: "ids", DType: graph.I64, Shape: []int64{graph.Batch, 3}}},
		Outputs: []graph.Value{{Name: "h", DType: graph.F32, Shape: []int64{graph.Batch, 3, 2}}},
		Consts:  []graph.Const{{Name: "table", DType: graph.F32, Shape: []int64{5, 2}, F32: []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}},
		Nodes:   []graph.Node{{Name: "embed", Op: "Gather", Inputs: []string{"table", "ids"}, Outputs: []string{"h"}, Attrs: map[string]graph.Attr{}}},
	}
}

// TestTokenIDInputs: an INT64 input survives ONNX and GGUF and runs as an
// embedding lookup.
func TestTokenIDInputs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		encode func(*graph.Graph) ([]byte, error)
		decode func([]byte) (*graph.Graph, int64, error)
	}{
		{"ONNX", EncodeONNX, DecodeONNX},
		{"GGUF", func(g *graph.Graph) ([]byte, error) { return EncodeGGUF(g, onnxOpset) }, DecodeGGUF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.encode(embeddingGraph())
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := tc.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, embeddingGraph()) {
				t.Fatalf("read back\n%+v\nwant\n%+v", got, embeddingGraph())
			}
			e, err := Load(tc.name, b, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if in := e.Inputs()[0]; in.DType != INT64 {
				t.Errorf("input spec %+v", in)
			}
			out, err := e.Run(context.Background(), []Tensor{{Name: "ids", DType: INT64, Shape: []int64{2, 3}, I64: []int64{0, 4, -1, 2, 2, 1}}})
			if err != nil {
				t.Fatal(err)
			}
			want := []float32{0, 1, 8, 9, 8, 9, 4, 5, 4, 5, 2, 3}
			if !slices.Equal(out[0].F32, want) || !slices.Equal(out[0].Shape, []int64{2, 3, 2}) {
				t.Errorf("got %v %v, want %v", out[0].Shape, out[0].F32, want)
			}
			if _, err := e.Run(context.Background(), []Tensor{{Name: "ids", DType: INT64, Shape: []int64{1, 3}, I64: []int64{0, 5, 0}}}); err == nil {
				t.Error("id 5 of a 5-row table ran")
			}
		})
	}
}

// TestONNXTensorAttribute: ConstantOfShape's value, a one-element tensor
// attribute, reads as a scalar attribute and folds.
func TestONNXTensorAttribute(t *testing.T) {
	b, err := EncodeONNX(embeddingGraph())
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// h2 = h + ConstantOfShape([2], value=1.5)
	gp := m.GetGraph()
	gp.Initializer = append(gp.Initializer, &onnxpb.TensorProto{Name: "len", Dims: []int64{1}, DataType: int32(onnxpb.TensorProto_INT64), Int64Data: []int64{2}})
	gp.Node = append(gp.Node,
		&onnxpb.NodeProto{Name: "cos", OpType: "ConstantOfShape", Input: []string{"len"}, Output: []string{"k"}, Attribute: []*onnxpb.AttributeProto{{
			Name: "value", Type: onnxpb.AttributeProto_TENSOR,
			T: &onnxpb.TensorProto{Dims: []int64{1}, DataType: int32(onnxpb.TensorProto_FLOAT), FloatData: []float32{1.5}},
		}}},
		&onnxpb.NodeProto{Name: "add", OpType: "Add", Input: []string{"h", "k"}, Output: []string{"h2"}})
	gp.Output[0].Name = "h2"
	if b, err = proto.Marshal(&m); err != nil {
		t.Fatal(err)
	}
	c, _, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	k := c.Values["k"].Const
	if k == nil || !slices.Equal(k.F32, []float32{1.5, 1.5}) || len(c.Nodes) != 2 {
		t.Errorf("ConstantOfShape folded to %+v, %d nodes left", k, len(c.Nodes))
	}
}
