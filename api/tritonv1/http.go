package tritonv1

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/api/v2/infer"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes
// is zero.
const DefaultMaxBodyBytes = 64 << 20

type handler struct {
	s       *service
	maxBody int64
}

// Mount adds the v1 status and inference routes to r:
//
//	GET  /api/status[/{model}]
//	POST /api/infer/{model}[/{version}]
//
// A model name with a slash is addressed as org%2Fmodel. The health
// probes are MountHealth's, so that they can stay outside authentication.
func Mount(r chi.Router, b infer.Backend, opts Options) {
	mount(r, newService(b, opts), opts.MaxBodyBytes)
}

func mount(r chi.Router, s *service, maxBody int64) {
	h := &handler{s: s, maxBody: maxBody}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	r.Get("/api/status", h.status)
	r.Get("/api/status/{model}", h.status)
	r.Post("/api/infer/{model}", h.infer)
	r.Post("/api/infer/{model}/{version}", h.infer)
}

// MountHealth adds the v1 health probes to r: GET /api/health/live (200
// while the process serves) and /api/health/ready (200 when ready says so,
// else 503), with no body and an NV-Status header.
func MountHealth(r chi.Router, ready func() bool) {
	r.Get("/api/health/live", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(HeaderStatus, headerText(requestStatus(nil)))
	})
	r.Get("/api/health/ready", func(w http.ResponseWriter, _ *http.Request) {
		var err error
		if !ready() {
			err = infer.Errorf(infer.Unavailable, "the server is not ready: a model is not ready, or the server is shutting down")
		}
		w.Header().Set(HeaderStatus, headerText(requestStatus(err)))
		w.WriteHeader(outcomeOf(err).http)
	})
}

// Refuse answers a request under /api/ that the router refuses before it
// reaches these routes (401 without the API key, 404 and 405 for a path or
// method not served, 500 for a panic) in the v1 form: that HTTP status,
// NV-Status (NOT_FOUND for 404, UNSUPPORTED for 405, INTERNAL for 5xx,
// INVALID_ARG otherwise: v1 has no code for a missing key) and the message
// as the body.
func Refuse(w http.ResponseWriter, status int, msg string) {
	code := pb.RequestStatusCode_INVALID_ARG
	switch {
	case status == http.StatusNotFound:
		code = pb.RequestStatusCode_NOT_FOUND
	case status == http.StatusMethodNotAllowed:
		code = pb.RequestStatusCode_UNSUPPORTED
	case status >= 500:
		code = pb.RequestStatusCode_INTERNAL
	}
	rs := requestStatus(nil)
	rs.Code, rs.Msg = code, msg
	w.Header().Set(HeaderStatus, headerText(rs))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, msg)
}

// pathParam is a path parameter, unescaped.
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// binaryFormat reads ?format=: "binary" or the default "text".
func binaryFormat(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "", "text":
		return false, nil
	case "binary":
		return true, nil
	default:
		return false, infer.Errorf(infer.Invalid, "format=%s is not a format: use format=text (the default) or format=binary", q(f))
	}
}

func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	bin, err := binaryFormat(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	st, msg, err := h.s.status(pathParam(r, "model"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := encode(st, bin, true)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rs := requestStatus(nil)
	rs.Msg = msg
	w.Header().Set(HeaderStatus, headerText(rs))
	writeBody(w, bin, b)
}

func (h *handler) infer(w http.ResponseWriter, r *http.Request) {
	bin, err := binaryFormat(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	version := pathParam(r, "version")
	if version == "-1" {
		version = ""
	}
	v, present := r.Header[http.CanonicalHeaderKey(HeaderInferRequest)]
	value := ""
	if present {
		value = v[0]
	}
	var tooLarge *http.MaxBytesError
	resp, raw, err := h.s.infer(r.Context(), pathParam(r, "model"), version, func(spec *modelSpec) (*decoded, error) {
		hdr, err := parseRequestHeader(value, present)
		if err != nil {
			return nil, err
		}
		body := r.Body
		if h.maxBody > 0 {
			body = http.MaxBytesReader(w, r.Body, h.maxBody)
		}
		data, err := io.ReadAll(body)
		if errors.As(err, &tooLarge) {
			return nil, infer.Errorf(infer.Invalid, "the request body is larger than the limit of %d bytes", tooLarge.Limit)
		}
		if err != nil {
			return nil, infer.Errorf(infer.Invalid, "the request body could not be read: %v", err)
		}
		return decodeBody(hdr, spec, data)
	})
	if err != nil {
		if tooLarge != nil {
			h.failCode(w, r, err, http.StatusRequestEntityTooLarge)
			return
		}
		h.fail(w, r, err)
		return
	}
	trailer, err := encode(resp, bin, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set(HeaderInferResponse, headerText(resp))
	w.Header().Set(HeaderStatus, headerText(requestStatus(nil)))
	// The raw output data, then the response message: binary data, even
	// when the message is text.
	writeBody(w, true, append(raw, trailer)...)
}

// encode is m in binary or text protobuf (multi-line for a body, as
// Triton's status is read by people too).
func encode(m proto.Message, bin, multiline bool) ([]byte, error) {
	if bin {
		return proto.Marshal(m)
	}
	return marshalText(m, !multiline), nil
}

// writeBody writes parts, in order, as the whole body of a 200 answer:
// binary (bin) or text.
func writeBody(w http.ResponseWriter, bin bool, parts ...[]byte) {
	contentType, n := "text/plain; charset=utf-8", 0
	if bin {
		contentType = "application/octet-stream"
	}
	for _, b := range parts {
		n += len(b)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	for _, b := range parts {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

// fail answers an error: the HTTP status of its RequestStatusCode, the
// NV-Status header, and the message as the text body.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.failCode(w, r, err, 0)
}

func (h *handler) failCode(w http.ResponseWriter, r *http.Request, err error, code int) {
	o := outcomeOf(err)
	if code == 0 {
		code = o.http
	}
	h.s.logFailure(r.Context(), r.Method+" "+r.URL.Path, err)
	w.Header().Set(HeaderStatus, headerText(requestStatus(err)))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if o.code == pb.RequestStatusCode_UNAVAILABLE && code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, o.msg)
}
