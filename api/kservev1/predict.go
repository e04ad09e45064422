package kservev1

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/metrics"
)

// DefaultMaxBodyBytes is the request body limit when MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 16 << 20

// Options configure the route.
type Options struct {
	// Logger receives failed requests; nil discards.
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies (0: DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Other answers a POST to /v1/models/... that is not :predict (the
	// router's 405 in OpenAI's shape, as that path is OpenAI's); nil: a
	// KServe 404.
	Other http.Handler
	// Infer, when set, counts predict requests per model (MLServer's
	// model_infer_request_success and _failure).
	Infer *metrics.Infer
}

// Mount adds POST /v1/models/{m}:predict to r. Model names may hold
// slashes (org/model:predict, or org%2Fmodel:predict).
func Mount(r chi.Router, b infer.Backend, opts Options) {
	h := &handler{b: b, rec: opts.Infer, log: opts.Logger, maxBody: opts.MaxBodyBytes, other: opts.Other}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	r.Post("/v1/models/*", h.post)
}

type handler struct {
	b       infer.Backend
	rec     *metrics.Infer
	log     *slog.Logger
	maxBody int64
	other   http.Handler
}

func (h *handler) post(w http.ResponseWriter, r *http.Request) {
	rest := chi.URLParam(r, "*")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(rest); err == nil {
			rest = u
		}
	}
	name, verb, ok := cutLast(rest, ":")
	if (!ok || verb != "predict") && h.other != nil {
		h.other.ServeHTTP(w, r)
		return
	}
	if !ok || verb != "predict" {
		h.fail(w, r, infer.Errorf(infer.NotFound, "no route for POST %s: KServe V1 serves POST /v1/models/{model}:predict", r.URL.Path))
		return
	}
	h.predict(w, r, name)
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func (h *handler) predict(w http.ResponseWriter, r *http.Request, name string) {
	arrival := time.Now()
	m, preds, err := h.runPredict(w, r, name)
	infer.Observe(h.rec, h.b, m, name, err, arrival)
	switch ea := (errAnswered{}); {
	case errors.As(err, &ea):
	case err != nil:
		h.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"predictions": preds})
	}
}

// runPredict serves :predict up to its predictions: a tensor model's or a
// custom runtime's outputs (decodeTensorInstances, then infer.Run by the
// model's kind), or an embedding model's vectors (decodeInstances, then
// infer.EmbedTexts). m is the model, nil when the lookup failed; an
// errAnswered was answered already (readBody).
func (h *handler) runPredict(w http.ResponseWriter, r *http.Request, name string) (m infer.Model, preds any, err error) {
	m, err = infer.LookupReady(r.Context(), h.b, name, "")
	if err != nil {
		return nil, nil, err
	}
	sig, tensor := infer.AsSignature(m)
	var e infer.Embedder
	if !tensor {
		if e, err = infer.AsEmbedder(m); err != nil {
			return m, nil, err
		}
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return m, nil, err
	}
	if tensor {
		req, err := decodeTensorInstances(body, sig)
		if err != nil {
			return m, nil, err
		}
		resp, err := infer.Run(r.Context(), sig, req, infer.GenOptions{})
		if err != nil {
			return m, nil, err
		}
		return m, tensorPredictions(resp.Outputs), nil
	}
	texts, err := decodeInstances(body)
	if err != nil {
		return m, nil, err
	}
	vecs, err := infer.EmbedTexts(r.Context(), e, texts, func(i int) string { return "instances[" + strconv.Itoa(i) + "]" })
	return m, vecs, err
}

// instancesOf reads the body {"instances": [instance, ...]}, a list of at
// least one instance; what says what an instance is ("text", "row") and
// list what the list holds, for the errors.
func instancesOf(body []byte, what, list string) ([]json.RawMessage, error) {
	var req struct {
		Instances *[]json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, infer.Errorf(infer.Invalid, "the body is not a JSON object {\"instances\": [...]}: %v", err)
	}
	if req.Instances == nil {
		return nil, infer.Errorf(infer.Invalid, "instances is required: %s", list)
	}
	if len(*req.Instances) == 0 {
		return nil, infer.Errorf(infer.Invalid, "instances is empty; send at least one %s", what)
	}
	return *req.Instances, nil
}

// decodeInstances reads {"instances": [text | {"text": text}, ...]}.
func decodeInstances(body []byte) ([]string, error) {
	instances, err := instancesOf(body, "text", "a list of texts or {\"text\": ...} objects")
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(instances))
	for i, raw := range instances {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			texts[i] = s
			continue
		}
		var o struct {
			Text *string `json:"text"`
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil || o.Text == nil {
			return nil, infer.Errorf(infer.Invalid, "instances[%d] must be a text or an object {\"text\": \"...\"}; this model embeds texts (arrays are for tensor models)", i)
		}
		texts[i] = *o.Text
	}
	return texts, nil
}

// fail writes err in KServe V1's shape, {"error": "..."}.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := infer.AsError(err)
	code := e.Code.HTTPStatus()
	if e.Code == infer.Exhausted {
		w.Header().Set("Retry-After", "1")
	}
	level := slog.LevelDebug
	if code >= 500 {
		level = slog.LevelError
	}
	h.log.Log(r.Context(), level, "kserve v1 request failed", "path", r.URL.Path, "status", code, "err", err)
	writeJSON(w, code, map[string]string{"error": e.Msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"the server failed to encode its response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// errAnswered is a readBody failure it has answered already.
type errAnswered struct{ error }

// readBody reads the request body up to the limit; when it cannot, it has
// answered (413 over the limit, else 400) and returns an errAnswered.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		msg := fmt.Sprintf("the request body is larger than the limit of %d bytes", mb.Limit)
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": msg})
		return nil, errAnswered{errors.New(msg)}
	}
	if err != nil {
		err = infer.Errorf(infer.Invalid, "the request body could not be read: %v", err)
		h.fail(w, r, err)
		return nil, errAnswered{err}
	}
	return body, nil
}
