package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/proto/tritonpb"
)

// V2Repository adapts a models.Repository to the V2 protocols'
// infer.Repository, for the REST routes here and the gRPC service
// cmd/llmserve registers; nil gives nil.
func V2Repository(repo *models.Repository) infer.Repository {
	if repo == nil {
		return nil
	}
	return v2Repository{repo}
}

type v2Repository struct{ repo *models.Repository }

func (r v2Repository) Index(readyOnly bool) []infer.IndexEntry {
	var out []infer.IndexEntry
	for _, e := range r.repo.Index(readyOnly) {
		out = append(out, infer.IndexEntry(e))
	}
	if out == nil {
		out = []infer.IndexEntry{}
	}
	return out
}

func (r v2Repository) Load(ctx context.Context, name string) error {
	return repoError(r.repo.Load(ctx, name))
}

func (r v2Repository) Unload(ctx context.Context, name string) error {
	return repoError(r.repo.Unload(ctx, name))
}

// repoError maps the repository's errors to infer's kinds.
func repoError(err error) error {
	var le *models.LoadError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, models.ErrNotInRepository):
		return infer.Errorf(infer.NotFound, "%v", err)
	case errors.Is(err, models.ErrBusy):
		return infer.Errorf(infer.Unavailable, "%v", err)
	case errors.As(err, &le):
		return infer.Errorf(infer.Invalid, "%v", err)
	}
	return infer.Errorf(infer.Internal, "%v", err)
}

// track records every HTTP request with the registry (models.Registry.Enter)
// so that unloading a model frees it only after the requests that may hold
// it have ended.
func track(reg *models.Registry) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, exit := reg.Enter(r.Context())
			defer exit()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// inferenceServices prefix the methods of the inference services (V2's
// and Triton v1's): only their calls can hold a model (reflection and
// health streams, which a client such as grpcurl keeps open around its
// calls, are not tracked).
var inferenceServices = []string{"/inference.GRPCInferenceService/", "/" + tritonpb.GRPCService_ServiceDesc.ServiceName + "/"}

func isInferenceCall(method string) bool {
	for _, p := range inferenceServices {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// GRPCTracking returns interceptors that record every call of the
// inference services with the registry, as the HTTP routes are (see
// track); cmd/llmserve chains them on the gRPC server.
func GRPCTracking(reg *models.Registry) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !isInferenceCall(info.FullMethod) {
			return h(ctx, req)
		}
		ctx, exit := reg.Enter(ctx)
		defer exit()
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !isInferenceCall(info.FullMethod) {
			return h(srv, ss)
		}
		ctx, exit := reg.Enter(ss.Context())
		defer exit()
		return h(srv, &trackedStream{ss, ctx})
	}
	return unary, stream
}

type trackedStream struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // the call's, with its tracking id, as grpc.ServerStream.Context returns it
}

func (s *trackedStream) Context() context.Context { return s.ctx }
