package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/llmserve/llmserve/models/tensor"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// scrape reads a Prometheus text page into samples by series
// ("name{label="v",...}" with labels sorted, as expfmt writes them).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := model.LabelSet{}
			for _, l := range m.GetLabel() {
				labels[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
			}
			key := name + labels.String()
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[strings.Replace(key, name, name+"_count", 1)] = float64(m.GetHistogram().GetSampleCount())
			case m.GetSummary() != nil:
				out[strings.Replace(key, name, name+"_count", 1)] = float64(m.GetSummary().GetSampleCount())
			}
		}
	}
	return out
}

// TestServeMLServerMetrics runs `llmserve serve` with --metrics-port and a
// batched tensor model, sends requests over V2 REST, V2 gRPC (ModelInfer
// and a ModelStreamInfer stream) and KServe V1, some of them bad, and
// scrapes the metrics port: MLServer's names and labels, counts that agree
// with the requests sent, and no /metrics on the HTTP port.
func TestServeMLServerMetrics(t *testing.T) {
	m, err := tensor.RandomMLP([]int{4, 8, 3}, 1, true, true)
	if err != nil {
		t.Fatal(err)
	}
	onnx, err := m.ONNX()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clf.onnx")
	if err := os.WriteFile(path, onnx, 0o644); err != nil {
		t.Fatal(err)
	}
	httpPort, grpcPort, metricsPort := freePort(t), freePort(t), freePort(t)
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--host", "127.0.0.1", "--http-port", strconv.Itoa(httpPort), "--grpc-port", strconv.Itoa(grpcPort),
		"--metrics-port", strconv.Itoa(metricsPort), "--metrics-endpoint", "/prom",
		"--model", "clf=" + path, "--max-batch-size", "8", "--max-batch-time", "0.002", "--parallel-workers", "2", "--log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v", err)
			}
		case <-time.After(40 * time.Second):
			t.Error("serve did not shut down")
		}
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/prom"
	waitOK(t, base+"/v2/health/ready")
	post := func(path, body string) int {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const good = `{"inputs":[{"name":"input","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`
	const restOK, restBad = 6, 2
	var wg sync.WaitGroup
	for range restOK {
		wg.Go(func() {
			if code := post("/v2/models/clf/infer", good); code != 200 {
				t.Errorf("infer: %d", code)
			}
		})
	}
	wg.Wait()
	if code := post("/v2/models/clf/versions/1/infer", good); code != 200 {
		t.Fatalf("infer with a version: %d", code)
	}
	for range restBad {
		if code := post("/v2/models/clf/infer", `{"inputs":[{"name":"input","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`); code != 400 {
			t.Fatalf("bad infer: %d", code)
		}
	}
	if code := post("/v2/models/nosuch/infer", good); code != 404 { // not counted: no such model
		t.Fatalf("unknown model: %d", code)
	}
	if code := post("/v1/models/clf:predict", `{"instances":[[1,2,3,4],[4,3,2,1]]}`); code != 200 {
		t.Fatalf("predict: %d", code)
	}

	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)
	req := &pb.ModelInferRequest{ModelName: "clf", Inputs: []*pb.ModelInferRequest_InferInputTensor{{
		Name: "input", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}},
	}}}
	const grpcOK = 3
	for range grpcOK {
		if _, err := client.ModelInfer(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	st, err := client.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.CloseSend()
	for n := 0; ; n++ {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			if n != 2 {
				t.Fatalf("the stream answered %d requests, want 2", n)
			}
			break
		}
		if err != nil || r.GetErrorMessage() != "" {
			t.Fatalf("stream: %v %q", err, r.GetErrorMessage())
		}
	}

	// The HTTP port has no metrics; the metrics port has nothing else.
	for _, url := range []string{base + "/metrics", base + "/prom", "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", url, resp.StatusCode)
		}
	}
	got := scrape(t, metricsURL)
	const clf = `{model_name="clf", model_version="1"}`
	successes := restOK + 1 + 1 + grpcOK + 2 // infer, infer with a version, predict, ModelInfer, the stream's two
	want := map[string]float64{
		`model_infer_request_success_total{model="clf", version="1"}`:  float64(successes),
		`model_infer_request_failure_total{model="clf", version="1"}`:  restBad,
		`model_infer_request_duration_count{model="clf", version="1"}`: float64(successes) + restBad,
		// Every request that reached the batcher: the successes.
		"batch_request_queue_count" + clf:    float64(successes),
		"parallel_request_queue_count" + clf: float64(successes),
		`rest_server_requests_total{app_name="llmserve", method="POST", path="/v2/models/{model_name}/infer", status_code="200"}`:                           restOK,
		`rest_server_requests_total{app_name="llmserve", method="POST", path="/v2/models/{model_name}/versions/{model_version}/infer", status_code="200"}`:  1,
		`rest_server_requests_total{app_name="llmserve", method="POST", path="/v2/models/{model_name}/infer", status_code="400"}`:                           restBad,
		`rest_server_request_duration_seconds_count{app_name="llmserve", method="POST", path="/v2/models/{model_name}/infer", status_code="200"}`:           restOK,
		`rest_server_requests_total{app_name="llmserve", method="POST", path="/v1/models/*", status_code="200"}`:                                            1,
		`rest_server_requests_in_progress{app_name="llmserve", method="POST"}`:                                                                              0,
		`grpc_server_started_total{grpc_method="ModelInfer", grpc_service="inference.GRPCInferenceService", grpc_type="unary"}`:                             grpcOK,
		`grpc_server_handled_total{grpc_code="OK", grpc_method="ModelInfer", grpc_service="inference.GRPCInferenceService", grpc_type="unary"}`:             grpcOK,
		`grpc_server_handling_seconds_count{grpc_method="ModelInfer", grpc_service="inference.GRPCInferenceService", grpc_type="unary"}`:                    grpcOK,
		`grpc_server_msg_received_total{grpc_method="ModelStreamInfer", grpc_service="inference.GRPCInferenceService", grpc_type="bidi_stream"}`:            2,
		`grpc_server_msg_sent_total{grpc_method="ModelStreamInfer", grpc_service="inference.GRPCInferenceService", grpc_type="bidi_stream"}`:                2,
		`grpc_server_handled_total{grpc_code="OK", grpc_method="ModelStreamInfer", grpc_service="inference.GRPCInferenceService", grpc_type="bidi_stream"}`: 1,
	}
	for series, v := range want {
		if g, ok := got[series]; !ok || g != v {
			var near []string
			name, _, _ := strings.Cut(series, "{")
			for k := range got {
				if strings.HasPrefix(k, name) {
					near = append(near, k)
				}
			}
			t.Errorf("%s = %v (present %v), want %v; series of that name: %v", series, g, ok, v, near)
		}
	}
	for series := range got {
		if strings.Contains(series, "nosuch") {
			t.Errorf("an unknown model made a series: %s", series)
		}
		if strings.HasPrefix(series, "rest_server_") && strings.Contains(series, "/prom") {
			t.Errorf("the metrics endpoint is counted: %s", series)
		}
	}
}
