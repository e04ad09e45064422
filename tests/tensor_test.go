package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/tensor"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// The tensor model of these tests: 6 inputs, a hidden layer of 16 with
// ReLU, 5 outputs through softmax, and the argmax label; known weights.
const (
	mlpIn  = 6
	mlpOut = 5
)

func testMLP() *tensor.MLP {
	layer := func(in, out, salt int, act string) tensor.Layer {
		l := tensor.Layer{Activation: act, Bias: make([]float32, out)}
		for i := range in {
			row := make([]float32, out)
			for j := range out {
				row[j] = float32(math.Sin(float64(i*31+j*7+salt))) * 0.6
			}
			l.Weights = append(l.Weights, row)
		}
		for j := range out {
			l.Bias[j] = float32(math.Cos(float64(j+salt))) * 0.1
		}
		return l
	}
	return &tensor.MLP{Layers: []tensor.Layer{layer(mlpIn, 16, 1, "relu"), layer(16, mlpOut, 2, "")}, Softmax: true, ArgMax: true}
}

// reference computes the MLP in plain Go (float64), independent of the
// runtime: output rows and labels.
func mlpReference(m *tensor.MLP, x []float32) ([]float32, []int64) {
	rows := len(x) / mlpIn
	var out []float32
	var labels []int64
	for r := range rows {
		cur := make([]float64, mlpIn)
		for i := range cur {
			cur[i] = float64(x[r*mlpIn+i])
		}
		for _, l := range m.Layers {
			next := make([]float64, len(l.Weights[0]))
			for j := range next {
				s := float64(l.Bias[j])
				for i, v := range cur {
					s += v * float64(l.Weights[i][j])
				}
				if l.Activation == "relu" {
					s = math.Max(s, 0)
				}
				next[j] = s
			}
			cur = next
		}
		mx, best := math.Inf(-1), 0
		for j, v := range cur {
			if v > mx {
				mx, best = v, j
			}
		}
		var sum float64
		for _, v := range cur {
			sum += math.Exp(v - mx)
		}
		for _, v := range cur {
			out = append(out, float32(math.Exp(v-mx)/sum))
		}
		labels = append(labels, int64(best))
	}
	return out, labels
}

// rows returns n input rows, different for each seed.
func mlpRows(seed, n int) []float32 {
	x := make([]float32, n*mlpIn)
	for i := range x {
		x[i] = float32(math.Sin(float64(seed*97+i*13))) * 2
	}
	return x
}

// writeTensorFile puts data in dir/name/1/file with settings (nil: none).
func writeTensorFile(t *testing.T, dir, name, file string, data []byte, settings any) {
	t.Helper()
	vdir := filepath.Join(dir, name, "1")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, file), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if settings != nil {
		b, _ := json.Marshal(settings)
		if err := os.WriteFile(filepath.Join(dir, name, models.SettingsFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// startTensorServer serves a repository with the test MLP as "mlp" (ONNX,
// no batching), "batched" (ONNX, batches of up to 32 rows and a window of
// a minute, which bounds only the wait for requests already queued for
// it), "mlpgguf" (the same graph as a
// GGUF) and "bad" (an ONNX whose first node is an LSTM, which the runtime
// lacks).
func startTensorServer(t *testing.T) *repoServer {
	t.Helper()
	m := testMLP()
	onnx, err := m.ONNX()
	if err != nil {
		t.Fatal(err)
	}
	gguf, err := m.GGUF()
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Graph()
	if err != nil {
		t.Fatal(err)
	}
	g.Nodes[0].Op = "LSTM"
	bad, err := tensor.EncodeONNX(g)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTensorFile(t, dir, "mlp", "model.onnx", onnx, nil)
	writeTensorFile(t, dir, "batched", "model.onnx", onnx, map[string]any{"max_batch_size": 32, "max_batch_time": 60, "parallel_workers": 2})
	writeTensorFile(t, dir, "mlpgguf", "model.gguf", gguf, nil)
	writeTensorFile(t, dir, "bad", "model.onnx", bad, nil)
	return startRepoServer(t, dir, false)
}

// tensorResult is one request's outputs.
type tensorResult struct {
	out    []float32
	labels []int64
}

func (r tensorResult) String() string { return fmt.Sprintf("%v %v", r.out, r.labels) }

// equalBits reports whether two results are bit-identical.
func (r tensorResult) equalBits(o tensorResult) bool {
	if len(r.out) != len(o.out) || len(r.labels) != len(o.labels) {
		return false
	}
	for i := range r.out {
		if math.Float32bits(r.out[i]) != math.Float32bits(o.out[i]) {
			return false
		}
	}
	for i := range r.labels {
		if r.labels[i] != o.labels[i] {
			return false
		}
	}
	return true
}

func checkReference(t *testing.T, what string, x []float32, got tensorResult) {
	t.Helper()
	wantOut, wantLabels := mlpReference(testMLP(), x)
	if len(got.out) != len(wantOut) || len(got.labels) != len(wantLabels) {
		t.Fatalf("%s: %d outputs and %d labels, want %d and %d", what, len(got.out), len(got.labels), len(wantOut), len(wantLabels))
	}
	for i := range wantOut {
		if d := math.Abs(float64(got.out[i] - wantOut[i])); d > 1e-5 || math.IsNaN(d) {
			t.Fatalf("%s: output[%d] = %v, reference %v (|diff| %g > 1e-5)", what, i, got.out[i], wantOut[i], d)
		}
	}
	for i := range wantLabels {
		if got.labels[i] != wantLabels[i] {
			t.Fatalf("%s: label[%d] = %d, reference %d", what, i, got.labels[i], wantLabels[i])
		}
	}
}

// The tensorProtocols, each sending rows x to a model and reading its outputs.
type tensorProtocol struct {
	name string
	run  func(t *testing.T, s *repoServer, model string, x []float32) (tensorResult, error)
}

var tensorProtocols = []tensorProtocol{
	{"REST JSON", restJSON},
	{"REST binary", restBinary},
	{"gRPC typed", func(t *testing.T, s *repoServer, model string, x []float32) (tensorResult, error) {
		return grpcInfer(s, model, x, false)
	}},
	{"gRPC raw", func(t *testing.T, s *repoServer, model string, x []float32) (tensorResult, error) {
		return grpcInfer(s, model, x, true)
	}},
	{"gRPC stream", grpcStream},
	{"KServe V1", v1Predict},
}

func httpError(code int, body []byte) error {
	return fmt.Errorf("HTTP %d: %s", code, bytes.TrimSpace(body))
}

func postTensor(url, contentType string, header map[string]string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

func restJSON(t *testing.T, s *repoServer, model string, x []float32) (tensorResult, error) {
	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "input", "datatype": "FP32", "shape": []int{len(x) / mlpIn, mlpIn}, "data": x}}})
	code, _, b, err := postTensor(s.URL+"/v2/models/"+model+"/infer", "application/json", nil, body)
	if err != nil {
		return tensorResult{}, err
	}
	if code != 200 {
		return tensorResult{}, httpError(code, b)
	}
	var resp struct {
		Outputs []struct {
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return tensorResult{}, err
	}
	var r tensorResult
	for _, o := range resp.Outputs {
		switch o.Name {
		case "output":
			err = json.Unmarshal(o.Data, &r.out)
		case "label":
			err = json.Unmarshal(o.Data, &r.labels)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

func restBinary(t *testing.T, s *repoServer, model string, x []float32) (tensorResult, error) {
	return restBinaryID(t, s, model, x, "")
}

// restBinaryID is restBinary with the request id id ("": none), which
// moves the binary data's offset in the body.
func restBinaryID(t *testing.T, s *repoServer, model string, x []float32, id string) (tensorResult, error) {
	req := map[string]any{
		"inputs":     []any{map[string]any{"name": "input", "datatype": "FP32", "shape": []int{len(x) / mlpIn, mlpIn}, "parameters": map[string]any{"binary_data_size": 4 * len(x)}}},
		"parameters": map[string]any{"binary_data_output": true},
	}
	if id != "" {
		req["id"] = id
	}
	head, _ := json.Marshal(req)
	body := append([]byte(nil), head...)
	for _, v := range x {
		body = binary.LittleEndian.AppendUint32(body, math.Float32bits(v))
	}
	code, h, b, err := postTensor(s.URL+"/v2/models/"+model+"/infer", "application/octet-stream", map[string]string{"Inference-Header-Content-Length": strconv.Itoa(len(head))}, body)
	if err != nil {
		return tensorResult{}, err
	}
	if code != 200 {
		return tensorResult{}, httpError(code, b)
	}
	n, err := strconv.Atoi(h.Get("Inference-Header-Content-Length"))
	if err != nil {
		return tensorResult{}, fmt.Errorf("binary answer without its header length: %w", err)
	}
	var resp struct {
		Outputs []struct {
			Name       string `json:"name"`
			Parameters struct {
				Size int `json:"binary_data_size"`
			} `json:"parameters"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b[:n], &resp); err != nil {
		return tensorResult{}, err
	}
	raw := b[n:]
	var r tensorResult
	for _, o := range resp.Outputs {
		part := raw[:o.Parameters.Size]
		raw = raw[o.Parameters.Size:]
		r.add(o.Name, part)
	}
	return r, nil
}

// add decodes a raw output (little-endian).
func (r *tensorResult) add(name string, raw []byte) {
	switch name {
	case "output":
		for i := 0; i+4 <= len(raw); i += 4 {
			r.out = append(r.out, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
		}
	case "label":
		for i := 0; i+8 <= len(raw); i += 8 {
			r.labels = append(r.labels, int64(binary.LittleEndian.Uint64(raw[i:])))
		}
	}
}

func grpcRequest(model string, x []float32, raw bool) *pb.ModelInferRequest {
	in := &pb.ModelInferRequest_InferInputTensor{Name: "input", Datatype: "FP32", Shape: []int64{int64(len(x) / mlpIn), mlpIn}}
	req := &pb.ModelInferRequest{ModelName: model, Inputs: []*pb.ModelInferRequest_InferInputTensor{in}}
	if raw {
		var b []byte
		for _, v := range x {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		req.RawInputContents = [][]byte{b}
	} else {
		in.Contents = &pb.InferTensorContents{Fp32Contents: x}
	}
	return req
}

func grpcResult(resp *pb.ModelInferResponse) tensorResult {
	var r tensorResult
	for i, o := range resp.GetOutputs() {
		if len(resp.GetRawOutputContents()) > i {
			r.add(o.GetName(), resp.GetRawOutputContents()[i])
			continue
		}
		switch o.GetName() {
		case "output":
			r.out = o.GetContents().GetFp32Contents()
		case "label":
			r.labels = o.GetContents().GetInt64Contents()
		}
	}
	return r
}

func grpcInfer(s *repoServer, model string, x []float32, raw bool) (tensorResult, error) {
	resp, err := s.grpc.ModelInfer(context.Background(), grpcRequest(model, x, raw))
	if err != nil {
		return tensorResult{}, err
	}
	return grpcResult(resp), nil
}

func grpcStream(t *testing.T, s *repoServer, model string, x []float32) (tensorResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := s.grpc.ModelStreamInfer(ctx)
	if err != nil {
		return tensorResult{}, err
	}
	if err := st.Send(grpcRequest(model, x, false)); err != nil {
		return tensorResult{}, err
	}
	if err := st.CloseSend(); err != nil {
		return tensorResult{}, err
	}
	resp, err := st.Recv()
	if err != nil {
		return tensorResult{}, err
	}
	if resp.GetErrorMessage() != "" {
		return tensorResult{}, fmt.Errorf("stream error: %s", resp.GetErrorMessage())
	}
	if final := resp.GetInferResponse().GetParameters()["triton_final_response"]; !final.GetBoolParam() {
		return tensorResult{}, fmt.Errorf("the response is not marked final")
	}
	switch extra, err := st.Recv(); {
	case err == nil:
		return tensorResult{}, fmt.Errorf("a second response after the final one: %v", extra)
	case !errors.Is(err, io.EOF):
		return tensorResult{}, fmt.Errorf("an error after the final response: %w", err)
	}
	return grpcResult(resp.GetInferResponse()), nil
}

func v1Predict(t *testing.T, s *repoServer, model string, x []float32) (tensorResult, error) {
	var instances [][]float32
	for r := 0; r < len(x)/mlpIn; r++ {
		instances = append(instances, x[r*mlpIn:(r+1)*mlpIn])
	}
	body, _ := json.Marshal(map[string]any{"instances": instances})
	code, _, b, err := postTensor(s.URL+"/v1/models/"+model+":predict", "application/json", nil, body)
	if err != nil {
		return tensorResult{}, err
	}
	if code != 200 {
		return tensorResult{}, httpError(code, b)
	}
	var resp struct {
		Predictions []struct {
			Output []float32 `json:"output"`
			Label  int64     `json:"label"`
		} `json:"predictions"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return tensorResult{}, err
	}
	var r tensorResult
	for _, p := range resp.Predictions {
		r.out = append(r.out, p.Output...)
		r.labels = append(r.labels, p.Label)
	}
	return r, nil
}

// TestTensorModelMatchesReference: every tensorProtocol's answer on the ONNX
// MLP equals the pure-Go reference within 1e-5, and the same model as a
// GGUF gives bit-identical outputs; the metadata is the graph's.
func TestTensorModelMatchesReference(t *testing.T) {
	s := startTensorServer(t)
	for _, p := range tensorProtocols {
		t.Run(p.name, func(t *testing.T) {
			for _, n := range []int{1, 3} {
				x := mlpRows(n, n)
				onnx, err := p.run(t, s, "mlp", x)
				if err != nil {
					t.Fatal(err)
				}
				checkReference(t, fmt.Sprintf("%s, %d rows", p.name, n), x, onnx)
				gguf, err := p.run(t, s, "mlpgguf", x)
				if err != nil {
					t.Fatal(err)
				}
				if !gguf.equalBits(onnx) {
					t.Fatalf("GGUF %v, ONNX %v: not the same", gguf, onnx)
				}
			}
		})
	}
	for model, platform := range map[string]string{"mlp": "onnx", "mlpgguf": "ggml"} {
		code, body := s.get(t, "/v2/models/"+model)
		want := `"platform":"` + platform + `","inputs":[{"name":"input","datatype":"FP32","shape":[-1,6]}],"outputs":[{"name":"output","datatype":"FP32","shape":[-1,5]},{"name":"label","datatype":"INT64","shape":[-1]}]`
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metadata of %s: %d %s, want it to hold %s", model, code, body, want)
		}
		if code, body := s.get(t, "/v1/models/"+model); code != 200 || body != `{"name":"`+model+`","ready":true}`+"\n" {
			t.Errorf("KServe V1 status of %s: %d %q", model, code, body)
		}
	}
}

// TestTensorAdaptiveBatching: 32 concurrent one-row requests, spread over
// every tensorProtocol, to a model batching up to 32 rows with a minute's
// window: every row is counted in the batch-size histogram scraped from
// /metrics, no request waits out the window (a request that finds the
// model idle runs at once; how the rest group depends on their arrival,
// which models/batching's tests pin down with a fake model), and each
// answer is bit-identical to the same row run alone on the unbatched
// model, and within 1e-5 of the reference.
func TestTensorAdaptiveBatching(t *testing.T) {
	s := startTensorServer(t)
	const clients = 32
	alone := make([]tensorResult, clients)
	for i := range clients {
		r, err := restBinary(t, s, "mlp", mlpRows(100+i, 1))
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = r
	}
	got := make([]tensorResult, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			p := tensorProtocols[i%len(tensorProtocols)]
			got[i], errs[i] = p.run(t, s, "batched", mlpRows(100+i, 1))
		})
	}
	wg.Wait()
	for i := range clients {
		p := tensorProtocols[i%len(tensorProtocols)]
		if errs[i] != nil {
			t.Fatalf("request %d (%s): %v", i, p.name, errs[i])
		}
		if !got[i].equalBits(alone[i]) {
			t.Fatalf("request %d (%s): batched %v, alone %v: not bit-identical", i, p.name, got[i], alone[i])
		}
		checkReference(t, fmt.Sprintf("request %d (%s)", i, p.name), mlpRows(100+i, 1), got[i])
	}
	count, sum := scrapeHistogram(t, s, "llmserve_tensor_batch_size", "batched")
	if count < 1 || count > clients || sum != clients {
		t.Fatalf("batch size histogram of batched: %v runs holding %v rows; want 1 to %d runs of %d rows in all", count, sum, clients, clients)
	}
	if n := scrapeCounter(t, s, `llmserve_tensor_requests_total{model="batched",outcome="success"}`); n != clients {
		t.Fatalf("%v successful requests counted, want %d", n, clients)
	}
}

// TestTensorBinaryBodiesReused: REST binary requests are read into reused
// buffers and their FP32 data reaches the model without a copy when it
// lies 4-byte aligned in the body (api/v2 bodypool.go,
// infer.ConvertInputs). Concurrent requests of 1 to 5 rows, whose binary
// data starts at every offset modulo 8 of the JSON (the id moves it), to a
// model that runs them alone and to one that batches them, over several
// rounds: each answer is bit-identical to the same rows sent alone first,
// so no request saw another's bytes.
func TestTensorBinaryBodiesReused(t *testing.T) {
	s := startTensorServer(t)
	rows := func(i int) []float32 { return mlpRows(300+i, 1+i%5) }
	checkReuseRounds(t, rows, func(model string, i, round int) (tensorResult, error) {
		return restBinaryID(t, s, model, rows(i), strings.Repeat("x", 1+(i+round)%8))
	})
}

// TestTensorGRPCRawBuffersReused is TestTensorBinaryBodiesReused over
// gRPC: ModelInfer requests of 1400 to 2900 rows (33 to 70 kB of
// raw_input_contents) are read by v2grpc's codec (ServerCodec, as serve
// installs it) into reused buffers and their FP32 data reaches the model
// where it lies; the id moves the data's offset in the message.
// Concurrent requests to a model that runs them alone and to one that
// batches them, over several rounds: each answer is bit-identical to the
// same rows sent alone first, so no request saw another's bytes.
func TestTensorGRPCRawBuffersReused(t *testing.T) {
	s := startTensorServer(t)
	rows := func(i int) []float32 { return mlpRows(500+i, 1400+100*i) }
	checkReuseRounds(t, rows, func(model string, i, round int) (tensorResult, error) {
		req := grpcRequest(model, rows(i), true)
		req.Id = strings.Repeat("x", 1+(i+round)%8)
		resp, err := s.grpc.ModelInfer(context.Background(), req)
		if err != nil {
			return tensorResult{}, err
		}
		return grpcResult(resp), nil
	})
}

// checkReuseRounds sends 16 clients' rows (rows(i)) alone to "mlp" first
// (round 0), checking each against the reference, then 4 rounds of all 16
// at once (rounds 1 to 4), each to "mlp" or "batched" by turns: every
// answer must be bit-identical to the same rows' answer alone. infer
// sends client i's request of a round; the round moves the request's id,
// so that the data lies at another offset of a reused buffer.
func checkReuseRounds(t *testing.T, rows func(i int) []float32, infer func(model string, i, round int) (tensorResult, error)) {
	t.Helper()
	const clients = 16
	alone := make([]tensorResult, clients)
	for i := range clients {
		r, err := infer("mlp", i, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkReference(t, fmt.Sprintf("request %d alone", i), rows(i), r)
		alone[i] = r
	}
	for round := 1; round <= 4; round++ {
		got := make([]tensorResult, clients)
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				model := "mlp"
				if (i+round)%2 == 0 {
					model = "batched"
				}
				got[i], errs[i] = infer(model, i, round)
			})
		}
		wg.Wait()
		for i := range clients {
			if errs[i] != nil {
				t.Fatalf("round %d, request %d: %v", round, i, errs[i])
			}
			if !got[i].equalBits(alone[i]) {
				t.Fatalf("round %d, request %d: %v, alone %v: not bit-identical", round, i, got[i], alone[i])
			}
		}
	}
}

// scrapeHistogram reads a histogram's _count and _sum for model from
// GET /metrics.
func scrapeHistogram(t *testing.T, s *repoServer, name, model string) (count, sum float64) {
	t.Helper()
	return scrapeCounter(t, s, name+`_count{model="`+model+`"}`), scrapeCounter(t, s, name+`_sum{model="`+model+`"}`)
}

func scrapeCounter(t *testing.T, s *repoServer, series string) float64 {
	t.Helper()
	code, body := s.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTensorBadModelAndInputs: the ONNX with an unsupported operator is
// refused at load with the operator's name, the good models keep serving;
// bad inputs are 400 / INVALID_ARGUMENT naming the input; the OpenAI
// routes refuse a tensor model with a 400 naming "model".
func TestTensorBadModelAndInputs(t *testing.T) {
	s := startTensorServer(t)
	idx := s.index(t)
	if e := idx["bad"]; e["state"] != "UNAVAILABLE" || !strings.Contains(e["reason"], "LSTM") {
		t.Fatalf("index entry of bad: %v; want UNAVAILABLE with the operator LSTM in the reason", e)
	}
	for _, m := range []string{"mlp", "batched", "mlpgguf"} {
		if idx[m]["state"] != "READY" {
			t.Fatalf("index entry of %s: %v", m, idx[m])
		}
	}
	code, b, _ := postJSON(s, "/v2/repository/models/bad/load", `{}`)
	if code != 400 || !strings.Contains(b, "LSTM") {
		t.Fatalf("load bad: %d %s", code, b)
	}
	if _, err := restJSON(t, s, "mlp", mlpRows(1, 2)); err != nil {
		t.Fatalf("mlp after the bad load: %v", err)
	}
	if code, _ := s.get(t, "/v2/models/bad/ready"); code != 404 {
		t.Fatalf("bad is served: %d", code)
	}

	input := func(dt string, shape []int, data any) string {
		b, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "input", "datatype": dt, "shape": shape, "data": data}}})
		return string(b)
	}
	big := make([]float32, 4097*mlpIn)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"missing input", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,6],"data":[1,2,3,4,5,6]}]}`, `input \"x\" is not an input`},
		{"no inputs", `{"inputs":[]}`, `inputs must list at least one tensor`},
		{"wrong datatype", input("BYTES", []int{1, 6}, []string{"a", "b", "c", "d", "e", "f"}), `input \"input\": datatype BYTES does not convert to FP32`},
		{"wrong shape", input("FP32", []int{1, 5}, []float32{1, 2, 3, 4, 5}), `input \"input\": shape [1 5]: dimension 1 is 5 but the model takes 6`},
		{"wrong rank", input("FP32", []int{6}, []float32{1, 2, 3, 4, 5, 6}), `input \"input\": shape [6] has 1 dimensions`},
		{"batch too big", input("FP32", []int{4097, 6}, big), `input \"input\": the batch size (shape[0]) is 4097, more than the 4096 rows`},
		{"integer not exact", input("INT64", []int{1, 6}, []int64{1 << 25, 0, 0, 0, 0, 0}), `input \"input\": element 0 (33554432) is not exact in FP32`},
		{"nested data against its shape", `{"inputs":[{"name":"input","datatype":"FP32","shape":[2,6],"data":[[1,2,3,4],[5,6,7,8],[9,10,11,12]]}]}`, `data[0] has 4 elements, but dimension 1 of shape [2 6] is 6`},
		{"unknown output", `{"inputs":[{"name":"input","datatype":"FP32","shape":[1,6],"data":[1,2,3,4,5,6]}],"outputs":[{"name":"probs"}]}`, `output \"probs\" is not an output`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b, _ := postJSON(s, "/v2/models/mlp/infer", tc.body)
			if code != 400 || !strings.Contains(b, tc.want) {
				t.Fatalf("REST: %d %s; want 400 with %s", code, b, tc.want)
			}
		})
	}
	// gRPC: the same as INVALID_ARGUMENT.
	req := grpcRequest("mlp", mlpRows(1, 1)[:5], false)
	req.Inputs[0].Shape = []int64{1, 5}
	if _, err := s.grpc.ModelInfer(context.Background(), req); err == nil || !strings.Contains(err.Error(), "InvalidArgument") || !strings.Contains(err.Error(), `input "input": shape [1 5]`) {
		t.Fatalf("gRPC wrong shape: %v", err)
	}
	// An integer input that converts is served as FP32.
	x := []int64{1, 0, -1, 2, 0, 1}
	code, b, _ = postJSON(s, "/v2/models/mlp/infer", input("INT32", []int{1, 6}, x))
	if code != 200 {
		t.Fatalf("INT32 input: %d %s", code, b)
	}
	// KServe V1: a row of the wrong width.
	if code, b, _ := postJSON(s, "/v1/models/mlp:predict", `{"instances":[[1,2,3]]}`); code != 400 || !strings.Contains(b, `input \"input\": shape [1 3]`) {
		t.Fatalf("V1 short row: %d %s", code, b)
	}
	// The OpenAI routes: a 400 naming model.
	code, b, _ = postJSON(s, "/v1/completions", `{"model":"mlp","prompt":"a"}`)
	if code != 400 || !strings.Contains(b, `"param":"model"`) || !strings.Contains(b, "tensor model, not an LLM") {
		t.Fatalf("OpenAI completions on a tensor model: %d %s", code, b)
	}
	code, b, _ = postJSON(s, "/v2/models/mlp/generate", `{"text_input":"a"}`)
	if code != 400 || !strings.Contains(b, "tensor model, not an LLM") {
		t.Fatalf("V2 generate on a tensor model: %d %s", code, b)
	}
	if n := scrapeCounter(t, s, `llmserve_tensor_requests_total{model="mlp",outcome="invalid"}`); n < 8 {
		t.Fatalf("%v invalid requests counted", n)
	}
	// Unload drains and frees: 404 after, then it loads again.
	if code, b, _ := postJSON(s, "/v2/repository/models/mlp/unload", `{}`); code != 200 {
		t.Fatalf("unload: %d %s", code, b)
	}
	if _, err := restJSON(t, s, "mlp", mlpRows(1, 1)); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("infer after unload: %v", err)
	}
	if code, b, _ := postJSON(s, "/v2/repository/models/mlp/load", `{}`); code != 200 {
		t.Fatalf("load: %d %s", code, b)
	}
	if _, err := restJSON(t, s, "mlp", mlpRows(1, 1)); err != nil {
		t.Fatalf("infer after reload: %v", err)
	}
}

func postJSON(s *repoServer, path, body string) (int, string, error) {
	code, _, b, err := postTensor(s.URL+path, "application/json", nil, []byte(body))
	return code, string(b), err
}

// TestTensorNaNInputPropagates: a NaN input is accepted (as ONNX Runtime
// accepts it) and propagates through the MLP's MatMul and Relu to every
// output, as ONNX Runtime computes it (Relu(NaN) = NaN), over V2 binary
// and gRPC (raw and typed contents); the other row of the batch is
// untouched.
func TestTensorNaNInputPropagates(t *testing.T) {
	s := startTensorServer(t)
	x := mlpRows(7, 2)
	x[0] = float32(math.NaN())
	good, _ := mlpReference(testMLP(), x[mlpIn:])
	for name, run := range map[string]func() (tensorResult, error){
		"rest-binary": func() (tensorResult, error) { return restBinary(t, s, "mlp", x) },
		"grpc-raw":    func() (tensorResult, error) { return grpcInfer(s, "mlp", x, true) },
		"grpc":        func() (tensorResult, error) { return grpcInfer(s, "mlp", x, false) },
	} {
		got, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got.out) != 2*mlpOut {
			t.Fatalf("%s: %d outputs, want %d", name, len(got.out), 2*mlpOut)
		}
		for j := range mlpOut {
			if v := got.out[j]; !math.IsNaN(float64(v)) {
				t.Fatalf("%s: row with a NaN input: output %d = %v, want NaN", name, j, v)
			}
			if v, w := got.out[mlpOut+j], good[j]; math.Abs(float64(v-w)) > 1e-5 {
				t.Fatalf("%s: the other row: output %d = %v, want %v", name, j, v, w)
			}
		}
	}
}

// TestTensorNonFiniteJSON: JSON has no NaN or Infinity, so V2 REST JSON
// and KServe V1 write them (and read them in FP inputs) as the strings
// "NaN", "Infinity" and "-Infinity"; a model output of NaN is a 200 with
// those strings, not a 500, and finite values stay numbers.
func TestTensorNonFiniteJSON(t *testing.T) {
	s := startTensorServer(t)
	x := mlpRows(9, 2)
	good, _ := mlpReference(testMLP(), x[mlpIn:])
	row0 := []any{"NaN"}
	for _, v := range x[1:mlpIn] {
		row0 = append(row0, v)
	}
	row1 := x[mlpIn:]
	check := func(what string, out0 []any, out1 []float32) {
		t.Helper()
		if len(out0) != mlpOut || len(out1) != mlpOut {
			t.Fatalf("%s: outputs %v %v", what, out0, out1)
		}
		for j := range mlpOut {
			if out0[j] != "NaN" {
				t.Fatalf("%s: NaN row output %d = %#v, want \"NaN\"", what, j, out0[j])
			}
			if math.Abs(float64(out1[j]-good[j])) > 1e-5 {
				t.Fatalf("%s: other row output %d = %v, want %v", what, j, out1[j], good[j])
			}
		}
	}

	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "input", "datatype": "FP32", "shape": []int{2, mlpIn}, "data": []any{row0, row1}}},
		"outputs": []any{map[string]any{"name": "output"}}})
	code, _, b, err := postTensor(s.URL+"/v2/models/mlp/infer", "application/json", nil, body)
	if err != nil || code != 200 {
		t.Fatalf("V2 JSON: %d %s %v", code, b, err)
	}
	var v2 struct {
		Outputs []struct {
			Data []any `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &v2); err != nil || len(v2.Outputs) != 1 || len(v2.Outputs[0].Data) != 2*mlpOut {
		t.Fatalf("V2 JSON: %s: %v", b, err)
	}
	var out1 []float32
	for _, v := range v2.Outputs[0].Data[mlpOut:] {
		f, _ := v.(float64)
		out1 = append(out1, float32(f))
	}
	check("V2 JSON", v2.Outputs[0].Data[:mlpOut], out1)

	body, _ = json.Marshal(map[string]any{"instances": []any{row0, row1}})
	code, _, b, err = postTensor(s.URL+"/v1/models/mlp:predict", "application/json", nil, body)
	if err != nil || code != 200 {
		t.Fatalf("KServe V1: %d %s %v", code, b, err)
	}
	var v1 struct {
		Predictions []struct {
			Output json.RawMessage `json:"output"`
		} `json:"predictions"`
	}
	if err := json.Unmarshal(b, &v1); err != nil || len(v1.Predictions) != 2 {
		t.Fatalf("KServe V1: %s: %v", b, err)
	}
	var p0 []any
	out1 = nil
	if err := json.Unmarshal(v1.Predictions[0].Output, &p0); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(v1.Predictions[1].Output, &out1); err != nil {
		t.Fatalf("KServe V1: the finite row is not numbers: %s", v1.Predictions[1].Output)
	}
	check("KServe V1", p0, out1)
}

// TestTensorReloadKeepsServing: a reload builds the new version beside
// the one serving and swaps them in one step. A version that fails to
// load leaves the loaded one serving (READY, the reason naming the
// failure), as Triton does; good reloads under a steady stream of
// requests lose none of them (before, a reload unloaded first, so the
// name was missing for a moment and requests got 404).
func TestTensorReloadKeepsServing(t *testing.T) {
	s := startTensorServer(t)
	m := testMLP()
	good, err := m.ONNX()
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Graph()
	if err != nil {
		t.Fatal(err)
	}
	g.Nodes[0].Op = "LSTM"
	bad, err := tensor.EncodeONNX(g)
	if err != nil {
		t.Fatal(err)
	}
	want, err := restJSON(t, s, "mlp", mlpRows(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	writeVersion := func(v string, data []byte) {
		t.Helper()
		vdir := filepath.Join(s.dir, "mlp", v)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vdir, "model.onnx"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Version 2 fails to load: version 1 keeps serving.
	writeVersion("2", bad)
	if code, b, _ := postJSON(s, "/v2/repository/models/mlp/load", `{}`); code != 400 || !strings.Contains(b, "LSTM") {
		t.Fatalf("load of the bad version 2: %d %s; want 400 naming LSTM", code, b)
	}
	if got, err := restJSON(t, s, "mlp", mlpRows(3, 2)); err != nil || !got.equalBits(want) {
		t.Fatalf("mlp after the failed reload: %v %v; want version 1's %v", got, err, want)
	}
	e := s.index(t)["mlp"]
	if e["state"] != "READY" || e["version"] != "1" || !strings.Contains(e["reason"], "reload failed") || !strings.Contains(e["reason"], "LSTM") {
		t.Fatalf("index entry after the failed reload: %v; want READY version 1 with the failure in the reason", e)
	}

	// Version 3 is good: five reloads under load lose no request.
	writeVersion("3", good)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served, failed atomic.Int64
	var firstErr atomic.Value
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := restJSON(t, s, "mlp", mlpRows(3, 2))
				if err == nil && !got.equalBits(want) {
					err = fmt.Errorf("worker %d request %d: %v, want %v", w, i, got, want)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				served.Add(1)
			}
		})
	}
	for range 5 {
		if code, b, _ := postJSON(s, "/v2/repository/models/mlp/load", `{}`); code != 200 {
			t.Errorf("reload: %d %s", code, b)
		}
	}
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || served.Load() == 0 {
		t.Fatalf("during 5 reloads %d requests served, %d failed (first: %v); want none failed", served.Load(), failed.Load(), firstErr.Load())
	}
	if e := s.index(t)["mlp"]; e["state"] != "READY" || e["version"] != "3" || e["reason"] != "" {
		t.Fatalf("index entry after the reloads: %v; want READY version 3", e)
	}
	t.Logf("%d requests served across 5 reloads", served.Load())
}
