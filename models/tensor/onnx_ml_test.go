package tensor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/proto/onnxpb"
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

// treeGraph is a one-tree classifier: x[1] <= 0.5 decides the class.
func treeGraph() *graph.Graph {
	i := func(v ...int64) graph.Attr { return graph.Attr{Kind: graph.AttrInts, Ints: v} }
	f := func(v ...float32) graph.Attr { return graph.Attr{Kind: graph.AttrFloats, Floats: v} }
	return &graph.Graph{
		Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, 2}}},
		Outputs: []graph.Value{{Name: "label", DType: graph.I64}, {Name: "scores", DType: graph.F32}},
		Nodes: []graph.Node{{Name: "trees", Op: "TreeEnsembleClassifier", Inputs: []string{"x"}, Outputs: []string{"label", "scores"}, Attrs: map[string]graph.Attr{
			"nodes_treeids": i(0, 0, 0), "nodes_nodeids": i(0, 1, 2), "nodes_featureids": i(1, 0, 0), "nodes_values": f(0.5, 0, 0),
			"nodes_modes":       {Kind: graph.AttrStrings, Strings: []string{"BRANCH_LEQ", "LEAF", "LEAF"}},
			"nodes_truenodeids": i(1, 0, 0), "nodes_falsenodeids": i(2, 0, 0), "nodes_missing_value_tracks_true": i(1, 0, 0),
			"class_treeids": i(0, 0), "class_nodeids": i(1, 2), "class_ids": i(0, 0), "class_weights": f(-1, 1),
			"classlabels_int64s": i(0, 1), "post_transform": {Kind: graph.AttrString, String: "LOGISTIC"},
		}}},
	}
}

// cnnGraph is Conv, MaxPool and GlobalAveragePool on 1×6×6 images.
func cnnGraph() *graph.Graph {
	i := func(v ...int64) graph.Attr { return graph.Attr{Kind: graph.AttrInts, Ints: v} }
	w := graph.Const{Name: "w", DType: graph.F32, Shape: []int64{2, 1, 3, 3}, F32: make([]float32, 18)}
	for k := range w.F32 {
		w.F32[k] = float32(k%5) - 2
	}
	return &graph.Graph{
		Inputs:  []graph.Value{{Name: "x", DType: graph.F32, Shape: []int64{graph.Batch, 1, 6, 6}}},
		Outputs: []graph.Value{{Name: "y", DType: graph.F32}},
		Consts:  []graph.Const{w},
		Nodes: []graph.Node{
			{Name: "conv", Op: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"c"}, Attrs: map[string]graph.Attr{"pads": i(1, 1, 1, 1)}},
			{Name: "pool", Op: "MaxPool", Inputs: []string{"c"}, Outputs: []string{"p"}, Attrs: map[string]graph.Attr{"kernel_shape": i(2, 2), "strides": i(2, 2)}},
			{Name: "gap", Op: "GlobalAveragePool", Inputs: []string{"p"}, Outputs: []string{"y"}, Attrs: map[string]graph.Attr{}},
		},
	}
}
