package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/api"
	v2grpc "github.com/llmserve/llmserve/api/v2/grpc"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// The public gRPC server takes messages up to grpcMaxMessage (V2's 64
// MiB by default, --max-body-bytes when set), not grpc-go's 4 MiB: a
// 5 MiB ModelInfer reaches the service (here: an unknown model, NOT_FOUND)
// unless the limit is below it (RESOURCE_EXHAUSTED).
func TestPublicGRPCMessageLimit(t *testing.T) {
	if got := grpcMaxMessage(&serveFlags{}); got != 64<<20 {
		t.Fatalf("default limit %d, want 64 MiB", got)
	}
	if got := grpcMaxMessage(&serveFlags{maxBodyBytes: 1 << 20}); got != 1<<20 {
		t.Fatalf("--max-body-bytes 1 MiB: limit %d", got)
	}
	for _, c := range []struct {
		limit int
		want  codes.Code
	}{{grpcMaxMessage(&serveFlags{}), codes.NotFound}, {1 << 20, codes.ResourceExhausted}} {
		gm, err := metrics.NewGRPCServer(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		registry := models.NewRegistry()
		srv, stopHealth := newPublicGRPC(registry, gm, c.limit, nil)
		v2grpc.Register(srv, api.V2Backend(registry), v2grpc.Options{})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = pb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, &pb.ModelInferRequest{
			ModelName:        "nosuch",
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "UINT8", Shape: []int64{5 << 20}}},
			RawInputContents: [][]byte{make([]byte, 5<<20)},
		}, grpc.MaxCallSendMsgSize(64<<20))
		cancel()
		if status.Code(err) != c.want {
			t.Errorf("limit %d: a 5 MiB request got %v, want %v", c.limit, err, c.want)
		}
		conn.Close()
		stopHealth()
		srv.Stop()
		registry.Close()
	}
}
