package tritonv1

import (
	"context"
	"encoding/binary"
	"math"
	"slices"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
)

// fakeTensor is a tensor model with inputs x FP32 [-1, 3] and ids INT64
// [-1], at most 4 rows a request; its outputs are probs FP32 [-1, 3] (x
// as it came) and label INT64 [-1] (ids as they came).
type fakeTensor struct{ ready bool }

func (f *fakeTensor) Name() string     { return "mlp" }
func (f *fakeTensor) Ready() bool      { return f.ready }
func (f *fakeTensor) Platform() string { return "onnx" }
func (f *fakeTensor) Inputs() []oip.Spec {
	return []oip.Spec{{Name: "x", DType: oip.FP32, Shape: []int64{-1, 3}}, {Name: "ids", DType: oip.INT64, Shape: []int64{-1}}}
}
func (f *fakeTensor) Outputs() []oip.Spec {
	return []oip.Spec{{Name: "probs", DType: oip.FP32, Shape: []int64{-1, 3}}, {Name: "label", DType: oip.INT64, Shape: []int64{-1}}}
}
func (f *fakeTensor) MaxRequestRows() int { return 4 }
func (f *fakeTensor) Infer(_ context.Context, in []oip.Tensor) ([]oip.Tensor, error) {
	p := oip.Tensor{Name: "probs", DType: oip.FP32, Shape: slices.Clone(in[0].Shape), F32: slices.Clone(in[0].F32)}
	l := oip.Tensor{Name: "label", DType: oip.INT64, Shape: slices.Clone(in[1].Shape), I64: slices.Clone(in[1].I64)}
	return []oip.Tensor{p, l}, nil
}

// fakeLLM is a generative model for what needs only its metadata; it
// cannot generate (its LLM methods are a nil infer.LLM's).
type fakeLLM struct{ infer.LLM }

func (fakeLLM) Name() string { return "llm" }
func (fakeLLM) Ready() bool  { return true }

// fakeBackend serves the fake models.
type fakeBackend struct{ ms []infer.Model }

func newFakeBackend() *fakeBackend {
	return &fakeBackend{ms: []infer.Model{&fakeTensor{ready: true}, fakeLLM{}}}
}

func (b *fakeBackend) Model(name string) (infer.Model, bool) {
	for _, m := range b.ms {
		if m.Name() == name {
			return m, true
		}
	}
	return nil, false
}
func (b *fakeBackend) Models() []infer.Model { return b.ms }
func (b *fakeBackend) Ready() bool {
	for _, m := range b.ms {
		if !m.Ready() {
			return false
		}
	}
	return true
}

func fp32(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func i64(vals ...int64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func str(vals ...string) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}
