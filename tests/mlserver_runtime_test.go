package tests

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/models"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// writeMLServerModel puts the MLServer-style example runtimes
// (runtimes/python/examples/mlserver_model/models.py, unchanged) in
// dir/name with an MLServer model-settings.json.
func writeMLServerModel(t *testing.T, dir, name string, settings map[string]any) {
	t.Helper()
	mdir := filepath.Join(dir, name)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../runtimes/python/examples/mlserver_model/models.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mdir, "models.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	settings["name"] = name
	b, _ := json.Marshal(settings)
	if err := os.WriteFile(filepath.Join(mdir, models.SettingsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// v2Output is one output of a V2 JSON answer, data as JSON.
type v2Output struct {
	Name     string          `json:"name"`
	Datatype string          `json:"datatype"`
	Shape    []int64         `json:"shape"`
	Data     json.RawMessage `json:"data"`
}

type v2Raw struct {
	ModelName    string     `json:"model_name"`
	ModelVersion string     `json:"model_version"`
	ID           string     `json:"id"`
	Outputs      []v2Output `json:"outputs"`
	Error        string     `json:"error"`
}

func (a v2Raw) data(name string) string {
	for _, o := range a.Outputs {
		if o.Name == name {
			return string(o.Data)
		}
	}
	return ""
}

// TestMLServerRuntime serves runtimes written the way MLServer's docs
// write them (from mlserver import MLModel, mlserver.codecs, decode_args,
// predict_stream, mlserver.log of an unregistered metric), from folders
// whose model-settings.json is MLServer's ("implementation":
// "models.SumModel"), and calls them as MLServer's clients do: V2 REST
// infer and infer_stream (null in a float tensor, a bare string for a
// BYTES [1] input, the runtime's own codec's content type), V2 gRPC
// ModelInfer and ModelStreamInfer, KServe V1; and scrapes MLServer's
// request metrics.
func TestMLServerRuntime(t *testing.T) {
	needPython(t)
	if out, err := exec.Command(python, "-c", "import pandas").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import pandas (make python-deps installs python3-pandas): %v\n%s", python, err, out)
	}
	dir := t.TempDir()
	writeMLServerModel(t, dir, "sum-model", map[string]any{
		"implementation": "models.SumModel",
		"parameters":     map[string]any{"version": "v1.2.3", "extra": map[string]any{"scale": 2.0}},
		"inputs":         []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{-1, 3}}},
	})
	writeMLServerModel(t, dir, "text-model", map[string]any{"implementation": "models.TextModel"})
	writeMLServerModel(t, dir, "typed-model", map[string]any{"implementation": "models.TypedModel"})
	writeMLServerModel(t, dir, "table-model", map[string]any{"implementation": "models.TableModel"})
	writeMLServerModel(t, dir, "failing-model", map[string]any{"implementation": "models.FailingModel"})
	s := startRepoServer(t, dir, false)
	idx := s.index(t)
	for _, n := range []string{"sum-model", "text-model", "typed-model", "table-model", "failing-model"} {
		if idx[n]["state"] != "READY" {
			t.Fatalf("%s: %v", n, idx[n])
		}
	}
	if idx["sum-model"]["version"] != "v1.2.3" {
		t.Fatalf("sum-model's version: %v", idx["sum-model"])
	}
	text := func(s string, ct string) map[string]any {
		in := map[string]any{"name": "text", "datatype": "BYTES", "shape": []int{1}, "data": s}
		if ct != "" {
			in["parameters"] = map[string]any{"content_type": ct}
		}
		return map[string]any{"inputs": []any{in}}
	}

	t.Run("v2 rest", func(t *testing.T) {
		var a v2Raw
		body := map[string]any{"id": "r1", "inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{2, 3}, "data": [][]any{{1, 2, 3}, {4, nil, 6}}}}}
		code, hdr := postHeaders(t, s.URL+"/v2/models/sum-model/infer", body, map[string]string{"X-Tenant": "a"}, &a)
		if code != 200 {
			t.Fatalf("%d %s", code, a.Error)
		}
		// null is NaN: the second row's sum is NaN.
		if a.ModelVersion != "v1.2.3" || a.ID != "r1" || a.data("total") != `[12,"NaN"]` {
			t.Fatalf("answer %+v (total %s)", a, a.data("total"))
		}
		if hdr.Get("X-Tenant") != "a" {
			t.Fatalf("X-Tenant not echoed: %v", hdr)
		}
		if code, _ := postHeaders(t, s.URL+"/v2/models/sum-model/versions/v1.2.3/infer", body, nil, nil); code != 200 {
			t.Fatalf("versioned route: %d", code)
		}
	})

	t.Run("content types", func(t *testing.T) {
		for _, c := range []struct {
			body      map[string]any
			code      int
			want, err string
		}{
			// MLServer's own example: a bare string as data for BYTES [1].
			{text("hello world 😁", "str"), 200, `["hello world 😁"]`, ""},
			{text("hello", ""), 200, `["hello"]`, ""},
			// The runtime's own codec (@register_input_codec), not in its settings.
			{text("hi there", "shout"), 200, `["HI THERE"]`, ""},
			{text("hi", "nope"), 400, "", "nope"},
		} {
			var a v2Raw
			code, _ := postHeaders(t, s.URL+"/v2/models/text-model/infer", c.body, nil, &a)
			if code != c.code || a.data("output") != c.want || !strings.Contains(a.Error, c.err) {
				t.Errorf("%v: %d %s %q, want %d %s %q", c.body, code, a.data("output"), a.Error, c.code, c.want, c.err)
			}
		}
	})

	t.Run("v2 rest infer_stream", func(t *testing.T) {
		b, _ := json.Marshal(text("hello streaming world", ""))
		resp, err := http.Post(s.URL+"/v2/models/text-model/infer_stream", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		var words []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var a v2Raw
			if err := json.Unmarshal([]byte(line), &a); err != nil || a.Error != "" {
				t.Fatalf("event %q: %v", line, err)
			}
			words = append(words, a.data("output"))
		}
		if strings.Join(words, "|") != `["hello"]|[" streaming"]|[" world"]` {
			t.Fatalf("events %q", words)
		}
		// predict_stream's default answers predict once; its InferenceError
		// before the first event is the route's 400.
		var a v2Raw
		if code, _ := postHeaders(t, s.URL+"/v2/models/failing-model/infer_stream", text("x", ""), nil, &a); code != 400 || !strings.Contains(a.Error, "cannot infer on 1 inputs") {
			t.Fatalf("failing stream: %d %q", code, a.Error)
		}
	})

	t.Run("v2 grpc", func(t *testing.T) {
		raw := make([]byte, 0, 24)
		for _, v := range []float32{1, 2, 3, 4, 5, 6} {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
		var hdr metadata.MD
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "b")
		resp, err := s.grpc.ModelInfer(ctx, &pb.ModelInferRequest{
			ModelName: "sum-model", Id: "g1",
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{2, 3}}},
			RawInputContents: [][]byte{raw},
		}, grpc.Header(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		out := resp.GetRawOutputContents()[0]
		if resp.GetModelVersion() != "v1.2.3" || math.Float32frombits(binary.LittleEndian.Uint32(out)) != 12 || math.Float32frombits(binary.LittleEndian.Uint32(out[4:])) != 30 {
			t.Fatalf("answer %v % x", resp, out)
		}
		if got := hdr.Get("x-tenant"); len(got) != 1 || got[0] != "b" {
			t.Fatalf("x-tenant back: %v", hdr)
		}
		// An MLServer error with status 400 (InferenceError) is INVALID_ARGUMENT.
		_, err = s.grpc.ModelInfer(context.Background(), &pb.ModelInferRequest{
			ModelName: "failing-model",
			Inputs:    []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}}},
		})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "cannot infer on 1 inputs") {
			t.Fatalf("failing model: %v", err)
		}
	})

	t.Run("v2 grpc stream", func(t *testing.T) {
		st, err := s.grpc.ModelStreamInfer(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		elem := []byte("hello streaming world")
		raw := binary.LittleEndian.AppendUint32(nil, uint32(len(elem)))
		if err := st.Send(&pb.ModelInferRequest{
			ModelName: "text-model", Id: "s1",
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "text", Datatype: "BYTES", Shape: []int64{1}}},
			RawInputContents: [][]byte{append(raw, elem...)},
		}); err != nil {
			t.Fatal(err)
		}
		_ = st.CloseSend()
		var words []string
		var finals []bool
		for {
			r, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.GetErrorMessage() != "" {
				t.Fatalf("stream error: %s", r.GetErrorMessage())
			}
			resp := r.GetInferResponse()
			if resp.GetId() != "s1" {
				t.Fatalf("id %q", resp.GetId())
			}
			finals = append(finals, resp.GetParameters()["triton_final_response"].GetBoolParam())
			for _, c := range resp.GetOutputs()[0].GetContents().GetBytesContents() {
				words = append(words, string(c))
			}
			if len(resp.GetRawOutputContents()) > 0 {
				b := resp.GetRawOutputContents()[0]
				words = append(words, string(b[4:]))
			}
		}
		if strings.Join(words, "|") != "hello| streaming| world" || len(finals) != 3 || finals[0] || finals[1] || !finals[2] {
			t.Fatalf("stream answered %q, final flags %v", words, finals)
		}
	})

	t.Run("kserve v1", func(t *testing.T) {
		var out map[string]any
		if code, _ := s.post(t, "/v1/models/sum-model:predict", map[string]any{"instances": [][]float32{{1, 2, 3}, {4, 5, 6}}}, &out); code != 200 {
			t.Fatalf("%d %v", code, out)
		}
		if b, _ := json.Marshal(out["predictions"]); !strings.Contains(string(b), "12") || !strings.Contains(string(b), "30") {
			t.Fatalf("predictions %s", b)
		}
	})

	t.Run("decode_args and pandas", func(t *testing.T) {
		var a v2Raw
		code, _ := postHeaders(t, s.URL+"/v2/models/typed-model/infer", map[string]any{"inputs": []any{
			map[string]any{"name": "foo", "datatype": "INT32", "shape": []int{1, 2}, "data": []int{1, 2}},
			map[string]any{"name": "bar", "datatype": "BYTES", "shape": []int{2}, "data": []string{"a", "b"}},
		}}, nil, &a)
		if code != 200 || a.data("output-0") != "[5]" {
			t.Fatalf("typed-model: %d %+v", code, a)
		}
		a = v2Raw{}
		code, _ = postHeaders(t, s.URL+"/v2/models/table-model/infer", map[string]any{"parameters": map[string]any{"content_type": "pd"}, "inputs": []any{
			map[string]any{"name": "a", "datatype": "INT64", "shape": []int{2}, "data": []int{1, 2}},
			map[string]any{"name": "b", "datatype": "FP64", "shape": []int{2}, "data": []float64{0.5, 0.25}},
			map[string]any{"name": "name", "datatype": "BYTES", "shape": []int{2}, "data": []string{"x", "y"}, "parameters": map[string]any{"content_type": "str"}},
		}}, nil, &a)
		if code != 200 || a.data("total") != "[1.5,2.25]" || a.data("label") != `["X","Y"]` {
			t.Fatalf("table-model: %d %+v", code, a)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(s.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		series := func(name string) map[string]float64 {
			out := map[string]float64{}
			for _, m := range mfs[name].GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				v := m.GetCounter().GetValue()
				if m.GetSummary() != nil {
					v = float64(m.GetSummary().GetSampleCount())
				}
				if m.GetHistogram() != nil {
					v = float64(m.GetHistogram().GetSampleCount())
				}
				out[strings.Join(labels, ",")] = v
			}
			return out
		}
		if got := series("model_infer_request_success_total")["model=sum-model,version=v1.2.3"]; got < 3 {
			t.Errorf("model_infer_request_success_total{sum-model} = %v, want 3 or more (two REST, one V1): %v", got, series("model_infer_request_success_total"))
		}
		if got := series("model_infer_request_duration")["model=sum-model,version=v1.2.3"]; got < 3 {
			t.Errorf("model_infer_request_duration_count{sum-model} = %v", got)
		}
		if got := series("model_infer_request_failure_total")["model=text-model,version=1"]; got != 1 {
			t.Errorf("model_infer_request_failure_total{text-model} = %v, want 1 (the unknown content type)", got)
		}
		// mlserver.log of a metric never registered: registered on the fly.
		if got := series("sum_rows")["model_name=sum-model,model_version=v1.2.3,worker=0"]; got < 3 {
			t.Errorf("sum_rows = %v: %v", got, series("sum_rows"))
		}
	})
}
