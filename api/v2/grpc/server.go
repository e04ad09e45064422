package v2grpc

import (
	"context"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/metrics"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// Options configure the service. The zero value is usable.
type Options struct {
	// Logger receives failed calls (Error for INTERNAL, Debug otherwise);
	// nil discards.
	Logger *slog.Logger
	// Version is the server version in server metadata; "" means the
	// module version the binary was built as.
	Version string
	// Repository, when set, answers RepositoryIndex and serves
	// RepositoryModelLoad and RepositoryModelUnload; without it the index
	// lists the served models and load and unload are UNIMPLEMENTED.
	Repository infer.Repository
	// Infer, when set, counts ModelInfer calls and each request of a
	// ModelStreamInfer stream per model (MLServer's
	// model_infer_request_success and _failure).
	Infer *metrics.Infer
}

// Server implements inference.GRPCInferenceService over an infer.Backend.
type Server struct {
	pb.UnimplementedGRPCInferenceServiceServer
	b       infer.Backend
	repo    infer.Repository
	rec     *metrics.Infer
	log     *slog.Logger
	version string
	now     func() time.Time
	seed    func() uint32
}

// New returns the service.
func New(b infer.Backend, opts Options) *Server {
	s := &Server{b: b, repo: opts.Repository, rec: opts.Infer, log: opts.Logger, version: opts.Version, now: time.Now, seed: mrand.Uint32}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.version == "" {
		s.version = infer.ServerVersion()
	}
	return s
}

// Register adds the service to gs, and server reflection, so that grpcurl
// and other tools work without the proto files.
func Register(gs *grpc.Server, b infer.Backend, opts Options) *Server {
	s := New(b, opts)
	pb.RegisterGRPCInferenceServiceServer(gs, s)
	reflection.Register(gs)
	return s
}

// grpcCode is each error kind's gRPC status code; Internal (and a kind
// not listed) is codes.Internal.
var grpcCode = map[infer.Code]codes.Code{
	infer.Invalid:     codes.InvalidArgument,
	infer.NotFound:    codes.NotFound,
	infer.Unavailable: codes.Unavailable,
	infer.Exhausted:   codes.ResourceExhausted,
	infer.Deadline:    codes.DeadlineExceeded,
	infer.Canceled:    codes.Canceled,
}

// statusOf maps an error to its gRPC status. It is the one place that
// does so for the V2 gRPC service.
func statusOf(err error) error {
	e := infer.AsError(err)
	code, ok := grpcCode[e.Code]
	if !ok {
		code = codes.Internal
	}
	return status.Error(code, e.Msg)
}

func (s *Server) fail(ctx context.Context, method string, err error) error {
	st := statusOf(err)
	level := slog.LevelDebug
	if status.Code(st) == codes.Internal {
		level = slog.LevelError
	}
	s.log.Log(ctx, level, "v2 grpc call failed", "method", method, "code", status.Code(st).String(), "err", err)
	return st
}

// ServerLive answers true while the process serves.
func (s *Server) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

// ServerReady answers whether every model is ready and the server is not
// draining.
func (s *Server) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	return &pb.ServerReadyResponse{Ready: s.b.Ready()}, nil
}

// ModelReady answers whether the model is ready; an unknown model or
// version is NOT_FOUND.
func (s *Server) ModelReady(ctx context.Context, req *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	m, err := infer.Lookup(s.b, req.GetName(), req.GetVersion())
	if err != nil {
		return nil, s.fail(ctx, "ModelReady", err)
	}
	return &pb.ModelReadyResponse{Ready: m.Ready()}, nil
}

// ServerMetadata answers the server's name, version and extensions.
func (s *Server) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	return &pb.ServerMetadataResponse{Name: infer.ServerName, Version: s.version, Extensions: infer.Extensions}, nil
}

// ModelMetadata answers the model's versions, platform, inputs and outputs.
// ModelConfig is Triton's model configuration extension: the model's
// ModelConfig (infer.TritonConfig), its config.pbtxt when it was loaded
// from one.
func (s *Server) ModelConfig(ctx context.Context, req *pb.ModelConfigRequest) (*pb.ModelConfigResponse, error) {
	m, err := infer.Lookup(s.b, req.GetName(), req.GetVersion())
	if err != nil {
		return nil, s.fail(ctx, "ModelConfig", err)
	}
	return &pb.ModelConfigResponse{Config: infer.TritonConfig(m)}, nil
}

func (s *Server) ModelMetadata(ctx context.Context, req *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	m, err := infer.Lookup(s.b, req.GetName(), req.GetVersion())
	if err != nil {
		return nil, s.fail(ctx, "ModelMetadata", err)
	}
	md := infer.Metadata(m)
	resp := &pb.ModelMetadataResponse{Name: md.Name, Versions: md.Versions, Platform: md.Platform}
	conv := func(ts []infer.TensorMetadata) []*pb.ModelMetadataResponse_TensorMetadata {
		out := make([]*pb.ModelMetadataResponse_TensorMetadata, len(ts))
		for i, t := range ts {
			out[i] = &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: string(t.Datatype), Shape: t.Shape}
		}
		return out
	}
	resp.Inputs, resp.Outputs = conv(md.Inputs), conv(md.Outputs)
	return resp, nil
}

// ModelInfer runs one inference to the end. The outputs come back in
// raw_output_contents when the inputs came in raw_input_contents, else in
// typed contents.
func (s *Server) ModelInfer(ctx context.Context, req *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	held := takeHeld(req) // what raw_input_contents alias (codec.go)
	arrival := s.now()
	m, resp, raw, err := s.modelInfer(ctx, req, arrival)
	infer.Observe(s.rec, s.b, m, req.GetModelName(), err, arrival)
	if err != nil {
		return nil, s.fail(ctx, "ModelInfer", err)
	}
	out := encodeResponse(resp, raw)
	if infer.KindOf(m) == infer.KindTensor {
		// The model's Run has returned and keeps no input.
		release(held, out)
	}
	return out, nil
}

// modelInfer serves ModelInfer up to the response; m is the model, nil
// when the lookup failed.
func (s *Server) modelInfer(ctx context.Context, req *pb.ModelInferRequest, arrival time.Time) (m infer.Model, resp *infer.Response, raw bool, err error) {
	m, err = infer.LookupReady(ctx, s.b, req.GetModelName(), req.GetModelVersion())
	if err != nil {
		return nil, nil, false, err
	}
	r, raw, err := decodeRequest(req)
	if err != nil {
		return m, nil, false, err
	}
	resp, err = infer.Run(ctx, m, r, infer.GenOptions{Arrival: arrival, Seed: s.seed(), IDPrefix: "v2-grpc-"})
	return m, resp, raw, err
}

// RepositoryIndex lists the repository's models with their state and
// reason, or without a repository the served models, READY or UNAVAILABLE
// (with ready set, only the ready ones). The repository name is ignored:
// there is one.
func (s *Server) RepositoryIndex(_ context.Context, req *pb.RepositoryIndexRequest) (*pb.RepositoryIndexResponse, error) {
	resp := &pb.RepositoryIndexResponse{}
	if s.repo != nil {
		for _, e := range s.repo.Index(req.GetReady()) {
			resp.Models = append(resp.Models, &pb.RepositoryIndexResponse_ModelIndex{Name: e.Name, Version: e.Version, State: e.State, Reason: e.Reason})
		}
		return resp, nil
	}
	for _, m := range s.b.Models() {
		state := "READY"
		if !m.Ready() {
			if req.GetReady() {
				continue
			}
			state = "UNAVAILABLE"
		}
		resp.Models = append(resp.Models, &pb.RepositoryIndexResponse_ModelIndex{Name: m.Name(), Version: infer.ModelVersion, State: state})
	}
	return resp, nil
}

// RepositoryModelLoad loads or reloads a model from the repository; a
// model that fails to load is INVALID_ARGUMENT with the load error.
func (s *Server) RepositoryModelLoad(ctx context.Context, req *pb.RepositoryModelLoadRequest) (*pb.RepositoryModelLoadResponse, error) {
	if s.repo == nil {
		return nil, status.Error(codes.Unimplemented, "this server has no model repository (start it with --model-repository)")
	}
	if len(req.GetParameters()) > 0 {
		return nil, s.fail(ctx, "RepositoryModelLoad", infer.Errorf(infer.Invalid, "load parameters are not supported: put the model's settings in its model-settings.json"))
	}
	if err := s.repo.Load(ctx, req.GetModelName()); err != nil {
		return nil, s.fail(ctx, "RepositoryModelLoad", err)
	}
	return &pb.RepositoryModelLoadResponse{}, nil
}

// RepositoryModelUnload drains and unloads a model.
func (s *Server) RepositoryModelUnload(ctx context.Context, req *pb.RepositoryModelUnloadRequest) (*pb.RepositoryModelUnloadResponse, error) {
	if s.repo == nil {
		return nil, status.Error(codes.Unimplemented, "this server has no model repository (start it with --model-repository)")
	}
	if err := s.repo.Unload(ctx, req.GetModelName()); err != nil {
		return nil, s.fail(ctx, "RepositoryModelUnload", err)
	}
	return &pb.RepositoryModelUnloadResponse{}, nil
}

// statusMessage is the message of a status error.
func statusMessage(err error) string {
	st, _ := status.FromError(err)
	return st.Message()
}
