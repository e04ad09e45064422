package bench

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/proto/inferencepb"
)

// fakeInference is a V2 gRPC service with one model, "mlp", of input x
// [-1, 4]: it counts the ModelInfer calls and the ones not as the client
// should send them (2 rows of 4, raw or typed, the API key).
type fakeInference struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
	binary      bool
	served, bad atomic.Int64
}

func (f *fakeInference) ModelMetadata(_ context.Context, r *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	if r.GetName() != "mlp" {
		return nil, status.Errorf(codes.NotFound, "model %q is not served here", r.GetName())
	}
	return &inferencepb.ModelMetadataResponse{Name: "mlp", Inputs: []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}}}, nil
}

func (f *fakeInference) ModelInfer(ctx context.Context, r *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	f.served.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	in := r.GetInputs()
	ok := r.GetModelName() == "mlp" && len(in) == 1 && in[0].GetName() == "x" && len(in[0].GetShape()) == 2 &&
		in[0].GetShape()[0] == 2 && in[0].GetShape()[1] == 4 && strings.Join(md.Get("authorization"), ",") == "Bearer k"
	if f.binary {
		ok = ok && len(r.GetRawInputContents()) == 1 && len(r.GetRawInputContents()[0]) == 4*8 && in[0].GetContents() == nil
	} else {
		ok = ok && len(r.GetRawInputContents()) == 0 && len(in[0].GetContents().GetFp32Contents()) == 8
	}
	if !ok {
		f.bad.Add(1)
		return nil, status.Error(codes.InvalidArgument, "not the request the client should send")
	}
	return &inferencepb.ModelInferResponse{ModelName: "mlp"}, nil
}

// TestRunV2GRPC drives a fake V2 gRPC service: the metadata gives the
// input, every ModelInfer carries it with the asked shape, raw or typed,
// with the API key.
func TestRunV2GRPC(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run("binary="+strconv.FormatBool(binary), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer()
			fake := &fakeInference{binary: binary}
			inferencepb.RegisterGRPCInferenceServiceServer(srv, fake)
			go func() { _ = srv.Serve(ln) }()
			defer srv.Stop()
			rep, err := RunV2GRPC(context.Background(), V2Config{BaseURL: "grpc://" + ln.Addr().String(), APIKey: "k", Model: "mlp", Rows: 2, Binary: binary, NumRequests: 20, Warmup: 3, Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Completed != 20 || rep.Failed != 0 || fake.served.Load() != 23 || fake.bad.Load() != 0 || rep.Protocol != "grpc" ||
				rep.InputName != "x" || rep.P99Ms < rep.MedianMs || rep.RequestsPerSec <= 0 {
				t.Fatalf("report %+v, served %d, bad %d", rep, fake.served.Load(), fake.bad.Load())
			}
			// A model the server does not have: the metadata call says so.
			if _, err := RunV2GRPC(context.Background(), V2Config{BaseURL: ln.Addr().String(), Model: "nope", NumRequests: 1}); err == nil || !strings.Contains(err.Error(), "not served here") {
				t.Fatalf("unknown model: %v", err)
			}
		})
	}
}

func TestGRPCTarget(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1:8081": "127.0.0.1:8081", "grpc://h:1": "h:1", "http://h:1/v2": "h:1", "dns:///h:1": "dns:///h:1"} {
		if got := grpcTarget(in); got != want {
			t.Errorf("grpcTarget(%q) = %q, want %q", in, got, want)
		}
	}
}
