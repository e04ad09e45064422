package kservev1

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
)

// twoInputs is a tensor model with inputs a FP32 [-1, 2, 2] and b INT64
// [-1]; only its Specs are used.
type twoInputs struct{ specs []oip.Spec }

func (m twoInputs) Name() string        { return "m" }
func (m twoInputs) Ready() bool         { return true }
func (m twoInputs) Platform() string    { return "onnx" }
func (m twoInputs) Inputs() []oip.Spec  { return m.specs }
func (m twoInputs) Outputs() []oip.Spec { return nil }
func (m twoInputs) MaxRequestRows() int { return 8 }
func (m twoInputs) Infer(context.Context, []oip.Tensor) ([]oip.Tensor, error) {
	return nil, nil
}

func TestDecodeTensorInstances(t *testing.T) {
	one := twoInputs{[]oip.Spec{{Name: "a", DType: oip.FP32, Shape: []int64{-1, 2, 2}}}}
	two := twoInputs{[]oip.Spec{{Name: "a", DType: oip.FP32, Shape: []int64{-1, 2}}, {Name: "b", DType: oip.INT64, Shape: []int64{-1}}}}
	for _, tc := range []struct {
		name   string
		model  twoInputs
		body   string
		shapes [][]int64
		data   []any
		err    string
	}{
		{"rows of one input", one, `{"instances": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]}`, [][]int64{{2, 2, 2}}, []any{[]float32{1, 2, 3, 4, 5, 6, 7, 8}}, ""},
		{"objects for two inputs", two, `{"instances": [{"a": [1, 2], "b": 3}, {"b": 4, "a": [5, 6]}]}`, [][]int64{{2, 2}, {2}}, []any{[]float32{1, 2, 5, 6}, []int64{3, 4}}, ""},
		{"ragged rows", one, `{"instances": [[[1, 2], [3, 4]], [[5, 6]]]}`, nil, nil, `instances[1] (input "a") has shape [1 2] but instances[0] has [2 2]`},
		{"not rectangular", one, `{"instances": [[[1, 2], [3]]]}`, nil, nil, "not rectangular"},
		{"missing input", two, `{"instances": [{"a": [1, 2]}]}`, nil, nil, `instances[0]: input "b" is missing`},
		{"unknown input", two, `{"instances": [{"a": [1, 2], "b": 1, "c": 2}]}`, nil, nil, `instances[0]: "c" is not an input`},
		{"not objects", two, `{"instances": [[1, 2]]}`, nil, nil, "must be an object"},
		{"fraction for INT64", two, `{"instances": [{"a": [1, 2], "b": 1.5}]}`, nil, nil, `input "b"`},
		{"no instances", one, `{}`, nil, nil, "instances is required"},
		{"empty", one, `{"instances": []}`, nil, nil, "instances is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := decodeTensorInstances([]byte(tc.body), tc.model)
			if tc.err != "" {
				if err == nil || infer.AsError(err).Code != infer.Invalid || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want Invalid with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range r.Inputs {
				if !reflect.DeepEqual(in.Shape, tc.shapes[i]) || !reflect.DeepEqual(in.JSONData(), tc.data[i]) {
					t.Fatalf("input %s: shape %v data %v, want %v %v", in.Name, in.Shape, in.JSONData(), tc.shapes[i], tc.data[i])
				}
			}
		})
	}
}

func TestTensorPredictions(t *testing.T) {
	y := infer.NewFP32Tensor("y", []int64{2, 2, 1}, []float32{1, 2, 3, 4})
	label := infer.FromTensor(oip.Tensor{Name: "label", DType: oip.INT64, Shape: []int64{2}, I64: []int64{7, 8}})
	for _, tc := range []struct {
		outs []*infer.Tensor
		want string
	}{
		{[]*infer.Tensor{y}, `[[[1],[2]],[[3],[4]]]`},
		{[]*infer.Tensor{label}, `[7,8]`},
		{[]*infer.Tensor{y, label}, `[{"label":7,"y":[[1],[2]]},{"label":8,"y":[[3],[4]]}]`},
	} {
		b, _ := json.Marshal(tensorPredictions(tc.outs))
		if string(b) != tc.want {
			t.Errorf("predictions %s, want %s", b, tc.want)
		}
	}
}
