package v2grpc

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/llmserve/llmserve/api/v2/infer"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// finalParam is Triton's marker of the last response to a request on a
// decoupled stream.
const finalParam = "triton_final_response"

// ModelStreamInfer serves many requests on one stream, each in its own
// goroutine, answered as they finish and matched by id. A custom
// runtime's request gets each response its predict_stream yields (the
// last with triton_final_response true; each is sent once the next one
// is known). An LLM request
// streams its tokens as decoupled responses (one per generated token, the
// last with triton_final_response true) unless it sets stream to false,
// which gives one final response. A bad request gets an in-band error
// (error_message, with its id) and the stream stays open. The call ends
// when the client has closed its side and every request is answered;
// cancelling it cancels every request on it, which frees their sequences.
func (s *Server) ModelStreamInfer(stream pb.GRPCInferenceService_ModelStreamInferServer) error {
	ctx := stream.Context()
	var (
		mu      sync.Mutex // serializes Send
		sendErr error      // guarded by mu
		wg      sync.WaitGroup
	)
	send := func(r *pb.ModelStreamInferResponse) error {
		mu.Lock()
		defer mu.Unlock()
		if sendErr != nil {
			return sendErr
		}
		sendErr = stream.Send(r)
		return sendErr
	}
	defer wg.Wait()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			return sendErr
		}
		if err != nil {
			return err // the context ended: the requests' generations end with it
		}
		wg.Go(func() { s.streamOne(ctx, req, send) })
	}
}

// streamOne serves one request of a stream.
func (s *Server) streamOne(ctx context.Context, req *pb.ModelInferRequest, send func(*pb.ModelStreamInferResponse) error) {
	held := takeHeld(req) // what raw_input_contents alias (codec.go)
	arrival := s.now()
	var (
		m      infer.Model
		failed error
	)
	defer func() { infer.Observe(s.rec, s.b, m, req.GetModelName(), failed, arrival) }()
	fail := func(err error) {
		failed = err
		st := s.fail(ctx, "ModelStreamInfer", err)
		if infer.AsError(err).Code == infer.Canceled {
			return
		}
		_ = send(&pb.ModelStreamInferResponse{
			ErrorMessage: statusMessage(st),
			InferResponse: &pb.ModelInferResponse{
				ModelName: req.GetModelName(), ModelVersion: req.GetModelVersion(), Id: req.GetId(),
				Parameters: infer.ProtoParameters(infer.Parameters{finalParam: true}),
			},
		})
	}
	m, err := infer.LookupReady(ctx, s.b, req.GetModelName(), req.GetModelVersion())
	if err != nil {
		m = nil
		fail(err)
		return
	}
	r, raw, err := decodeRequest(req)
	if err != nil {
		fail(err)
		return
	}
	if rt, ok := infer.AsRuntime(m); ok {
		// A custom runtime's predict_stream: each response it yields,
		// the last one marked final. A response is sent when the next
		// one comes (or the stream ends), so that the last is known; a
		// runtime that answers once answers as a tensor model does.
		var held *infer.Response
		emit := func(final bool) error {
			if held.Parameters == nil {
				held.Parameters = infer.Parameters{}
			}
			held.Parameters[finalParam] = final
			return send(&pb.ModelStreamInferResponse{InferResponse: encodeResponse(held, raw)})
		}
		err := infer.RunRuntimeStream(ctx, rt, r, func(resp *infer.Response) error {
			if held != nil {
				if err := emit(false); err != nil {
					return err
				}
			}
			held = resp
			return nil
		})
		if err == nil {
			if held == nil { // it yielded nothing: an empty final response
				held = &infer.Response{ModelName: m.Name(), ModelVersion: infer.VersionOf(m), ID: r.ID}
			}
			err = emit(true)
		}
		if err != nil {
			fail(err)
		}
		return
	}
	if t, ok := infer.AsTensor(m); ok {
		// A tensor model answers each request of the stream once.
		resp, err := infer.RunTensor(ctx, t, r)
		if err != nil {
			fail(err)
			return
		}
		if resp.Parameters == nil {
			resp.Parameters = infer.Parameters{}
		}
		resp.Parameters[finalParam] = true
		out := encodeResponse(resp, raw)
		if err := send(&pb.ModelStreamInferResponse{InferResponse: out}); err != nil {
			fail(err)
			return
		}
		// The model's Run has returned and keeps no input, and Send has
		// encoded the response.
		release(held, out)
		return
	}
	llm, err := infer.AsLLM(m, "generate")
	if err != nil {
		fail(err)
		return
	}
	lr, err := infer.DecodeLLM(r)
	if err != nil {
		fail(err)
		return
	}
	p, err := infer.ParseParams(llm, lr.Params, s.seed())
	if err != nil {
		fail(err)
		return
	}
	streaming := !p.StreamSet || p.Stream
	if streaming && len(lr.Prompts) != 1 {
		fail(infer.Errorf(infer.Invalid, "a streamed request takes one prompt (text_input has %d elements): send one request per prompt, or set stream to false", len(lr.Prompts)))
		return
	}
	g, err := infer.Start(ctx, llm, p, lr.Prompts, infer.NewRequestID("v2-grpc-stream-"), arrival)
	if err != nil {
		fail(err)
		return
	}
	defer g.Close()
	respond := func(outputs []*infer.Tensor, final bool) error {
		resp := &infer.Response{
			ModelName: m.Name(), ModelVersion: infer.VersionOf(m), ID: r.ID,
			Parameters: infer.Parameters{finalParam: final}, Outputs: outputs,
		}
		if err := infer.EncodeResponse(r, resp); err != nil {
			return err
		}
		return send(&pb.ModelStreamInferResponse{InferResponse: encodeResponse(resp, raw)})
	}
	if !streaming {
		res, err := g.Collect(ctx)
		if err != nil {
			fail(err)
			return
		}
		if err := respond(lr.BuildOutputs(res), true); err != nil {
			fail(err)
		}
		return
	}
	err = g.Run(ctx, func(d infer.Delta) error {
		if d.Text == "" && d.Reasoning == "" && d.Finish == "" && !p.Details {
			return nil
		}
		res := infer.Result{Text: d.Text, Reasoning: d.Reasoning, Finish: d.Finish}
		res.PromptTokens, res.OutputTokens = g.Usage(0)
		if err := respond(lr.BuildOutputs([]infer.Result{res}), d.Finish != ""); err != nil {
			return infer.Errorf(infer.Canceled, "the stream is gone: %v", err)
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
}
