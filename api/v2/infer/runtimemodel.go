package infer

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// RuntimeModel is a custom runtime model (models/runtime): a process of
// the user's that serves the Open Inference Protocol's ModelInfer. Its
// Signature is the inputs and outputs its settings declare (its
// metadata; KServe V1 turns instances into them); Run hands its requests
// to RunRuntime.
type RuntimeModel interface {
	Signature
	// CallRuntime sends the request (inputs in raw_input_contents) with
	// the client's headers as gRPC metadata, batched with others as the
	// model batches, and returns the runtime's answer (outputs in
	// raw_output_contents, checked against their datatypes and shapes)
	// and the headers it sent back. Its errors are *Error.
	CallRuntime(ctx context.Context, req *pb.ModelInferRequest, headers metadata.MD) (*pb.ModelInferResponse, metadata.MD, error)
}

// runtimeContentTypes is a RuntimeModel whose codecs decode content types
// of their own, accepted besides ContentTypes.
type runtimeContentTypes interface{ ContentTypes() []string }

// Headers carries an HTTP request's headers to a custom runtime and the
// runtime's headers back to the HTTP response; the REST layer puts it in
// the request's context (WithHeaders). Without it, RunRuntime uses the
// gRPC call's incoming metadata and sends the runtime's headers as the
// call's header metadata.
type Headers struct {
	// Request are the client's headers.
	Request map[string][]string
	// SetResponse sets a response header (called before the response is
	// written).
	SetResponse func(key string, values []string)
}

type headersKey struct{}

// WithHeaders returns ctx carrying h for RunRuntime.
func WithHeaders(ctx context.Context, h *Headers) context.Context {
	return context.WithValue(ctx, headersKey{}, h)
}

// RuntimeStreamer is a RuntimeModel whose runtime streams (MLServer's
// predict_stream, on the runtime's ModelStreamInfer).
type RuntimeStreamer interface {
	// StreamRuntime sends one request as CallRuntime does and calls fn
	// with each response as it comes, the first time with the headers
	// the runtime sent back. Its errors are *Error, or fn's.
	StreamRuntime(ctx context.Context, req *pb.ModelInferRequest, headers metadata.MD, fn func(resp *pb.ModelInferResponse, back metadata.MD) error) error
}

// RunRuntime serves an inference request on a custom runtime: the
// inputs go as the client sent them (every datatype, BYTES included, and
// every parameter, content_type included: the runtime decodes them with
// its own codecs), the request's headers (REST) or metadata (gRPC) as
// gRPC metadata; the answer's outputs (the ones asked for, when some are)
// and headers come back. Inputs that do not match their shape are
// Invalid, and so are content types that are not known (ContentTypes,
// or the runtime's own: a ContentTypes method) or that do not hold
// (CheckContentTypes: the bytes are checked, never changed); the runtime's failures are its *Error kinds (Unavailable,
// Deadline, Internal, Invalid) with the model's name.
func RunRuntime(ctx context.Context, rt RuntimeModel, r *Request) (*Response, error) {
	req, in, h, err := runtimeRequest(ctx, rt, r)
	if err != nil {
		return nil, err
	}
	resp, back, err := rt.CallRuntime(ctx, req, in)
	if err != nil {
		return nil, err
	}
	sendBack(ctx, h, back)
	return runtimeResponse(rt, r, resp)
}

// RunRuntimeStream serves an inference request on a custom runtime's
// streaming call (MLServer's predict_stream): the request goes as
// RunRuntime sends it, and send gets each response the runtime yields, as
// it yields it (the runtime's headers are set before the first). A
// runtime that does not stream answers once, through CallRuntime.
func RunRuntimeStream(ctx context.Context, rt RuntimeModel, r *Request, send func(*Response) error) error {
	st, ok := rt.(RuntimeStreamer)
	if !ok {
		resp, err := RunRuntime(ctx, rt, r)
		if err != nil {
			return err
		}
		return send(resp)
	}
	req, in, h, err := runtimeRequest(ctx, rt, r)
	if err != nil {
		return err
	}
	return st.StreamRuntime(ctx, req, in, func(resp *pb.ModelInferResponse, back metadata.MD) error {
		sendBack(ctx, h, back)
		out, err := runtimeResponse(rt, r, resp)
		if err != nil {
			return err
		}
		return send(out)
	})
}

// runtimeRequest checks r and makes the runtime's request and metadata.
func runtimeRequest(ctx context.Context, rt RuntimeModel, r *Request) (*pb.ModelInferRequest, metadata.MD, *Headers, error) {
	if err := r.CheckInputs(); err != nil {
		return nil, nil, nil, err
	}
	var known []string
	if ct, ok := rt.(runtimeContentTypes); ok {
		known = ct.ContentTypes()
	}
	if err := CheckContentTypes(r, known...); err != nil {
		return nil, nil, nil, err
	}
	if len(r.Inputs) == 0 {
		return nil, nil, nil, invalidf("the request to model %q has no inputs (for KServe V1 instances, the model's model-settings.json must declare its inputs)", rt.Name())
	}
	req := &pb.ModelInferRequest{
		ModelName: rt.Name(), ModelVersion: VersionOf(rt), Id: r.ID,
		Parameters: ProtoParameters(r.Parameters),
	}
	for _, t := range r.Inputs {
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{
			Name: t.Name, Datatype: string(t.Datatype), Shape: slices.Clone(t.Shape), Parameters: ProtoParameters(t.Parameters),
		})
		req.RawInputContents = append(req.RawInputContents, t.Binary())
	}
	for _, o := range r.Outputs {
		req.Outputs = append(req.Outputs, &pb.ModelInferRequest_InferRequestedOutputTensor{Name: o.Name, Parameters: ProtoParameters(o.Parameters)})
	}
	h, _ := ctx.Value(headersKey{}).(*Headers)
	var in metadata.MD
	if h != nil {
		in = metadata.MD(h.Request)
	} else {
		in, _ = metadata.FromIncomingContext(ctx)
	}
	return req, in, h, nil
}

// sendBack passes the runtime's headers to the HTTP response (h), else
// to the gRPC call's header metadata.
func sendBack(ctx context.Context, h *Headers, back metadata.MD) {
	if len(back) == 0 {
		return
	}
	if h != nil && h.SetResponse != nil {
		for k, v := range back {
			h.SetResponse(k, v)
		}
		return
	}
	_ = grpc.SetHeader(ctx, back) // not in a gRPC call, or headers already sent
}

// runtimeResponse checks the runtime's answer and keeps the outputs r
// asked for.
func runtimeResponse(m RuntimeModel, r *Request, resp *pb.ModelInferResponse) (*Response, error) {
	params, err := ParametersFromProto(resp.GetParameters())
	if err != nil {
		return nil, Errorf(Internal, "model %q: the runtime's answer is malformed: %v", m.Name(), err)
	}
	out := &Response{ModelName: m.Name(), ModelVersion: VersionOf(m), ID: r.ID, Parameters: params}
	for i, o := range resp.GetOutputs() {
		if len(r.Outputs) > 0 && !slices.ContainsFunc(r.Outputs, func(ro RequestedOutput) bool { return ro.Name == o.GetName() }) {
			continue
		}
		t := &Tensor{Name: o.GetName(), Datatype: Datatype(o.GetDatatype()), Shape: o.GetShape()}
		t.Parameters, err = ParametersFromProto(o.GetParameters())
		if err == nil {
			err = t.SetBinary(resp.GetRawOutputContents()[i])
		}
		if err == nil {
			err = t.Check()
		}
		if err != nil {
			return nil, Errorf(Internal, "model %q: the runtime's answer is malformed: output %q: %v", m.Name(), truncate(o.GetName()), err)
		}
		out.Outputs = append(out.Outputs, t)
	}
	return out, nil
}
