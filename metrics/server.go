package metrics

import (
	"slices"
	"strconv"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RESTAppName is the app_name label of the REST server metrics.
const RESTAppName = "llmserve"

// restBuckets are the Prometheus Python client's default histogram
// buckets, which MLServer's REST metrics (starlette_exporter) use.
var restBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// REST records MLServer's REST server metrics, under the names its REST
// server really exports (starlette_exporter with the prefix
// rest_server): rest_server_requests_total and
// rest_server_request_duration_seconds by method, path (the route
// template, such as /v2/models/{model_name}/infer), status_code and
// app_name, and rest_server_requests_in_progress by method and app_name.
// As MLServer, it skips the metrics endpoint and the server health
// probes, and a request no route matched is counted only in progress.
type REST struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	inProgress *prometheus.GaugeVec
	skip       []string
}

// NewREST registers the REST server metrics on reg; requests to the paths
// in skip (the metrics endpoint, the health probes) are not recorded.
func NewREST(reg prometheus.Registerer, skip ...string) (*REST, error) {
	labels := []string{"method", "path", "status_code", "app_name"}
	m := &REST{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_server_requests_total", Help: "Total HTTP requests (MLServer's REST server metric).",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_server_request_duration_seconds", Help: "HTTP request duration, in seconds (MLServer's REST server metric).", Buckets: restBuckets,
		}, labels),
		inProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rest_server_requests_in_progress", Help: "HTTP requests currently in progress (MLServer's REST server metric).",
		}, []string{"method", "app_name"}),
		skip: skip,
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inProgress} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Start records a request to urlPath as in progress. The caller calls
// done when the response is written, with the route template that served
// it ("" when no route matched) and the status code. A nil *REST records
// nothing.
func (m *REST) Start(method, urlPath string) (done func(route string, status int)) {
	if m == nil || slices.Contains(m.skip, urlPath) {
		return func(string, int) {}
	}
	start := time.Now()
	g := m.inProgress.WithLabelValues(method, RESTAppName)
	g.Inc()
	return func(route string, status int) {
		g.Dec()
		if route == "" {
			return
		}
		code := strconv.Itoa(status)
		m.requests.WithLabelValues(method, route, code, RESTAppName).Inc()
		m.duration.WithLabelValues(method, route, code, RESTAppName).Observe(time.Since(start).Seconds())
	}
}

// NewGRPCServer registers the gRPC server metrics MLServer exports (through
// py-grpc-prometheus, with the handling time histogram on):
// grpc_server_started_total, grpc_server_handled_total,
// grpc_server_msg_received_total, grpc_server_msg_sent_total and
// grpc_server_handling_seconds, labelled grpc_type, grpc_service,
// grpc_method (and grpc_code on handled, written as py-grpc-prometheus
// writes it: Python's StatusCode names, INVALID_ARGUMENT where Go writes
// InvalidArgument). Its UnaryServerInterceptor and
// StreamServerInterceptor go on the gRPC server.
func NewGRPCServer(reg prometheus.Registerer) (*grpcprom.ServerMetrics, error) {
	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	if err := reg.Register(pythonCodes{m}); err != nil {
		return nil, err
	}
	return m, nil
}

// pythonCodes is a collector whose grpc_code label values are Python's
// grpc.StatusCode names (py-grpc-prometheus writes code.name) rather than
// Go's codes.Code.String().
type pythonCodes struct{ prometheus.Collector }

func (c pythonCodes) Collect(ch chan<- prometheus.Metric) {
	in := make(chan prometheus.Metric)
	go func() {
		c.Collector.Collect(in)
		close(in)
	}()
	for m := range in {
		ch <- pythonCodeMetric{m}
	}
}

// pythonCodeMetric renames the value of its grpc_code label.
type pythonCodeMetric struct{ prometheus.Metric }

func (m pythonCodeMetric) Write(out *dto.Metric) error {
	if err := m.Metric.Write(out); err != nil {
		return err
	}
	for _, l := range out.GetLabel() {
		if l.GetName() == "grpc_code" {
			if name, ok := grpcCodeNames[l.GetValue()]; ok {
				l.Value = &name
			}
		}
	}
	return nil
}

// grpcCodeNames maps Go's names of the gRPC status codes to Python's.
var grpcCodeNames = map[string]string{
	"OK": "OK", "Canceled": "CANCELLED", "Unknown": "UNKNOWN", "InvalidArgument": "INVALID_ARGUMENT",
	"DeadlineExceeded": "DEADLINE_EXCEEDED", "NotFound": "NOT_FOUND", "AlreadyExists": "ALREADY_EXISTS",
	"PermissionDenied": "PERMISSION_DENIED", "ResourceExhausted": "RESOURCE_EXHAUSTED",
	"FailedPrecondition": "FAILED_PRECONDITION", "Aborted": "ABORTED", "OutOfRange": "OUT_OF_RANGE",
	"Unimplemented": "UNIMPLEMENTED", "Internal": "INTERNAL", "Unavailable": "UNAVAILABLE",
	"DataLoss": "DATA_LOSS", "Unauthenticated": "UNAUTHENTICATED",
}
