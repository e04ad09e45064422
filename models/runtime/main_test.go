package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// envFake makes the test binary a fake runtime (fakeRuntime) instead of
// running the tests: the supervisor starts it as a real child process.
const envFake = "LLMSERVE_TEST_FAKE_RUNTIME"

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(envFake); ok {
		fakeRuntime(mode)
		return
	}
	goleak.VerifyTestMain(m)
}

// fakeRuntime serves the Open Inference Protocol on the socket it is
// given. Its model doubles input "x" (FP32) into output "y" and answers
// "batch" (INT64 [rows, 1]), the rows of the call it saw, and the header
// x-batch-rows. The request parameter "action" makes it misbehave:
// "crash" exits, "sleep" sleeps 30 s, "badshape" answers one row too few,
// "malformed" answers data that does not fit its shape, "invalid"
// refuses the request. Mode "ignore-term" ignores SIGTERM, mode
// "nostream" answers ModelStreamInfer UNIMPLEMENTED.
func fakeRuntime(mode string) {
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Fprintln(os.Stderr, "fake runtime starting for", os.Getenv(EnvModelName))
	ln, err := net.Listen("unix", os.Getenv(EnvSocket))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := grpc.NewServer()
	pb.RegisterGRPCInferenceServiceServer(s, fakeServer{})
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "llmserve.runtime.v1.RuntimeMetrics",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Metrics", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(&emptypb.Empty{}); err != nil {
				return nil, err
			}
			return wrapperspb.String("# TYPE fake_predictions_total counter\nfake_predictions_total{kind=\"a\"} 7\n# TYPE llmserve_sneaky gauge\nllmserve_sneaky 1\n"), nil
		}}},
	}, nil)
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "llmserve.runtime.v1.RuntimeInfo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "ContentTypes", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(&emptypb.Empty{}); err != nil {
				return nil, err
			}
			return wrapperspb.String("img\nnp\n"), nil
		}}},
	}, nil)
	_ = s.Serve(ln)
}

// ModelStreamInfer answers each request with ModelInfer's answer three
// times, the parameter "seq" 0, 1, 2 (the first with the header
// x-stream); the action "crash" exits after the first.
func (f fakeServer) ModelStreamInfer(st pb.GRPCInferenceService_ModelStreamInferServer) error {
	if os.Getenv(envFake) == "nostream" {
		return status.Error(codes.Unimplemented, "no streaming here")
	}
	for {
		r, err := st.Recv()
		if err != nil {
			return nil
		}
		action := r.GetParameters()["action"].GetStringParam()
		if action == "invalid" {
			return status.Error(codes.InvalidArgument, "x must be positive")
		}
		r.Parameters = nil
		resp, err := f.ModelInfer(st.Context(), r)
		if err != nil {
			return err
		}
		_ = st.SetHeader(metadata.Pairs("x-stream", "yes"))
		for i := range 3 {
			if i == 1 && action == "crash" {
				fmt.Fprintln(os.Stderr, "fake runtime crashing mid-stream")
				os.Exit(3)
			}
			resp.Parameters = map[string]*pb.InferParameter{"seq": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: int64(i)}}}
			if err := st.Send(&pb.ModelStreamInferResponse{InferResponse: resp}); err != nil {
				return err
			}
		}
	}
}

type fakeServer struct {
	pb.UnimplementedGRPCInferenceServiceServer
}

func (fakeServer) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	return &pb.ServerReadyResponse{Ready: true}, nil
}

func (fakeServer) ModelReady(_ context.Context, r *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	return &pb.ModelReadyResponse{Ready: r.GetName() == os.Getenv(EnvModelName)}, nil
}

func (fakeServer) ModelInfer(ctx context.Context, r *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	in := r.GetInputs()[0]
	rows := in.GetShape()[0]
	x := r.GetRawInputContents()[0]
	y := make([]byte, len(x))
	for i := 0; i < len(x); i += 4 {
		binary.LittleEndian.PutUint32(y[i:], math.Float32bits(2*math.Float32frombits(binary.LittleEndian.Uint32(x[i:]))))
	}
	batch := make([]byte, 8*rows)
	for i := range rows {
		binary.LittleEndian.PutUint64(batch[8*i:], uint64(rows))
	}
	yShape := append([]int64(nil), in.GetShape()...)
	bShape := []int64{rows, 1}
	md, _ := metadata.FromIncomingContext(ctx)
	hdr := metadata.Pairs("x-batch-rows", fmt.Sprint(rows))
	if v := md.Get("x-echo"); len(v) > 0 {
		hdr.Append("x-echo", v...)
	}
	_ = grpc.SetHeader(ctx, hdr)
	switch r.GetParameters()["action"].GetStringParam() {
	case "crash":
		fmt.Fprintln(os.Stderr, "fake runtime crashing on purpose")
		os.Exit(3)
	case "sleep":
		select {
		case <-time.After(30 * time.Second):
		case <-ctx.Done():
		}
	case "badshape":
		bShape[0]--
		batch = batch[8:]
	case "malformed":
		y = y[:len(y)-1]
	case "invalid":
		return nil, status.Error(codes.InvalidArgument, "x must be positive")
	}
	return &pb.ModelInferResponse{
		ModelName: r.GetModelName(), Id: r.GetId(),
		Outputs: []*pb.ModelInferResponse_InferOutputTensor{
			{Name: "y", Datatype: "FP32", Shape: yShape},
			{Name: "batch", Datatype: "INT64", Shape: bShape},
		},
		RawOutputContents: [][]byte{y, batch},
	}, nil
}
