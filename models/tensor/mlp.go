package tensor

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/llmserve/llmserve/engine/graph"
)

// MLP is a multilayer perceptron given by its weights, the model
// `llmserve synth mlp` writes and tests build: input "input" [batch, in],
// output "output" [batch, out] (the last layer, through softmax when
// Softmax is set) and, when ArgMax is set, "label" [batch] (INT64, the
// index of the largest output).
type MLP struct {
	Layers  []Layer `json:"layers"`
	Softmax bool    `json:"softmax,omitempty"`
	ArgMax  bool    `json:"argmax,omitempty"`
}

// Layer is one dense layer: y = activation(x·Weights + Bias).
type Layer struct {
	// Weights is [inputs][outputs] (ONNX MatMul's B).
	Weights [][]float32 `json:"weights"`
	// Bias has one value per output; nil for none.
	Bias []float32 `json:"bias,omitempty"`
	// Activation is "", "relu", "tanh", "sigmoid", "gelu" or "gelu_tanh".
	Activation string `json:"activation,omitempty"`
}

// activations maps Layer.Activation to the operator and its attributes.
var activations = map[string]graph.Node{
	"":          {},
	"relu":      {Op: "Relu"},
	"tanh":      {Op: "Tanh"},
	"sigmoid":   {Op: "Sigmoid"},
	"gelu":      {Op: "Gelu"},
	"gelu_tanh": {Op: "Gelu", Attrs: map[string]graph.Attr{"approximate": {Kind: graph.AttrString, String: "tanh"}}},
}

// Validate reports whether the layers fit together.
func (m *MLP) Validate() error {
	if len(m.Layers) == 0 {
		return errors.New("mlp: no layers")
	}
	prev := 0
	for i, l := range m.Layers {
		if len(l.Weights) == 0 || len(l.Weights[0]) == 0 {
			return fmt.Errorf("mlp: layer %d: empty weights", i)
		}
		in, out := len(l.Weights), len(l.Weights[0])
		for r, row := range l.Weights {
			if len(row) != out {
				return fmt.Errorf("mlp: layer %d: weights row %d has %d values, row 0 has %d", i, r, len(row), out)
			}
		}
		if i > 0 && in != prev {
			return fmt.Errorf("mlp: layer %d takes %d inputs, layer %d gives %d", i, in, i-1, prev)
		}
		if l.Bias != nil && len(l.Bias) != out {
			return fmt.Errorf("mlp: layer %d: bias has %d values, want %d", i, len(l.Bias), out)
		}
		if _, ok := activations[l.Activation]; !ok {
			return fmt.Errorf("mlp: layer %d: unknown activation %q (want relu, tanh, sigmoid, gelu, gelu_tanh or none)", i, l.Activation)
		}
		prev = out
	}
	return nil
}

// Inputs is the number of input features; Outputs of outputs.
func (m *MLP) Inputs() int  { return len(m.Layers[0].Weights) }
func (m *MLP) Outputs() int { return len(m.Layers[len(m.Layers)-1].Weights[0]) }

// Graph is the MLP as a model graph: MatMul, Add and the activation per
// layer, then Softmax and ArgMax.
func (m *MLP) Graph() (*graph.Graph, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	g := &graph.Graph{Inputs: []graph.Value{{Name: "input", DType: graph.F32, Shape: []int64{graph.Batch, int64(m.Inputs())}}}}
	x := "input"
	node := func(name, op string, attrs map[string]graph.Attr, inputs ...string) {
		g.Nodes = append(g.Nodes, graph.Node{Name: name, Op: op, Inputs: inputs, Outputs: []string{name}, Attrs: attrs})
		x = name
	}
	for i, l := range m.Layers {
		in, out := len(l.Weights), len(l.Weights[0])
		w := fmt.Sprintf("layer%d.weight", i)
		g.Consts = append(g.Consts, graph.Const{Name: w, DType: graph.F32, Shape: []int64{int64(in), int64(out)}, F32: slices.Concat(l.Weights...)})
		node(fmt.Sprintf("layer%d.matmul", i), "MatMul", nil, x, w)
		if l.Bias != nil {
			b := fmt.Sprintf("layer%d.bias", i)
			g.Consts = append(g.Consts, graph.Const{Name: b, DType: graph.F32, Shape: []int64{int64(out)}, F32: slices.Clone(l.Bias)})
			node(fmt.Sprintf("layer%d.add", i), "Add", nil, x, b)
		}
		if a := activations[l.Activation]; a.Op != "" {
			node(fmt.Sprintf("layer%d.%s", i, l.Activation), a.Op, a.Attrs, x)
		}
	}
	if m.Softmax {
		node("softmax", "Softmax", map[string]graph.Attr{"axis": {Kind: graph.AttrInt, Int: -1}}, x)
	}
	g.Nodes[len(g.Nodes)-1].Outputs = []string{"output"}
	g.Outputs = []graph.Value{{Name: "output", DType: graph.F32, Shape: []int64{graph.Batch, int64(m.Outputs())}}}
	if m.ArgMax {
		g.Nodes = append(g.Nodes, graph.Node{Name: "argmax", Op: "ArgMax", Inputs: []string{"output"}, Outputs: []string{"label"},
			Attrs: map[string]graph.Attr{"axis": {Kind: graph.AttrInt, Int: 1}, "keepdims": {Kind: graph.AttrInt, Int: 0}}})
		g.Outputs = append(g.Outputs, graph.Value{Name: "label", DType: graph.I64, Shape: []int64{graph.Batch}})
	}
	return g, nil
}

// ONNX is the MLP as an ONNX model file.
func (m *MLP) ONNX() ([]byte, error) {
	g, err := m.Graph()
	if err != nil {
		return nil, err
	}
	return EncodeONNX(g)
}

// Forward computes the MLP in pure Go (float64 sums) on rows of input x,
// as a reference: the "output" values and, with ArgMax, the labels.
func (m *MLP) Forward(x []float32, rows int) ([]float32, []int64) {
	cur := x
	for _, l := range m.Layers {
		in, out := len(l.Weights), len(l.Weights[0])
		a := activations[l.Activation]
		act := graph.Activation(&a)
		next := make([]float32, rows*out)
		for r := range rows {
			for j := range out {
				var s float64
				for k := range in {
					s += float64(cur[r*in+k]) * float64(l.Weights[k][j])
				}
				v := float32(s)
				if l.Bias != nil {
					v += l.Bias[j]
				}
				next[r*out+j] = float32(act(float64(v)))
			}
		}
		cur = next
	}
	out := m.Outputs()
	if m.Softmax {
		for r := range rows {
			row := cur[r*out : (r+1)*out]
			mx := math.Inf(-1)
			for _, v := range row {
				mx = max(mx, float64(v))
			}
			var s float64
			for _, v := range row {
				s += math.Exp(float64(v) - mx)
			}
			for j, v := range row {
				row[j] = float32(math.Exp(float64(v)-mx) / s)
			}
		}
	}
	var labels []int64
	if m.ArgMax {
		labels = make([]int64, rows)
		for r := range rows {
			row := cur[r*out : (r+1)*out]
			for j, v := range row {
				if v > row[labels[r]] {
					labels[r] = int64(j)
				}
			}
		}
	}
	return cur, labels
}

// RandomMLP is an MLP of the given layer sizes (inputs first, e.g. 784,
// 256, 128, 10) with weights and biases drawn uniformly from
// ±1/sqrt(inputs) by a generator seeded with seed, relu between layers and
// none after the last.
func RandomMLP(sizes []int, seed uint64, softmax, argmax bool) (*MLP, error) {
	if len(sizes) < 2 {
		return nil, fmt.Errorf("mlp: %d layer sizes, want at least 2 (inputs and outputs)", len(sizes))
	}
	for _, s := range sizes {
		if s < 1 || s > 1<<16 {
			return nil, fmt.Errorf("mlp: layer size %d out of range 1..65536", s)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d6c70))
	m := &MLP{Softmax: softmax, ArgMax: argmax}
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		bound := 1 / math.Sqrt(float64(in))
		draw := func() float32 { return float32((rng.Float64()*2 - 1) * bound) }
		l := Layer{Weights: make([][]float32, in), Bias: make([]float32, out)}
		for k := range l.Weights {
			l.Weights[k] = make([]float32, out)
			for j := range l.Weights[k] {
				l.Weights[k][j] = draw()
			}
		}
		for j := range l.Bias {
			l.Bias[j] = draw()
		}
		if i+2 < len(sizes) {
			l.Activation = "relu"
		}
		m.Layers = append(m.Layers, l)
	}
	return m, nil
}

// GGUF is the MLP as a GGUF graph file.
func (m *MLP) GGUF() ([]byte, error) {
	g, err := m.Graph()
	if err != nil {
		return nil, err
	}
	return EncodeGGUF(g, onnxOpset)
}
