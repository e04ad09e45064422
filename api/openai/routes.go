package openai

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/jsonwire"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is
// zero (or one item of Options.Media.MaxBytes in base64 and 1 MiB, when
// that is larger): far above any text prompt a model here can take, small
// enough that a client cannot make the server buffer arbitrary amounts.
const DefaultMaxBodyBytes = 16 << 20

// Options configure the routes. The zero value is usable.
type Options struct {
	// Logger receives one line per failed request (Error for 5xx, Debug
	// otherwise) and per finished request (Debug). Nil discards.
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies; larger ones get 413. Zero means
	// DefaultMaxBodyBytes (see there); negative means no limit.
	MaxBodyBytes int64
	// RequestID returns the id of an HTTP request, typically the one a
	// request-id middleware assigned. It becomes the response id
	// ("chatcmpl-<id>", "cmpl-<id>") and the scheduler request id, so it
	// must be unique among live requests: do not pass a client's header
	// through unchecked. Nil, or an empty result, means a random id.
	RequestID func(*http.Request) string
	// KVTransfer serves kv_transfer_params; nil refuses them (400).
	KVTransfer KVTransfer
	// Media bound the images and audio of chat requests. With
	// MaxBodyBytes zero, the body limit grows to hold one item of
	// Media.MaxBytes in base64.
	Media MediaOptions
	// Now and Seed, when set, replace the clock and the source of random
	// sampling seeds (tests make answers deterministic with them).
	Now  func() time.Time
	Seed func() uint32
}

// Mount adds the OpenAI routes of New(b, opts) to r (Server.Mount).
func Mount(r chi.Router, b Backend, opts Options) {
	New(b, opts).Mount(r)
}

// Server serves the OpenAI routes over a Backend, and is the chat path
// the other chat-family protocols share (family.go): api/anthropic and
// api/responses hold one and mount their own routes beside its.
type Server struct{ h *handler }

// New returns the server of b's models.
func New(b Backend, opts Options) *Server { return &Server{h: newHandler(b, opts)} }

// Mount adds the OpenAI routes to r:
//
//	POST /v1/chat/completions
//	POST /v1/completions
//	POST /v1/embeddings
//	POST /v1/score, /score                      (vLLM)
//	POST /v1/rerank, /rerank, /v2/rerank        (Jina, Cohere)
//	POST /tokenize, /detokenize                 (vLLM)
func (s *Server) Mount(r chi.Router) {
	h := s.h
	score, rerank := serveJSON(h, "score-", h.poolingModel, h.score), serveJSON(h, "rerank-", h.poolingModel, h.rerank)
	post := map[string]http.HandlerFunc{
		"/v1/chat/completions": h.chatCompletions, "/v1/completions": h.completions,
		"/v1/embeddings": serveJSON(h, "embd-", h.poolingModel, h.embeddings),
		"/v1/score":      score, "/score": score, "/v1/rerank": rerank, "/rerank": rerank, "/v2/rerank": rerank,
		"/tokenize":   serveJSON(h, "tokenize-", h.anyModel, h.tokenize),
		"/detokenize": serveJSON(h, "detokenize-", h.anyModel, h.detokenize),
	}
	for path, fn := range post {
		r.Post(path, fn)
	}
}

// handler serves the routes. Its function fields are seams for tests.
type handler struct {
	backend   Backend
	log       *slog.Logger
	maxBody   int64
	requestID func(*http.Request) string
	transfer  KVTransfer
	now       func() time.Time
	seed      func() uint32
	media     *mediaConfig
}

func newHandler(b Backend, opts Options) *handler {
	h := &handler{
		backend:   b,
		log:       opts.Logger,
		maxBody:   opts.MaxBodyBytes,
		requestID: opts.RequestID,
		transfer:  opts.KVTransfer,
		now:       time.Now,
		seed:      mrand.Uint32,
		media:     newMediaConfig(opts.Media),
	}
	if opts.Now != nil {
		h.now = opts.Now
	}
	if opts.Seed != nil {
		h.seed = opts.Seed
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody == 0 {
		h.maxBody = h.media.bodyLimit(DefaultMaxBodyBytes)
	}
	return h
}

// id returns the request's id.
func (h *handler) id(r *http.Request) string {
	if h.requestID != nil {
		if id := h.requestID(r); id != "" {
			return id
		}
	}
	return randomID()
}

// randomID is 26 base32 characters (130 bits).
func randomID() string { return rand.Text() }

// readBody reads the whole body within the size limit.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := r.Body
	if h.maxBody > 0 {
		body = http.MaxBytesReader(w, r.Body, h.maxBody)
	}
	b, err := io.ReadAll(body)
	var mb *http.MaxBytesError
	if err != nil && !errors.As(err, &mb) {
		return nil, invalid("", "The request body could not be read: %v.", err)
	}
	return b, err
}

// readJSON reads the body within the size limit, checks that its text is
// valid Unicode and decodes it into v. It returns the body, for decoders
// of further fields.
func (h *handler) readJSON(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	body, err := h.readBody(w, r)
	if err != nil {
		return nil, err
	}
	return body, jsonwire.DecodeBody(body, v)
}

// jsonCall is one request to a route that answers with one JSON document.
type jsonCall struct {
	r       *http.Request
	id      string // the response id: the route's prefix and the request's id
	arrival time.Time
	body    []byte // the request body, for decoders of further fields
}

// modelNamed is a request body that names the model it is for.
type modelNamed interface{ modelName() string }

// serveJSON is the handler of a route that answers with one JSON document
// (embeddings, score, rerank, tokenize, detokenize): it reads the body into
// a Req (readJSON), finds the model it names with find, and writes what
// answer makes of them with 200. Every failure, at any of these steps, is
// answered once, by fail, under the response id.
func serveJSON[Req modelNamed, M any](h *handler, prefix string,
	find func(c *jsonCall, name string) (M, error),
	answer func(c *jsonCall, req *Req, m M) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &jsonCall{r: r, arrival: h.now()}
		c.id = prefix + h.id(r)
		resp, err := func() (any, error) {
			var req Req
			body, err := h.readJSON(w, r, &req)
			if err != nil {
				return nil, err
			}
			c.body = body
			m, err := find(c, req.modelName())
			if err != nil {
				return nil, err
			}
			return answer(c, &req, m)
		}()
		if err != nil {
			h.fail(w, r, c.id, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

// anyModel is serveJSON's find for routes every model serves.
func (h *handler) anyModel(c *jsonCall, name string) (Model, error) {
	return h.model(c.r.Context(), name)
}

// model finds the model a request names. "model" is required, as OpenAI
// and its SDKs require it (vLLM serves the first model instead; a client
// that forgot the field should hear so, not get some model's answer).
//
// A Backend that is a ModelWaiter (a head before any worker answered) is
// asked to wait for a model it does not know yet.
func (h *handler) model(ctx context.Context, name string) (Model, error) {
	if name == "" {
		return nil, invalid("model", "model is required: the id of a served model (GET /v1/models lists them).")
	}
	if m, ok := h.backend.Model(name); ok {
		return m, nil
	}
	if mw, ok := h.backend.(ModelWaiter); ok {
		m, err := mw.WaitModel(ctx, name)
		if err != nil {
			return nil, err
		}
		if m != nil {
			return m, nil
		}
	}
	if tb, ok := h.backend.(TensorModels); ok {
		if _, ok := tb.TensorModel(name); ok {
			return nil, invalid("model", "The model `%s` is a tensor model, not an LLM: the OpenAI API does not serve it. Send its input tensors to POST /v2/models/%s/infer (V2) or POST /v1/models/%s:predict (KServe V1).", name, name, name)
		}
	}
	return nil, &modelNotFoundError{name: name}
}

// fail answers a request that failed before any response was written.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, id string, err error) {
	if isClientGone(err) {
		h.log.Debug("client went away", "id", id, "path", r.URL.Path)
		return
	}
	e := toAPIError(err)
	h.logError(r, id, e, err)
	writeError(w, e)
}

// logError logs a failed request: server errors at Error with the internal
// error, client errors at Debug.
func (h *handler) logError(r *http.Request, id string, e *apiError, err error) {
	level := slog.LevelDebug
	if e.status >= 500 {
		level = slog.LevelError
	}
	h.log.Log(r.Context(), level, "request failed", "id", id, "path", r.URL.Path, "status", e.status, "err", err)
}
