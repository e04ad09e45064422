package tensor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/models/tensor/onnxpb"
)

// mlGraph is a scikit-learn-shaped pipeline: Scaler, a two-class
// LinearClassifier with labels 3 and 7 (its label and scores outputs) and
// a ZipMap of the scores.
func mlGraph() *graph.Graph {
	f := func(v ...float32) graph.Attr { return graph.Attr{Kind: graph.AttrFloats, Floats: v} }
	return &graph.Graph{
		Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, 2}}},
		Outputs: []graph.Value{{Name: "label", DType: graph.I64}, {Name: "probabilities", DType: graph.F32}},
		Nodes: []graph.Node{
			{Name: "scaler", Op: "Scaler", Inputs: []string{"x"}, Outputs: []string{"s"}, Attrs: map[string]graph.Attr{"offset": f(1, -1), "scale": f(0.5, 2)}},
			{Name: "linear", Op: "LinearClassifier", Inputs: []string{"s"}, Outputs: []string{"label", "scores"}, Attrs: map[string]graph.Attr{
				"coefficients": f(1, -1, -1, 1), "intercepts": f(0.5, -0.5), "post_transform": {Kind: graph.AttrString, String: "SOFTMAX"},
				"classlabels_ints": {Kind: graph.AttrInts, Ints: []int64{3, 7}},
			}},
			{Name: "zipmap", Op: "ZipMap", Inputs: []string{"scores"}, Outputs: []string{"probabilities"}, Attrs: map[string]graph.Attr{
				"classlabels_int64s": {Kind: graph.AttrInts, Ints: []int64{3, 7}},
			}},
		},
	}
}

// TestONNXML: an ai.onnx.ml pipeline loads and runs as graph.Eval computes
// it, its ZipMap output the scores tensor, its label INT64.
func TestONNXML(t *testing.T) {
	b, err := EncodeONNX(mlGraph())
	if err != nil {
		t.Fatal(err)
	}
	e, err := Load("ml", b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.(interface{ Close() error }).Close()
	outs := e.Outputs()
	if len(outs) != 2 || outs[0].DType != INT64 || outs[1].DType != FP32 || outs[1].Shape[1] != 2 {
		t.Fatalf("outputs %+v", outs)
	}
	x := []float32{0, 0, 3, -2, -1, 4}
	got, err := e.Run(context.Background(), []Tensor{{Name: "x", DType: FP32, Shape: []int64{3, 2}, F32: x}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := graph.Check(mlGraph(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := graph.Eval(c, map[string]*graph.Dense{"x": {Shape: []int64{3, 2}, F32: x}})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range want["label"].I64 {
		if got[0].I64[i] != v {
			t.Errorf("label[%d] = %d, want %d", i, got[0].I64[i], v)
		}
	}
	for i, v := range want["probabilities"].F32 {
		if got[1].F32[i] != v {
			t.Errorf("probabilities[%d] = %v, want %v", i, got[1].F32[i], v)
		}
	}
}

// TestONNXMLDomain: ai.onnx.ml nodes need their domain and a known opset
// of it; other domains and unknown ai.onnx.ml operators fail the load.
func TestONNXMLDomain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*onnxpb.ModelProto)
		want   string
	}{
		{"no-ml-opset", func(m *onnxpb.ModelProto) { m.OpsetImport = m.OpsetImport[:1] }, "opset 0 of ai.onnx.ml"},
		{"ml-opset-5", func(m *onnxpb.ModelProto) { m.OpsetImport[1].Version = 5 }, "opset 5 of ai.onnx.ml"},
		{"default-domain", func(m *onnxpb.ModelProto) { m.Graph.Node[0].Domain = "" }, "belongs to the ai.onnx.ml domain"},
		{"unknown-ml-op", func(m *onnxpb.ModelProto) { m.Graph.Node[0].OpType = "SVMClassifier" }, "ai.onnx.ml:SVMClassifier is not supported"},
		{"other-domain", func(m *onnxpb.ModelProto) { m.Graph.Node[0].Domain = "com.microsoft" }, "com.microsoft:Scaler is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeONNX(mlGraph())
			if err != nil {
				t.Fatal(err)
			}
			var m onnxpb.ModelProto
			if err := proto.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			tc.mutate(&m)
			if b, err = proto.Marshal(&m); err != nil {
				t.Fatal(err)
			}
			_, err = Load("ml", b, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidModel) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
