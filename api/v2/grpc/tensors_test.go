package v2grpc

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/api/v2/infer"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestContentsRoundTrip: every datatype's typed contents decode to the
// binary form and encode back to the same contents; raw contents give
// the same tensor.
func TestContentsRoundTrip(t *testing.T) {
	cases := []struct {
		dt string
		c  *pb.InferTensorContents
	}{
		{"BOOL", &pb.InferTensorContents{BoolContents: []bool{true, false}}},
		{"INT8", &pb.InferTensorContents{IntContents: []int32{-128, 127}}},
		{"INT16", &pb.InferTensorContents{IntContents: []int32{-32768, 5}}},
		{"INT32", &pb.InferTensorContents{IntContents: []int32{math.MinInt32, 7}}},
		{"INT64", &pb.InferTensorContents{Int64Contents: []int64{math.MinInt64, 1}}},
		{"UINT8", &pb.InferTensorContents{UintContents: []uint32{0, 255}}},
		{"UINT16", &pb.InferTensorContents{UintContents: []uint32{65535, 1}}},
		{"UINT32", &pb.InferTensorContents{UintContents: []uint32{math.MaxUint32, 2}}},
		{"UINT64", &pb.InferTensorContents{Uint64Contents: []uint64{math.MaxUint64, 3}}},
		{"FP32", &pb.InferTensorContents{Fp32Contents: []float32{1.5, -2}}},
		{"FP64", &pb.InferTensorContents{Fp64Contents: []float64{1e300, -0.5}}},
		{"BYTES", &pb.InferTensorContents{BytesContents: [][]byte{[]byte("a"), {}}}},
	}
	for _, c := range cases {
		t.Run(c.dt, func(t *testing.T) {
			req := &pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: c.dt, Shape: []int64{2}, Contents: c.c}}}
			r, raw, err := decodeRequest(req)
			if err != nil || raw {
				t.Fatal(err, raw)
			}
			in := r.Inputs[0]
			if got := typedContents(in); !proto.Equal(got, c.c) {
				t.Fatalf("contents %v came back as %v", c.c, got)
			}
			rawReq := &pb.ModelInferRequest{
				Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: c.dt, Shape: []int64{1, 2}}},
				RawInputContents: [][]byte{in.Binary()},
			}
			r2, raw, err := decodeRequest(rawReq)
			if err != nil || !raw || !reflect.DeepEqual(r2.Inputs[0].JSONData(), in.JSONData()) {
				t.Fatalf("raw: %v %v %v", r2, raw, err)
			}
			resp := encodeResponse(&infer.Response{Outputs: []*infer.Tensor{in}}, true)
			if len(resp.GetRawOutputContents()) != 1 || string(resp.GetRawOutputContents()[0]) != string(in.Binary()) {
				t.Fatalf("raw output %v", resp)
			}
		})
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	in := func(dt string, shape []int64, c *pb.InferTensorContents) *pb.ModelInferRequest {
		return &pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: dt, Shape: shape, Contents: c}}}
	}
	cases := []struct {
		req  *pb.ModelInferRequest
		want string
	}{
		{in("INT32", []int64{1}, &pb.InferTensorContents{Fp32Contents: []float32{1}}), "int_contents"},
		{in("UINT8", []int64{1}, &pb.InferTensorContents{UintContents: []uint32{256}}), "UINT8"},
		{in("INT16", []int64{1}, &pb.InferTensorContents{IntContents: []int32{40000}}), "INT16"},
		{in("FP16", []int64{1}, &pb.InferTensorContents{Fp32Contents: []float32{1}}), "raw_input_contents"},
		{in("FP16", []int64{1}, nil), "raw_input_contents"},
		{in("FP32", []int64{2}, &pb.InferTensorContents{Fp32Contents: []float32{1}}), "2 elements"},
		{in("FP32", []int64{1}, nil), "no data"},
		{in("STRING", []int64{1}, nil), "datatype"},
		{&pb.ModelInferRequest{Parameters: map[string]*pb.InferParameter{"p": {}}, Inputs: in("BOOL", []int64{0}, nil).Inputs}, "no value"},
	}
	for _, c := range cases {
		_, _, err := decodeRequest(c.req)
		var e *infer.Error
		if !errors.As(err, &e) || e.Code != infer.Invalid || !strings.Contains(e.Msg, c.want) {
			t.Errorf("%v: %v, want Invalid mentioning %q", c.req, err, c.want)
		}
	}
}

// FuzzDecodeRequest: any ModelInferRequest bytes decode to checked
// tensors or fail as Invalid; nothing panics.
func FuzzDecodeRequest(f *testing.F) {
	seed := func(r *pb.ModelInferRequest) {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	seed(&pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("hi")}}}}})
	seed(&pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP16", Shape: []int64{2}}}, RawInputContents: [][]byte{{0, 0x3c, 0, 0}}})
	seed(&pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "INT8", Shape: []int64{1}, Contents: &pb.InferTensorContents{IntContents: []int32{-3}}}}})
	f.Fuzz(func(t *testing.T, b []byte) {
		var req pb.ModelInferRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		r, _, err := decodeRequest(&req)
		if err != nil {
			var e *infer.Error
			if !errors.As(err, &e) || e.Code != infer.Invalid || e.Msg == "" {
				t.Fatalf("error %#v is not Invalid with a message", err)
			}
			return
		}
		for _, in := range r.Inputs {
			if err := in.Check(); err != nil {
				t.Fatalf("accepted input %q fails its check: %v", in.Name, err)
			}
		}
	})
}
