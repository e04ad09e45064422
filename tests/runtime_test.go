package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/models"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// python is the interpreter custom runtimes run on: Debian's, with
// python3-grpcio, python3-numpy and python3-protobuf (make python-deps).
const python = "/usr/bin/python3"

// faultyPy is a test runtime: the example model, plus misbehaviour on
// request: parameters.action "crash" exits mid-request, "sleep" never
// answers in time, "malformed" answers data that does not fit its shape.
const faultyPy = `import asyncio, os, sys
from model import LinearModel

class Faulty(LinearModel):
    async def predict(self, request):
        action = request.parameters.action if request.parameters else None
        if action == "crash":
            print("faulty: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        if action == "sleep":
            await asyncio.sleep(60)
        resp = await super().predict(request)
        if action == "malformed":
            resp.outputs[0].shape = [99]
        if action == "headers":
            resp.parameters.headers["x-seen"] = ",".join(sorted(request.parameters.headers))
        return resp
`

// writeRuntimeModel puts the example NumPy model (runtimes/python/examples)
// in dir/name with settings (implementation defaults to the example's
// class; name to the folder's).
func writeRuntimeModel(t *testing.T, dir, name string, settings map[string]any, files map[string]string) {
	t.Helper()
	mdir := filepath.Join(dir, name)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../runtimes/python/examples/numpy_model/model.py")
	if err != nil {
		t.Fatal(err)
	}
	files["model.py"] = string(src)
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(mdir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := map[string]any{
		"name":           name,
		"implementation": python + " -m llmserve_runtime model:LinearModel",
		"inputs":         []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{-1, 2}}},
		"outputs":        []any{map[string]any{"name": "y", "datatype": "FP32", "shape": []int{-1, 2}}, map[string]any{"name": "rows_seen", "datatype": "INT64", "shape": []int{-1, 1}}},
		"parameters":     map[string]any{"extra": map[string]any{"scale": 2.0, "offset": 0.5}},
	}
	for k, v := range settings {
		base[k] = v
	}
	b, _ := json.Marshal(base)
	if err := os.WriteFile(filepath.Join(mdir, models.SettingsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// needPython fails the test when the interpreter lacks the packages, and
// puts the runtime package on the runtimes' PYTHONPATH.
func needPython(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import grpc, numpy, google.protobuf").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import grpc, numpy and protobuf (make python-deps installs python3-grpcio, python3-numpy, python3-protobuf): %v\n%s", python, err, out)
	}
	abs, err := filepath.Abs("../runtimes/python")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", abs)
}

// v2X is a V2 REST body with x = rows of [v, v+1].
func v2X(rows int, v float32, params map[string]any) map[string]any {
	data := make([]float32, 0, 2*rows)
	for r := range rows {
		data = append(data, v+float32(r), v+float32(r)+1)
	}
	body := map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{rows, 2}, "data": data}}}
	if params != nil {
		body["parameters"] = params
	}
	return body
}

type v2Answer struct {
	ModelName string `json:"model_name"`
	Outputs   []struct {
		Name     string    `json:"name"`
		Datatype string    `json:"datatype"`
		Shape    []int64   `json:"shape"`
		Data     []float64 `json:"data"`
	} `json:"outputs"`
	Error string `json:"error"`
}

func (a v2Answer) output(name string) []float64 {
	for _, o := range a.Outputs {
		if o.Name == name {
			return o.Data
		}
	}
	return nil
}

func postHeaders(t *testing.T, url string, body any, hdr map[string]string, out any) (int, http.Header) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("decode %q: %v", raw, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// TestCustomRuntime serves the example NumPy model (a real Python process
// on the real runtime package) from a repository folder beside an LLM,
// over V2 REST (JSON and binary), V2 gRPC and KServe V1, with headers
// round-tripped, 32 concurrent requests batched into one predict call,
// its own metrics on /metrics, unload and reload; and runtimes that
// crash mid-request, hang past request_timeout, answer malformed data, or
// never start.
func TestCustomRuntime(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	writeRepoModel(t, dir, "tiny", "1", nil)
	writeRuntimeModel(t, dir, "numpy_model", nil, map[string]string{})
	writeRuntimeModel(t, dir, "batched", map[string]any{"max_batch_size": 32, "max_batch_time": 30}, map[string]string{})
	writeRuntimeModel(t, dir, "faulty", map[string]any{"implementation": python + " -m llmserve_runtime faulty:Faulty", "request_timeout": "1s"}, map[string]string{"faulty.py": faultyPy})
	writeRuntimeModel(t, dir, "codec", map[string]any{"parameters": map[string]any{
		"extra": map[string]any{"scale": 2.0, "offset": 0.5}, "content_types": []string{"my-codec"},
	}}, map[string]string{})
	writeRuntimeModel(t, dir, "broken", map[string]any{"implementation": python + ` -c 'import sys; print("cannot read weights.bin", file=sys.stderr); sys.exit(4)'`}, map[string]string{})
	s := startRepoServer(t, dir, false)

	idx := s.index(t)
	for _, n := range []string{"numpy_model", "batched", "faulty", "codec", "tiny"} {
		if idx[n]["state"] != "READY" {
			t.Fatalf("%s: %v", n, idx[n])
		}
	}
	if e := idx["broken"]; e["state"] != "UNAVAILABLE" || !strings.Contains(e["reason"], "exit status 4") || !strings.Contains(e["reason"], "cannot read weights.bin") {
		t.Fatalf("broken runtime's index entry: %v", e)
	}

	t.Run("v2 rest json and headers", func(t *testing.T) {
		var a v2Answer
		code, hdr := postHeaders(t, s.URL+"/v2/models/numpy_model/infer", v2X(2, 1, nil), map[string]string{"X-Echo": "round trip", "Authorization": "Bearer secret"}, &a)
		if code != 200 {
			t.Fatalf("%d %s", code, a.Error)
		}
		if y := a.output("y"); fmt.Sprint(y) != "[2.5 4.5 4.5 6.5]" {
			t.Fatalf("y = %v", y)
		}
		if got := hdr.Get("X-Echo"); got != "round trip" {
			t.Fatalf("X-Echo back: %q (headers %v)", got, hdr)
		}
		if got := hdr.Get("X-Batch-Rows"); got != "2" {
			t.Fatalf("X-Batch-Rows: %q", got)
		}
		var meta map[string]any
		if code, body := s.get(t, "/v2/models/numpy_model"); code != 200 {
			t.Fatalf("metadata: %d %s", code, body)
		} else {
			_ = json.Unmarshal([]byte(body), &meta)
		}
		if meta["platform"] != "custom" || len(meta["inputs"].([]any)) != 1 {
			t.Fatalf("metadata: %v", meta)
		}
	})

	t.Run("content types", func(t *testing.T) {
		// llmserve checks a runtime's content types (the runtime decodes
		// them itself); one its settings name passes unchecked.
		withCT := func(ct string) map[string]any {
			b := v2X(1, 1, nil)
			b["inputs"].([]any)[0].(map[string]any)["parameters"] = map[string]any{"content_type": ct}
			return b
		}
		for _, c := range []struct {
			model, ct string
			code      int
			want      string
		}{
			{"numpy_model", "np", 200, ""},
			{"numpy_model", "my-codec", 400, "known content types: base64, datetime, np, pd, str"},
			{"codec", "my-codec", 200, ""},
			{"numpy_model", "pd", 400, "pd"},
		} {
			var a v2Answer
			code, _ := postHeaders(t, s.URL+"/v2/models/"+c.model+"/infer", withCT(c.ct), nil, &a)
			if code != c.code || !strings.Contains(a.Error, c.want) {
				t.Errorf("%s with content_type %q: %d %q, want %d naming %q", c.model, c.ct, code, a.Error, c.code, c.want)
			}
			if c.code == 200 && fmt.Sprint(a.output("y")) != "[2.5 4.5]" {
				t.Errorf("%s with content_type %q: y = %v", c.model, c.ct, a.output("y"))
			}
		}
	})

	t.Run("v2 rest binary", func(t *testing.T) {
		raw := make([]byte, 0, 8)
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(3))
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(-1))
		head, _ := json.Marshal(map[string]any{
			"inputs":  []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{1, 2}, "parameters": map[string]any{"binary_data_size": 8}}},
			"outputs": []any{map[string]any{"name": "y", "parameters": map[string]any{"binary_data": true}}},
		})
		req, _ := http.NewRequest("POST", s.URL+"/v2/models/numpy_model/infer", bytes.NewReader(append(head, raw...)))
		req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(head)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		n, err := strconv.Atoi(resp.Header.Get("Inference-Header-Content-Length"))
		if resp.StatusCode != 200 || err != nil || len(body) != n+8 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		y0 := math.Float32frombits(binary.LittleEndian.Uint32(body[n:]))
		y1 := math.Float32frombits(binary.LittleEndian.Uint32(body[n+4:]))
		if y0 != 6.5 || y1 != -1.5 {
			t.Fatalf("y = %v %v", y0, y1)
		}
	})

	t.Run("v2 grpc and metadata", func(t *testing.T) {
		var hdr metadata.MD
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-echo", "via grpc")
		resp, err := s.grpc.ModelInfer(ctx, &pb.ModelInferRequest{
			ModelName: "numpy_model",
			Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2},
				Contents: &pb.InferTensorContents{Fp32Contents: []float32{1, 1}}}},
		}, grpc.Header(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		if got := hdr.Get("x-echo"); len(got) != 1 || got[0] != "via grpc" {
			t.Fatalf("x-echo back: %v", hdr)
		}
		var y []float32
		for i, o := range resp.GetOutputs() {
			if o.GetName() == "y" {
				if c := o.GetContents(); c != nil && len(c.GetFp32Contents()) > 0 {
					y = c.GetFp32Contents()
				} else {
					b := resp.GetRawOutputContents()[i]
					y = []float32{math.Float32frombits(binary.LittleEndian.Uint32(b)), math.Float32frombits(binary.LittleEndian.Uint32(b[4:]))}
				}
			}
		}
		if fmt.Sprint(y) != "[2.5 2.5]" {
			t.Fatalf("y = %v", y)
		}
	})

	t.Run("v2 grpc stream", func(t *testing.T) {
		st, err := s.grpc.ModelStreamInfer(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := st.Send(&pb.ModelInferRequest{
				ModelName: "numpy_model", Id: strconv.Itoa(i),
				Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2},
					Contents: &pb.InferTensorContents{Fp32Contents: []float32{float32(i), 0}}}},
			}); err != nil {
				t.Fatal(err)
			}
		}
		_ = st.CloseSend()
		got := map[string]float32{}
		for range 3 {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetErrorMessage() != "" {
				t.Fatalf("stream error: %s", r.GetErrorMessage())
			}
			resp := r.GetInferResponse()
			for j, o := range resp.GetOutputs() {
				if o.GetName() != "y" {
					continue
				}
				if c := o.GetContents().GetFp32Contents(); len(c) > 0 {
					got[resp.GetId()] = c[0]
				} else {
					got[resp.GetId()] = math.Float32frombits(binary.LittleEndian.Uint32(resp.GetRawOutputContents()[j]))
				}
			}
		}
		if fmt.Sprint(got) != "map[0:0.5 1:2.5 2:4.5]" {
			t.Fatalf("stream answers: %v", got)
		}
	})

	t.Run("kserve v1", func(t *testing.T) {
		var out struct {
			Predictions []map[string]any `json:"predictions"`
		}
		if code, _ := s.post(t, "/v1/models/numpy_model:predict", map[string]any{"instances": [][]float32{{1, 2}, {0, 0}}}, &out); code != 200 {
			t.Fatalf("predict: %d %v", code, out)
		}
		if len(out.Predictions) != 2 || fmt.Sprint(out.Predictions[0]["y"]) != "[2.5 4.5]" || fmt.Sprint(out.Predictions[1]["y"]) != "[0.5 0.5]" {
			t.Fatalf("predictions: %v", out.Predictions)
		}
	})

	t.Run("openai refuses", func(t *testing.T) {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		code, _ := s.post(t, "/v1/chat/completions", map[string]any{"model": "numpy_model", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, &e)
		if code != 400 || !strings.Contains(e.Error.Message, "not an LLM") {
			t.Fatalf("chat on a custom runtime: %d %q", code, e.Error.Message)
		}
	})

	t.Run("batched", func(t *testing.T) {
		// 16 over REST and 16 over gRPC: one predict call of 32 rows.
		var wg sync.WaitGroup
		seen := make([]float64, 32)
		for i := range 32 {
			wg.Go(func() {
				if i%2 == 0 {
					var a v2Answer
					if code, _ := s.post(t, "/v2/models/batched/infer", v2X(1, float32(i), nil), &a); code != 200 {
						t.Errorf("request %d: %d %s", i, code, a.Error)
						return
					}
					if y := a.output("y"); len(y) != 2 || y[0] != 2*float64(i)+0.5 {
						t.Errorf("request %d: y = %v", i, y)
					}
					seen[i] = a.output("rows_seen")[0]
					return
				}
				raw := binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(i)))
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(i)+1))
				resp, err := s.grpc.ModelInfer(context.Background(), &pb.ModelInferRequest{
					ModelName:        "batched",
					Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2}}},
					RawInputContents: [][]byte{raw},
				})
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				for j, o := range resp.GetOutputs() {
					if o.GetName() == "rows_seen" {
						seen[i] = float64(binary.LittleEndian.Uint64(resp.GetRawOutputContents()[j]))
					}
					if o.GetName() == "y" {
						if y0 := math.Float32frombits(binary.LittleEndian.Uint32(resp.GetRawOutputContents()[j])); y0 != 2*float32(i)+0.5 {
							t.Errorf("request %d: y[0] = %v", i, y0)
						}
					}
				}
			})
		}
		wg.Wait()
		for i, n := range seen {
			if n != 32 {
				t.Fatalf("request %d ran in a predict call of %v rows, want all 32 in one: %v", i, n, seen)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		code, body := s.get(t, "/metrics")
		if code != 200 || !strings.Contains(body, `linear_rows{model_name="batched",model_version="1",worker="0"} 32`) {
			t.Fatalf("/metrics (%d) lacks the runtime's linear_rows for batched:\n%s", code, grepLines(body, "linear_"))
		}
	})

	t.Run("crash", func(t *testing.T) {
		var a v2Answer
		code, _ := s.post(t, "/v2/models/faulty/infer", v2X(1, 1, map[string]any{"action": "crash"}), &a)
		if code != 503 || !strings.Contains(a.Error, `model "faulty"`) || !strings.Contains(a.Error, "died while serving this request") {
			t.Fatalf("crash: %d %q", code, a.Error)
		}
		// The others keep serving.
		if code, text := s.generate(t, "tiny"); code != 200 || text == "" {
			t.Fatalf("the LLM after the crash: %d %q", code, text)
		}
		if code, _ := s.post(t, "/v2/models/numpy_model/infer", v2X(1, 1, nil), nil); code != 200 {
			t.Fatalf("numpy_model after the crash: %d", code)
		}
		// The runtime is restarted and serves again.
		restarted := poll(t, 60*time.Second, 100*time.Millisecond, func() bool {
			a = v2Answer{}
			code, _ = s.post(t, "/v2/models/faulty/infer", v2X(1, 1, nil), &a)
			return code != 503 // 503 while it restarts
		})
		if !restarted || code != 200 {
			t.Fatalf("faulty after the crash: %d %q", code, a.Error)
		}
	})

	t.Run("request timeout", func(t *testing.T) {
		var a v2Answer
		start := time.Now()
		code, _ := s.post(t, "/v2/models/faulty/infer", v2X(1, 1, map[string]any{"action": "sleep"}), &a)
		if code != 504 || !strings.Contains(a.Error, `model "faulty"`) || !strings.Contains(a.Error, "request_timeout of 1s") {
			t.Fatalf("hang: %d %q", code, a.Error)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("the 504 took %s", d)
		}
		_, err := s.grpc.ModelInfer(context.Background(), &pb.ModelInferRequest{
			ModelName:  "faulty",
			Parameters: map[string]*pb.InferParameter{"action": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "sleep"}}},
			Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2},
				Contents: &pb.InferTensorContents{Fp32Contents: []float32{1, 1}}}},
		})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("hang over gRPC: %v", err)
		}
		if code, _ := s.post(t, "/v2/models/faulty/infer", v2X(1, 1, nil), nil); code != 200 {
			t.Fatalf("faulty after the timeout: %d", code)
		}
	})

	t.Run("headers seen", func(t *testing.T) {
		// The runtime sees the client's own headers, never the API key.
		var a v2Answer
		code, hdr := postHeaders(t, s.URL+"/v2/models/faulty/infer", v2X(1, 1, map[string]any{"action": "headers"}),
			map[string]string{"X-Tenant": "t1", "Authorization": "Bearer secret"}, &a)
		seen := hdr.Get("X-Seen")
		if code != 200 || !strings.Contains(seen, "x-tenant") || strings.Contains(seen, "authorization") || strings.Contains(seen, "content-type") {
			t.Fatalf("%d %q: the runtime saw headers %q", code, a.Error, seen)
		}
	})

	t.Run("malformed answer", func(t *testing.T) {
		var a v2Answer
		code, _ := s.post(t, "/v2/models/faulty/infer", v2X(1, 1, map[string]any{"action": "malformed"}), &a)
		if code != 500 || !strings.Contains(a.Error, `model "faulty": the runtime's answer is malformed: output "y"`) {
			t.Fatalf("malformed: %d %q", code, a.Error)
		}
	})

	t.Run("unload and reload", func(t *testing.T) {
		if code, _ := s.post(t, "/v2/repository/models/numpy_model/unload", nil, nil); code != 200 {
			t.Fatalf("unload: %d", code)
		}
		if code, _ := s.post(t, "/v2/models/numpy_model/infer", v2X(1, 1, nil), nil); code != 404 {
			t.Fatalf("infer after unload: %d, want 404", code)
		}
		if e := s.index(t)["numpy_model"]; e["state"] != "UNAVAILABLE" || e["reason"] != "unloaded" {
			t.Fatalf("index after unload: %v", e)
		}
		if code, _ := s.post(t, "/v2/repository/models/numpy_model/load", map[string]any{}, nil); code != 200 {
			t.Fatalf("load: %d", code)
		}
		var a v2Answer
		if code, _ := s.post(t, "/v2/models/numpy_model/infer", v2X(1, 1, nil), &a); code != 200 || fmt.Sprint(a.output("y")) != "[2.5 4.5]" {
			t.Fatalf("infer after reload: %d %v %s", code, a.output("y"), a.Error)
		}
	})
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
