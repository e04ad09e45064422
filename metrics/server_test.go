package metrics

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
// py-grpc-prometheus (MLServer's) writes them.
func TestGRPCCodesAsPython(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewGRPCServer(reg)
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/inference.GRPCInferenceService/ModelInfer"}
	for _, c := range []codes.Code{codes.OK, codes.InvalidArgument, codes.Canceled} {
		_, _ = m.UnaryServerInterceptor()(context.Background(), nil, info, func(context.Context, any) (any, error) {
			return nil, status.Error(c, "x")
		})
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "grpc_code" {
					got = append(got, l.GetValue())
				}
			}
		}
	}
	slices.Sort(got)
	if want := []string{"CANCELLED", "INVALID_ARGUMENT", "OK"}; !slices.Equal(got, want) {
		t.Errorf("grpc_code values %v, want %v", got, want)
	}
	for i := range 17 {
		if _, ok := grpcCodeNames[codes.Code(i).String()]; !ok {
			t.Errorf("no Python name for %s", codes.Code(i))
		}
	}
}
