package tritonv1

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"

	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

func grpcClient(t *testing.T) (pb.GRPCServiceClient, *fakeBackend) {
	t.Helper()
	b := newFakeBackend()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	Register(gs, b, Options{})
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewGRPCServiceClient(conn), b
}

func TestGRPCHealthProfile(t *testing.T) {
	c, b := grpcClient(t)
	ctx := context.Background()
	for _, mode := range []string{"live", "ready"} {
		r, err := c.Health(ctx, &pb.HealthRequest{Mode: mode})
		if err != nil || !r.GetHealth() || r.GetRequestStatus().GetCode() != pb.RequestStatusCode_SUCCESS {
			t.Fatalf("%s: %v %v", mode, r, err)
		}
	}
	b.ms[0].(*fakeTensor).ready = false
	if r, err := c.Health(ctx, &pb.HealthRequest{Mode: "ready"}); err != nil || r.GetHealth() {
		t.Fatalf("ready with a model not ready: %v %v", r, err)
	}
	if r, err := c.Health(ctx, &pb.HealthRequest{Mode: "alive"}); err != nil || r.GetRequestStatus().GetCode() != pb.RequestStatusCode_INVALID_ARG || !strings.Contains(r.GetRequestStatus().GetMsg(), `"alive"`) {
		t.Fatalf("mode alive: %v %v", r, err)
	}
	r, err := c.Profile(ctx, &pb.ProfileRequest{Cmd: "start"})
	if err != nil || r.GetRequestStatus().GetCode() != pb.RequestStatusCode_UNSUPPORTED || !strings.Contains(r.GetRequestStatus().GetMsg(), "profiling is not available") {
		t.Fatalf("profile: %v %v", r, err)
	}
}

// TestGRPCStreamInOrder: requests on one stream, good and bad, are
// answered one each, in order, and a bad one leaves the stream open.
func TestGRPCStreamInOrder(t *testing.T) {
	c, _ := grpcClient(t)
	stream, err := c.StreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(text string) *pb.InferRequestHeader {
		var h pb.InferRequestHeader
		if err := prototext.Unmarshal([]byte(text), &h); err != nil {
			t.Fatal(err)
		}
		return &h
	}
	const n = 6
	for i := range n {
		req := &pb.InferRequest{ModelName: "mlp", MetaData: hdr(`batch_size: 1 input { name: "x" } input { name: "ids" } output { name: "label" }`),
			RawInput: [][]byte{fp32(1, 2, 3), i64(int64(i))}}
		req.MetaData.Id = uint64(i)
		if i == 3 {
			req.RawInput = req.RawInput[:1]
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if r.GetRequestStatus().GetCode() != pb.RequestStatusCode_INVALID_ARG || !strings.Contains(r.GetRequestStatus().GetMsg(), "1 raw_input but meta_data lists 2") || r.GetMetaData().GetId() != 3 {
				t.Fatalf("answer %d: %v", i, r.GetRequestStatus())
			}
			continue
		}
		if r.GetMetaData().GetId() != uint64(i) || len(r.GetRawOutput()) != 1 || string(r.GetRawOutput()[0]) != string(i64(int64(i))) {
			t.Fatalf("answer %d: %v", i, r)
		}
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the stream did not end")
	}
}

// TestGRPCMixedClsAndRaw: a request that asks for a classification and a
// raw output gets one raw_output per output, in the header's order, the
// classification's empty, as v1.2.0's GRPCInferResponseProvider answers
// and the official client (request_grpc.cc) reads them: raw_output(i) for
// output i.
func TestGRPCMixedClsAndRaw(t *testing.T) {
	c, _ := grpcClient(t)
	var h pb.InferRequestHeader
	if err := prototext.Unmarshal([]byte(`batch_size: 2 input { name: "x" } input { name: "ids" } output { name: "probs" cls { count: 1 } } output { name: "label" }`), &h); err != nil {
		t.Fatal(err)
	}
	r, err := c.Infer(context.Background(), &pb.InferRequest{ModelName: "mlp", MetaData: &h, RawInput: [][]byte{fp32(1, 9, 3, 7, 2, 3), i64(4, 5)}})
	if err != nil || r.GetRequestStatus().GetCode() != pb.RequestStatusCode_SUCCESS {
		t.Fatalf("%v %v", r, err)
	}
	outs, raw := r.GetMetaData().GetOutput(), r.GetRawOutput()
	if len(outs) != 2 || len(raw) != 2 || outs[0].GetName() != "probs" || outs[0].GetRaw() != nil || len(raw[0]) != 0 ||
		outs[0].GetBatchClasses()[0].GetCls()[0].GetIdx() != 1 || outs[0].GetBatchClasses()[1].GetCls()[0].GetIdx() != 0 ||
		outs[1].GetName() != "label" || string(raw[1]) != string(i64(4, 5)) {
		t.Fatalf("outputs %v, raw_output %q", outs, raw)
	}
}
