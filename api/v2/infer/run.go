package infer

import (
	"context"
	"time"
)

// GenOptions are what an LLM's request takes from the protocol that
// decoded it: the request's arrival, the seed it samples with when it
// sends none, and the prefix of its request id ("v2-infer-").
type GenOptions struct {
	Arrival  time.Time
	Seed     uint32
	IDPrefix string
}

// Run serves a complete (non-streaming) inference request on m, by its
// kind: RunLLM, RunEmbed, RunTensor or RunRuntime. Each of these checks
// and decodes the request once, content types included. opts are used
// by an LLM only.
func Run(ctx context.Context, m Model, r *Request, opts GenOptions) (*Response, error) {
	switch KindOf(m) {
	case KindRuntime:
		return RunRuntime(ctx, m.(RuntimeModel), r)
	case KindTensor:
		return RunTensor(ctx, m.(TensorModel), r)
	case KindEmbedding:
		return RunEmbed(ctx, m, r)
	case KindLLM:
		return RunLLM(ctx, m.(LLM), r, opts)
	}
	return nil, noKind(m)
}

// RunLLM serves a complete (non-streaming) inference request on a
// generative model: it decodes the LLM inputs, generates, and builds the
// outputs. "stream" true is refused: a unary call has one response.
func RunLLM(ctx context.Context, m LLM, r *Request, opts GenOptions) (*Response, error) {
	lr, err := DecodeLLM(r)
	if err != nil {
		return nil, err
	}
	p, err := ParseParams(m, lr.Params, opts.Seed)
	if err != nil {
		return nil, err
	}
	if p.Stream {
		return nil, invalidf("stream is true, but this call has a single response: use generate_stream (REST) or ModelStreamInfer (gRPC) to stream")
	}
	g, err := Start(ctx, m, p, lr.Prompts, NewRequestID(opts.IDPrefix), opts.Arrival)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	res, err := g.Collect(ctx)
	if err != nil {
		return nil, err
	}
	resp := &Response{ModelName: m.Name(), ModelVersion: VersionOf(m), ID: r.ID, Outputs: lr.BuildOutputs(res)}
	if err := EncodeResponse(r, resp); err != nil {
		return nil, err
	}
	return resp, nil
}
