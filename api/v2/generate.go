package v2

import (
	"encoding/json"
	"net/http"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// generateRequest is a decoded generate body: Triton's {id, text_input,
// parameters}; any other top-level field is a parameter too, as Triton
// passes them (a field in "parameters" wins).
type generateRequest struct {
	id     string
	text   string
	params infer.Parameters
}

func decodeGenerate(body []byte) (*generateRequest, error) {
	var fields map[string]json.RawMessage
	if err := strictJSON(body, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, infer.Errorf(infer.Invalid, "the body must be a JSON object with text_input")
	}
	g := &generateRequest{}
	if raw, ok := fields["id"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &g.id); err != nil {
			return nil, infer.Errorf(infer.Invalid, "id must be a string")
		}
	}
	raw, ok := fields["text_input"]
	if !ok || string(raw) == "null" {
		return nil, infer.Errorf(infer.Invalid, "text_input (the prompt, a string) is required")
	}
	if err := json.Unmarshal(raw, &g.text); err != nil {
		return nil, infer.Errorf(infer.Invalid, "text_input must be a string")
	}
	params := fields["parameters"]
	delete(fields, "id")
	delete(fields, "text_input")
	delete(fields, "parameters")
	rest, _ := json.Marshal(fields)
	var err error
	if g.params, err = infer.DecodeParameters(rest); err != nil {
		return nil, infer.Errorf(infer.Invalid, "%v", err)
	}
	p, err := infer.DecodeParameters(params)
	if err != nil {
		return nil, infer.Errorf(infer.Invalid, "%v", err)
	}
	if g.params == nil {
		g.params = infer.Parameters{}
	}
	for k, v := range p {
		g.params[k] = v
	}
	return g, nil
}

// generateResponse is generate's answer, and each generate_stream event.
type generateResponse struct {
	ID           string `json:"id,omitempty"`
	ModelName    string `json:"model_name"`
	ModelVersion string `json:"model_version"`
	TextOutput   string `json:"text_output"`
	// ReasoningContent is the thinking of a model with a reasoning parser
	// (the tags dropped; text_output is then the answer alone), as chat's
	// message.reasoning_content.
	ReasoningContent string           `json:"reasoning_content,omitempty"`
	Details          *generateDetails `json:"details,omitempty"`
}

// generateDetails are the OIP generate details: finish_reason and logprobs
// for generate; finish_reason (on the last event) and token for a stream.
type generateDetails struct {
	FinishReason string        `json:"finish_reason,omitempty"`
	Logprobs     []infer.Token `json:"logprobs,omitempty"`
	Token        *infer.Token  `json:"token,omitempty"`
}

// start validates a generate request and submits it.
func (h *handler) startGenerate(w http.ResponseWriter, r *http.Request) (infer.LLM, *generateRequest, *infer.GenParams, *infer.Generation, bool) {
	arrival := h.now()
	model, err := infer.LookupReady(r.Context(), h.b, pathParam(r, "model"), pathParam(r, "version"))
	if err != nil {
		h.fail(w, r, err)
		return nil, nil, nil, nil, false
	}
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return nil, nil, nil, nil, false
	}
	req, err := decodeGenerate(body)
	if err != nil {
		h.fail(w, r, err)
		return nil, nil, nil, nil, false
	}
	m, err := infer.AsLLM(model, "generate")
	if err != nil {
		h.fail(w, r, err)
		return nil, nil, nil, nil, false
	}
	p, err := infer.ParseParams(m, req.params, h.seed())
	if err != nil {
		h.fail(w, r, err)
		return nil, nil, nil, nil, false
	}
	g, err := infer.Start(r.Context(), m, p, []string{req.text}, infer.NewRequestID("v2-gen-"), arrival)
	if err != nil {
		h.fail(w, r, err)
		return nil, nil, nil, nil, false
	}
	return m, req, p, g, true
}

// generate serves POST .../generate: the whole answer in one object.
func (h *handler) generate(w http.ResponseWriter, r *http.Request) {
	m, req, p, g, ok := h.startGenerate(w, r)
	if !ok {
		return
	}
	defer g.Close()
	res, err := g.Collect(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	resp := generateResponse{ID: req.id, ModelName: m.Name(), ModelVersion: infer.VersionOf(m), TextOutput: res[0].Text, ReasoningContent: res[0].Reasoning}
	if p.Details {
		lps := res[0].Tokens
		if lps == nil {
			lps = []infer.Token{}
		}
		resp.Details = &generateDetails{FinishReason: res[0].Finish, Logprobs: lps}
	}
	writeJSON(w, http.StatusOK, resp)
}

// generateStream serves POST .../generate_stream: SSE, one event per
// token with that token's text, no [DONE]. Errors before the first event
// are a JSON error with its status; after, a data: {"error": ...} event.
func (h *handler) generateStream(w http.ResponseWriter, r *http.Request) {
	m, req, p, g, ok := h.startGenerate(w, r)
	if !ok {
		return
	}
	defer g.Close()
	send := startSSE(w)
	err := g.Run(r.Context(), func(d infer.Delta) error {
		if d.Text == "" && d.Reasoning == "" && d.Finish == "" && !p.Details {
			return nil
		}
		ev := generateResponse{ID: req.id, ModelName: m.Name(), ModelVersion: infer.VersionOf(m), TextOutput: d.Text, ReasoningContent: d.Reasoning}
		if p.Details {
			ev.Details = &generateDetails{FinishReason: d.Finish, Token: d.Token}
		}
		return send(ev)
	})
	if err != nil {
		code, msg, _ := status(err)
		if code == 499 {
			return // the client went away; the deferred Close frees the sequence
		}
		h.log.Log(r.Context(), levelFor(code), "v2 stream failed", "path", r.URL.Path, "status", code, "err", err)
		_ = send(map[string]string{"error": msg})
	}
}

// startSSE writes the headers of a server-sent events answer and returns
// the function that sends one event ("data: <json>" and a blank line),
// flushed at once. A failed write means the client went away.
func startSSE(w http.ResponseWriter) func(v any) error {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	return func(v any) error {
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
}
