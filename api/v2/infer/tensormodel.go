package infer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/llmserve/llmserve/float16"
	"github.com/llmserve/llmserve/oip"
)

// Signature is a model whose inputs and outputs are declared tensors with
// a leading batch dimension: a tensor model (its graph's) or a custom
// runtime (its settings'). AsSignature finds it.
type Signature interface {
	Model
	// Platform is the model's platform in metadata: "onnx" or "ggml" for
	// a tensor model, a custom runtime's own ("custom" by default).
	Platform() string
	// Inputs and Outputs describe the tensors, Shape[0] the batch (-1).
	Inputs() []oip.Spec
	Outputs() []oip.Spec
}

// TensorModel is a served tensor model: a graph (ONNX or a graph GGUF)
// with named, typed inputs and outputs and a batch dimension, behind
// adaptive batching.
type TensorModel interface {
	Signature
	// MaxRequestRows is the most rows (batch size) one request may carry.
	MaxRequestRows() int
	// Infer runs one request whose inputs match Inputs (RunTensor checks
	// them); the outputs come in Outputs' order.
	Infer(ctx context.Context, in []oip.Tensor) ([]oip.Tensor, error)
}

// invalidInputRecorder is implemented by tensor models that count
// requests refused before they ran (metrics).
type invalidInputRecorder interface{ InvalidInput() }

// signatureMetadata returns a tensor model's or custom runtime's
// metadata: its platform, inputs and outputs as its Specs say.
func signatureMetadata(m Signature) ModelMetadata {
	md := ModelMetadata{Name: m.Name(), Versions: []string{VersionOf(m)}, Platform: m.Platform()}
	for _, s := range m.Inputs() {
		md.Inputs = append(md.Inputs, TensorMetadata{Name: s.Name, Datatype: s.DType, Shape: slices.Clone(s.Shape)})
	}
	for _, s := range m.Outputs() {
		md.Outputs = append(md.Outputs, TensorMetadata{Name: s.Name, Datatype: s.DType, Shape: slices.Clone(s.Shape)})
	}
	return md
}

// RunTensor serves an inference request on a tensor model: it checks and
// converts the inputs (ConvertInputs), runs them and returns the outputs
// asked for (all by default), in the model's order.
func RunTensor(ctx context.Context, t TensorModel, r *Request) (*Response, error) {
	in, err := ConvertInputs(t, r)
	if err == nil {
		err = checkOutputs(t, r.Outputs)
	}
	if err != nil {
		if rec, ok := t.(invalidInputRecorder); ok {
			rec.InvalidInput()
		}
		return nil, err
	}
	out, err := t.Infer(ctx, in)
	if err != nil {
		return nil, err
	}
	resp := &Response{ModelName: t.Name(), ModelVersion: VersionOf(t), ID: r.ID}
	for _, o := range out {
		if len(r.Outputs) > 0 && !slices.ContainsFunc(r.Outputs, func(ro RequestedOutput) bool { return ro.Name == o.Name }) {
			continue
		}
		resp.Outputs = append(resp.Outputs, FromTensor(o))
	}
	if err := EncodeResponse(r, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func checkOutputs(t TensorModel, req []RequestedOutput) error {
	for _, o := range req {
		if !slices.ContainsFunc(t.Outputs(), func(s oip.Spec) bool { return s.Name == o.Name }) {
			return invalidf("output %q is not an output of model %q; its outputs are %s", truncate(o.Name), t.Name(), specNames(t.Outputs()))
		}
	}
	return nil
}

func specNames(ss []oip.Spec) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s (%s %v)", s.Name, s.DType, s.Shape)
	}
	return strings.Join(parts, ", ")
}

// maxExactInt is the largest integer magnitude every FP32 holds exactly.
const maxExactInt = 1 << 24

// ConvertInputs checks a request's inputs against the model's and returns
// them in the model's order and element types. Every error is Invalid and
// names the input: a missing or unknown input, a shape whose rank or fixed
// dimensions differ from the model's, inputs with different batch sizes,
// a batch of 0 or more than MaxRequestRows rows, or a datatype that does
// not convert.
//
// Conversions: an FP32 input takes FP32 as it is, FP16 (exact), FP64
// (rounded to the nearest FP32; a value beyond FP32's range is refused)
// and any integer type whose values are exact in FP32 (|v| <= 2^24, else
// refused). An INT64 input takes any integer type (a UINT64 above the
// INT64 range is refused). BOOL and BYTES are refused. The request's
// content types are applied first (applyContentTypes: this is the tensor
// kind's decoder); an input of shape [N] for a model input [-1, 1] is
// taken as [N, 1], MLServer's convention (a pd column is one value per
// row).
//
// An FP32 input sent as FP32 is not copied where the host allows it
// (little-endian, its bytes 4-byte aligned): the returned tensor's F32
// shares the input's Raw, so r's inputs must not change until the model
// has run.
func ConvertInputs(t TensorModel, r *Request) ([]oip.Tensor, error) {
	if err := r.CheckInputs(); err != nil {
		return nil, err
	}
	if err := applyContentTypes(r); err != nil {
		return nil, err
	}
	specs := t.Inputs()
	for _, in := range r.Inputs {
		if !slices.ContainsFunc(specs, func(s oip.Spec) bool { return s.Name == in.Name }) {
			return nil, invalidf("input %q is not an input of model %q; its inputs are %s", truncate(in.Name), t.Name(), specNames(specs))
		}
	}
	out := make([]oip.Tensor, len(specs))
	batch := int64(-1)
	for i, s := range specs {
		in := r.input(s.Name)
		if in == nil {
			return nil, invalidf("input %q is missing: model %q takes %s", s.Name, t.Name(), specNames(specs))
		}
		conv, err := convert(in, s.DType)
		if err != nil {
			return nil, invalidf("input %q: %v", s.Name, err)
		}
		if len(in.Shape) == 1 && len(s.Shape) == 2 && s.Shape[1] == 1 {
			// MLServer's convention: [N] is [N, 1], one value per row (a
			// pd column).
			in.Shape = []int64{in.Shape[0], 1}
		}
		if err := checkShape(s, in.Shape); err != nil {
			return nil, invalidf("input %q: %v", s.Name, err)
		}
		switch n := in.Shape[0]; {
		case n < 1:
			return nil, invalidf("input %q: the batch size (shape[0]) is %d; send at least one row", s.Name, n)
		case n > int64(t.MaxRequestRows()):
			return nil, invalidf("input %q: the batch size (shape[0]) is %d, more than the %d rows one request may carry; split it into several requests", s.Name, n, t.MaxRequestRows())
		case batch >= 0 && n != batch:
			return nil, invalidf("input %q: the batch size (shape[0]) is %d but input %q has %d; every input needs the same", s.Name, n, specs[0].Name, batch)
		}
		batch = in.Shape[0]
		conv.Name, conv.Shape = s.Name, slices.Clone(in.Shape)
		out[i] = conv
	}
	return out, nil
}

// checkShape compares a request's shape with the model's.
func checkShape(s oip.Spec, shape []int64) error {
	if len(shape) != len(s.Shape) {
		return fmt.Errorf("shape %v has %d dimensions but the model takes %d: %v (the first is the batch size)", shape, len(shape), len(s.Shape), s.Shape)
	}
	for d := 1; d < len(shape); d++ {
		if s.Shape[d] >= 0 && shape[d] != s.Shape[d] {
			return fmt.Errorf("shape %v: dimension %d is %d but the model takes %d (shape %v)", shape, d, shape[d], s.Shape[d], s.Shape)
		}
	}
	return nil
}

// convert reads t's elements as want.
func convert(t *Tensor, want oip.Datatype) (oip.Tensor, error) {
	n := t.Len()
	switch want {
	case oip.FP32:
		if t.Datatype == oip.FP32 {
			if v, ok := float32View(t.Raw); ok {
				// The wire's bytes are the values: no copy (the model
				// only reads its inputs).
				return oip.Tensor{DType: oip.FP32, F32: v}, nil
			}
		}
		out := oip.Tensor{DType: oip.FP32, F32: make([]float32, n)}
		switch {
		case t.Datatype == oip.FP32:
			for i := range n {
				out.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Raw[4*i:]))
			}
		case t.Datatype == oip.FP16:
			for i := range n {
				out.F32[i] = float16.ToFloat32(binary.LittleEndian.Uint16(t.Raw[2*i:]))
			}
		case t.Datatype == oip.FP64:
			for i := range n {
				v, _ := t.Float(i)
				if math.Abs(v) > math.MaxFloat32 && !math.IsInf(v, 0) {
					return out, fmt.Errorf("element %d (%g) is beyond the FP32 range the model computes in", i, v)
				}
				out.F32[i] = float32(v)
			}
		case t.Datatype.IsInt():
			for i := range n {
				v, _ := t.Int(i)
				if t.Datatype == oip.UINT64 && t.uint(i) > maxExactInt || v > maxExactInt || v < -maxExactInt {
					return out, fmt.Errorf("element %d (%d) is not exact in FP32, the model's datatype; send FP32", i, v)
				}
				out.F32[i] = float32(v)
			}
		default:
			return out, fmt.Errorf("datatype %s does not convert to FP32, the model's datatype; send FP32 (or FP16, FP64, an integer type)", t.Datatype)
		}
		return out, nil
	case oip.INT64:
		out := oip.Tensor{DType: oip.INT64, I64: make([]int64, n)}
		if !t.Datatype.IsInt() {
			return out, fmt.Errorf("datatype %s does not convert to INT64, the model's datatype; send an integer type", t.Datatype)
		}
		for i := range n {
			if t.Datatype == oip.UINT64 && t.uint(i) > math.MaxInt64 {
				return out, fmt.Errorf("element %d (%d) is beyond the INT64 range", i, t.uint(i))
			}
			out.I64[i], _ = t.Int(i)
		}
		return out, nil
	}
	return oip.Tensor{}, fmt.Errorf("the model takes datatype %s, which this server cannot feed", want)
}

// FromTensor is a model output in the V2 form. An FP32 or INT64 output's
// Raw shares o's memory on a little-endian host (it is the wire form
// already), so o must not change after.
func FromTensor(o oip.Tensor) *Tensor {
	switch o.DType {
	case oip.INT64:
		if raw, ok := valueBytes(o.I64); ok {
			return &Tensor{Name: o.Name, Datatype: oip.INT64, Shape: slices.Clone(o.Shape), Raw: raw}
		}
		raw := make([]byte, 8*len(o.I64))
		for i, v := range o.I64 {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		}
		return &Tensor{Name: o.Name, Datatype: oip.INT64, Shape: slices.Clone(o.Shape), Raw: raw}
	default:
		if raw, ok := valueBytes(o.F32); ok {
			return &Tensor{Name: o.Name, Datatype: oip.FP32, Shape: slices.Clone(o.Shape), Raw: raw}
		}
		return NewFP32Tensor(o.Name, slices.Clone(o.Shape), o.F32)
	}
}
