package v2

import (
	"encoding/json"
	"net/http"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// inferStream serves MLServer's POST .../infer_stream: the body is a JSON
// V2 inference request (no binary data) on a generative model or a custom
// runtime (its predict_stream: inferStreamRuntime); for an LLM the answer
// is SSE, one "data: {InferenceResponse}" event per generated token whose
// text_output (BYTES, shape [1]) holds that token's text and whose
// parameters hold the prompt's "index" and, on its last event,
// "finish_reason". Errors as generate_stream's.
func (h *handler) inferStream(w http.ResponseWriter, r *http.Request) {
	arrival := h.now()
	var (
		m   infer.Model
		err error
	)
	defer func() { infer.Observe(h.rec, h.b, m, pathParam(r, "model"), err, arrival) }()
	m, err = infer.LookupReady(r.Context(), h.b, pathParam(r, "model"), pathParam(r, "version"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rt, isRuntime := infer.AsRuntime(m)
	var llm infer.LLM
	if !isRuntime {
		if llm, err = infer.AsLLM(m, "stream tokens"); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if r.Header.Get(headerLength) != "" {
		err = infer.Errorf(infer.Invalid, "infer_stream takes a JSON request; the binary tensor data extension (%s) is for infer", headerLength)
		h.fail(w, r, err)
		return
	}
	d, err := decodeInfer(body, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if isRuntime {
		err = h.inferStreamRuntime(w, r, rt, d)
		return
	}
	lr, err := infer.DecodeLLM(d.Request)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, err := infer.ParseParams(llm, lr.Params, h.seed())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	g, err := infer.Start(r.Context(), llm, p, lr.Prompts, infer.NewRequestID("v2-infer-stream-"), arrival)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer g.Close()
	send := startSSE(w)
	err = g.Run(r.Context(), func(dl infer.Delta) error {
		if dl.Text == "" && dl.Reasoning == "" && dl.Finish == "" {
			return nil
		}
		params := map[string]any{"index": dl.Index}
		if dl.Finish != "" {
			params["finish_reason"] = dl.Finish
		}
		outputs := []map[string]any{{
			"name": infer.OutputText, "datatype": "BYTES", "shape": []int{1}, "data": []string{dl.Text},
			"parameters": map[string]string{infer.ParamContentType: infer.ContentStr},
		}}
		if p.Reasoning != "" {
			outputs = append(outputs, map[string]any{
				"name": infer.OutputReasoning, "datatype": "BYTES", "shape": []int{1}, "data": []string{dl.Reasoning},
				"parameters": map[string]string{infer.ParamContentType: infer.ContentStr},
			})
		}
		return send(map[string]any{
			"model_name": m.Name(), "model_version": infer.VersionOf(m), "id": d.ID, "parameters": params,
			"outputs": outputs,
		})
	})
	if err != nil {
		code, msg, _ := status(err)
		if code == 499 {
			return
		}
		h.log.Log(r.Context(), levelFor(code), "v2 stream failed", "path", r.URL.Path, "status", code, "err", err)
		_ = send(map[string]string{"error": msg})
	}
}

// inferStreamRuntime serves infer_stream on a custom runtime: its
// predict_stream's responses, one "data: {InferenceResponse}" event each
// as it yields them (JSON data only), as MLServer's infer_stream. An
// error before the first event is the route's usual error status; after
// it, an event {"error": "..."}.
func (h *handler) inferStreamRuntime(w http.ResponseWriter, r *http.Request, rt infer.RuntimeModel, d *decodedRequest) error {
	asJSON := &decodedRequest{Request: d.Request, binaryOut: map[string]bool{}}
	var send func(any) error
	err := infer.RunRuntimeStream(r.Context(), rt, d.Request, func(resp *infer.Response) error {
		body, _, err := encodeInfer(asJSON, resp)
		if err != nil {
			return err
		}
		if send == nil {
			send = startSSE(w)
		}
		return send(json.RawMessage(body))
	})
	if err == nil {
		return nil
	}
	code, msg, _ := status(err)
	switch {
	case send == nil:
		h.fail(w, r, err)
	case code != 499:
		h.log.Log(r.Context(), levelFor(code), "v2 stream failed", "path", r.URL.Path, "status", code, "err", err)
		_ = send(map[string]string{"error": msg})
	}
	return err
}
