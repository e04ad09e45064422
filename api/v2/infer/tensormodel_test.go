package infer

import (
	"context"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/float16"
	"github.com/llmserve/llmserve/oip"
)

// fakeTensor is a tensor model with inputs x FP32 [-1, 2] and ids INT64
// [-1]; its output y is x's rows summed plus ids.
type fakeTensor struct{ invalid int }

func (f *fakeTensor) Name() string     { return "mlp" }
func (f *fakeTensor) Ready() bool      { return true }
func (f *fakeTensor) Platform() string { return "onnx" }
func (f *fakeTensor) Inputs() []oip.Spec {
	return []oip.Spec{{Name: "x", DType: oip.FP32, Shape: []int64{-1, 2}}, {Name: "ids", DType: oip.INT64, Shape: []int64{-1}}}
}
func (f *fakeTensor) Outputs() []oip.Spec {
	return []oip.Spec{{Name: "y", DType: oip.FP32, Shape: []int64{-1, 1}}, {Name: "label", DType: oip.INT64, Shape: []int64{-1}}}
}
func (f *fakeTensor) MaxRequestRows() int { return 4 }
func (f *fakeTensor) InvalidInput()       { f.invalid++ }
func (f *fakeTensor) Infer(_ context.Context, in []oip.Tensor) ([]oip.Tensor, error) {
	n := in[0].Shape[0]
	y := oip.Tensor{Name: "y", DType: oip.FP32, Shape: []int64{n, 1}}
	l := oip.Tensor{Name: "label", DType: oip.INT64, Shape: []int64{n}}
	for r := range n {
		y.F32 = append(y.F32, in[0].F32[2*r]+in[0].F32[2*r+1]+float32(in[1].I64[r]))
		l.I64 = append(l.I64, in[1].I64[r])
	}
	return []oip.Tensor{y, l}, nil
}

func raw(dt Datatype, vals ...float64) []byte {
	var b []byte
	for _, v := range vals {
		switch dt {
		case oip.FP32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case oip.FP64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		case oip.FP16:
			b = binary.LittleEndian.AppendUint16(b, float16.FromFloat32(float32(v)))
		case oip.INT32:
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
		case oip.INT64:
			b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
		case oip.UINT64:
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		case oip.UINT8, oip.BOOL:
			b = append(b, byte(v))
		}
	}
	return b
}

func TestRunTensor(t *testing.T) {
	x := func(dt Datatype, shape []int64, vals ...float64) *Tensor {
		return &Tensor{Name: "x", Datatype: dt, Shape: shape, Raw: raw(dt, vals...)}
	}
	ids := func(dt Datatype, shape []int64, vals ...float64) *Tensor {
		return &Tensor{Name: "ids", Datatype: dt, Shape: shape, Raw: raw(dt, vals...)}
	}
	for _, tc := range []struct {
		name    string
		inputs  []*Tensor
		outputs []RequestedOutput
		want    []float32 // y
		err     string
	}{
		{"fp32", []*Tensor{x(oip.FP32, []int64{2, 2}, 1, 2, 3, 4), ids(oip.INT64, []int64{2}, 10, 20)}, nil, []float32{13, 27}, ""},
		{"fp64 and int32 convert", []*Tensor{x(oip.FP64, []int64{1, 2}, 0.5, 0.25), ids(oip.INT32, []int64{1}, 1)}, nil, []float32{1.75}, ""},
		{"fp16 and uint8", []*Tensor{x(oip.FP16, []int64{1, 2}, 0.5, 2), ids(oip.UINT8, []int64{1}, 3)}, nil, []float32{5.5}, ""},
		{"ints exact in fp32", []*Tensor{x(oip.INT32, []int64{1, 2}, 16777216, -3), ids(oip.INT64, []int64{1}, 0)}, nil, []float32{16777213}, ""},
		{"only y", []*Tensor{x(oip.FP32, []int64{1, 2}, 1, 1), ids(oip.INT64, []int64{1}, 0)}, []RequestedOutput{{Name: "y"}}, []float32{2}, ""},
		{"missing input", []*Tensor{x(oip.FP32, []int64{1, 2}, 1, 2)}, nil, nil, `input "ids" is missing`},
		{"unknown input", []*Tensor{x(oip.FP32, []int64{1, 2}, 1, 2), ids(oip.INT64, []int64{1}, 1), {Name: "z", Datatype: oip.FP32, Shape: []int64{1}, Raw: raw(oip.FP32, 1)}}, nil, nil, `input "z" is not an input`},
		{"wrong rank", []*Tensor{x(oip.FP32, []int64{2}, 1, 2), ids(oip.INT64, []int64{1}, 1)}, nil, nil, `input "x": shape [2] has 1 dimensions`},
		{"wrong width", []*Tensor{x(oip.FP32, []int64{1, 3}, 1, 2, 3), ids(oip.INT64, []int64{1}, 1)}, nil, nil, `input "x": shape [1 3]: dimension 1 is 3 but the model takes 2`},
		{"batch mismatch", []*Tensor{x(oip.FP32, []int64{1, 2}, 1, 2), ids(oip.INT64, []int64{2}, 1, 2)}, nil, nil, `input "ids": the batch size (shape[0]) is 2 but input "x" has 1`},
		{"empty batch", []*Tensor{x(oip.FP32, []int64{0, 2}), ids(oip.INT64, []int64{0})}, nil, nil, `input "x": the batch size (shape[0]) is 0`},
		{"batch too big", []*Tensor{x(oip.FP32, []int64{5, 2}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), ids(oip.INT64, []int64{5}, 1, 2, 3, 4, 5)}, nil, nil, `input "x": the batch size (shape[0]) is 5, more than the 4 rows`},
		{"bool for fp32", []*Tensor{x(oip.BOOL, []int64{1, 2}, 1, 0), ids(oip.INT64, []int64{1}, 1)}, nil, nil, `input "x": datatype BOOL does not convert to FP32`},
		{"float for int64", []*Tensor{x(oip.FP32, []int64{1, 2}, 1, 0), ids(oip.FP32, []int64{1}, 1)}, nil, nil, `input "ids": datatype FP32 does not convert to INT64`},
		{"int not exact", []*Tensor{x(oip.INT64, []int64{1, 2}, 16777217, 0), ids(oip.INT64, []int64{1}, 1)}, nil, nil, `input "x": element 0 (16777217) is not exact in FP32`},
		{"fp64 out of range", []*Tensor{x(oip.FP64, []int64{1, 2}, 1e300, 0), ids(oip.INT64, []int64{1}, 1)}, nil, nil, `input "x": element 0 (1e+300) is beyond the FP32 range`},
		{"uint64 beyond int64", []*Tensor{x(oip.FP32, []int64{1, 2}, 1, 0), ids(oip.UINT64, []int64{1}, 1<<63)}, nil, nil, `input "ids": element 0 (9223372036854775808) is beyond the INT64 range`},
		{"data shorter than shape", []*Tensor{x(oip.FP32, []int64{2, 2}, 1, 2), ids(oip.INT64, []int64{2}, 1, 2)}, nil, nil, `input "x"`},
		{"unknown output", []*Tensor{x(oip.FP32, []int64{1, 2}, 1, 2), ids(oip.INT64, []int64{1}, 1)}, []RequestedOutput{{Name: "probs"}}, nil, `output "probs" is not an output`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeTensor{}
			resp, err := Run(context.Background(), f, &Request{ID: "r", Inputs: tc.inputs, Outputs: tc.outputs}, GenOptions{})
			if tc.err != "" {
				e := AsError(err)
				if err == nil || e.Code != Invalid || !strings.Contains(e.Msg, tc.err) {
					t.Fatalf("err %v, want Invalid with %q", err, tc.err)
				}
				if f.invalid != 1 {
					t.Errorf("invalid inputs recorded %d times", f.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.ID != "r" || resp.ModelName != "mlp" || resp.Outputs[0].Name != "y" {
				t.Fatalf("response %+v", resp)
			}
			if got := resp.Outputs[0].JSONData(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("y = %v, want %v", got, tc.want)
			}
			if tc.outputs != nil && len(resp.Outputs) != len(tc.outputs) {
				t.Fatalf("%d outputs, want %d", len(resp.Outputs), len(tc.outputs))
			}
		})
	}
}

func TestTensorModelMetadataAndRefusals(t *testing.T) {
	m := &fakeTensor{}
	if KindOf(m) != KindTensor {
		t.Fatalf("kind %v", KindOf(m))
	}
	md := Metadata(m)
	if md.Platform != "onnx" || len(md.Inputs) != 2 || md.Inputs[0].Name != "x" || md.Inputs[0].Datatype != oip.FP32 ||
		!reflect.DeepEqual(md.Inputs[0].Shape, []int64{-1, 2}) || md.Outputs[1].Datatype != oip.INT64 {
		t.Fatalf("metadata %+v", md)
	}
	if _, err := AsLLM(m, "generate"); err == nil || AsError(err).Code != Invalid || !strings.Contains(err.Error(), "tensor model, not an LLM: it does not generate") {
		t.Fatalf("AsLLM: %v", err)
	}
}
