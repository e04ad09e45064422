package v2

import (
	"encoding/json"
	"net/http"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// inferStream serves MLServer's POST .../infer_stream: the body is a JSON
// V2 inference request (no binary data) on a generative model; the answer
// is SSE, one "data: {InferenceResponse}" event per generated token whose
// text_output (BYTES, shape [1]) holds that token's text and whose
// parameters hold the prompt's "index" and, on its last event,
// "finish_reason". Errors as generate_stream's.
func (h *handler) inferStream(w http.ResponseWriter, r *http.Request) {
	arrival := h.now()
	m, err := infer.LookupReady(h.b, pathParam(r, "model"), pathParam(r, "version"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if r.Header.Get(headerLength) != "" {
		h.fail(w, r, infer.Errorf(infer.Invalid, "infer_stream takes a JSON request; the binary tensor data extension (%s) is for infer", headerLength))
		return
	}
	d, err := decodeInfer(body, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	lr, err := infer.DecodeLLM(d.Request)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, err := infer.ParseParams(m, lr.Params, h.seed())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	g, err := infer.Start(r.Context(), m, p, lr.Prompts, infer.NewRequestID("v2-infer-stream-"), arrival)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer g.Close()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return infer.Errorf(infer.Canceled, "the client went away: %v", err)
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	err = g.Run(r.Context(), func(dl infer.Delta) error {
		if dl.Text == "" && dl.Finish == "" {
			return nil
		}
		params := map[string]any{"index": dl.Index}
		if dl.Finish != "" {
			params["finish_reason"] = dl.Finish
		}
		return send(map[string]any{
			"model_name": m.Name(), "model_version": infer.VersionOf(m), "id": d.ID, "parameters": params,
			"outputs": []map[string]any{{"name": infer.OutputText, "datatype": "BYTES", "shape": []int{1}, "data": []string{dl.Text}}},
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
