package api

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/metadata"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/runtime"
	"github.com/llmserve/llmserve/oip"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// V2Backend adapts the registry to the V2 protocols' infer.Backend, for
// the REST routes here and the gRPC service cmd/llmserve registers. Each
// kind of model is handed out as its own interface, with the methods of
// its kind only: generative and embedding models (*models.Generative) as
// infer.LLM and infer.Embedder, tensor models as infer.TensorModel
// (v2Tensor), custom runtimes as infer.RuntimeModel (v2Runtime);
// infer.KindOf tells them apart.
func V2Backend(reg *models.Registry) infer.Backend { return v2Backend{reg} }

type v2Backend struct{ reg *models.Registry }

// Each kind's concrete model meets its kind's interface.
var (
	_ infer.LLM          = (*models.Generative)(nil)
	_ infer.Embedder     = (*models.Generative)(nil)
	_ infer.TensorModel  = v2Tensor{}
	_ infer.RuntimeModel = v2Runtime{}
)

func (b v2Backend) Model(name string) (infer.Model, bool) {
	if g, ok := b.reg.Get(name); ok {
		return g, true
	}
	if t, ok := b.reg.GetTensor(name); ok {
		return v2Tensor{t}, true
	}
	if rt, ok := b.reg.GetRuntime(name); ok {
		return v2Runtime{rt}, true
	}
	return nil, false
}

func (b v2Backend) Models() []infer.Model {
	var out []infer.Model
	for _, g := range b.reg.List() {
		out = append(out, g)
	}
	for _, t := range b.reg.ListTensors() {
		out = append(out, v2Tensor{t})
	}
	for _, rt := range b.reg.ListRuntimes() {
		out = append(out, v2Runtime{rt})
	}
	return out
}

func (b v2Backend) Ready() bool { return b.reg.Ready() }

// v2Tensor is a tensor model as an infer.TensorModel.
type v2Tensor struct{ *models.TensorModel }

// Infer maps an unloaded model's error to Unavailable.
func (t v2Tensor) Infer(ctx context.Context, in []oip.Tensor) ([]oip.Tensor, error) {
	out, err := t.TensorModel.Infer(ctx, in)
	if errors.Is(err, models.ErrClosed) {
		return nil, infer.Errorf(infer.Unavailable, "model %q was unloaded or the server is stopping; retry", t.Name())
	}
	return out, err
}

// v2Runtime is a custom runtime model as an infer.RuntimeModel: its
// signature is the inputs and outputs its settings declare; its
// ContentTypes (its settings', and those its processes report) are
// those its own codecs decode.
type v2Runtime struct{ *runtime.Model }

// MaxBatchSize is the runtime's adaptive batch size (its settings'
// max_batch_size), which Triton's configuration reports.
func (r v2Runtime) MaxBatchSize() int { return r.Config().MaxBatchSize }

// Platform is the settings' platform, "custom" by default.
func (r v2Runtime) Platform() string {
	if p := r.Config().Platform; p != "" {
		return p
	}
	return "custom"
}

func (r v2Runtime) Inputs() []oip.Spec  { return runtimeSpecs(r.Config().Inputs) }
func (r v2Runtime) Outputs() []oip.Spec { return runtimeSpecs(r.Config().Outputs) }

// CallRuntime passes the client's headers (Headers drops the transport's
// and Authorization) and maps the runtime's errors to the V2 kinds.
func (r v2Runtime) CallRuntime(ctx context.Context, req *pb.ModelInferRequest, headers metadata.MD) (*pb.ModelInferResponse, metadata.MD, error) {
	resp, back, err := r.Infer(ctx, req, runtime.Headers(headers))
	if err == nil {
		return resp, back, nil
	}
	return nil, nil, runtimeError(err)
}

// StreamRuntime runs the request on the runtime's streaming call
// (predict_stream), with CallRuntime's headers and errors.
func (r v2Runtime) StreamRuntime(ctx context.Context, req *pb.ModelInferRequest, headers metadata.MD, fn func(*pb.ModelInferResponse, metadata.MD) error) error {
	return runtimeError(r.InferStream(ctx, req, runtime.Headers(headers), fn))
}

// runtimeError maps a runtime's error to the V2 kinds; others (the
// request's context, the caller's own) pass as they are.
func runtimeError(err error) error {
	var re *runtime.Error
	if !errors.As(err, &re) {
		return err // the request's context: infer.AsError maps it
	}
	code := infer.Internal
	switch {
	case errors.Is(err, runtime.ErrUnavailable), errors.Is(err, runtime.ErrClosed):
		code = infer.Unavailable
	case errors.Is(err, runtime.ErrTimeout):
		code = infer.Deadline
	case errors.Is(err, runtime.ErrInvalid):
		code = infer.Invalid
	}
	return infer.Errorf(code, "%s", re.Msg)
}

func runtimeSpecs(ts []runtime.TensorSpec) []oip.Spec {
	out := make([]oip.Spec, len(ts))
	for i, t := range ts {
		out[i] = oip.Spec{Name: t.Name, DType: oip.Datatype(t.Datatype), Shape: t.Shape}
	}
	return out
}

// runtimeHeaders hands each HTTP request's headers to a custom runtime,
// and its headers back to the response (infer.WithHeaders), as MLServer
// passes headers to and from its models.
func runtimeHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := infer.WithHeaders(r.Context(), &infer.Headers{
			Request: r.Header,
			SetResponse: func(k string, v []string) {
				w.Header()[http.CanonicalHeaderKey(k)] = v
			},
		})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
