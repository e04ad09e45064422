package v2grpc

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/api/v2/infer/infertest"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
	"github.com/llmserve/llmserve/scheduler"
)

// client serves one scripted model over an in-memory connection.
func client(t *testing.T, m *infertest.Scripted) pb.GRPCInferenceServiceClient {
	t.Helper()
	return serveBackend(t, infertest.Backend{M: m})
}

// serveBackend serves b over an in-memory connection, with the server
// options given, and returns a client of it.
func serveBackend(t *testing.T, b infer.Backend, opts ...grpc.ServerOption) pb.GRPCInferenceServiceClient {
	t.Helper()
	ln := bufconn.Listen(8 << 20)
	gs := grpc.NewServer(opts...)
	Register(gs, b, Options{})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewGRPCInferenceServiceClient(conn)
}

func request(id string) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "m", Id: id, Inputs: []*pb.ModelInferRequest_InferInputTensor{{
		Name: "text_input", Datatype: "BYTES", Shape: []int64{1}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("hi")}},
	}}}
}

// TestStreamErrorMidway: an engine failure after some tokens is an
// in-band error, marked final, after the tokens' responses.
func TestStreamErrorMidway(t *testing.T) {
	c := client(t, infertest.New(t, "", true, []scheduler.Output{
		{Tokens: []int32{0}}, {Finish: scheduler.FinishAbort, Err: scheduler.ErrEngine},
	}...))
	st, err := c.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(request("q")); err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	var got []*pb.ModelStreamInferResponse
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 2 || got[0].GetErrorMessage() != "" || string(got[0].GetInferResponse().GetOutputs()[0].GetContents().GetBytesContents()[0]) != "a" ||
		got[1].GetErrorMessage() == "" || got[1].GetInferResponse().GetId() != "q" ||
		!got[1].GetInferResponse().GetParameters()[finalParam].GetBoolParam() {
		t.Fatalf("%v", got)
	}
	if _, err := c.ModelInfer(context.Background(), request("u")); status.Code(err) != codes.Internal {
		t.Fatalf("ModelInfer: %v", err)
	}
}

func TestNotReady(t *testing.T) {
	c := client(t, infertest.New(t, "", false))
	if _, err := c.ModelInfer(context.Background(), request("u")); status.Code(err) != codes.Unavailable {
		t.Fatalf("ModelInfer: %v", err)
	}
	if r, err := c.ModelReady(context.Background(), &pb.ModelReadyRequest{Name: "m"}); err != nil || r.GetReady() {
		t.Fatalf("ModelReady: %v %v", r, err)
	}
	if r, err := c.ServerReady(context.Background(), &pb.ServerReadyRequest{}); err != nil || r.GetReady() {
		t.Fatalf("ServerReady: %v %v", r, err)
	}
	if r, err := c.RepositoryIndex(context.Background(), &pb.RepositoryIndexRequest{}); err != nil || r.GetModels()[0].GetState() != "UNAVAILABLE" {
		t.Fatalf("RepositoryIndex: %v %v", r, err)
	}
	if r, err := c.ModelConfig(context.Background(), &pb.ModelConfigRequest{Name: "m"}); err != nil || r.GetConfig().GetName() != "m" || r.GetConfig().GetInput()[0].GetName() != "text_input" {
		t.Fatalf("ModelConfig: %v %v", r, err)
	}
}
