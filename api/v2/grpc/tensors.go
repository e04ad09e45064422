package v2grpc

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// decodeRequest turns a ModelInferRequest into the protocol-independent
// request. raw says whether the inputs came as raw_input_contents (then
// the outputs go back as raw_output_contents). Errors are Invalid.
func decodeRequest(req *pb.ModelInferRequest) (r *infer.Request, raw bool, err error) {
	r = &infer.Request{ID: req.GetId()}
	if r.Parameters, err = infer.ParametersFromProto(req.GetParameters()); err != nil {
		return nil, false, infer.Errorf(infer.Invalid, "parameters: %v", err)
	}
	ins := req.GetInputs()
	raws := req.GetRawInputContents()
	raw = len(raws) > 0
	if len(ins) == 0 {
		return nil, false, infer.Errorf(infer.Invalid, "inputs must list at least one tensor")
	}
	if raw && len(raws) != len(ins) {
		return nil, false, infer.Errorf(infer.Invalid, "raw_input_contents has %d entries for %d inputs; send one per input, in order, or use contents", len(raws), len(ins))
	}
	for i, in := range ins {
		if in.GetName() == "" {
			return nil, false, infer.Errorf(infer.Invalid, "inputs[%d].name is required", i)
		}
		where := fmt.Sprintf("input %q", trunc(in.GetName()))
		dt, err := infer.ParseDatatype(in.GetDatatype())
		if err != nil {
			return nil, false, infer.Errorf(infer.Invalid, "%s: %v", where, err)
		}
		t := &infer.Tensor{Name: in.GetName(), Datatype: dt, Shape: in.GetShape()}
		if t.Shape == nil {
			t.Shape = []int64{}
		}
		if t.Parameters, err = infer.ParametersFromProto(in.GetParameters()); err != nil {
			return nil, false, infer.Errorf(infer.Invalid, "%s: parameters: %v", where, err)
		}
		if raw {
			if hasContents(in.GetContents()) {
				return nil, false, infer.Errorf(infer.Invalid, "%s has contents while the request uses raw_input_contents; use one or the other for every input", where)
			}
			if err := t.SetBinary(raws[i]); err != nil {
				return nil, false, infer.Errorf(infer.Invalid, "%s: raw_input_contents[%d]: %v", where, i, err)
			}
		} else if err := setContents(t, in.GetContents()); err != nil {
			return nil, false, infer.Errorf(infer.Invalid, "%s: %v", where, err)
		}
		r.Inputs = append(r.Inputs, t)
	}
	for i, o := range req.GetOutputs() {
		if o.GetName() == "" {
			return nil, false, infer.Errorf(infer.Invalid, "outputs[%d].name is required", i)
		}
		p, err := infer.ParametersFromProto(o.GetParameters())
		if err != nil {
			return nil, false, infer.Errorf(infer.Invalid, "output %q: parameters: %v", trunc(o.GetName()), err)
		}
		r.Outputs = append(r.Outputs, infer.RequestedOutput{Name: o.GetName(), Parameters: p})
	}
	if err := r.CheckInputs(); err != nil {
		return nil, false, err
	}
	return r, raw, nil
}

func hasContents(c *pb.InferTensorContents) bool {
	return len(c.GetBoolContents())+len(c.GetIntContents())+len(c.GetInt64Contents())+len(c.GetUintContents())+
		len(c.GetUint64Contents())+len(c.GetFp32Contents())+len(c.GetFp64Contents())+len(c.GetBytesContents()) > 0
}

// setContents fills t from the typed contents field of its datatype; data
// in a field of another type is an error that names both.
func setContents(t *infer.Tensor, c *pb.InferTensorContents) error {
	fields := []struct {
		name string
		n    int
		dts  []infer.Datatype
	}{
		{"bool_contents", len(c.GetBoolContents()), []infer.Datatype{oip.BOOL}},
		{"int_contents", len(c.GetIntContents()), []infer.Datatype{oip.INT8, oip.INT16, oip.INT32}},
		{"int64_contents", len(c.GetInt64Contents()), []infer.Datatype{oip.INT64}},
		{"uint_contents", len(c.GetUintContents()), []infer.Datatype{oip.UINT8, oip.UINT16, oip.UINT32}},
		{"uint64_contents", len(c.GetUint64Contents()), []infer.Datatype{oip.UINT64}},
		{"fp32_contents", len(c.GetFp32Contents()), []infer.Datatype{oip.FP32}},
		{"fp64_contents", len(c.GetFp64Contents()), []infer.Datatype{oip.FP64}},
		{"bytes_contents", len(c.GetBytesContents()), []infer.Datatype{oip.BYTES}},
	}
	for _, f := range fields {
		if f.n == 0 {
			continue
		}
		ok := false
		for _, d := range f.dts {
			ok = ok || d == t.Datatype
		}
		if !ok {
			if t.Datatype == oip.FP16 {
				return fmt.Errorf("FP16 has no typed contents: send it in raw_input_contents")
			}
			return fmt.Errorf("datatype is %s but the data is in contents.%s; use %s", t.Datatype, f.name, contentsField(t.Datatype))
		}
	}
	size := t.Datatype.Size()
	put := func(v uint64) { t.Raw = infer.AppendElement(t.Raw, v, size) }
	switch t.Datatype {
	case oip.BOOL:
		for _, b := range c.GetBoolContents() {
			v := uint64(0)
			if b {
				v = 1
			}
			put(v)
		}
	case oip.INT8, oip.INT16, oip.INT32:
		lo, hi := int64(-1)<<(8*size-1), int64(1)<<(8*size-1)-1
		for i, v := range c.GetIntContents() {
			if int64(v) < lo || int64(v) > hi {
				return fmt.Errorf("int_contents[%d] = %d does not fit %s", i, v, t.Datatype)
			}
			put(uint64(v))
		}
	case oip.INT64:
		for _, v := range c.GetInt64Contents() {
			put(uint64(v))
		}
	case oip.UINT8, oip.UINT16, oip.UINT32:
		for i, v := range c.GetUintContents() {
			if uint64(v) > uint64(1)<<(8*size)-1 {
				return fmt.Errorf("uint_contents[%d] = %d does not fit %s", i, v, t.Datatype)
			}
			put(uint64(v))
		}
	case oip.UINT64:
		for _, v := range c.GetUint64Contents() {
			put(v)
		}
	case oip.FP32:
		for _, v := range c.GetFp32Contents() {
			put(uint64(math.Float32bits(v)))
		}
	case oip.FP64:
		for _, v := range c.GetFp64Contents() {
			put(math.Float64bits(v))
		}
	case oip.BYTES:
		t.Bytes = c.GetBytesContents()
	}
	if t.Raw == nil && t.Bytes == nil {
		n, err := infer.NumElements(t.Shape)
		if err == nil && n > 0 {
			if t.Datatype == oip.FP16 {
				return fmt.Errorf("FP16 has no typed contents: send it in raw_input_contents")
			}
			return fmt.Errorf("has no data: send contents.%s or raw_input_contents", contentsField(t.Datatype))
		}
	}
	return nil
}

// contentsField names the typed contents field of d (oip's table), or
// raw_input_contents for a datatype without one.
func contentsField(d infer.Datatype) string {
	if info, ok := oip.Lookup(d); ok && info.Contents != "" {
		return info.Contents
	}
	return "raw_input_contents"
}

// encodeResponse builds a ModelInferResponse: outputs in raw_output_contents
// when raw (or when one is FP16, which has no typed contents), else typed.
func encodeResponse(resp *infer.Response, raw bool) *pb.ModelInferResponse {
	out := &pb.ModelInferResponse{ModelName: resp.ModelName, ModelVersion: resp.ModelVersion, Id: resp.ID, Parameters: infer.ProtoParameters(resp.Parameters)}
	for _, t := range resp.Outputs {
		raw = raw || t.Datatype == oip.FP16
	}
	for _, t := range resp.Outputs {
		o := &pb.ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: string(t.Datatype), Shape: t.Shape, Parameters: infer.ProtoParameters(t.Parameters)}
		if raw {
			out.RawOutputContents = append(out.RawOutputContents, t.Binary())
		} else {
			o.Contents = typedContents(t)
		}
		out.Outputs = append(out.Outputs, o)
	}
	return out
}

func typedContents(t *infer.Tensor) *pb.InferTensorContents {
	c := &pb.InferTensorContents{}
	n := t.Len()
	ints := func(i int) int64 {
		v, _ := t.Int(i)
		return v
	}
	floats := func(i int) float64 {
		v, _ := t.Float(i)
		return v
	}
	switch d := t.Datatype; {
	case d == oip.BOOL:
		c.BoolContents = collect(len(t.Raw), func(i int) bool { return t.Raw[i] != 0 })
	case d == oip.BYTES:
		c.BytesContents = t.Bytes
	case d == oip.INT64:
		c.Int64Contents = collect(n, ints)
	case d.IsSigned():
		c.IntContents = collect(n, func(i int) int32 { return int32(ints(i)) })
	case d == oip.UINT64:
		c.Uint64Contents = collect(n, func(i int) uint64 { return binary.LittleEndian.Uint64(t.Raw[8*i:]) })
	case d.IsUnsigned():
		c.UintContents = collect(n, func(i int) uint32 { return uint32(ints(i)) })
	case d == oip.FP32:
		c.Fp32Contents = collect(n, func(i int) float32 { return float32(floats(i)) })
	case d == oip.FP64:
		c.Fp64Contents = collect(n, floats)
	}
	return c
}

// collect is the n values at(0), ..., at(n-1), nil when n is 0 (as the
// contents fields are when a tensor has no elements).
func collect[T any](n int, at func(i int) T) []T {
	var out []T
	for i := range n {
		out = append(out, at(i))
	}
	return out
}

func trunc(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}
