package tests

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmserve/llmserve/api"
	v2grpc "github.com/llmserve/llmserve/api/v2/grpc"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// TestMLServerMetricsLLM: the LLM's V2 infer over REST (JSON and an
// infer_stream) and gRPC (ModelInfer and the requests of a stream), good
// and bad, are counted in model_infer_request_success_total and
// _failure_total (and model_infer_request_duration) under model and
// version, as MLServer's dataplane labels them, read from /metrics over HTTP; generate
// and the OpenAI routes are not inference requests of the tensor
// protocols and are not counted.
func TestMLServerMetricsLLM(t *testing.T) {
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	registry := models.NewRegistry()
	t.Cleanup(func() { registry.Close() })
	g, err := models.LoadGenerative(models.GenerativeConfig{CacheDir: modelDir, MaxNumSeqs: 8, InitialSeqs: 2, MaxWaiting: 64, Threads: 1}, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.Add(g); err != nil {
		t.Fatal(errors.Join(err, g.Close()))
	}
	rec, err := metrics.NewInfer(reg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(api.Options{Registry: registry, Logger: log, Registerer: reg, Gatherer: reg, Infer: rec})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	v2grpc.Register(gs, api.V2Backend(registry), v2grpc.Options{Infer: rec})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := pb.NewGRPCInferenceServiceClient(conn)
	s := &server{URL: srv.URL, reg: reg, registry: registry}

	good := []byte(`{"parameters":{"max_tokens":4,"temperature":0},"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"data":["Once upon a time"]}]}`)
	bad := []byte(`{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"parameters":{"content_type":"base64"},"data":["%%%"]}]}`)
	for range 3 {
		if code, _, b := s.v2Do(t, "POST", "/v2/models/stories260K/infer", good, nil); code != 200 {
			t.Fatalf("infer: %d %s", code, b)
		}
	}
	if code, _, _ := s.v2Do(t, "POST", "/v2/models/stories260K/infer", bad, nil); code != 400 {
		t.Fatalf("bad infer: %d", code)
	}
	if code, _, _ := s.v2Do(t, "POST", "/v2/models/stories260K/versions/7/infer", good, nil); code != 404 {
		t.Fatalf("unknown version: %d", code) // a failure of a model served here
	}
	_ = s.stream(t, context.Background(), "/v2/models/stories260K/infer_stream", map[string]any{
		"parameters": map[string]any{"max_tokens": 4}, "inputs": []any{textInput("Once upon a time")},
	})
	s.v2Generate(t, "Once upon a time", 4) // not counted
	if _, err := client.ModelInfer(context.Background(), greedyRequest("g", "Once upon a time", 4)); err != nil {
		t.Fatal(err)
	}
	st, err := client.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	badReq := greedyRequest("b", "x", 4)
	badReq.Inputs[0].Parameters = map[string]*pb.InferParameter{"content_type": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "img"}}}
	for _, r := range []*pb.ModelInferRequest{greedyRequest("s1", "Once upon a time", 3), greedyRequest("s2", "The cat", 3), badReq} {
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.CloseSend()
	for {
		if _, err := st.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	count := func(name string) float64 {
		var sum float64
		for _, m := range mfs[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model"] != "stories260K" || labels["version"] != "1" || len(labels) != 2 {
				t.Errorf("%s has labels %v", name, labels)
			}
			if mfs[name].GetType() == dto.MetricType_SUMMARY {
				sum += float64(m.GetSummary().GetSampleCount())
				continue
			}
			sum += m.GetCounter().GetValue()
		}
		return sum
	}
	// 3 infer, 1 infer_stream, 1 ModelInfer, 2 good stream requests.
	if got := count("model_infer_request_success_total"); got != 7 {
		t.Errorf("model_infer_request_success_total = %v, want 7", got)
	}
	// The bad base64, the unknown version, the stream's unknown content type.
	if got := count("model_infer_request_failure_total"); got != 3 {
		t.Errorf("model_infer_request_failure_total = %v, want 3", got)
	}
	if got := count("model_infer_request_duration"); got != 10 {
		t.Errorf("model_infer_request_duration_count = %v, want 10 (successes and failures)", got)
	}
	if mf := mfs["rest_server_requests_total"]; mf == nil || !strings.Contains(mf.String(), "/v2/models/{model_name}/infer_stream") {
		t.Errorf("rest_server_requests_total has no infer_stream series: %v", mf)
	}
}
