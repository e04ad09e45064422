package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/oip"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// elemSize is the size of one element of a V2 datatype in bytes (oip's
// table): 0 for BYTES (variable) and -1 for a name that is not a V2
// datatype.
func elemSize(dt string) int {
	info, ok := oip.Lookup(oip.Datatype(dt))
	if !ok {
		return -1
	}
	return info.Size
}

// numElements is the product of shape, or an error for a negative
// dimension or an overflow.
func numElements(shape []int64) (int, error) {
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape[%d] is %d", i, d)
		}
		if d > 0 && n > math.MaxInt32/d {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= d
	}
	return int(n), nil
}

// bytesElems counts the elements of BYTES data in the binary form (each a
// 4-byte little-endian length, then its bytes) and returns the offset
// where each element begins, plus the end.
func bytesElems(raw []byte) ([]int, error) {
	var offs []int
	off := 0
	for off < len(raw) {
		offs = append(offs, off)
		if len(raw)-off < 4 {
			return nil, fmt.Errorf("BYTES data is cut inside the length of element %d", len(offs)-1)
		}
		n := int(binary.LittleEndian.Uint32(raw[off:]))
		if n > len(raw)-off-4 {
			return nil, fmt.Errorf("BYTES element %d says it has %d bytes but %d are left", len(offs)-1, n, len(raw)-off-4)
		}
		off += 4 + n
	}
	return append(offs, off), nil
}

// checkRaw verifies that raw holds the elements of a tensor of this
// datatype and shape.
func checkRaw(dt string, shape []int64, raw []byte) error {
	n, err := numElements(shape)
	if err != nil {
		return err
	}
	switch size := elemSize(dt); {
	case size < 0:
		return fmt.Errorf("datatype %q is not a V2 datatype", dt)
	case size == 0:
		offs, err := bytesElems(raw)
		if err != nil {
			return err
		}
		if len(offs)-1 != n {
			return fmt.Errorf("shape %v has %d elements but the BYTES data has %d", shape, n, len(offs)-1)
		}
	case len(raw) != n*size:
		return fmt.Errorf("shape %v of %s needs %d bytes but the data has %d", shape, dt, n*size, len(raw))
	}
	return nil
}

// typedToRaw is the binary form of a tensor sent in typed contents (the
// protocol's other encoding), so that everything downstream reads one
// form. FP16 has no typed field; BOOL is one byte 0 or 1.
func typedToRaw(dt string, c *pb.InferTensorContents) ([]byte, error) {
	var out []byte
	put32 := func(v uint32) { out = binary.LittleEndian.AppendUint32(out, v) }
	put64 := func(v uint64) { out = binary.LittleEndian.AppendUint64(out, v) }
	switch dt {
	case "BOOL":
		for _, v := range c.GetBoolContents() {
			if v {
				out = append(out, 1)
			} else {
				out = append(out, 0)
			}
		}
	case "INT8":
		for _, v := range c.GetIntContents() {
			out = append(out, byte(int8(v)))
		}
	case "INT16":
		for _, v := range c.GetIntContents() {
			out = binary.LittleEndian.AppendUint16(out, uint16(int16(v)))
		}
	case "INT32":
		for _, v := range c.GetIntContents() {
			put32(uint32(v))
		}
	case "INT64":
		for _, v := range c.GetInt64Contents() {
			put64(uint64(v))
		}
	case "UINT8":
		for _, v := range c.GetUintContents() {
			out = append(out, byte(v))
		}
	case "UINT16":
		for _, v := range c.GetUintContents() {
			out = binary.LittleEndian.AppendUint16(out, uint16(v))
		}
	case "UINT32":
		for _, v := range c.GetUintContents() {
			put32(v)
		}
	case "UINT64":
		for _, v := range c.GetUint64Contents() {
			put64(v)
		}
	case "FP32":
		for _, v := range c.GetFp32Contents() {
			put32(math.Float32bits(v))
		}
	case "FP64":
		for _, v := range c.GetFp64Contents() {
			put64(math.Float64bits(v))
		}
	case "BYTES":
		for _, v := range c.GetBytesContents() {
			put32(uint32(len(v)))
			out = append(out, v...)
		}
	default:
		return nil, fmt.Errorf("datatype %q cannot be sent in typed contents (send raw contents)", dt)
	}
	return out, nil
}

// normalizeResponse puts every output of a runtime's answer in
// raw_output_contents (converting typed contents) and checks each one's
// data against its datatype and shape. Its errors say what is malformed.
func normalizeResponse(resp *pb.ModelInferResponse) error {
	outs := resp.GetOutputs()
	raw := resp.GetRawOutputContents()
	if len(raw) != 0 && len(raw) != len(outs) {
		return fmt.Errorf("it has %d outputs but %d raw_output_contents", len(outs), len(raw))
	}
	norm := make([][]byte, len(outs))
	for i, o := range outs {
		if o.GetName() == "" {
			return fmt.Errorf("output %d has no name", i)
		}
		if elemSize(o.GetDatatype()) < 0 {
			return fmt.Errorf("output %q has datatype %q, which is not a V2 datatype", o.GetName(), o.GetDatatype())
		}
		if len(raw) != 0 {
			norm[i] = raw[i]
		} else {
			b, err := typedToRaw(o.GetDatatype(), o.GetContents())
			if err != nil {
				return fmt.Errorf("output %q: %w", o.GetName(), err)
			}
			norm[i] = b
		}
		if err := checkRaw(o.GetDatatype(), o.GetShape(), norm[i]); err != nil {
			return fmt.Errorf("output %q: %w", o.GetName(), err)
		}
		o.Contents = nil
	}
	resp.RawOutputContents = norm
	return nil
}

// rowsOf is the batch size of a request: shape[0] of its inputs, which
// must all agree and be at least 1; 0 when the request cannot be batched.
func rowsOf(req *pb.ModelInferRequest) int {
	rows := int64(-1)
	for _, in := range req.GetInputs() {
		sh := in.GetShape()
		if len(sh) == 0 || sh[0] < 1 || (rows >= 0 && sh[0] != rows) {
			return 0
		}
		rows = sh[0]
	}
	if rows < 1 || rows > math.MaxInt32 {
		return 0
	}
	return int(rows)
}

// batchKey says which requests may share a batch: the same inputs (names,
// datatypes, dimensions after the first, parameters), the same requested
// outputs and the same request parameters. "" means never batched.
func batchKey(req *pb.ModelInferRequest) string {
	if rowsOf(req) == 0 {
		return ""
	}
	var b strings.Builder
	mo := proto.MarshalOptions{Deterministic: true}
	param := func(p map[string]*pb.InferParameter) {
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, _ := mo.Marshal(p[k])
			fmt.Fprintf(&b, "%q=%x;", k, v)
		}
	}
	param(req.GetParameters())
	for _, in := range req.GetInputs() {
		fmt.Fprintf(&b, "|in %q %s %v ", in.GetName(), in.GetDatatype(), in.GetShape()[1:])
		param(in.GetParameters())
	}
	for _, o := range req.GetOutputs() {
		fmt.Fprintf(&b, "|out %q ", o.GetName())
		param(o.GetParameters())
	}
	return b.String()
}

// mergeRequests concatenates the requests' inputs along the first
// dimension into one request. They share a batchKey, and every input is
// in raw_input_contents.
func mergeRequests(reqs []*pb.ModelInferRequest, rows int) *pb.ModelInferRequest {
	first := reqs[0]
	m := &pb.ModelInferRequest{
		ModelName: first.GetModelName(), ModelVersion: first.GetModelVersion(), Id: first.GetId(),
		Parameters: first.GetParameters(), Outputs: first.GetOutputs(),
	}
	for i, in := range first.GetInputs() {
		shape := slices.Clone(in.GetShape())
		shape[0] = int64(rows)
		m.Inputs = append(m.Inputs, &pb.ModelInferRequest_InferInputTensor{
			Name: in.GetName(), Datatype: in.GetDatatype(), Shape: shape, Parameters: in.GetParameters(),
		})
		n := 0
		for _, r := range reqs {
			n += len(r.GetRawInputContents()[i])
		}
		buf := make([]byte, 0, n)
		for _, r := range reqs {
			buf = append(buf, r.GetRawInputContents()[i]...)
		}
		m.RawInputContents = append(m.RawInputContents, buf)
	}
	return m
}

// splitResponse cuts a batch's answer (normalized) into one answer per
// request, by each request's rows. Every output's first dimension must be
// the batch's rows: a batched model answers one row per input row.
func splitResponse(resp *pb.ModelInferResponse, rows []int) ([]*pb.ModelInferResponse, error) {
	total := 0
	for _, r := range rows {
		total += r
	}
	outs := make([]*pb.ModelInferResponse, len(rows))
	for j := range outs {
		outs[j] = &pb.ModelInferResponse{
			ModelName: resp.GetModelName(), ModelVersion: resp.GetModelVersion(), Parameters: resp.GetParameters(),
		}
	}
	for i, o := range resp.GetOutputs() {
		sh := o.GetShape()
		if len(sh) == 0 || sh[0] != int64(total) {
			return nil, fmt.Errorf("output %q has shape %v but the batch it answers has %d rows (from %d requests merged by adaptive batching): a batched model returns one row per input row, shape [%d, ...]", o.GetName(), sh, total, len(rows), total)
		}
		data := resp.GetRawOutputContents()[i]
		perRow, err := numElements(sh[1:])
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.GetName(), err)
		}
		var cut []int // byte offset where each row begins, then the end
		if size := elemSize(o.GetDatatype()); size > 0 {
			for r := 0; r <= total; r++ {
				cut = append(cut, r*perRow*size)
			}
		} else {
			offs, err := bytesElems(data)
			if err != nil {
				return nil, fmt.Errorf("output %q: %w", o.GetName(), err)
			}
			for r := 0; r <= total; r++ {
				cut = append(cut, offs[r*perRow])
			}
		}
		row := 0
		for j, n := range rows {
			shape := slices.Clone(sh)
			shape[0] = int64(n)
			outs[j].Outputs = append(outs[j].Outputs, &pb.ModelInferResponse_InferOutputTensor{
				Name: o.GetName(), Datatype: o.GetDatatype(), Shape: shape, Parameters: o.GetParameters(),
			})
			outs[j].RawOutputContents = append(outs[j].RawOutputContents, data[cut[row]:cut[row+n]:cut[row+n]])
			row += n
		}
	}
	return outs, nil
}

// reservedHeader reports whether a header or metadata key belongs to the
// transport, or to llmserve, rather than to the request: such keys are
// neither passed to the runtime nor taken back from it. Authorization is
// llmserve's (it checks the API key); the runtime never sees it.
func reservedHeader(k string) bool {
	switch k {
	case "authorization", "connection", "content-length", "content-type", "host", "keep-alive",
		"te", "trailer", "transfer-encoding", "upgrade", "user-agent", "accept-encoding", "content-encoding":
		return true
	}
	return strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, "proxy-")
}

// validKey is gRPC's rule for metadata keys: 0-9 a-z - _ . only.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// validValue is gRPC's rule for a text metadata value: printable ASCII.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// Headers turns HTTP headers or gRPC metadata into the metadata passed
// to (or taken back from) a runtime: keys lowercased, transport and
// llmserve keys dropped (reservedHeader), and keys or values gRPC cannot
// carry dropped.
func Headers(h map[string][]string) metadata.MD {
	md := metadata.MD{}
	for k, vs := range h {
		k = strings.ToLower(k)
		if reservedHeader(k) || !validKey(k) {
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") || validValue(v) {
				md[k] = append(md[k], v)
			}
		}
	}
	return md
}
