package v2

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/metrics"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes
// is zero.
const DefaultMaxBodyBytes = 64 << 20

// Options configure the routes. The zero value is usable.
type Options struct {
	// Logger receives failed requests (Error for 5xx, Debug otherwise);
	// nil discards.
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies (413 beyond); zero means
	// DefaultMaxBodyBytes, negative no limit.
	MaxBodyBytes int64
	// Version is the server version in server metadata; "" means the
	// module version the binary was built as.
	Version string
	// Infer, when set, counts infer and infer_stream requests per model
	// (MLServer's model_infer_request_success and _failure).
	Infer *metrics.Infer
}

type handler struct {
	b       infer.Backend
	rec     *metrics.Infer
	log     *slog.Logger
	maxBody int64
	version string
	now     func() time.Time
	seed    func() uint32
}

// Mount adds the V2 routes to r: server metadata, and for every model,
// with and without /versions/{version}: metadata, ready, config (Triton's
// model configuration extension), infer, generate, generate_stream and
// infer_stream. The health probes stay with the router.
func Mount(r chi.Router, b infer.Backend, opts Options) {
	h := &handler{b: b, rec: opts.Infer, log: opts.Logger, maxBody: opts.MaxBodyBytes, version: opts.Version, now: time.Now, seed: mrand.Uint32}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.version == "" {
		h.version = infer.ServerVersion()
	}
	r.Get("/v2", h.serverMetadata)
	for _, base := range []string{"/v2/models/{model}", "/v2/models/{model}/versions/{version}"} {
		r.Get(base, h.modelMetadata)
		r.Get(base+"/ready", h.modelReady)
		r.Get(base+"/config", h.modelConfig)
		r.Post(base+"/infer", h.infer)
		r.Post(base+"/generate", h.generate)
		r.Post(base+"/generate_stream", h.generateStream)
		r.Post(base+"/infer_stream", h.inferStream)
	}
}

func (h *handler) serverMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"name": infer.ServerName, "version": h.version, "extensions": infer.Extensions})
}

func (h *handler) lookup(r *http.Request) (infer.Model, error) {
	return infer.Lookup(h.b, pathParam(r, "model"), pathParam(r, "version"))
}

// pathParam is a path parameter, unescaped: a model name with a slash
// ("org/model") is addressed as org%2Fmodel.
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

func (h *handler) modelMetadata(w http.ResponseWriter, r *http.Request) {
	m, err := h.lookup(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, infer.Metadata(m))
}

// modelReady answers 200 with {"name","ready":true} or 503 with ready
// false, so that it works as a probe.
func (h *handler) modelReady(w http.ResponseWriter, r *http.Request) {
	m, err := h.lookup(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	code := http.StatusOK
	if !m.Ready() {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"name": m.Name(), "ready": m.Ready()})
}

func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, _, err := h.readBodyPooled(w, r, false)
	return b, err
}

// readBodyPooled is readBody into a buffer from bodyBuffers when pooled
// (and the body's length is known): the caller gives buf back (nil: none)
// once nothing holds the body.
func (h *handler) readBodyPooled(w http.ResponseWriter, r *http.Request, pooled bool) (b []byte, buf *infer.Buffer, err error) {
	body := r.Body
	if h.maxBody > 0 {
		body = http.MaxBytesReader(w, r.Body, h.maxBody)
	}
	at := binaryOffset(r.Header.Get(headerLength))
	if pooled {
		b, buf, err = readPooled(body, r.ContentLength, h.maxBody, at)
	} else {
		b, err = readAll(body, r.ContentLength, h.maxBody, at)
	}
	if err != nil {
		bodyBuffers.Put(buf)
		buf = nil
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return nil, nil, errTooLarge{mb.Limit}
	}
	if err != nil {
		// The client went away or sent a broken body.
		return nil, nil, infer.Errorf(infer.Invalid, "the request body could not be read: %v", err)
	}
	return b, buf, nil
}

// readAll reads r to its end into one buffer of the body's announced
// length (n, -1 if unknown), where io.ReadAll would grow and copy its way
// up to it (a 256-row CNN request is 800 kB of binary tensor data). A
// length beyond limit (or 64 MiB with no limit) is not trusted for the
// first allocation: the reading stops at the limit anyway. The buffer is
// placed so that byte at (the binary tensor data after the JSON header)
// is 8-byte aligned: FP32 inputs are then handed to the model as they lie
// in the body, without a decoded copy (infer.ConvertInputs).
func readAll(r io.Reader, n, limit int64, at int) ([]byte, error) {
	if limit <= 0 {
		limit = 64 << 20
	}
	if n <= 0 || n > limit {
		return io.ReadAll(r)
	}
	pad := (8 - at%8) % 8
	// Room to read EOF without growing; Go aligns the allocation to 8.
	b := make([]byte, int64(pad)+n+bytes.MinRead)
	buf := bytes.NewBuffer(b[pad:pad])
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// binaryOffset is where the binary data starts in a body whose
// Inference-Header-Content-Length is header: 0 when absent or malformed
// (decodeInfer refuses the latter).
func binaryOffset(header string) int {
	n, err := strconv.Atoi(header)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func (h *handler) infer(w http.ResponseWriter, r *http.Request) {
	arrival := h.now()
	m, out, n, err := h.runInfer(w, r, arrival)
	infer.Observe(h.rec, h.b, m, pathParam(r, "model"), err, arrival)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if n >= 0 {
		w.Header().Set(headerLength, strconv.Itoa(n))
		w.Header().Set("Content-Type", "application/octet-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// runInfer serves an infer request up to its encoded answer: the body,
// and n, the JSON header's length when binary data follows it (else -1).
// m is the model, nil when the lookup failed.
func (h *handler) runInfer(w http.ResponseWriter, r *http.Request, arrival time.Time) (m infer.Model, out []byte, n int, err error) {
	m, err = infer.LookupReady(r.Context(), h.b, pathParam(r, "model"), pathParam(r, "version"))
	if err != nil {
		return nil, nil, 0, err
	}
	// A tensor model's body is read into a reused buffer (bodypool.go),
	// given back once the model has answered.
	tensor := infer.KindOf(m) == infer.KindTensor
	body, buf, err := h.readBodyPooled(w, r, tensor)
	if err != nil {
		return m, nil, 0, err
	}
	d, err := decodeInfer(body, r.Header.Get(headerLength))
	if err != nil {
		return m, nil, 0, err
	}
	resp, err := infer.Run(r.Context(), m, d.Request, infer.GenOptions{Arrival: arrival, Seed: h.seed(), IDPrefix: "v2-infer-"})
	if err != nil {
		return m, nil, 0, err
	}
	out, n, err = encodeInfer(d, resp)
	if err == nil {
		// The model's Run has returned and keeps no input; the request's
		// values hold no slice of the body (names, ids and parameters
		// are copies) and the response is new memory.
		bodyBuffers.Put(buf)
	}
	return m, out, n, err
}

// errTooLarge is a body over the limit: 413.
type errTooLarge struct{ limit int64 }

func (e errTooLarge) Error() string {
	return "the request body is larger than the limit of " + strconv.FormatInt(e.limit, 10) + " bytes"
}

// status maps an error to its HTTP status and message. It is the one place
// that does so for the V2 REST routes.
func status(err error) (int, string, time.Duration) {
	var tl errTooLarge
	if errors.As(err, &tl) {
		return http.StatusRequestEntityTooLarge, tl.Error(), 0
	}
	e := infer.AsError(err)
	switch e.Code {
	case infer.Unavailable:
		return e.Code.HTTPStatus(), e.Msg, e.RetryAfter
	case infer.Exhausted:
		return e.Code.HTTPStatus(), e.Msg, max(e.RetryAfter, time.Second)
	}
	return e.Code.HTTPStatus(), e.Msg, 0
}

// fail writes err as {"error": "..."} with its status.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg, retry := status(err)
	h.log.Log(r.Context(), levelFor(code), "v2 request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	}
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"the server failed to encode its response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func levelFor(code int) slog.Level {
	if code >= 500 {
		return slog.LevelError
	}
	return slog.LevelDebug
}
