package api

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-chi/cors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmserve/llmserve/api/anthropic"
	"github.com/llmserve/llmserve/api/catalog"
	"github.com/llmserve/llmserve/api/dataplane"
	"github.com/llmserve/llmserve/api/kservev1"
	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/responses"
	"github.com/llmserve/llmserve/api/responses/store"
	"github.com/llmserve/llmserve/api/tritonv1"
	v2 "github.com/llmserve/llmserve/api/v2"
	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/api/webui"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models"
)

// Options configure the handler.
type Options struct {
	Registry *models.Registry
	// Logger receives access logs (Debug) and failures; nil discards.
	Logger *slog.Logger
	// Registerer and Gatherer hold the metrics; nil means a private
	// registry (then /metrics shows only what was registered on it).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// APIKeys, when any is set, are the keys accepted as
	// "Authorization: Bearer <key>" on every inference route (as vLLM's
	// --api-key); health, metrics and the model list's probes stay open.
	APIKeys []string
	// CORS, when it allows any origin, answers browsers' cross-origin
	// requests and preflights (as vLLM's --allowed-origins).
	CORS CORSOptions
	// MaxBodyBytes limits request bodies (0: the protocol default).
	MaxBodyBytes int64
	// Media bound the images and audio of OpenAI chat requests.
	Media openai.MediaOptions
	// Repository, when set, is the model repository that the V2
	// repository routes load models from and unload them to.
	Repository *models.Repository
	// KVTransfer, when set, serves vLLM's kv_transfer_params on the
	// OpenAI routes (api/worker's Server).
	KVTransfer openai.KVTransfer
	// ResponseStore keeps the Responses API's stored responses (nil: one
	// in memory of the default size).
	ResponseStore *store.Store
	// OpenAI and V2, when set, serve the inference routes instead of the
	// registry's models, and V2.Ready decides readiness: llmserve head's
	// remote models (head/router). Registry still tracks requests.
	OpenAI openai.Backend
	V2     infer.Backend
	// Infer, when set, counts the tensor protocols' inference requests
	// (MLServer's model_infer_request_* and Triton v1's status
	// statistics); the same one goes to the gRPC services.
	Infer *metrics.Infer
	// MetricsPath is where GET serves the metrics ("": /metrics).
	// NoMetricsRoute leaves it out of this handler: the metrics have a
	// port of their own (MetricsHandler), as MLServer's metrics_port.
	MetricsPath    string
	NoMetricsRoute bool
	// LoRARuntimeUpdates mounts vLLM's POST /v1/load_lora_adapter and
	// /v1/unload_lora_adapter (--enable-lora-runtime-updates).
	LoRARuntimeUpdates bool
}

// DefaultMetricsPath is where the metrics are served unless
// Options.MetricsPath says otherwise (MLServer's metrics_endpoint).
const DefaultMetricsPath = "/metrics"

// MetricsHandler serves g's metrics in the Prometheus text format at path
// ("": DefaultMetricsPath) and 404 elsewhere: the handler of a metrics
// port of its own.
func MetricsHandler(g prometheus.Gatherer, path string) http.Handler {
	if path == "" {
		path = DefaultMetricsPath
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+path, promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

// NewHandler returns the server's HTTP handler.
func NewHandler(opts Options) (http.Handler, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil || opts.Gatherer == nil {
		reg := prometheus.NewRegistry()
		opts.Registerer, opts.Gatherer = reg, reg
	}
	if opts.MetricsPath == "" {
		opts.MetricsPath = DefaultMetricsPath
	}
	hm, err := newHTTPMetrics(opts.Registerer, opts.MetricsPath)
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Use(track(opts.Registry), middleware.RequestID, recoverer(log), accessLog(log, hm))
	if len(opts.CORS.AllowedOrigins) > 0 {
		// Before auth: a browser's preflight carries no credentials.
		r.Use(opts.CORS.handler())
	}
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)

	reg := opts.Registry
	v2b := V2Backend(reg)
	var oab openai.Backend = openaiBackend{reg}
	if opts.V2 != nil && opts.OpenAI != nil {
		v2b, oab = opts.V2, opts.OpenAI
	}
	ready := v2b.Ready
	r.Get("/health", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	r.Get("/v2/health/live", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"live": true})
	})
	r.Get("/v2/health/ready", func(w http.ResponseWriter, _ *http.Request) {
		ok := ready()
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, map[string]bool{"ready": ok})
	})
	// Triton's v1 health routes: no body, 200 or 503, and NV-Status.
	tritonv1.MountHealth(r, ready)
	if !opts.NoMetricsRoute {
		r.Method(http.MethodGet, opts.MetricsPath, promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	// The chat page is public: its API calls carry the key the user types.
	ui := webui.Handler(http.HandlerFunc(notFound))
	r.Method(http.MethodGet, "/", ui)
	r.Method(http.MethodGet, webui.Prefix+"*", ui)
	// The data plane's OpenAPI document and Swagger UI are public too.
	dataplane.Mount(r)

	r.Group(func(r chi.Router) {
		if keys := nonEmpty(opts.APIKeys); len(keys) > 0 {
			r.Use(bearerAuth(keys))
		}
		r.Use(runtimeHeaders)
		// The chat family: OpenAI's routes, and Anthropic's Messages and
		// OpenAI's Responses over the same chat path.
		oa := openai.New(oab, openai.Options{
			Logger:       log,
			MaxBodyBytes: opts.MaxBodyBytes,
			KVTransfer:   opts.KVTransfer,
			Media:        opts.Media,
		})
		oa.Mount(r)
		// The model list, in each client's shape, over the same models.
		catalog.Mount(r, oab)
		anthropic.Mount(r, oa, anthropic.Options{})
		responses.Mount(r, oa, responses.Options{Store: opts.ResponseStore})
		v2.Mount(r, v2b, v2.Options{Logger: log, MaxBodyBytes: opts.MaxBodyBytes, Infer: opts.Infer})
		kservev1.Mount(r, v2b, kservev1.Options{
			Logger: log, MaxBodyBytes: opts.MaxBodyBytes, Other: http.HandlerFunc(methodNotAllowed), Infer: opts.Infer,
		})
		tritonv1.Mount(r, v2b, tritonv1.Options{Logger: log, MaxBodyBytes: opts.MaxBodyBytes, Infer: opts.Infer, Repository: V2Repository(opts.Repository)})
		if opts.LoRARuntimeUpdates && reg != nil {
			mountLoRA(r, reg, log)
		}
		if opts.Repository != nil {
			v2.MountRepository(r, V2Repository(opts.Repository), v2.Options{Logger: log, MaxBodyBytes: opts.MaxBodyBytes})
		}
	})
	return r, nil
}

// openaiBackend adapts the registry to api/openai.Backend.
type openaiBackend struct{ reg *models.Registry }

func (b openaiBackend) Model(name string) (openai.Model, bool) {
	if g, ok := b.reg.Get(name); ok {
		return g, true
	}
	if a, ok := b.reg.GetAdapter(name); ok {
		return a, true
	}
	return nil, false
}

func (b openaiBackend) TensorModel(name string) (ready, ok bool) {
	if rt, ok := b.reg.GetRuntime(name); ok { // a custom runtime: tensors too
		return rt.Ready(), true
	}
	t, ok := b.reg.GetTensor(name)
	return ok && t.Ready(), ok
}

func (b openaiBackend) Models() []openai.Model {
	var out []openai.Model
	for _, g := range b.reg.List() {
		out = append(out, g)
		for _, a := range g.Adapters() {
			out = append(out, a)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the error format of the protocol the path belongs
// to: OpenAI's error object under /v1, Triton v1's NV-Status under /api,
// {"error": "..."} elsewhere (OIP).
func writeError(w http.ResponseWriter, r *http.Request, code int, typ, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		tritonv1.Refuse(w, code, msg)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1" {
		writeJSON(w, code, map[string]any{"error": map[string]any{
			"message": msg, "type": typ, "param": nil, "code": code,
		}})
		return
	}
	writeJSON(w, code, map[string]string{"error": msg})
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusNotFound, "NotFoundError", "no route for "+r.Method+" "+r.URL.Path)
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusMethodNotAllowed, "BadRequestError", "method "+r.Method+" is not allowed on "+r.URL.Path)
}

// bearerAuth accepts a request whose Authorization header is "Bearer k"
// for one of keys, or, without an Authorization header, whose x-api-key
// header is k (Anthropic's SDKs send that). Every key is compared, in constant time, so that the
// time taken does not say which key came close. A refusal is a 401 in the
// error shape of the protocol the path belongs to: the Open Inference
// Protocol's under /v2 (but /v2/rerank, Cohere's), Triton v1's under /api
// (NV-Status), Anthropic's under /v1/messages, OpenAI's elsewhere.
func bearerAuth(keys []string) func(http.Handler) http.Handler {
	want := make([][]byte, len(keys))
	for i, k := range keys {
		want[i] = []byte("Bearer " + k)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got := []byte(r.Header.Get("Authorization"))
			if len(got) == 0 {
				// Anthropic's SDKs send the key as x-api-key.
				if k := r.Header.Get("X-Api-Key"); k != "" {
					got = []byte("Bearer " + k)
				}
			}
			ok := 0
			for _, k := range want {
				ok |= subtle.ConstantTimeCompare(got, k)
			}
			if ok != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="llmserve"`)
				if r.URL.Path == "/v1/messages" || strings.HasPrefix(r.URL.Path, "/v1/messages/") {
					anthropic.WriteAuthError(w, "Missing or invalid API key: send the header x-api-key: <key> or Authorization: Bearer <key>.")
				} else if strings.HasPrefix(r.URL.Path, "/api/") {
					// Triton v1's: NV-Status and a text body.
					tritonv1.Refuse(w, http.StatusUnauthorized, "missing or invalid API key: send the header Authorization: Bearer <key>")
				} else if strings.HasPrefix(r.URL.Path, "/v2/") && r.URL.Path != "/v2/rerank" {
					// The Open Inference Protocol's error shape.
					writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or invalid API key: send the header Authorization: Bearer <key>"})
				} else {
					writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
						"message": "Missing or invalid API key: send the header Authorization: Bearer <key>.",
						"type":    "AuthenticationError", "param": nil, "code": "invalid_api_key",
					}})
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func nonEmpty(xs []string) []string {
	var out []string
	for _, x := range xs {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// CORSOptions are vLLM's CORS settings.
type CORSOptions struct {
	// AllowedOrigins lists the origins browsers may call from ("*": any);
	// empty means no cross-origin access.
	AllowedOrigins []string
	// AllowedMethods and AllowedHeaders default to every method and
	// header, as in vLLM.
	AllowedMethods   []string
	AllowedHeaders   []string
	AllowCredentials bool
}

func (o CORSOptions) handler() func(http.Handler) http.Handler {
	methods := o.AllowedMethods
	if len(methods) == 0 || slices.Contains(methods, "*") {
		methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions}
	}
	headers := o.AllowedHeaders
	if len(headers) == 0 {
		headers = []string{"*"}
	}
	return cors.Handler(cors.Options{
		AllowedOrigins:   o.AllowedOrigins,
		AllowedMethods:   methods,
		AllowedHeaders:   headers,
		ExposedHeaders:   []string{"Retry-After", "X-Request-Id"},
		AllowCredentials: o.AllowCredentials,
		MaxAge:           600,
	})
}

// recoverer turns a panic in a handler into a logged 500; a panic is a bug,
// never an answer to bad input.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
						panic(v)
					}
					log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
					writeError(w, r, http.StatusInternalServerError, "InternalServerError", "internal error")
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	rest     *metrics.REST // MLServer's names
}

func newHTTPMetrics(reg prometheus.Registerer, metricsPath string) (*httpMetrics, error) {
	rest, err := metrics.NewREST(reg, metricsPath, "/v2/health/live", "/v2/health/ready")
	if err != nil {
		return nil, err
	}
	m := &httpMetrics{
		rest: rest,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmserve_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "llmserve_http_request_duration_seconds", Help: "HTTP request duration (to the end of the body, streams included).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"route", "method"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func accessLog(log *slog.Logger, m *httpMetrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			restDone := m.rest.Start(r.Method, r.URL.Path)
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			}
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			if route == "unmatched" {
				restDone("", status)
			} else {
				restDone(mlserverRoute.Replace(route), status)
			}
			d := time.Since(start)
			m.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(route, r.Method).Observe(d.Seconds())
			level := slog.LevelDebug
			if status >= 500 {
				level = slog.LevelError
			}
			log.Log(r.Context(), level, "http request", "method", r.Method, "path", r.URL.Path, "status", status,
				"bytes", ww.BytesWritten(), "duration", d, "request_id", middleware.GetReqID(r.Context()))
		})
	}
}

// mlserverRoute names a route's parameters as MLServer's routes do, for
// the path label of its REST metrics.
var mlserverRoute = strings.NewReplacer("{model}", "{model_name}", "{version}", "{model_version}")
