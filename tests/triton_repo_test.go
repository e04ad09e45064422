package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
	tpb "github.com/llmserve/llmserve/proto/tritonpb"
)

// A Triton user's model repository, served as it is: the test MLP as an
// ONNX model with max_batch_size, dynamic_batching and instance_group,
// stories260K as a GGUF LLM ("llama.cpp" backend, settings as
// parameters), a model-settings.json folder beside them, and a
// config.pbtxt llmserve cannot honour. The real binary serves it over V2
// (REST and gRPC) and Triton v1, which a Python port of the official v1
// client drives over HTTP and gRPC.

const mlpConfig = `name: "mlp"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "input" data_type: TYPE_FP32 dims: [ 6 ] }
]
output [
  { name: "output" data_type: TYPE_FP32 dims: [ 5 ] },
  { name: "label" data_type: TYPE_INT64 dims: [ 1 ] reshape: { shape: [ ] } }
]
dynamic_batching {
  preferred_batch_size: [ 4 ]
  max_queue_delay_microseconds: 2000
}
instance_group [ { count: 2 kind: KIND_CPU } ]
`

const llmConfig = `backend: "llama.cpp"
max_batch_size: 4
parameters: { key: "max_model_len" value: { string_value: "256" } }
`

// writeTritonRepo writes the repository and returns its folder.
func writeTritonRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(path string, data []byte) {
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onnx, err := testMLP().ONNX()
	if err != nil {
		t.Fatal(err)
	}
	write("mlp/config.pbtxt", []byte(mlpConfig))
	write("mlp/1/model.onnx", onnx)
	src, err := stories260k.File(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	gguf, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	write("stories260K/config.pbtxt", []byte(llmConfig))
	write("stories260K/1/model.gguf", gguf)
	writeRepoModel(t, dir, "tiny", "1", map[string]any{"max_model_len": 128})
	write("broken/config.pbtxt", []byte(`platform: "onnxruntime_onnx" max_batch_size: 4 sequence_batching {}`))
	write("broken/2/model.onnx", onnx)
	return dir
}

func TestTritonRepository(t *testing.T) {
	p := startServeProc(t, "--model-repository", writeTritonRepo(t))
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v2c := pb.NewGRPCInferenceServiceClient(conn)
	ctx := context.Background()
	x := mlpRows(7, 3)

	t.Run("V2 config", func(t *testing.T) {
		resp, err := http.Get(p.url + "/v2/models/mlp/config")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Triton's JSON: the proto's names, numbers for int64 (dims).
		var c struct {
			Name            string `json:"name"`
			Platform        string `json:"platform"`
			MaxBatchSize    int    `json:"max_batch_size"`
			DynamicBatching struct {
				PreferredBatchSize []int `json:"preferred_batch_size"`
				MaxQueueDelay      int   `json:"max_queue_delay_microseconds"`
			} `json:"dynamic_batching"`
			InstanceGroup []struct {
				Count int    `json:"count"`
				Kind  string `json:"kind"`
			} `json:"instance_group"`
			Input []struct {
				Name     string  `json:"name"`
				DataType string  `json:"data_type"`
				Format   string  `json:"format"`
				Dims     []int64 `json:"dims"`
			} `json:"input"`
			Output []struct {
				Name    string `json:"name"`
				Reshape *struct {
					Shape []int64 `json:"shape"`
				} `json:"reshape"`
			} `json:"output"`
		}
		if err := json.Unmarshal(b, &c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
		}
		if c.Name != "mlp" || c.Platform != "onnxruntime_onnx" || c.MaxBatchSize != 8 || !slices.Equal(c.DynamicBatching.PreferredBatchSize, []int{4}) ||
			c.DynamicBatching.MaxQueueDelay != 2000 || len(c.InstanceGroup) != 1 || c.InstanceGroup[0].Count != 2 || c.InstanceGroup[0].Kind != "KIND_CPU" ||
			len(c.Input) != 1 || c.Input[0].DataType != "TYPE_FP32" || c.Input[0].Format != "FORMAT_NONE" || !slices.Equal(c.Input[0].Dims, []int64{6}) ||
			len(c.Output) != 2 || c.Output[1].Reshape == nil || len(c.Output[1].Reshape.Shape) != 0 {
			t.Fatalf("config %s", b)
		}
		// gRPC's ModelConfig answers the same configuration.
		r, err := v2c.ModelConfig(ctx, &pb.ModelConfigRequest{Name: "stories260K"})
		if err != nil {
			t.Fatal(err)
		}
		if c := r.GetConfig(); c.GetBackend() != "llama.cpp" || c.GetMaxBatchSize() != 4 || c.GetInput()[0].GetName() != "text_input" ||
			c.GetParameters()["max_model_len"].GetStringValue() != "256" || c.GetVersionPolicy().GetLatest().GetNumVersions() != 1 {
			t.Fatalf("stories260K config %v", c)
		}
		// A model-settings.json model has a configuration made from its
		// metadata.
		r, err = v2c.ModelConfig(ctx, &pb.ModelConfigRequest{Name: "tiny"})
		if err != nil || r.GetConfig().GetPlatform() != "llama.cpp" || r.GetConfig().GetInput()[0].GetDataType() != tc.DataType_TYPE_STRING {
			t.Fatalf("tiny config %v %v", r, err)
		}
	})

	t.Run("V2 infer and generate", func(t *testing.T) {
		got, err := restJSON(t, &repoServer{server: &server{URL: p.url}}, "mlp", x)
		if err != nil {
			t.Fatal(err)
		}
		checkReference(t, "V2 REST on the Triton folder", x, got)
		for _, model := range []string{"stories260K", "tiny"} {
			code, b := p.post(t, "/v2/models/"+model+"/generate", map[string]any{"text_input": "Once upon a time", "parameters": map[string]any{"max_tokens": 4, "temperature": 0}})
			if code != 200 || !strings.Contains(string(b), "text_output") {
				t.Fatalf("generate on %s: %d %s", model, code, b)
			}
		}
		// More rows than max_batch_size: a client error.
		if _, err := restJSON(t, &repoServer{server: &server{URL: p.url}}, "mlp", mlpRows(1, 9)); err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("9 rows to max_batch_size 8: %v", err)
		}
	})

	t.Run("V2 index shows the broken model", func(t *testing.T) {
		code, b := p.post(t, "/v2/repository/index", map[string]any{})
		var idx []map[string]string
		if err := json.Unmarshal(b, &idx); err != nil || code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		i := slices.IndexFunc(idx, func(e map[string]string) bool { return e["name"] == "broken" })
		if i < 0 || idx[i]["state"] != "UNAVAILABLE" || idx[i]["version"] != "2" || !strings.Contains(idx[i]["reason"], "sequence_batching is not supported") {
			t.Fatalf("index %s", b)
		}
	})

	t.Run("Python v1 client", func(t *testing.T) {
		needPython(t)
		rows := func(x []float32) []float64 {
			out := make([]float64, len(x))
			for i, v := range x {
				out[i] = float64(v)
			}
			return out
		}
		mixed := `batch_size: 3 input { name: "input" } output { name: "output" cls { count: 2 } } output { name: "label" }`
		llmHeader, _ := v1LLMRequest("", 0)
		plan := []map[string]any{
			{"op": "status", "model": "mlp"},
			{"op": "status_of", "model": "broken"},
			{"op": "http", "model": "mlp", "header": mixed, "inputs": [][]any{{"fp32", rows(x)}}, "kinds": map[string]string{"label": "int64"}},
			{"op": "grpc", "model": "mlp", "header": mixed, "inputs": [][]any{{"fp32", rows(x)}}, "kinds": map[string]string{"label": "int64"}},
			{"op": "stream", "model": "mlp", "times": 3, "header": `batch_size: 3 input { name: "input" } output { name: "label" } output { name: "output" cls { count: 1 } }`,
				"inputs": [][]any{{"fp32", rows(x)}}, "kinds": map[string]string{"label": "int64"}},
			{"op": "http", "model": "stories260K", "header": llmHeader, "inputs": [][]any{{"string", []string{"Once upon a time"}}, {"int32", []int{6}}, {"fp32", []float64{0}}},
				"kinds": map[string]string{"text_output": "string"}},
			{"op": "grpc", "model": "stories260K", "header": llmHeader, "inputs": [][]any{{"string", []string{"Once upon a time"}}, {"int32", []int{6}}, {"fp32", []float64{0}}},
				"kinds": map[string]string{"text_output": "string"}},
			// Errors: an input the model lacks, named with non-ASCII, over
			// HTTP (the NV-Status header) and gRPC.
			{"op": "http", "model": "mlp", "header": `batch_size: 1 input { name: "naïve" }`, "inputs": [][]any{{"fp32", rows(x[:6])}}},
			{"op": "grpc", "model": "mlp", "header": `batch_size: 1 input { name: "naïve" }`, "inputs": [][]any{{"fp32", rows(x[:6])}}},
			{"op": "http", "model": "broken", "header": "batch_size: 1", "inputs": [][]any{}},
		}
		answers := runV1Client(t, p, plan)

		// The status lists every model, the broken one unavailable at its
		// version, and gives the context mlp's max_batch_size.
		var st struct {
			Models       map[string]map[string]string `json:"models"`
			MaxBatchSize int                          `json:"max_batch_size"`
		}
		decodeAnswer(t, answers[0], &st)
		if len(st.Models) != 4 || st.MaxBatchSize != 8 || st.Models["broken"]["2"] != "ready_state: MODEL_UNAVAILABLE" ||
			!strings.HasPrefix(st.Models["mlp"]["1"], "ready_state: MODEL_READY") {
			t.Fatalf("status %s", answers[0])
		}
		var of struct {
			HTTPMsg string   `json:"http_msg"`
			GRPCMsg string   `json:"grpc_msg"`
			States  []string `json:"states"`
		}
		decodeAnswer(t, answers[1], &of)
		if !strings.Contains(of.HTTPMsg, "sequence_batching is not supported") || of.GRPCMsg != of.HTTPMsg || len(of.States) != 1 {
			t.Fatalf("status of broken %s", answers[1])
		}

		// Mixed classification and raw outputs, HTTP and gRPC: the
		// classes are the reference's top 2, the labels its labels.
		wantOut, wantLabels := mlpReference(testMLP(), x)
		for i, a := range answers[2:4] {
			var r struct {
				BatchSize int      `json:"batch_size"`
				Outputs   []string `json:"outputs"`
				Results   struct {
					Output [][][3]any `json:"output"`
					Label  []int64    `json:"label"`
				} `json:"results"`
			}
			decodeAnswer(t, a, &r)
			if r.BatchSize != 3 || !slices.Equal(r.Outputs, []string{"output", "label"}) || !slices.Equal(r.Results.Label, wantLabels) || len(r.Results.Output) != 3 {
				t.Fatalf("answer %d: %s", i, a)
			}
			for row, classes := range r.Results.Output {
				want := topK(wantOut[row*mlpOut:(row+1)*mlpOut], 2)
				for k, c := range classes {
					if c[0].(float64) != want[k][0] || math.Abs(c[1].(float64)-want[k][1]) > 1e-5 {
						t.Fatalf("answer %d row %d: classes %v, reference %v", i, row, classes, want)
					}
				}
			}
		}
		var stream struct {
			Answers []struct {
				Label  []int64    `json:"label"`
				Output [][][3]any `json:"output"`
			} `json:"answers"`
		}
		decodeAnswer(t, answers[4], &stream)
		if len(stream.Answers) != 3 {
			t.Fatalf("stream %s", answers[4])
		}
		for _, a := range stream.Answers {
			if !slices.Equal(a.Label, wantLabels) || len(a.Output) != 3 || a.Output[0][0][0].(float64) != float64(wantLabels[0]) {
				t.Fatalf("stream %s", answers[4])
			}
		}

		// The LLM over v1, HTTP and gRPC: OpenAI's greedy text.
		want := openAIGreedy(t, p, "Once upon a time", 6)
		for _, a := range answers[5:7] {
			var r struct {
				Results struct {
					Text []string `json:"text_output"`
				} `json:"results"`
			}
			decodeAnswer(t, a, &r)
			if len(r.Results.Text) != 1 || r.Results.Text[0] != want || want == "" {
				t.Fatalf("LLM over v1: %s, OpenAI %q", a, want)
			}
		}

		// Errors: Python parsed NV-Status and request_status.
		for _, a := range answers[7:9] {
			var r struct {
				Error struct {
					Code string `json:"code"`
					Msg  string `json:"msg"`
				} `json:"error"`
			}
			decodeAnswer(t, a, &r)
			if r.Error.Code != "INVALID_ARG" || !strings.Contains(r.Error.Msg, `"naïve"`) {
				t.Fatalf("error %s", a)
			}
		}
		if !strings.Contains(answers[9], `"code": "NOT_FOUND"`) && !strings.Contains(answers[9], `"code": "UNAVAILABLE"`) {
			t.Fatalf("inference on the broken model: %s", answers[9])
		}
	})

	t.Run("v1 statistics", func(t *testing.T) {
		a := v1Do(t, "GET", p.url+"/api/status/mlp", "", nil)
		var st tpb.ServerStatus
		if err := prototext.Unmarshal(a.body, &st); err != nil {
			t.Fatal(err)
		}
		vs := st.GetModelStatus()["mlp"].GetVersionStatus()[1]
		is := vs.GetInferStats()[1]
		// 1 V2 request of 3 rows (the 9-row one was refused), 2 v1 of 3
		// and a stream of 3 of 3, each in at most one batch.
		if vs.GetModelInferenceCount() != 18 || vs.GetModelExecutionCount() < 1 || vs.GetModelExecutionCount() > 6 ||
			is.GetQueue().GetCount() != 6 || is.GetCompute().GetCount() != 6 || is.GetCompute().GetTotalTimeNs() == 0 {
			t.Fatalf("statistics %v", vs)
		}
		c := st.GetModelStatus()["mlp"].GetConfig()
		if c.GetMaxBatchSize() != 8 || c.GetDynamicBatching().GetPreferredBatchSize()[0] != 4 || c.GetInstanceGroup()[0].GetCount() != 2 {
			t.Fatalf("v1 config %v", c)
		}
	})
}

// runV1Client runs the Python v1 client (testdata/tritonv1_client.py) on
// the plan and returns its answers, one JSON object per step.
func runV1Client(t *testing.T, p *pdProc, plan []map[string]any) []string {
	t.Helper()
	set := v1DescriptorSet(t)
	in, _ := json.Marshal(plan)
	cmd := exec.Command(python, "testdata/tritonv1_client.py", set, p.url, p.grpcAddr)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(plan) {
		t.Fatalf("python client answered %d steps of %d:\n%s\n%s", len(lines), len(plan), out, stderr.Bytes())
	}
	return lines
}

func decodeAnswer(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
}

// v1DescriptorSet writes the v1 protos (grpc_service.proto and what it
// imports) as a FileDescriptorSet for the Python client.
func v1DescriptorSet(t *testing.T) string {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			imp, err := protoregistry.GlobalFiles.FindFileByPath(fd.Imports().Get(i).Path())
			if err != nil {
				t.Fatal(err)
			}
			add(imp)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	add(tpb.File_src_core_grpc_service_proto)
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v1.pb")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTritonLLMTensorsMatchMetadata: the LLM tensors a config.pbtxt may
// list (models.LLMInputs, LLMOutputs) are the ones V2 metadata gives an
// LLM.
func TestTritonLLMTensorsMatchMetadata(t *testing.T) {
	s := startRepoServer(t, func() string {
		dir := t.TempDir()
		writeRepoModel(t, dir, "tiny", "1", nil)
		return dir
	}(), false)
	var md struct {
		Inputs, Outputs []struct {
			Name     string  `json:"name"`
			Datatype string  `json:"datatype"`
			Shape    []int64 `json:"shape"`
		}
	}
	code, body := s.get(t, "/v2/models/tiny")
	if err := json.Unmarshal([]byte(body), &md); code != 200 || err != nil {
		t.Fatal(code, body, err)
	}
	check := func(what string, table map[string]models.TritonTensor, got []struct {
		Name     string  `json:"name"`
		Datatype string  `json:"datatype"`
		Shape    []int64 `json:"shape"`
	}) {
		if len(got) != len(table) {
			t.Fatalf("%s: metadata has %d, models' table %d", what, len(got), len(table))
		}
		for _, m := range got {
			want, ok := table[m.Name]
			dt := "TYPE_" + m.Datatype
			if m.Datatype == "BYTES" {
				dt = "TYPE_STRING"
			}
			if !ok || want.DataType.String() != dt || !slices.Equal(want.Dims, m.Shape) {
				t.Fatalf("%s %s %s %v: models' table has %v", what, m.Name, m.Datatype, m.Shape, want)
			}
		}
	}
	check("input", models.LLMInputs, md.Inputs)
	check("output", models.LLMOutputs, md.Outputs)
}
