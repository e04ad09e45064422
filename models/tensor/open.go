package tensor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/engine/llamacpp/tensorgraph"
	"github.com/llmserve/llmserve/gguf"
)

// Options says how to execute a loaded model.
type Options struct {
	// Threads is the number of CPU threads one Run computes with; 0 means
	// 1, best for small models (see tensorgraph.GraphOptions): use parallel
	// workers (concurrent Runs) to use more cores.
	Threads int
	// Parts is the most runners a large batch (2×tensorgraph.SplitRows rows
	// and more, cut into pieces of SplitRows) is computed on at once; 0
	// means GOMAXPROCS (every core the process was given), 1 never cuts.
	Parts int
}

// ErrInvalidModel is matched (errors.Is) by every error Open returns for a
// file whose content is not a model this runtime can execute: not ONNX or
// GGUF, malformed, inconsistent shapes, or an unsupported operator (then
// errors.Is(err, ErrUnsupported) too). An I/O error reading the file does
// not match it.
var ErrInvalidModel = errors.New("invalid tensor model")

// ErrUnsupported is matched by the errors for models that are well formed
// but use an operator or attribute the runtime does not implement.
var ErrUnsupported = graph.ErrUnsupported

// ModelError is a model file that cannot be loaded. Err is usually a
// *graph.Error, which names the node and operator at fault.
type ModelError struct {
	Path   string
	Format string // "ONNX", "GGUF" or "" when neither was recognized
	Err    error
}

func (e *ModelError) Error() string {
	if e.Format == "" {
		return fmt.Sprintf("tensor model %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("tensor model %s (%s): %v", e.Path, e.Format, e.Err)
}

// Unwrap gives ErrInvalidModel and the cause.
func (e *ModelError) Unwrap() []error { return []error{ErrInvalidModel, e.Err} }

// Open loads the ONNX or GGUF model at path (chosen by content: GGUF
// files start with "GGUF", anything else is read as an ONNX protobuf) and
// prepares it for execution.
func Open(path string, opts Options) (Executor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tensor model: %w", err)
	}
	return Load(path, data, opts)
}

// Load is Open on a file's content; name is used in errors.
func Load(name string, data []byte, opts Options) (Executor, error) {
	c, format, err := Decode(data)
	if err != nil {
		return nil, &ModelError{Path: name, Format: format, Err: err}
	}
	m, err := tensorgraph.LoadGraph(c, tensorgraph.GraphOptions{Threads: opts.Threads, Parts: parts(opts.Parts)})
	if err != nil {
		return nil, fmt.Errorf("tensor model %s: %w", name, err)
	}
	return newExecutor(c, m), nil
}

// Decode parses and checks a model file's content, giving its format
// ("ONNX" or "GGUF").
func Decode(data []byte) (*graph.Checked, string, error) {
	var (
		g      *graph.Graph
		opset  int64
		err    error
		format = "ONNX"
	)
	if bytes.HasPrefix(data, []byte(gguf.Magic)) {
		format = "GGUF"
		g, opset, err = DecodeGGUF(data)
	} else {
		g, opset, err = DecodeONNX(data)
	}
	if err != nil {
		return nil, format, err
	}
	c, err := graph.Check(g, opset)
	if err != nil {
		return nil, format, err
	}
	return c, format, nil
}

// executor is an Executor over a ggml graph.
type executor struct {
	m       *tensorgraph.GraphModel
	inputs  []Spec
	outputs []Spec
}

func newExecutor(c *graph.Checked, m *tensorgraph.GraphModel) *executor {
	e := &executor{m: m}
	for _, v := range c.Inputs {
		e.inputs = append(e.inputs, spec(v))
	}
	for _, v := range c.Outputs {
		e.outputs = append(e.outputs, spec(v))
	}
	return e
}

func spec(v graph.Value) Spec {
	dt := FP32
	if v.DType == graph.I64 {
		dt = INT64
	}
	return Spec{Name: v.Name, DType: dt, Shape: slices.Clone(v.Shape)}
}

func (e *executor) Inputs() []Spec  { return cloneSpecs(e.inputs) }
func (e *executor) Outputs() []Spec { return cloneSpecs(e.outputs) }

func cloneSpecs(s []Spec) []Spec {
	out := make([]Spec, len(s))
	for i, v := range s {
		out[i] = Spec{Name: v.Name, DType: v.DType, Shape: slices.Clone(v.Shape)}
	}
	return out
}

func (e *executor) Run(ctx context.Context, in []Tensor) ([]Tensor, error) {
	if len(in) != len(e.inputs) {
		return nil, fmt.Errorf("got %d input tensors, the model takes %d", len(in), len(e.inputs))
	}
	rows := int64(-1)
	data := make([]tensorgraph.GraphInput, len(in))
	for i, spec := range e.inputs {
		t := &in[i]
		if t.Name != spec.Name {
			return nil, fmt.Errorf("input %d is %q, want %q", i, t.Name, spec.Name)
		}
		if t.DType != spec.DType {
			return nil, fmt.Errorf("input %q is %s, want %s", t.Name, t.DType, spec.DType)
		}
		if err := t.Check(); err != nil {
			return nil, err
		}
		if len(t.Shape) != len(spec.Shape) || t.Shape[0] < 1 {
			return nil, fmt.Errorf("input %q has shape %v, want %v", t.Name, t.Shape, spec.Shape)
		}
		for d := 1; d < len(spec.Shape); d++ {
			if t.Shape[d] != spec.Shape[d] {
				return nil, fmt.Errorf("input %q has shape %v, want %v", t.Name, t.Shape, spec.Shape)
			}
		}
		if rows >= 0 && t.Shape[0] != rows {
			return nil, fmt.Errorf("input %q has batch size %d, input %q has %d", t.Name, t.Shape[0], in[0].Name, rows)
		}
		rows = t.Shape[0]
		data[i] = tensorgraph.GraphInput{F32: t.F32, I64: t.I64}
	}
	outs, err := e.m.RunInputs(ctx, int(rows), data)
	if err != nil {
		return nil, err
	}
	res := make([]Tensor, len(outs))
	for i, spec := range e.outputs {
		shape := slices.Clone(spec.Shape)
		shape[0] = rows
		res[i] = Tensor{Name: spec.Name, DType: spec.DType, Shape: shape, F32: outs[i].F32, I64: outs[i].I64}
	}
	return res, nil
}

func (e *executor) Close() error { return e.m.Close() }

// parts is Options.Parts with its default.
func parts(n int) int {
	if n <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}
