package kservev1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
)

// decodeTensorInstances reads KServe V1's row format for a tensor model:
// {"instances": [row, ...]} where, for a model with one input, a row is
// that input's value for one batch row (a number or nested arrays of the
// input's shape without its batch dimension), and for a model with several
// inputs an object {"input name": row value, ...}. Each input becomes one
// V2 tensor of shape [len(instances), ...row shape] in the model's
// datatype; RunTensor checks the rest.
func decodeTensorInstances(body []byte, t infer.Signature) (*infer.Request, error) {
	rows, err := instancesOf(body, "row", "a list of rows, one per batch element")
	if err != nil {
		return nil, err
	}
	specs := t.Inputs()
	values := make([][]json.RawMessage, len(specs)) // per input, per row
	for i, raw := range rows {
		if len(specs) == 1 {
			values[0] = append(values[0], raw)
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, infer.Errorf(infer.Invalid, "instances[%d] must be an object {\"input name\": value, ...}: the model has %d inputs", i, len(specs))
		}
		for name := range obj {
			if !slices.ContainsFunc(specs, func(s oip.Spec) bool { return s.Name == name }) {
				return nil, infer.Errorf(infer.Invalid, "instances[%d]: %q is not an input of the model", i, name)
			}
		}
		for j, s := range specs {
			v, ok := obj[s.Name]
			if !ok {
				return nil, infer.Errorf(infer.Invalid, "instances[%d]: input %q is missing", i, s.Name)
			}
			values[j] = append(values[j], v)
		}
	}
	r := &infer.Request{}
	for j, s := range specs {
		var shape []int64
		for i, v := range values[j] {
			sh, err := jsonShape(v)
			if err != nil {
				return nil, infer.Errorf(infer.Invalid, "instances[%d] (input %q): %v", i, s.Name, err)
			}
			if i == 0 {
				shape = sh
			} else if !slices.Equal(sh, shape) {
				return nil, infer.Errorf(infer.Invalid, "instances[%d] (input %q) has shape %v but instances[0] has %v; every row needs the same", i, s.Name, sh, shape)
			}
		}
		var all bytes.Buffer
		all.WriteByte('[')
		for i, v := range values[j] {
			if i > 0 {
				all.WriteByte(',')
			}
			all.Write(v)
		}
		all.WriteByte(']')
		in := &infer.Tensor{Name: s.Name, Datatype: infer.Datatype(s.DType), Shape: append([]int64{int64(len(rows))}, shape...)}
		if err := in.SetJSONData(all.Bytes()); err != nil {
			return nil, infer.Errorf(infer.Invalid, "instances (input %q): %v", s.Name, err)
		}
		r.Inputs = append(r.Inputs, in)
	}
	return r, nil
}

// jsonShape is the shape of a JSON number or of nested arrays of numbers,
// which must be rectangular.
func jsonShape(raw json.RawMessage) ([]int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("not a number or an array of numbers: %w", err)
	}
	var inner []int64
	for i, e := range elems {
		sh, err := jsonShape(e)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			inner = sh
		} else if !slices.Equal(sh, inner) {
			return nil, fmt.Errorf("the arrays are not rectangular: element %d has shape %v, element 0 %v", i, sh, inner)
		}
	}
	return append([]int64{int64(len(elems))}, inner...), nil
}

// tensorPredictions turns the outputs into one prediction per row: the
// row's value of the single output (nested as its shape), or with several
// outputs an object {"output name": value}.
func tensorPredictions(outs []*infer.Tensor) []any {
	if len(outs) == 0 || len(outs[0].Shape) == 0 {
		return nil
	}
	n := int(outs[0].Shape[0])
	preds := make([]any, n)
	for i := range n {
		if len(outs) == 1 {
			preds[i] = rowValue(outs[0], i)
			continue
		}
		obj := make(map[string]any, len(outs))
		for _, o := range outs {
			obj[o.Name] = rowValue(o, i)
		}
		preds[i] = obj
	}
	return preds
}

// rowValue is row i of t, nested as t's shape without the batch
// dimension (a scalar for a [batch] tensor).
func rowValue(t *infer.Tensor, i int) any {
	flat := t.JSONData()
	per := 1
	for _, d := range t.Shape[1:] {
		per *= int(d)
	}
	switch f := flat.(type) {
	case []float32:
		return nest(f[i*per:(i+1)*per], t.Shape[1:])
	case []int64:
		return nest(f[i*per:(i+1)*per], t.Shape[1:])
	case []any: // floats with "NaN", "Infinity", "-Infinity"
		return nest(f[i*per:(i+1)*per], t.Shape[1:])
	}
	return nil
}

func nest[E any](flat []E, shape []int64) any {
	if len(shape) == 0 {
		return flat[0]
	}
	if len(shape) == 1 {
		return flat
	}
	n := int(shape[0])
	per := len(flat) / max(n, 1)
	out := make([]any, n)
	for i := range n {
		out[i] = nest(flat[i*per:(i+1)*per], shape[1:])
	}
	return out
}
