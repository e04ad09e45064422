package tritonv1

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// HeaderInferRequest, HeaderInferResponse and HeaderStatus are the v1
// API's HTTP headers.
const (
	HeaderInferRequest  = "NV-InferRequest"
	HeaderInferResponse = "NV-InferResponse"
	HeaderStatus        = "NV-Status"
)

// decoded is a v1 inference request in the V2 form the core serves.
type decoded struct {
	id    uint64
	batch uint32
	req   *infer.Request
	// outputs are the outputs asked for, in the header's order; none
	// means the model's default outputs, all raw.
	outputs []outputPlan
}

// outputPlan is one requested output: raw data, or the top cls classes
// of each batch entry.
type outputPlan struct {
	name string
	cls  int
}

// inputPlan is one input of a request, checked against the model.
type inputPlan struct {
	spec tensorSpec
	// shape is the V2 shape: the batch size first when the model batches.
	shape []int64
	n     int
	// byteSize is the header's batch_byte_size (0: not given).
	byteSize uint64
}

func invalid(format string, args ...any) error { return infer.Errorf(infer.Invalid, format, args...) }

// q quotes a client-given name for a message, cut to a sane length.
func q(s string) string {
	const max = 64
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return strconv.Quote(s)
}

// parseRequestHeader reads the NV-InferRequest header, a text
// InferRequestHeader.
func parseRequestHeader(v string, present bool) (*pb.InferRequestHeader, error) {
	if !present || strings.TrimSpace(v) == "" {
		return nil, invalid("the %s header is missing: send a text InferRequestHeader, such as %s: batch_size: 1 input { name: \"input\" } output { name: \"output\" }", HeaderInferRequest, HeaderInferRequest)
	}
	hdr := &pb.InferRequestHeader{}
	if err := prototext.Unmarshal([]byte(v), hdr); err != nil {
		// protobuf-go's errors put a non-breaking space after "proto:" at
		// random (so that nobody matches them); the message has a plain one.
		return nil, invalid("the %s header is not a text InferRequestHeader: %s", HeaderInferRequest, strings.ReplaceAll(err.Error(), "\u00a0", " "))
	}
	return hdr, nil
}

// plan checks a request header against the model: the batch size, every
// input's name and dims, every output's name and classification.
func plan(hdr *pb.InferRequestHeader, s *modelSpec) ([]inputPlan, []outputPlan, error) {
	batch := hdr.GetBatchSize()
	switch {
	case batch < 1:
		return nil, nil, invalid("%s: batch_size is %d; it must be at least 1 (model %q)", HeaderInferRequest, batch, s.Name)
	case s.MaxBatch == 0 && batch != 1:
		return nil, nil, invalid("%s: batch_size is %d, but model %q does not batch (max_batch_size 0): batch_size must be 1", HeaderInferRequest, batch, s.Name)
	case s.MaxBatch > 0 && int64(batch) > int64(s.MaxBatch):
		return nil, nil, invalid("%s: batch_size is %d, more than model %q's max_batch_size %d", HeaderInferRequest, batch, s.Name, s.MaxBatch)
	}
	var ins []inputPlan
	for _, in := range hdr.GetInput() {
		spec, ok := s.input(in.GetName())
		if !ok {
			return nil, nil, invalid("unexpected inference input %s for model %q: its inputs are %s", q(in.GetName()), s.Name, names(s.Inputs))
		}
		if slices.ContainsFunc(ins, func(p inputPlan) bool { return p.spec.Name == spec.Name }) {
			return nil, nil, invalid("input %q appears twice in %s", spec.Name, HeaderInferRequest)
		}
		dims, err := inputDims(spec, in.GetDims())
		if err != nil {
			return nil, nil, err
		}
		if spec.Reshape {
			dims = []int64{}
		}
		shape := dims
		if s.MaxBatch > 0 {
			shape = append([]int64{int64(batch)}, dims...)
		}
		n, err := infer.NumElements(shape)
		if err != nil {
			return nil, nil, invalid("input %q: %v", spec.Name, err)
		}
		ins = append(ins, inputPlan{spec: spec, shape: shape, n: n, byteSize: in.GetBatchByteSize()})
	}
	var outs []outputPlan
	for _, o := range hdr.GetOutput() {
		spec, ok := s.output(o.GetName())
		if !ok {
			return nil, nil, invalid("unexpected inference output %s for model %q: its outputs are %s", q(o.GetName()), s.Name, names(s.Outputs))
		}
		if slices.ContainsFunc(outs, func(p outputPlan) bool { return p.name == spec.Name }) {
			return nil, nil, invalid("output %q is requested twice in %s", spec.Name, HeaderInferRequest)
		}
		p := outputPlan{name: spec.Name}
		if c := o.GetCls(); c != nil {
			if c.GetCount() < 1 {
				return nil, nil, invalid("output %q: cls { count } is %d; ask for at least 1 class", spec.Name, c.GetCount())
			}
			if !classifiable(spec.Datatype) {
				return nil, nil, invalid("output %q is %s: cls (classification) needs a numeric output such as TYPE_FP32; ask for it raw", spec.Name, dataType(spec.Datatype))
			}
			p.cls = int(min(c.GetCount(), math.MaxInt32))
		}
		outs = append(outs, p)
	}
	return ins, outs, nil
}

// classifiable reports whether an output of datatype d can be classified.
func classifiable(d infer.Datatype) bool { return d.IsFloat() || d.IsInt() }

// inputDims checks the dims a request gives for an input (without the
// batch dimension) against the model's: the same rank, and every fixed
// dimension equal. None given means the model's, which must then be fixed.
func inputDims(spec tensorSpec, dims []int64) ([]int64, error) {
	if len(dims) == 0 {
		if slices.Contains(spec.Dims, -1) {
			return nil, invalid("input %q: the model's dims %s have a variable dimension (-1): give the input's dims in %s, such as input { name: %q dims: 1 }", spec.Name, dimsString(spec.Dims), HeaderInferRequest, spec.Name)
		}
		return slices.Clone(spec.Dims), nil
	}
	if len(dims) != len(spec.Dims) {
		return nil, invalid("input %q: dims %s have %d dimensions but the model takes %d: %s (without the batch dimension)", spec.Name, dimsString(dims), len(dims), len(spec.Dims), dimsString(spec.Dims))
	}
	for i, d := range dims {
		switch {
		case d < 0:
			return nil, invalid("input %q: dimension %d of dims %s is %d; dimensions must be 0 or more", spec.Name, i, dimsString(dims), d)
		case spec.Dims[i] >= 0 && d != spec.Dims[i]:
			return nil, invalid("input %q: dimension %d of dims %s is %d but the model takes %d (dims %s)", spec.Name, i, dimsString(dims), d, spec.Dims[i], dimsString(spec.Dims))
		}
	}
	return slices.Clone(dims), nil
}

// readInput decodes input p from the front of data (where says what data
// is, for messages) and returns how many bytes it took: the elements of
// its model datatype, little-endian, STRING (BYTES) elements each a 4-byte
// little-endian length and the bytes. batch_byte_size, when given, must be
// exactly what the elements take.
func readInput(p inputPlan, data []byte, where string) (*infer.Tensor, int, error) {
	name := p.spec.Name
	t := &infer.Tensor{Name: name, Datatype: p.spec.Datatype, Shape: p.shape}
	if p.byteSize > uint64(len(data)) {
		return nil, 0, invalid("input %q: batch_byte_size is %d but %s has only %d bytes for it", name, p.byteSize, where, len(data))
	}
	if p.spec.Datatype == oip.BYTES {
		buf := data
		if p.byteSize > 0 {
			buf = data[:p.byteSize]
		}
		used := 0
		t.Bytes = make([][]byte, 0, min(p.n, len(buf)/4))
		for i := range p.n {
			if len(buf)-used < 4 {
				return nil, 0, invalid("input %q: element %d of %d (TYPE_STRING, shape %s) needs a 4-byte length but %s has %d bytes left", name, i, p.n, dimsString(p.shape), where, len(buf)-used)
			}
			l := binary.LittleEndian.Uint32(buf[used:])
			used += 4
			if uint64(l) > uint64(len(buf)-used) {
				return nil, 0, invalid("input %q: element %d of %d (TYPE_STRING) has length %d but %s has %d bytes left", name, i, p.n, l, where, len(buf)-used)
			}
			t.Bytes = append(t.Bytes, buf[used:used+int(l)])
			used += int(l)
		}
		if p.byteSize > 0 && uint64(used) != p.byteSize {
			return nil, 0, invalid("input %q: batch_byte_size is %d but its %d strings (4-byte length and bytes each) take %d bytes", name, p.byteSize, p.n, used)
		}
		return t, used, nil
	}
	size := p.spec.Datatype.Size()
	if size == 0 {
		return nil, 0, invalid("input %q has datatype %s, which the v1 API cannot carry", name, p.spec.Datatype)
	}
	want := uint64(p.n) * uint64(size)
	if p.byteSize > 0 && p.byteSize != want {
		return nil, 0, invalid("input %q: batch_byte_size is %d but shape %s of %s takes %d bytes", name, p.byteSize, dimsString(p.shape), dataType(p.spec.Datatype), want)
	}
	if want > uint64(len(data)) {
		return nil, 0, invalid("input %q: shape %s of %s takes %d bytes but %s has only %d", name, dimsString(p.shape), dataType(p.spec.Datatype), want, where, len(data))
	}
	t.Raw = data[:want]
	if err := t.Check(); err != nil {
		return nil, 0, invalid("input %q: %v", name, err)
	}
	return t, int(want), nil
}

// decodeBody decodes an HTTP request: the header, and the body holding
// the inputs' data back to back in the header's order.
func decodeBody(hdr *pb.InferRequestHeader, s *modelSpec, body []byte) (*decoded, error) {
	ins, outs, err := plan(hdr, s)
	if err != nil {
		return nil, err
	}
	d := newDecoded(hdr, outs)
	off := 0
	for _, p := range ins {
		t, used, err := readInput(p, body[off:], "the request body")
		if err != nil {
			return nil, err
		}
		off += used
		d.req.Inputs = append(d.req.Inputs, t)
	}
	if off != len(body) {
		return nil, invalid("the request body has %d bytes but the inputs %s describes take %d: the body must hold exactly the inputs' data, in the header's order", len(body), HeaderInferRequest, off)
	}
	return d, nil
}

// decodeRaw decodes a gRPC request: the header, and one raw_input per
// input in the header's order.
func decodeRaw(hdr *pb.InferRequestHeader, s *modelSpec, raw [][]byte) (*decoded, error) {
	if hdr == nil {
		return nil, invalid("meta_data (the InferRequestHeader) is missing: it gives batch_size, the inputs and the outputs")
	}
	ins, outs, err := plan(hdr, s)
	if err != nil {
		return nil, err
	}
	if len(raw) != len(ins) {
		return nil, invalid("the request has %d raw_input but meta_data lists %d inputs: send one raw_input per input, in meta_data's order", len(raw), len(ins))
	}
	d := newDecoded(hdr, outs)
	for i, p := range ins {
		where := "raw_input[" + strconv.Itoa(i) + "]"
		t, used, err := readInput(p, raw[i], where)
		if err != nil {
			return nil, err
		}
		if used != len(raw[i]) {
			return nil, invalid("input %q: %s has %d bytes but shape %s of %s takes %d", p.spec.Name, where, len(raw[i]), dimsString(p.shape), dataType(p.spec.Datatype), used)
		}
		d.req.Inputs = append(d.req.Inputs, t)
	}
	return d, nil
}

func newDecoded(hdr *pb.InferRequestHeader, outs []outputPlan) *decoded {
	d := &decoded{id: hdr.GetId(), batch: hdr.GetBatchSize(), req: &infer.Request{ID: strconv.FormatUint(hdr.GetId(), 10)}, outputs: outs}
	for _, o := range outs {
		d.req.Outputs = append(d.req.Outputs, infer.RequestedOutput{Name: o.name})
	}
	return d
}

// encodeResponse turns the core's answer into the response header and the
// raw outputs' data, in the order of the request's outputs (the answer's
// order when it asked for none). Classified outputs carry their classes in
// the header and no data.
func encodeResponse(s *modelSpec, d *decoded, resp *infer.Response) (*pb.InferResponseHeader, [][]byte, error) {
	h := &pb.InferResponseHeader{Id: d.id, ModelName: s.Name, ModelVersion: s.versionNumber(), BatchSize: d.batch}
	outs := d.outputs
	if len(outs) == 0 {
		for _, t := range resp.Outputs {
			outs = append(outs, outputPlan{name: t.Name})
		}
	}
	var raw [][]byte
	for _, o := range outs {
		i := slices.IndexFunc(resp.Outputs, func(t *infer.Tensor) bool { return t.Name == o.name })
		if i < 0 {
			return nil, nil, infer.Errorf(infer.Internal, "model %q did not produce output %q", s.Name, o.name)
		}
		t := resp.Outputs[i]
		if o.cls > 0 {
			rows := 1
			if s.MaxBatch > 0 && len(t.Shape) > 0 {
				rows = int(t.Shape[0])
			}
			classes, err := classify(t, rows, o.cls)
			if err != nil {
				return nil, nil, err
			}
			h.Output = append(h.Output, &pb.InferResponseHeader_Output{Name: t.Name, BatchClasses: classes})
			// An empty raw entry, as v1.2.0's GRPCInferResponseProvider
			// allocates one for every output: the official client takes
			// raw_output(i) for output i.
			raw = append(raw, nil)
			continue
		}
		data := tensorBytes(t)
		h.Output = append(h.Output, &pb.InferResponseHeader_Output{Name: t.Name, Raw: &pb.InferResponseHeader_Output_Raw{
			Dims: s.v1Dims(t.Name, t.Shape), BatchByteSize: uint64(len(data)),
		}})
		raw = append(raw, data)
	}
	return h, raw, nil
}

// tensorBytes is a tensor's data in the v1 wire form.
func tensorBytes(t *infer.Tensor) []byte {
	if t.Datatype != oip.BYTES {
		return t.Raw
	}
	n := 0
	for _, b := range t.Bytes {
		n += 4 + len(b)
	}
	out := make([]byte, 0, n)
	for _, b := range t.Bytes {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

// classify returns the k highest values of each of rows batch entries of
// t, highest first, equal values by index: the v1 API's classification.
// A NaN ranks below every number. Labels are empty: llmserve's models
// carry no label files.
func classify(t *infer.Tensor, rows, k int) ([]*pb.InferResponseHeader_Output_Classes, error) {
	n := t.Len()
	if rows < 1 || n%rows != 0 {
		return nil, infer.Errorf(infer.Internal, "output %q has %d values, which do not split into %d batch entries", t.Name, n, rows)
	}
	per := n / rows
	vals := make([]float64, per)
	idx := make([]int, per)
	out := make([]*pb.InferResponseHeader_Output_Classes, rows)
	for r := range rows {
		for i := range per {
			v, ok := t.Float(r*per + i)
			if !ok {
				return nil, infer.Errorf(infer.Internal, "output %q (%s) is not numeric and cannot be classified", t.Name, t.Datatype)
			}
			vals[i], idx[i] = v, i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			va, vb := vals[a], vals[b]
			switch na, nb := math.IsNaN(va), math.IsNaN(vb); {
			case na && nb:
				return 0
			case na:
				return 1
			case nb:
				return -1
			}
			return cmp.Compare(vb, va)
		})
		c := &pb.InferResponseHeader_Output_Classes{}
		for _, i := range idx[:min(k, per)] {
			c.Cls = append(c.Cls, &pb.InferResponseHeader_Output_Class{Idx: int32(i), Value: float32(vals[i])})
		}
		out[r] = c
	}
	return out, nil
}
