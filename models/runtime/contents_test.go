package runtime

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

func encBytes(vals ...string) []byte {
	var out []byte
	for _, v := range vals {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	return out
}

// TestSplitBytes: BYTES outputs split by rows of elements, merged BYTES
// inputs concatenate.
func TestSplitBytes(t *testing.T) {
	resp := &pb.ModelInferResponse{
		Outputs:           []*pb.ModelInferResponse_InferOutputTensor{{Name: "s", Datatype: "BYTES", Shape: []int64{3, 2}}},
		RawOutputContents: [][]byte{encBytes("a", "bb", "", "ccc", "d", "ee")},
	}
	if err := normalizeResponse(resp); err != nil {
		t.Fatal(err)
	}
	parts, err := splitResponse(resp, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := parts[0].GetRawOutputContents()[0]; !bytes.Equal(got, encBytes("a", "bb")) {
		t.Fatalf("part 0: %q", got)
	}
	if got := parts[1].GetRawOutputContents()[0]; !bytes.Equal(got, encBytes("", "ccc", "d", "ee")) || parts[1].GetOutputs()[0].GetShape()[0] != 2 {
		t.Fatalf("part 1: %q %v", got, parts[1].GetOutputs()[0].GetShape())
	}
	mk := func(vals ...string) *pb.ModelInferRequest {
		return &pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: []int64{int64(len(vals))}}}, RawInputContents: [][]byte{encBytes(vals...)}}
	}
	a, b := mk("x"), mk("yy", "z")
	if batchKey(a) != batchKey(b) || batchKey(a) == "" {
		t.Fatal("BYTES requests of one signature do not share a key")
	}
	m := mergeRequests([]*pb.ModelInferRequest{a, b}, 3)
	if !bytes.Equal(m.GetRawInputContents()[0], encBytes("x", "yy", "z")) || m.GetInputs()[0].GetShape()[0] != 3 {
		t.Fatalf("merged: %q %v", m.GetRawInputContents()[0], m.GetInputs()[0].GetShape())
	}
}

// TestNormalizeTyped: typed contents become raw; data that does not fit
// its shape is refused with the output's name.
func TestNormalizeTyped(t *testing.T) {
	resp := &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{
		{Name: "i", Datatype: "INT16", Shape: []int64{2}, Contents: &pb.InferTensorContents{IntContents: []int32{-1, 2}}},
		{Name: "b", Datatype: "BOOL", Shape: []int64{1}, Contents: &pb.InferTensorContents{BoolContents: []bool{true}}},
		{Name: "s", Datatype: "BYTES", Shape: []int64{1}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("hé")}}},
	}}
	if err := normalizeResponse(resp); err != nil {
		t.Fatal(err)
	}
	raw := resp.GetRawOutputContents()
	if !bytes.Equal(raw[0], []byte{0xff, 0xff, 2, 0}) || !bytes.Equal(raw[1], []byte{1}) || !bytes.Equal(raw[2], encBytes("hé")) {
		t.Fatalf("raw: %v", raw)
	}
	bad := &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{
		{Name: "f", Datatype: "FP32", Shape: []int64{3}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1, 2}}},
	}}
	if err := normalizeResponse(bad); err == nil || !strings.Contains(err.Error(), `output "f": shape [3] of FP32 needs 12 bytes but the data has 8`) {
		t.Fatalf("bad: %v", err)
	}
	for _, dt := range []string{"FP16", "BF16"} {
		r := &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "h", Datatype: dt, Shape: []int64{1}, Contents: &pb.InferTensorContents{}}}}
		if err := normalizeResponse(r); err == nil {
			t.Fatalf("%s in typed contents accepted", dt)
		}
	}
}

// TestHeaders: client headers become metadata without the transport's
// and llmserve's own, nor what gRPC cannot carry.
func TestHeaders(t *testing.T) {
	md := Headers(map[string][]string{
		"X-Tenant": {"a"}, "Authorization": {"Bearer k"}, "Content-Type": {"application/json"},
		"Grpc-Timeout": {"1S"}, "X-Bad": {"caf\u00e9"}, "Bad Key": {"x"}, "X-Trace-Bin": {"\x00\x01"},
	})
	if len(md) != 2 || md.Get("x-tenant")[0] != "a" || len(md.Get("x-trace-bin")) != 1 {
		t.Fatalf("metadata: %v", md)
	}
}
