package infer

import "context"

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
