package runtime

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// ContentTypesMethod is the gRPC method of our info service (see
// runtimes/proto/llmserve_runtime.proto): google.protobuf.Empty in, a
// google.protobuf.StringValue out holding the content types the runtime's
// own codecs decode, one a line (MLServer's codec registry: a codec a
// runtime registers with @register_input_codec). A runtime that does not
// serve it has none beyond its settings'.
const ContentTypesMethod = "/llmserve.runtime.v1.RuntimeInfo/ContentTypes"

// ContentTypes are the content types the runtime's own codecs decode: the
// settings' (Config.ContentTypes) and those its processes report
// (ContentTypesMethod), sorted.
func (m *Model) ContentTypes() []string {
	m.ctMu.Lock()
	defer m.ctMu.Unlock()
	out := slices.Clone(m.cfg.ContentTypes)
	for _, ct := range m.reported {
		if !slices.Contains(out, ct) {
			out = append(out, ct)
		}
	}
	slices.Sort(out)
	return out
}

// learnContentTypes asks a ready process for its codecs' content types.
func (m *Model) learnContentTypes(inc *incarnation) {
	ctx, cancel := context.WithTimeout(m.ctx, time.Second)
	defer cancel()
	var v wrapperspb.StringValue
	if err := inc.conn.Invoke(ctx, ContentTypesMethod, &emptypb.Empty{}, &v); err != nil {
		if status.Code(err) != codes.Unimplemented {
			m.cfg.Logger.Warn("runtime did not say which content types its codecs decode", "model", m.cfg.Name, "err", err)
		}
		return
	}
	m.ctMu.Lock()
	defer m.ctMu.Unlock()
	for _, ct := range strings.Split(v.GetValue(), "\n") {
		if ct = strings.TrimSpace(ct); ct != "" && len(ct) <= 64 && !slices.Contains(m.reported, ct) {
			m.reported = append(m.reported, ct)
		}
	}
}

// InferStream runs one request on the runtime's ModelStreamInfer (in
// Python, the model's predict_stream) and calls fn with each response as
// it arrives (outputs in raw_output_contents, checked as Infer's), the
// first time with the headers the runtime sent back. Streams are not
// batched: each goes to a ready process, in turn. request_timeout bounds
// the whole stream. A runtime that does not serve ModelStreamInfer
// (UNIMPLEMENTED) answers once, through Infer. The errors are *Error
// (ErrUnavailable when no process is ready), fn's own, or ctx's.
func (m *Model) InferStream(ctx context.Context, req *pb.ModelInferRequest, md metadata.MD, fn func(resp *pb.ModelInferResponse, headers metadata.MD) error) error {
	ctx, done := m.start(ctx)
	defer done()
	if err := m.toRaw(req); err != nil {
		return err
	}
	select {
	case <-m.quit:
		return m.errorf(ErrClosed, "the model was unloaded or the server is stopping; retry")
	default:
	}
	p, inc := m.pick()
	if p == nil {
		return m.errorf(ErrUnavailable, "no runtime process is ready (starting or restarting); retry")
	}
	// The call ends with the request or when the model stops.
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	stream, err := inc.client.ModelStreamInfer(metadata.NewOutgoingContext(callCtx, md))
	if err == nil {
		err = stream.Send(req)
		if errors.Is(err, io.EOF) {
			_, err = stream.Recv() // the call ended: its status says why
		}
	}
	if err == nil {
		err = stream.CloseSend()
	}
	if err != nil {
		return m.streamError(ctx, p, inc, err)
	}
	first := true
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if first && status.Code(err) == codes.Unimplemented {
			// A runtime without streaming answers once, through Infer.
			resp, hdr, err := m.Infer(ctx, req, md)
			if err != nil {
				return err
			}
			return fn(resp, hdr)
		}
		if err != nil {
			return m.streamError(ctx, p, inc, err)
		}
		if msg := resp.GetErrorMessage(); msg != "" {
			return m.errorf(ErrBadAnswer, "the runtime failed: %s", msg)
		}
		out := resp.GetInferResponse()
		if out == nil {
			return m.errorf(ErrBadAnswer, "the runtime's answer is malformed: a stream response without infer_response")
		}
		if nerr := normalizeResponse(out); nerr != nil {
			return m.errorf(ErrBadAnswer, "the runtime's answer is malformed: %v", nerr)
		}
		var hdr metadata.MD
		if first {
			first = false
			h, _ := stream.Header()
			hdr = Headers(h)
		}
		if err := fn(out, hdr); err != nil {
			return err
		}
	}
}

// streamError turns a failed stream into the client's error.
func (m *Model) streamError(ctx context.Context, p *proc, inc *incarnation, err error) error {
	if ctx.Err() != nil {
		return m.ctxErr(ctx)
	}
	return m.callError(p, inc, err)
}

// pick returns a ready process and its incarnation, taking them in turn;
// nil when none is ready.
func (m *Model) pick() (*proc, *incarnation) {
	n := len(m.ps)
	start := int(m.next.Add(1) % uint64(n))
	for i := range n {
		p := m.ps[(start+i)%n]
		if inc, _ := p.current(); inc != nil && inc.alive() {
			return p, inc
		}
	}
	return nil, nil
}
