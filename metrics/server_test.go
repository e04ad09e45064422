package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRESTSkipsAndUnmatched(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewREST(reg, "/metrics", "/v2/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	done := m.Start("POST", "/v2/models/a/infer")
	if got := testutil.ToFloat64(m.inProgress.WithLabelValues("POST", RESTAppName)); got != 1 {
		t.Fatalf("in progress %v, want 1", got)
	}
	done("/v2/models/{model_name}/infer", 200)
	m.Start("GET", "/metrics")("/metrics", 200)
	m.Start("GET", "/v2/health/ready")("/v2/health/ready", 200)
	m.Start("GET", "/nowhere")("", 404)
	if got := testutil.ToFloat64(m.inProgress.WithLabelValues("POST", RESTAppName)); got != 0 {
		t.Errorf("in progress %v after the request, want 0", got)
	}
	if n := testutil.CollectAndCount(m.requests); n != 1 {
		t.Errorf("%d request series, want 1: skipped paths and unmatched requests are not counted", n)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("POST", "/v2/models/{model_name}/infer", "200", RESTAppName)); got != 1 {
		t.Errorf("rest_server_requests_total = %v", got)
	}
	var none *REST
	none.Start("GET", "/")("/", 200)
	if _, err := NewGRPCServer(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewGRPCServer(reg); err == nil {
		t.Error("registering the gRPC metrics twice on one registry passed")
	}
}

func TestTensorQueues(t *testing.T) {
	reg := prometheus.NewRegistry()
	tm, err := NewTensor(reg, "m", "3", func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	tm.Arrived(2, 1)
	tm.Arrived(0, 0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "batch_request_queue", "parallel_request_queue":
			found++
			m := mf.GetMetric()[0]
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model_name"] != "m" || labels["model_version"] != "3" || m.GetHistogram().GetSampleCount() != 2 {
				t.Errorf("%s: labels %v, %d samples", mf.GetName(), labels, m.GetHistogram().GetSampleCount())
			}
			want := 2.0
			if mf.GetName() == "parallel_request_queue" {
				want = 1
			}
			if m.GetHistogram().GetSampleSum() != want {
				t.Errorf("%s sum %v, want %v", mf.GetName(), m.GetHistogram().GetSampleSum(), want)
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d of the queue histograms", found)
	}
}

// TestGRPCCodesAsPython: grpc_code holds Python's status code names, as
// py-grpc-prometheus (MLServer's) writes them; other labels and values
// are untouched.
func TestGRPCCodesAsPython(t *testing.T) {
	handled := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_server_handled_total", Help: "h"}, []string{"grpc_method", "grpc_code"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(pythonCodes{handled})
	handled.WithLabelValues("ModelInfer", "OK").Inc()
	handled.WithLabelValues("ModelInfer", "InvalidArgument").Add(2)
	handled.WithLabelValues("Canceled", "Canceled").Inc()
	handled.WithLabelValues("ModelInfer", "SomethingNew").Inc()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP grpc_server_handled_total h
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="CANCELLED",grpc_method="Canceled"} 1
grpc_server_handled_total{grpc_code="INVALID_ARGUMENT",grpc_method="ModelInfer"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="ModelInfer"} 1
grpc_server_handled_total{grpc_code="SomethingNew",grpc_method="ModelInfer"} 1
`)); err != nil {
		t.Error(err)
	}
	if len(grpcCodeNames) != 17 {
		t.Errorf("%d gRPC code names, want the 17 codes", len(grpcCodeNames))
	}
	if _, err := NewGRPCServer(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
}
