package v2

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// headerLength is the binary tensor data extension's header: the length
// of the JSON part of a body that has binary tensor data after it.
const headerLength = "Inference-Header-Content-Length"

// Binary extension parameters.
const (
	paramBinarySize   = "binary_data_size"
	paramBinary       = "binary_data"
	paramBinaryOutput = "binary_data_output"
)

type wireRequest struct {
	ID         json.RawMessage `json:"id"`
	Parameters json.RawMessage `json:"parameters"`
	Inputs     []wireInput     `json:"inputs"`
	Outputs    []wireOutput    `json:"outputs"`
}

type wireInput struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters json.RawMessage `json:"parameters"`
	Data       json.RawMessage `json:"data"`
}

type wireOutput struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

// decodedRequest is an inference request with what the wire adds to it.
type decodedRequest struct {
	*infer.Request
	// binaryOut says, per output name, whether it goes back as binary
	// data; binaryAll is the request's binary_data_output.
	binaryOut map[string]bool
	binaryAll bool
}

// decodeInfer decodes an inference request body. header is the value of
// Inference-Header-Content-Length ("" when absent). Every error is an
// *infer.Error of kind Invalid.
func decodeInfer(body []byte, header string) (*decodedRequest, error) {
	jsonPart, binPart := body, []byte(nil)
	if header != "" {
		n, err := strconv.ParseInt(header, 10, 64)
		if err != nil || n < 0 {
			return nil, infer.Errorf(infer.Invalid, "header %s must be a byte count (0 or more), got %q", headerLength, trunc(header))
		}
		if n > int64(len(body)) {
			return nil, infer.Errorf(infer.Invalid, "header %s is %d but the body has only %d bytes", headerLength, n, len(body))
		}
		if n == 0 {
			return rawBinaryRequest(body), nil
		}
		jsonPart, binPart = body[:n], body[n:]
	}
	var w wireRequest
	if !decodeHead(jsonPart, &w) {
		w = wireRequest{}
		if err := strictJSON(jsonPart, &w); err != nil {
			return nil, err
		}
	}
	req := &infer.Request{}
	if len(w.ID) > 0 && string(w.ID) != "null" {
		if err := json.Unmarshal(w.ID, &req.ID); err != nil {
			return nil, infer.Errorf(infer.Invalid, "id must be a string")
		}
	}
	var err error
	if req.Parameters, err = infer.DecodeParameters(w.Parameters); err != nil {
		return nil, infer.Errorf(infer.Invalid, "%v", err)
	}
	d := &decodedRequest{Request: req, binaryOut: map[string]bool{}}
	if d.binaryAll, _, err = req.Parameters.Bool(paramBinaryOutput); err != nil {
		return nil, infer.Errorf(infer.Invalid, "%v", err)
	}
	delete(req.Parameters, paramBinaryOutput)
	if len(w.Inputs) == 0 {
		return nil, infer.Errorf(infer.Invalid, "inputs must list at least one tensor")
	}
	off := 0
	for i, in := range w.Inputs {
		t, err := decodeInput(i, &in, binPart, &off)
		if err != nil {
			return nil, err
		}
		req.Inputs = append(req.Inputs, t)
	}
	if off != len(binPart) {
		return nil, infer.Errorf(infer.Invalid, "the body has %d bytes of binary data after the JSON header but the inputs' binary_data_size add up to %d", len(binPart), off)
	}
	for i, o := range w.Outputs {
		if o.Name == "" {
			return nil, infer.Errorf(infer.Invalid, "outputs[%d].name is required", i)
		}
		p, err := infer.DecodeParameters(o.Parameters)
		if err != nil {
			return nil, infer.Errorf(infer.Invalid, "outputs[%d] (%q): %v", i, trunc(o.Name), err)
		}
		b, ok, err := p.Bool(paramBinary)
		if err != nil {
			return nil, infer.Errorf(infer.Invalid, "outputs[%d] (%q): %v", i, trunc(o.Name), err)
		}
		if ok {
			d.binaryOut[o.Name] = b
		}
		delete(p, paramBinary)
		req.Outputs = append(req.Outputs, infer.RequestedOutput{Name: o.Name, Parameters: p})
	}
	return d, req.CheckInputs()
}

func decodeInput(i int, in *wireInput, binPart []byte, off *int) (*infer.Tensor, error) {
	if in.Name == "" {
		return nil, infer.Errorf(infer.Invalid, "inputs[%d].name is required", i)
	}
	where := func() string { return fmt.Sprintf("input %q", trunc(in.Name)) } // for errors only
	dt, err := infer.ParseDatatype(in.Datatype)
	if err != nil {
		return nil, infer.Errorf(infer.Invalid, "%s: %v", where(), err)
	}
	if in.Shape == nil {
		return nil, infer.Errorf(infer.Invalid, "%s: shape is required", where())
	}
	t := &infer.Tensor{Name: in.Name, Datatype: dt, Shape: in.Shape}
	if t.Parameters, err = infer.DecodeParameters(in.Parameters); err != nil {
		return nil, infer.Errorf(infer.Invalid, "%s: %v", where(), err)
	}
	size, hasBin, err := t.Parameters.Int64(paramBinarySize)
	if err != nil {
		return nil, infer.Errorf(infer.Invalid, "%s: %v", where(), err)
	}
	delete(t.Parameters, paramBinarySize)
	hasData := len(in.Data) > 0 && string(in.Data) != "null"
	switch {
	case hasBin && hasData:
		return nil, infer.Errorf(infer.Invalid, "%s has both data and binary_data_size; send one", where())
	case hasBin:
		if size < 0 {
			return nil, infer.Errorf(infer.Invalid, "%s: binary_data_size must be 0 or more, got %d", where(), size)
		}
		if int64(len(binPart)-*off) < size {
			return nil, infer.Errorf(infer.Invalid, "%s: binary_data_size is %d but only %d bytes of binary data are left in the body (is it truncated, or %s wrong?)", where(), size, len(binPart)-*off, headerLength)
		}
		raw := binPart[*off : *off+int(size)]
		*off += int(size)
		if err := t.SetBinary(raw); err != nil {
			return nil, infer.Errorf(infer.Invalid, "%s: %v", where(), err)
		}
	case hasData:
		if err := t.SetJSONData(in.Data); err != nil {
			return nil, infer.Errorf(infer.Invalid, "%s: %v", where(), err)
		}
	default:
		return nil, infer.Errorf(infer.Invalid, "%s has no data: send data, or binary_data_size with the bytes after the JSON header", where())
	}
	return t, nil
}

// rawBinaryRequest is the extension's raw binary request (header length
// 0): the whole body is the one input, text_input, and every output goes
// back as binary data. The body may be the BYTES binary form of one
// element or, as plain text, the element itself.
func rawBinaryRequest(body []byte) *decodedRequest {
	elem := body
	if b, err := infer.DecodeBytes(body); err == nil && len(b) == 1 {
		elem = b[0]
	}
	t := infer.NewBytesTensor(infer.InputText, []int64{1}, [][]byte{elem})
	return &decodedRequest{Request: &infer.Request{Inputs: []*infer.Tensor{t}}, binaryOut: map[string]bool{}, binaryAll: true}
}

// strictJSON decodes one JSON value into v; a syntax or type error is
// Invalid with a message that says where.
func strictJSON(b []byte, v any) error {
	if json.Unmarshal(b, v) == nil {
		// The same acceptance as below (one value, then only spaces),
		// without a Decoder's buffer; a failure is decoded again below
		// for its message.
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return infer.Errorf(infer.Invalid, "the body is not valid JSON: %v (at byte %d)", se, se.Offset)
		case errors.As(err, &te):
			return infer.Errorf(infer.Invalid, "field %s must be %s, not a JSON %s", te.Field, te.Type, te.Value)
		}
		return infer.Errorf(infer.Invalid, "the body is not a valid JSON object: %v", err)
	}
	if dec.More() {
		return infer.Errorf(infer.Invalid, "the JSON header has content after its object (binary data needs the %s header)", headerLength)
	}
	return nil
}

type wireResponse struct {
	ModelName    string           `json:"model_name"`
	ModelVersion string           `json:"model_version,omitempty"`
	ID           string           `json:"id,omitempty"`
	Parameters   infer.Parameters `json:"parameters,omitempty"`
	Outputs      []wireTensorOut  `json:"outputs"`
}

type wireTensorOut struct {
	Name       string           `json:"name"`
	Datatype   infer.Datatype   `json:"datatype"`
	Shape      []int64          `json:"shape"`
	Parameters infer.Parameters `json:"parameters,omitempty"`
	Data       any              `json:"data,omitempty"`
}

// encodeInfer encodes a response: JSON only, or the JSON header and the
// binary data of the outputs asked for as binary. n is the header's length
// when binary data follows it, else -1.
func encodeInfer(d *decodedRequest, resp *infer.Response) (body []byte, n int, err error) {
	w := wireResponse{ModelName: resp.ModelName, ModelVersion: resp.ModelVersion, ID: resp.ID, Parameters: resp.Parameters}
	var bin [][]byte
	sizes := make([]int64, len(resp.Outputs)) // binary_data_size, -1 for none
	binBytes := 0
	for i, t := range resp.Outputs {
		o := wireTensorOut{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape, Parameters: t.Parameters}
		binary := d.binaryAll
		if b, ok := d.binaryOut[t.Name]; ok {
			binary = b
		}
		sizes[i] = -1
		if binary {
			raw := t.Binary()
			sizes[i] = int64(len(raw))
			bin = append(bin, raw)
			binBytes += len(raw)
		} else {
			o.Data = t.JSONData()
		}
		w.Outputs = append(w.Outputs, o)
	}
	js, ok := appendHead(make([]byte, 0, 256+binBytes), &w, sizes)
	if !ok {
		// encoding/json, with binary_data_size in a copy of each binary
		// output's parameters.
		for i := range w.Outputs {
			if sizes[i] >= 0 {
				p := maps.Clone(w.Outputs[i].Parameters)
				if p == nil {
					p = infer.Parameters{}
				}
				p[paramBinarySize] = sizes[i]
				w.Outputs[i].Parameters = p
			}
		}
		if js, err = json.Marshal(w); err != nil {
			return nil, 0, err
		}
	}
	if len(bin) == 0 {
		return js, -1, nil
	}
	n = len(js)
	for _, b := range bin {
		js = append(js, b...)
	}
	return js, n, nil
}

func trunc(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return string(bytes.ToValidUTF8([]byte(s[:max]), nil)) + "…"
}
