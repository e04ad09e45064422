package tritonv1

import (
	"context"
	"errors"
	"io"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/api/v2/infer"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// Server implements nvidia.inferenceserver.GRPCService over an
// infer.Backend. Every answer carries its outcome in request_status, as
// the v1 API does; the call itself fails only when the client goes away
// (or, before the service, authentication refuses it).
type Server struct {
	pb.UnimplementedGRPCServiceServer
	s *service
}

// New returns the gRPC service.
func New(b infer.Backend, opts Options) *Server {
	return &Server{s: newService(b, opts)}
}

// Register adds the service to gs. Server reflection lists it once
// reflection is registered on gs (api/v2/grpc's Register does that).
func Register(gs *grpc.Server, b infer.Backend, opts Options) *Server {
	s := New(b, opts)
	pb.RegisterGRPCServiceServer(gs, s)
	return s
}

// Status answers the server's status, with every model's or with
// model_name's alone (NOT_FOUND when it is not served).
func (g *Server) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	st, msg, err := g.s.status(req.GetModelName())
	if err != nil {
		g.s.logFailure(ctx, "Status", err)
		return &pb.StatusResponse{RequestStatus: requestStatus(err)}, nil
	}
	rs := requestStatus(nil)
	rs.Msg = msg
	return &pb.StatusResponse{RequestStatus: rs, ServerStatus: st}, nil
}

// Profile answers UNSUPPORTED: llmserve has no GPU profiler to start or
// stop.
func (g *Server) Profile(context.Context, *pb.ProfileRequest) (*pb.ProfileResponse, error) {
	rs := requestStatus(nil)
	rs.Code, rs.Msg = pb.RequestStatusCode_UNSUPPORTED, "profiling is not available on this server"
	return &pb.ProfileResponse{RequestStatus: rs}, nil
}

// Health answers mode "live" (true while the process serves) or "ready"
// (true when every model is ready); another mode is INVALID_ARG.
func (g *Server) Health(_ context.Context, req *pb.HealthRequest) (*pb.HealthResponse, error) {
	switch req.GetMode() {
	case "live":
		return &pb.HealthResponse{RequestStatus: requestStatus(nil), Health: true}, nil
	case "ready":
		return &pb.HealthResponse{RequestStatus: requestStatus(nil), Health: g.s.b.Ready()}, nil
	}
	err := infer.Errorf(infer.Invalid, "health mode %s is not a mode: use \"live\" or \"ready\"", q(req.GetMode()))
	return &pb.HealthResponse{RequestStatus: requestStatus(err)}, nil
}

// Infer runs one inference.
func (g *Server) Infer(ctx context.Context, req *pb.InferRequest) (*pb.InferResponse, error) {
	resp := g.infer(ctx, req)
	if err := ctx.Err(); err != nil && resp.GetRequestStatus().GetCode() != pb.RequestStatusCode_SUCCESS {
		return nil, status.FromContextError(err).Err()
	}
	return resp, nil
}

func (g *Server) infer(ctx context.Context, req *pb.InferRequest) *pb.InferResponse {
	version := ""
	if v := req.GetModelVersion(); v > 0 {
		version = strconv.FormatInt(v, 10)
	}
	h, raw, err := g.s.infer(ctx, req.GetModelName(), version, func(spec *modelSpec) (*decoded, error) {
		return decodeRaw(req.GetMetaData(), spec, req.GetRawInput())
	})
	if err != nil {
		g.s.logFailure(ctx, "Infer "+req.GetModelName(), err)
		// The request's id, so that a stream's client can tell which
		// request failed.
		return &pb.InferResponse{RequestStatus: requestStatus(err), MetaData: &pb.InferResponseHeader{Id: req.GetMetaData().GetId()}}
	}
	return &pb.InferResponse{RequestStatus: requestStatus(nil), MetaData: h, RawOutput: raw}
}

// StreamInfer serves the requests of one stream one after the other and
// answers each, in order; a failed request is answered with its status
// and the stream goes on. It returns when the client closes its side.
func (g *Server) StreamInfer(stream pb.GRPCService_StreamInferServer) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := g.infer(ctx, req)
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
