package tensor

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/proto/onnxpb"
)

// TestGGUFMatchesONNX: the same MLP written as GGUF gives bit-identical
// outputs to its ONNX file.
func TestGGUFMatchesONNX(t *testing.T) {
	m, err := RandomMLP([]int{20, 16, 8, 4}, 3, true, true)
	if err != nil {
		t.Fatal(err)
	}
	m.Layers[0].Activation = "gelu"
	m.Layers[1].Activation = "tanh"
	onnx, err := m.ONNX()
	if err != nil {
		t.Fatal(err)
	}
	gguf, err := m.GGUF()
	if err != nil {
		t.Fatal(err)
	}
	eo, err := Open(writeModel(t, "m.onnx", onnx), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eo.Close()
	eg, err := Open(writeModel(t, "m.gguf", gguf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eg.Close()
	x := randomRows(rand.New(rand.NewPCG(1, 1)), 5, 20)
	a, b := run(t, eo, x, 5), run(t, eg, x, 5)
	for i := range a[0].F32 {
		if math.Float32bits(a[0].F32[i]) != math.Float32bits(b[0].F32[i]) {
			t.Fatalf("output[%d]: ONNX %v, GGUF %v", i, a[0].F32[i], b[0].F32[i])
		}
	}
	for i := range a[1].I64 {
		if a[1].I64[i] != b[1].I64[i] {
			t.Fatalf("label[%d]: ONNX %d, GGUF %d", i, a[1].I64[i], b[1].I64[i])
		}
	}
	want, _ := m.Forward(x, 5)
	for i := range want {
		if !closeTo(b[0].F32[i], want[i]) {
			t.Fatalf("GGUF output[%d] = %v, reference %v", i, b[0].F32[i], want[i])
		}
	}
	if got := eg.Inputs(); len(got) != 1 || got[0].Name != "input" || got[0].Shape[0] != -1 || got[0].Shape[1] != 20 {
		t.Errorf("GGUF inputs %+v", got)
	}
}

// TestConcurrentRun: 32 goroutines calling Run at once get exactly their
// sequential results.
func TestConcurrentRun(t *testing.T) {
	m, err := RandomMLP([]int{32, 24, 10}, 5, true, true)
	if err != nil {
		t.Fatal(err)
	}
	e := openMLP(t, m)
	rng := rand.New(rand.NewPCG(2, 2))
	const n = 32
	xs := make([][]float32, n)
	want := make([][]Tensor, n)
	for i := range n {
		xs[i] = randomRows(rng, 1+i%4, 32)
		want[i] = run(t, e, xs[i], 1+i%4)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			out, err := e.Run(context.Background(), []Tensor{{Name: "input", DType: FP32, Shape: []int64{int64(1 + i%4), 32}, F32: xs[i]}})
			if err != nil {
				errs[i] = err
				return
			}
			for j, v := range out[0].F32 {
				if math.Float32bits(v) != math.Float32bits(want[i][0].F32[j]) {
					errs[i] = errors.New("output differs from the sequential run")
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
}

// convModel is an MLP with an LSTM node (an operator the runtime lacks) spliced in.
func convModel(t testing.TB) []byte {
	m, _ := RandomMLP([]int{4, 3}, 1, false, false)
	g, err := m.Graph()
	if err != nil {
		t.Fatal(err)
	}
	g.Nodes = append([]graph.Node{{Name: "conv1", Op: "LSTM", Inputs: []string{"input", "layer0.weight"}, Outputs: []string{"c"}}}, g.Nodes...)
	b, err := EncodeONNX(g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUnsupportedOperator(t *testing.T) {
	_, err := Open(writeModel(t, "conv.onnx", convModel(t)), Options{})
	if err == nil {
		t.Fatal("LSTM model loaded")
	}
	msg := err.Error()
	for _, want := range []string{`node "conv1"`, "operator LSTM is not supported", "supported: ", "MatMul"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, ErrInvalidModel) || !errors.Is(err, ErrUnsupported) {
		t.Errorf("error %v does not match ErrInvalidModel and ErrUnsupported", err)
	}
	var ge *graph.Error
	if !errors.As(err, &ge) || ge.Op != "LSTM" || ge.Node != "conv1" {
		t.Errorf("error %v: graph.Error %+v", err, ge)
	}
}

func TestOpenErrors(t *testing.T) {
	m := knownMLP()
	good, err := m.ONNX()
	if err != nil {
		t.Fatal(err)
	}
	goodGGUF, err := m.GGUF()
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(*onnxpb.ModelProto)) []byte {
		var p onnxpb.ModelProto
		if err := proto.Unmarshal(good, &p); err != nil {
			t.Fatal(err)
		}
		f(&p)
		b, err := proto.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "graph"},
		{"garbage", []byte("this is not a model at all"), "ONNX"},
		{"truncated-onnx", good[:len(good)/2], ""},
		{"truncated-gguf", goodGGUF[:len(goodGGUF)/2], ""},
		{"gguf-header-only", goodGGUF[:24], ""},
		{"missing-initializer", mutate(func(p *onnxpb.ModelProto) { p.Graph.Initializer = p.Graph.Initializer[1:] }), "layer0.weight"},
		{"short-raw-data", mutate(func(p *onnxpb.ModelProto) { p.Graph.Initializer[0].RawData = p.Graph.Initializer[0].RawData[4:] }), "raw_data"},
		{"wrong-weight-shape", mutate(func(p *onnxpb.ModelProto) {
			w := p.Graph.Initializer[0]
			w.Dims = []int64{w.Dims[1], w.Dims[0]}
		}), "do not multiply"},
		{"huge-dims", mutate(func(p *onnxpb.ModelProto) { p.Graph.Initializer[0].Dims = []int64{1 << 40, 1 << 40} }), "bad dims"},
		{"double-initializer", mutate(func(p *onnxpb.ModelProto) { p.Graph.Initializer[0].DataType = int32(onnxpb.TensorProto_DOUBLE) }), "DOUBLE"},
		{"no-graph", mutate(func(p *onnxpb.ModelProto) { p.Graph = nil }), "no graph"},
		{"symbolic-feature-dim", mutate(func(p *onnxpb.ModelProto) {
			p.Graph.Input[0].Type.GetTensorType().Shape.Dim[1].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "n"}
		}), "not fixed"},
		{"undefined-node-input", mutate(func(p *onnxpb.ModelProto) { p.Graph.Node[0].Input[0] = "nope" }), `"nope"`},
		{"ir-99", mutate(func(p *onnxpb.ModelProto) { p.IrVersion = 99 }), "IR version 99; this loader reads IR versions up to 11"},
		{"opset-99", mutate(func(p *onnxpb.ModelProto) { p.OpsetImport[0].Version = 99 }), "opset 99 of the default domain; this loader knows opsets up to 23"},
		{"opset-99-ai.onnx", mutate(func(p *onnxpb.ModelProto) {
			p.OpsetImport = append(p.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: "ai.onnx", Version: 99})
		}), "opset 99"},
		{"foreign-domain", mutate(func(p *onnxpb.ModelProto) { p.Graph.Node[0].Domain = "ai.onnx.ml" }), "not supported"},
		{"batch-axis-softmax", mutate(func(p *onnxpb.ModelProto) {
			for _, n := range p.Graph.Node {
				if n.OpType == "Softmax" {
					n.Attribute[0].I = 0
				}
			}
		}), "batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Open(writeModel(t, "bad", tc.data), Options{})
			if err == nil {
				e.Close()
				t.Fatal("loaded")
			}
			if !errors.Is(err, ErrInvalidModel) {
				t.Errorf("error %v does not match ErrInvalidModel", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
	_, err = Open(t.TempDir()+"/missing.onnx", Options{})
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalidModel) {
		t.Errorf("missing file: %v", err)
	}
}

func TestRunRejectsBadInputs(t *testing.T) {
	e := openMLP(t, knownMLP())
	ok := []float32{1, 2, 3, 4}
	for _, tc := range []struct {
		name string
		in   []Tensor
	}{
		{"none", nil},
		{"wrong-name", []Tensor{{Name: "x", DType: FP32, Shape: []int64{1, 4}, F32: ok}}},
		{"wrong-dtype", []Tensor{{Name: "input", DType: INT64, Shape: []int64{1, 4}, I64: []int64{1, 2, 3, 4}}}},
		{"wrong-shape", []Tensor{{Name: "input", DType: FP32, Shape: []int64{2, 2}, F32: ok}}},
		{"short-data", []Tensor{{Name: "input", DType: FP32, Shape: []int64{2, 4}, F32: ok}}},
		{"zero-rows", []Tensor{{Name: "input", DType: FP32, Shape: []int64{0, 4}, F32: []float32{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.Run(context.Background(), tc.in); err == nil {
				t.Error("no error")
			}
		})
	}
}

// FuzzDecode feeds client-supplied model files (as the model repository
// receives them) to the ONNX and GGUF graph loaders: errors, never a panic.
func FuzzDecode(f *testing.F) {
	m := knownMLP()
	onnx, _ := m.ONNX()
	gguf, _ := m.GGUF()
	f.Add(onnx)
	f.Add(gguf)
	f.Add(convModel(f))
	for _, g := range []*graph.Graph{mlGraph(), treeGraph(), cnnGraph()} {
		b, err := EncodeONNX(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := Decode(data)
		if err != nil {
			if !errors.Is((&ModelError{Err: err}), ErrInvalidModel) {
				t.Fatal("error not typed")
			}
			return
		}
		if len(c.Inputs) == 0 || len(c.Outputs) == 0 {
			t.Fatal("checked graph without inputs or outputs")
		}
		// A graph that passes Check must also build and run in ggml
		// (a failed ggml assertion would abort the process).
		var rowElems int64
		for _, info := range c.Values {
			if info.Batched {
				n := int64(1)
				for _, d := range info.Shape[1:] {
					n *= d
				}
				rowElems += n
			}
		}
		if rowElems > 1<<16 {
			return
		}
		e, err := Load("fuzz", data, Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var in []Tensor
		for _, s := range e.Inputs() {
			shape := append([]int64{2}, s.Shape[1:]...)
			x := Tensor{Name: s.Name, DType: FP32, Shape: shape}
			x.F32 = make([]float32, x.Elements())
			in = append(in, x)
		}
		if _, err := e.Run(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	})
}

// TestONNXEncodings: initializers in float_data/int64_data instead of
// raw_data, and a first dimension that is fixed, symbolic or missing, all
// load as the same model.
func TestONNXEncodings(t *testing.T) {
	m := knownMLP()
	g, err := m.Graph()
	if err != nil {
		t.Fatal(err)
	}
	// A Reshape to [0, 3] before the argmax exercises int64 data.
	n := len(g.Nodes)
	g.Nodes[n-2].Outputs = []string{"pre"} // softmax
	g.Consts = append(g.Consts, graph.Const{Name: "shape", DType: graph.I64, Shape: []int64{2}, I64: []int64{0, 3}})
	g.Nodes = slices.Insert(g.Nodes, n-1, graph.Node{Name: "reshape", Op: "Reshape", Inputs: []string{"pre", "shape"}, Outputs: []string{"output"}})
	base, err := EncodeONNX(g)
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{0.5, -1, 2, 0.25, 1, 1, -1, 3}
	want, labels := m.Forward(x, 2)
	variant := func(f func(*onnxpb.ModelProto)) []byte {
		var p onnxpb.ModelProto
		if err := proto.Unmarshal(base, &p); err != nil {
			t.Fatal(err)
		}
		f(&p)
		b, err := proto.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	firstDim := func(p *onnxpb.ModelProto) *onnxpb.TensorShapeProto_Dimension {
		return p.Graph.Input[0].Type.GetTensorType().Shape.Dim[0]
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"raw-data", base},
		{"typed-data", variant(func(p *onnxpb.ModelProto) {
			for _, init := range p.Graph.Initializer {
				k, err := onnxConst(init)
				if err != nil {
					t.Fatal(err)
				}
				init.RawData, init.FloatData, init.Int64Data = nil, k.F32, k.I64
			}
		})},
		{"fixed-first-dim", variant(func(p *onnxpb.ModelProto) {
			firstDim(p).Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 1}
		})},
		{"missing-first-dim", variant(func(p *onnxpb.ModelProto) { firstDim(p).Value = nil })},
		{"constant-node", variant(func(p *onnxpb.ModelProto) {
			for i, init := range p.Graph.Initializer {
				if init.Name == "shape" {
					p.Graph.Initializer = slices.Delete(p.Graph.Initializer, i, i+1)
					p.Graph.Node = slices.Insert(p.Graph.Node, 0, &onnxpb.NodeProto{Name: "const", OpType: "Constant", Output: []string{"shape"},
						Attribute: []*onnxpb.AttributeProto{{Name: "value", Type: onnxpb.AttributeProto_TENSOR, T: init}}})
					return
				}
			}
		})},
		{"constant-node-ints", variant(func(p *onnxpb.ModelProto) {
			for i, init := range p.Graph.Initializer {
				if init.Name == "shape" {
					p.Graph.Initializer = slices.Delete(p.Graph.Initializer, i, i+1)
					p.Graph.Node = slices.Insert(p.Graph.Node, 0, &onnxpb.NodeProto{Name: "const", OpType: "Constant", Output: []string{"shape"},
						Attribute: []*onnxpb.AttributeProto{{Name: "value_ints", Type: onnxpb.AttributeProto_INTS, Ints: []int64{0, 3}}}})
					return
				}
			}
		})},
		{"opset-11", variant(func(p *onnxpb.ModelProto) { p.OpsetImport[0].Version = 11 })},
		{"initializers-as-inputs", variant(func(p *onnxpb.ModelProto) {
			for _, init := range p.Graph.Initializer {
				p.Graph.Input = append(p.Graph.Input, &onnxpb.ValueInfoProto{Name: init.Name})
			}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Load(tc.name, tc.data, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			out := run(t, e, x, 2)
			for i := range want {
				if !closeTo(out[0].F32[i], want[i]) {
					t.Fatalf("output[%d] = %v, reference %v", i, out[0].F32[i], want[i])
				}
			}
			for i := range labels {
				if out[1].I64[i] != labels[i] {
					t.Fatalf("label[%d] = %d, reference %d", i, out[1].I64[i], labels[i])
				}
			}
		})
	}
}

// TestONNXNewestKnownVersions: a model at the newest IR version and
// default-domain opset the loader knows (11, 23) still loads; one past
// them fails (TestOpenErrors).
func TestONNXNewestKnownVersions(t *testing.T) {
	good, err := knownMLP().ONNX()
	if err != nil {
		t.Fatal(err)
	}
	var p onnxpb.ModelProto
	if err := proto.Unmarshal(good, &p); err != nil {
		t.Fatal(err)
	}
	p.IrVersion, p.OpsetImport[0].Version = onnxMaxIR, onnxMaxOpset
	b, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(writeModel(t, "newest", b), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}
