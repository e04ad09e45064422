package tests

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	tpb "github.com/llmserve/llmserve/proto/tritonpb"
)

// The Triton v1 tests run the real `llmserve serve` binary on a model
// repository holding stories260K and the test MLP (tensor_test.go), and
// drive it as v1 clients do: Go's HTTP client with text protobuf headers,
// grpc-go with the official protos (tritonpb), and grpcurl through
// reflection. Every expected value comes from another protocol of the same
// server (the OpenAI route's greedy text, V2's tensors) or from the MLP's
// pure-Go reference.

// startTritonV1Server serves stories260K, the MLP ("mlp", ONNX) and
// stories260K as an embedding model ("emb") from a repository, with extra
// flags.
func startTritonV1Server(t *testing.T, extra ...string) *pdProc {
	t.Helper()
	dir := t.TempDir()
	writeRepoModel(t, dir, "stories260K", "1", nil)
	writeRepoModel(t, dir, "emb", "1", map[string]any{"pooling": "mean", "parameters": map[string]any{"task": "embed"}})
	onnx, err := testMLP().ONNX()
	if err != nil {
		t.Fatal(err)
	}
	writeTensorFile(t, dir, "mlp", "model.onnx", onnx, nil)
	return startServeProc(t, append([]string{"--model-repository", dir}, extra...)...)
}

// v1Answer is one answer of the v1 HTTP API.
type v1Answer struct {
	code   int
	status *tpb.RequestStatus
	header *tpb.InferResponseHeader
	// raw is each raw output's bytes, in the header's order.
	raw  map[string][]byte
	body []byte
}

// v1Do sends a v1 request with the NV-InferRequest header (none when
// empty) and reads the answer: NV-Status always, and for a successful
// infer NV-InferResponse, the raw outputs and the trailing header (text,
// or binary with ?format=binary), which must equal NV-InferResponse.
func v1Do(t *testing.T, method, url, nvRequest string, body []byte) v1Answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if nvRequest != "" {
		req.Header.Set("NV-InferRequest", nvRequest)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := v1Answer{code: resp.StatusCode, status: &tpb.RequestStatus{}, raw: map[string][]byte{}}
	if a.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	nv := resp.Header.Get("NV-Status")
	if err := prototext.Unmarshal([]byte(nv), a.status); err != nil || nv == "" {
		t.Fatalf("%s %s: NV-Status %q is not a text RequestStatus (%v); HTTP %d %s", method, url, nv, err, a.code, a.body)
	}
	if (a.code == 200) != (a.status.GetCode() == tpb.RequestStatusCode_SUCCESS) {
		t.Fatalf("%s %s: HTTP %d with NV-Status %v", method, url, a.code, a.status)
	}
	if a.code != 200 || !strings.Contains(url, "/api/infer/") {
		return a
	}
	a.header = &tpb.InferResponseHeader{}
	if err := prototext.Unmarshal([]byte(resp.Header.Get("NV-InferResponse")), a.header); err != nil {
		t.Fatalf("NV-InferResponse %q: %v", resp.Header.Get("NV-InferResponse"), err)
	}
	rest := a.body
	for _, o := range a.header.GetOutput() {
		if o.GetRaw() == nil {
			continue
		}
		n := o.GetRaw().GetBatchByteSize()
		if n > uint64(len(rest)) {
			t.Fatalf("output %s: batch_byte_size %d, %d bytes left in the body", o.GetName(), n, len(rest))
		}
		a.raw[o.GetName()], rest = rest[:n], rest[n:]
	}
	trailer := &tpb.InferResponseHeader{}
	if strings.Contains(url, "format=binary") {
		err = proto.Unmarshal(rest, trailer)
	} else {
		err = prototext.Unmarshal(rest, trailer)
	}
	if err != nil || !proto.Equal(trailer, a.header) {
		t.Fatalf("the body's trailing InferResponseHeader %q (%v) is not NV-InferResponse %v", rest, err, a.header)
	}
	return a
}

// v1LLMRequest is the header and body of a greedy request for prompt.
func v1LLMRequest(prompt string, maxTokens int32) (string, []byte) {
	hdr := `batch_size: 1 input { name: "text_input" dims: 1 } input { name: "max_tokens" } input { name: "temperature" } output { name: "text_output" }`
	body := binary.LittleEndian.AppendUint32(nil, uint32(len(prompt)))
	body = append(body, prompt...)
	body = binary.LittleEndian.AppendUint32(body, uint32(maxTokens))
	body = binary.LittleEndian.AppendUint32(body, math.Float32bits(0))
	return hdr, body
}

// v1Strings decodes TYPE_STRING data: 4-byte length, bytes, ...
func v1Strings(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
			t.Fatalf("bad TYPE_STRING data %q", b)
		}
		n := binary.LittleEndian.Uint32(b)
		out = append(out, string(b[4:4+n]))
		b = b[4+n:]
	}
	return out
}

func fp32Values(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// openAIGreedy is the OpenAI completions route's greedy text.
func openAIGreedy(t *testing.T, p *pdProc, prompt string, maxTokens int) string {
	t.Helper()
	code, b := p.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0})
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil || code != 200 || len(out.Choices) != 1 {
		t.Fatalf("completions: %d %s", code, b)
	}
	return out.Choices[0].Text
}

// topK is the k highest values of row with their indices, highest first,
// equal values by index: what cls { count: k } must return.
func topK(row []float32, k int) [][2]float64 {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(row[b], row[a]) })
	var out [][2]float64
	for _, i := range idx[:k] {
		out = append(out, [2]float64{float64(i), float64(row[i])})
	}
	return out
}

var v1Prompts = []string{"Once upon a time", "The little dog", "Lily wanted to", "One day, a girl", "Tom and his mom", "The sun was", "She saw a big", "They went to the park"}

func TestTritonV1(t *testing.T) {
	p := startTritonV1Server(t)
	repo := &repoServer{server: &server{URL: p.url}}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := tpb.NewGRPCServiceClient(conn)
	ctx := context.Background()

	t.Run("health", func(t *testing.T) {
		for _, path := range []string{"/api/health/live", "/api/health/ready"} {
			if a := v1Do(t, "GET", p.url+path, "", nil); a.code != 200 || len(a.body) != 0 {
				t.Fatalf("%s: %d %q", path, a.code, a.body)
			}
		}
	})

	t.Run("status", func(t *testing.T) {
		a := v1Do(t, "GET", p.url+"/api/status", "", nil)
		var st tpb.ServerStatus
		if err := prototext.Unmarshal(a.body, &st); err != nil || a.code != 200 {
			t.Fatalf("%d %s: %v", a.code, a.body, err)
		}
		if st.GetId() != "llmserve" || st.GetVersion() == "" || st.GetUptimeNs() == 0 || st.GetReadyState() != tpb.ServerReadyState_SERVER_READY || len(st.GetModelStatus()) != 3 {
			t.Fatalf("status %v", &st)
		}
		llm, mlp := st.GetModelStatus()["stories260K"], st.GetModelStatus()["mlp"]
		if c := llm.GetConfig(); c.GetPlatform() != "llama.cpp" || c.GetMaxBatchSize() != 0 || c.GetInput()[0].GetName() != "text_input" ||
			c.GetInput()[0].GetDataType() != tpb.DataType_TYPE_STRING || !slices.Equal(c.GetInput()[0].GetDims(), []int64{-1}) ||
			c.GetOutput()[0].GetName() != "text_output" || c.GetOutput()[0].GetDataType() != tpb.DataType_TYPE_STRING {
			t.Fatalf("stories260K config %v", c)
		}
		want := &tpb.ModelConfig{
			Name: "mlp", Platform: "onnx", MaxBatchSize: 4096,
			VersionPolicy: &tpb.ModelVersionPolicy{PolicyChoice: &tpb.ModelVersionPolicy_Latest_{Latest: &tpb.ModelVersionPolicy_Latest{NumVersions: 1}}},
			Input:         []*tpb.ModelInput{{Name: "input", DataType: tpb.DataType_TYPE_FP32, Dims: []int64{mlpIn}}},
			Output:        []*tpb.ModelOutput{{Name: "output", DataType: tpb.DataType_TYPE_FP32, Dims: []int64{mlpOut}}, {Name: "label", DataType: tpb.DataType_TYPE_INT64, Dims: []int64{1}, Reshape: &tpb.ModelTensorReshape{}}},
		}
		if !proto.Equal(mlp.GetConfig(), want) {
			t.Fatalf("mlp config %v, want %v", mlp.GetConfig(), want)
		}
		for name, ms := range st.GetModelStatus() {
			if vs := ms.GetVersionStatus()[1]; vs.GetReadyState() != tpb.ModelReadyState_MODEL_READY {
				t.Fatalf("%s version status %v", name, ms.GetVersionStatus())
			}
		}
		// Binary, of one model: the same config.
		a = v1Do(t, "GET", p.url+"/api/status/mlp?format=binary", "", nil)
		var one tpb.ServerStatus
		if err := proto.Unmarshal(a.body, &one); err != nil || a.code != 200 || len(one.GetModelStatus()) != 1 || !proto.Equal(one.GetModelStatus()["mlp"].GetConfig(), want) {
			t.Fatalf("binary status of mlp: %d %v %v", a.code, &one, err)
		}
	})

	t.Run("LLM equals OpenAI's greedy text", func(t *testing.T) {
		for i, prompt := range v1Prompts[:3] {
			maxTokens := int32(4 + 4*i)
			hdr, body := v1LLMRequest(prompt, maxTokens)
			a := v1Do(t, "POST", p.url+"/api/infer/stories260K", hdr, body)
			if a.code != 200 {
				t.Fatalf("%d %v", a.code, a.status)
			}
			got := v1Strings(t, a.raw["text_output"])
			want := openAIGreedy(t, p, prompt, int(maxTokens))
			if len(got) != 1 || got[0] != want || want == "" {
				t.Fatalf("prompt %q: v1 %q, OpenAI %q", prompt, got, want)
			}
			h := a.header
			if h.GetModelName() != "stories260K" || h.GetModelVersion() != 1 || h.GetBatchSize() != 1 || len(h.GetOutput()) != 1 ||
				!slices.Equal(h.GetOutput()[0].GetRaw().GetDims(), []int64{1}) {
				t.Fatalf("NV-InferResponse %v", h)
			}
		}
		// Version 1 by path, the header in binary, no outputs asked for
		// (text_output), and the server's defaults without sampling inputs
		// (16 tokens at temperature 1: some text).
		prompt := "Once upon a time"
		body := binary.LittleEndian.AppendUint32(nil, uint32(len(prompt)))
		body = append(body, prompt...)
		a := v1Do(t, "POST", p.url+"/api/infer/stories260K/1?format=binary", `batch_size: 1 input { name: "text_input" dims: 1 batch_byte_size: 20 }`, body)
		if got := v1Strings(t, a.raw["text_output"]); a.code != 200 || len(got) != 1 || got[0] == "" {
			t.Fatalf("defaults: %d %v %q", a.code, a.status, got)
		}
	})

	t.Run("tensor model equals V2", func(t *testing.T) {
		x := mlpRows(7, 3)
		var body []byte
		for _, v := range x {
			body = binary.LittleEndian.AppendUint32(body, math.Float32bits(v))
		}
		a := v1Do(t, "POST", p.url+"/api/infer/mlp", `id: 5 batch_size: 3 input { name: "input" } output { name: "output" } output { name: "label" }`, body)
		if a.code != 200 {
			t.Fatalf("%d %v", a.code, a.status)
		}
		v2, err := restBinary(t, repo, "mlp", x)
		if err != nil {
			t.Fatal(err)
		}
		var got tensorResult
		got.add("output", a.raw["output"])
		got.add("label", a.raw["label"])
		if !got.equalBits(v2) {
			t.Fatalf("v1 %v\nV2 %v", got, v2)
		}
		checkReference(t, "v1", x, got)
		h := a.header
		if h.GetId() != 5 || h.GetBatchSize() != 3 || h.GetModelName() != "mlp" || len(h.GetOutput()) != 2 ||
			!slices.Equal(h.GetOutput()[0].GetRaw().GetDims(), []int64{mlpOut}) || h.GetOutput()[0].GetRaw().GetBatchByteSize() != 3*mlpOut*4 ||
			!slices.Equal(h.GetOutput()[1].GetRaw().GetDims(), []int64{1}) || h.GetOutput()[1].GetRaw().GetBatchByteSize() != 3*8 {
			t.Fatalf("NV-InferResponse %v", h)
		}

		// cls { count: 3 }: the top 3 of each row, as V2's output says.
		a = v1Do(t, "POST", p.url+"/api/infer/mlp/1", `batch_size: 3 input { name: "input" batch_byte_size: 72 } output { name: "output" cls { count: 3 } }`, body)
		if a.code != 200 || len(a.body) == 0 {
			t.Fatalf("%d %v", a.code, a.status)
		}
		out := a.header.GetOutput()
		if len(out) != 1 || out[0].GetRaw() != nil || len(out[0].GetBatchClasses()) != 3 || len(a.raw) != 0 {
			t.Fatalf("classification %v", a.header)
		}
		for r, classes := range out[0].GetBatchClasses() {
			want := topK(v2.out[r*mlpOut:(r+1)*mlpOut], 3)
			var gotCls [][2]float64
			for _, c := range classes.GetCls() {
				if c.GetLabel() != "" {
					t.Fatalf("label %q: the model has no labels", c.GetLabel())
				}
				gotCls = append(gotCls, [2]float64{float64(c.GetIdx()), float64(c.GetValue())})
			}
			if fmt.Sprint(gotCls) != fmt.Sprint(want) {
				t.Fatalf("row %d: classes %v, want %v", r, gotCls, want)
			}
			if int64(gotCls[0][0]) != v2.labels[r] {
				t.Fatalf("row %d: top class %v, the model's label %d", r, gotCls[0], v2.labels[r])
			}
		}
	})

	t.Run("embedding model equals V2", func(t *testing.T) {
		texts := []string{"Once upon a time", "a cat"}
		var body []byte
		for _, s := range texts {
			body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
			body = append(body, s...)
		}
		a := v1Do(t, "POST", p.url+"/api/infer/emb", `batch_size: 1 input { name: "text_input" dims: 2 } output { name: "embedding" }`, body)
		if a.code != 200 {
			t.Fatalf("%d %v", a.code, a.status)
		}
		dims := a.header.GetOutput()[0].GetRaw().GetDims()
		got := fp32Values(a.raw["embedding"])
		var v2 struct {
			Outputs []struct {
				Shape []int64   `json:"shape"`
				Data  []float32 `json:"data"`
			} `json:"outputs"`
		}
		code, b := p.post(t, "/v2/models/emb/infer", map[string]any{"inputs": []any{map[string]any{"name": "text_input", "datatype": "BYTES", "shape": []int{2}, "data": texts}}})
		if err := json.Unmarshal(b, &v2); err != nil || code != 200 || len(v2.Outputs) != 1 {
			t.Fatalf("V2: %d %s", code, b)
		}
		if !slices.Equal(dims, v2.Outputs[0].Shape) || len(dims) != 2 || dims[0] != 2 || fmt.Sprint(got) != fmt.Sprint(v2.Outputs[0].Data) {
			t.Fatalf("v1 dims %v %v\nV2 shape %v %v", dims, got, v2.Outputs[0].Shape, v2.Outputs[0].Data)
		}
		c := v1Do(t, "GET", p.url+"/api/status/emb", "", nil)
		var st tpb.ServerStatus
		if err := prototext.Unmarshal(c.body, &st); err != nil {
			t.Fatal(err)
		}
		if cfg := st.GetModelStatus()["emb"].GetConfig(); cfg.GetMaxBatchSize() != 0 || cfg.GetOutput()[0].GetName() != "embedding" ||
			cfg.GetOutput()[0].GetDataType() != tpb.DataType_TYPE_FP32 || !slices.Equal(cfg.GetOutput()[0].GetDims(), []int64{-1, -1}) {
			t.Fatalf("emb config %v", cfg)
		}
	})

	t.Run("statistics", func(t *testing.T) {
		counts := func() (ok, failed uint64) {
			a := v1Do(t, "GET", p.url+"/api/status/mlp", "", nil)
			var st tpb.ServerStatus
			if err := prototext.Unmarshal(a.body, &st); err != nil {
				t.Fatal(err)
			}
			is := st.GetModelStatus()["mlp"].GetVersionStatus()[1].GetInferStats()[1]
			if is.GetSuccess().GetCount() > 0 && is.GetSuccess().GetTotalTimeNs() == 0 {
				t.Fatalf("success without time: %v", is)
			}
			return is.GetSuccess().GetCount(), is.GetFailed().GetCount()
		}
		ok0, failed0 := counts()
		body := make([]byte, 4*mlpIn)
		for range 3 {
			if a := v1Do(t, "POST", p.url+"/api/infer/mlp", `batch_size: 1 input { name: "input" }`, body); a.code != 200 {
				t.Fatalf("%d %v", a.code, a.status)
			}
		}
		if a := v1Do(t, "POST", p.url+"/api/infer/mlp", `batch_size: 1 input { name: "input" dims: 5 }`, body); a.code != 400 {
			t.Fatalf("bad dims: %d", a.code)
		}
		// gRPC's requests go to the same statistics.
		var h tpb.InferRequestHeader
		if err := prototext.Unmarshal([]byte(`batch_size: 1 input { name: "input" }`), &h); err != nil {
			t.Fatal(err)
		}
		for _, raw := range [][]byte{body, body[:8]} {
			if r, err := gc.Infer(ctx, &tpb.InferRequest{ModelName: "mlp", MetaData: &h, RawInput: [][]byte{raw}}); err != nil {
				t.Fatal(err)
			} else if got, want := r.GetRequestStatus().GetCode(), map[bool]tpb.RequestStatusCode{true: tpb.RequestStatusCode_SUCCESS, false: tpb.RequestStatusCode_INVALID_ARG}[len(raw) == len(body)]; got != want {
				t.Fatalf("gRPC Infer: %v, want %v", r.GetRequestStatus(), want)
			}
		}
		ok1, failed1 := counts()
		if ok1-ok0 != 4 || failed1-failed0 != 2 {
			t.Fatalf("success %d -> %d, failed %d -> %d; want 4 and 2 more", ok0, ok1, failed0, failed1)
		}
	})

	t.Run("errors", func(t *testing.T) {
		// The router's refusals under /api/ are in the v1 form too.
		if a := v1Do(t, "GET", p.url+"/api/nothing", "", nil); a.code != 404 || a.status.GetCode() != tpb.RequestStatusCode_NOT_FOUND {
			t.Fatalf("GET /api/nothing: %d %v", a.code, a.status)
		}
		if a := v1Do(t, "PUT", p.url+"/api/status", "", nil); a.code != 405 || a.status.GetCode() != tpb.RequestStatusCode_UNSUPPORTED {
			t.Fatalf("PUT /api/status: %d %v", a.code, a.status)
		}
		row := make([]byte, 4*mlpIn)
		hi := binary.LittleEndian.AppendUint32(nil, 2)
		hi = append(hi, "hi"...)
		for _, c := range []struct {
			name, method, path, header string
			body                       []byte
			http                       int
			code                       tpb.RequestStatusCode
			msg                        string
		}{
			{"unknown model", "POST", "/api/infer/nope", `batch_size: 1`, nil, 404, tpb.RequestStatusCode_NOT_FOUND, `model "nope" is not served here`},
			{"unknown version", "POST", "/api/infer/mlp/3", `batch_size: 1`, nil, 404, tpb.RequestStatusCode_NOT_FOUND, `model "mlp" has no version "3"`},
			{"status of an unknown model", "GET", "/api/status/nope", "", nil, 404, tpb.RequestStatusCode_NOT_FOUND, `model "nope" is not served here`},
			{"no NV-InferRequest", "POST", "/api/infer/mlp", "", row, 400, tpb.RequestStatusCode_INVALID_ARG, "the NV-InferRequest header is missing"},
			{"NV-InferRequest not text protobuf", "POST", "/api/infer/mlp", `{"batch_size": 1}`, row, 400, tpb.RequestStatusCode_INVALID_ARG, "the NV-InferRequest header is not a text InferRequestHeader"},
			{"batch_size 0", "POST", "/api/infer/mlp", `input { name: "input" }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, "batch_size is 0"},
			{"batch over max_batch_size", "POST", "/api/infer/mlp", `batch_size: 5000 input { name: "input" }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, "max_batch_size 4096"},
			{"unknown input", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "pixels" }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, `unexpected inference input "pixels" for model "mlp"`},
			{"wrong dims", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "input" dims: 5 }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, `input "input": dimension 0 of dims [5] is 5 but the model takes 6`},
			{"wrong rank", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "input" dims: [2, 3] }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, `dims [2, 3] have 2 dimensions but the model takes 1`},
			{"batch_byte_size vs dims", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "input" batch_byte_size: 20 }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, `input "input": batch_byte_size is 20 but shape [1, 6] of TYPE_FP32 takes 24 bytes`},
			{"body short", "POST", "/api/infer/mlp", `batch_size: 2 input { name: "input" }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, "takes 48 bytes but the request body has only 24"},
			{"body long", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "input" }`, append(row, 1, 2), 400, tpb.RequestStatusCode_INVALID_ARG, "the request body has 26 bytes but the inputs NV-InferRequest describes take 24"},
			{"no input", "POST", "/api/infer/mlp", `batch_size: 1`, nil, 400, tpb.RequestStatusCode_INVALID_ARG, `input "input" is missing`},
			{"unknown output", "POST", "/api/infer/mlp", `batch_size: 1 input { name: "input" } output { name: "probs" }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, `unexpected inference output "probs"`},
			{"cls on text", "POST", "/api/infer/stories260K", `batch_size: 1 input { name: "text_input" dims: 1 } output { name: "text_output" cls { count: 2 } }`, hi, 400, tpb.RequestStatusCode_INVALID_ARG, "cls (classification) needs a numeric output"},
			{"LLM batch 2", "POST", "/api/infer/stories260K", `batch_size: 2 input { name: "text_input" dims: 1 }`, hi, 400, tpb.RequestStatusCode_INVALID_ARG, "does not batch (max_batch_size 0): batch_size must be 1"},
			{"LLM dims needed", "POST", "/api/infer/stories260K", `batch_size: 1 input { name: "text_input" }`, hi, 400, tpb.RequestStatusCode_INVALID_ARG, `input "text_input": the model's dims [-1] have a variable dimension`},
			{"string cut short", "POST", "/api/infer/stories260K", `batch_size: 1 input { name: "text_input" dims: 1 }`, hi[:5], 400, tpb.RequestStatusCode_INVALID_ARG, `input "text_input": element 0 of 1 (TYPE_STRING) has length 2 but the request body has 1 bytes left`},
			{"tensor input on an LLM", "POST", "/api/infer/stories260K", `batch_size: 1 input { name: "input" }`, row, 400, tpb.RequestStatusCode_INVALID_ARG, `unexpected inference input "input" for model "stories260K"`},
		} {
			t.Run(c.name, func(t *testing.T) {
				a := v1Do(t, c.method, p.url+c.path, c.header, c.body)
				if a.code != c.http || a.status.GetCode() != c.code || !strings.Contains(a.status.GetMsg(), c.msg) {
					t.Fatalf("HTTP %d %v, want %d %v saying %q", a.code, a.status, c.http, c.code, c.msg)
				}
			})
		}
	})

	t.Run("gRPC Health, Status, Profile", func(t *testing.T) {
		for _, mode := range []string{"live", "ready"} {
			r, err := gc.Health(ctx, &tpb.HealthRequest{Mode: mode})
			if err != nil || !r.GetHealth() || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_SUCCESS {
				t.Fatalf("Health %s: %v %v", mode, r, err)
			}
		}
		r, err := gc.Status(ctx, &tpb.StatusRequest{})
		if err != nil || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_SUCCESS || len(r.GetServerStatus().GetModelStatus()) != 3 ||
			r.GetServerStatus().GetModelStatus()["mlp"].GetConfig().GetMaxBatchSize() != 4096 {
			t.Fatalf("Status: %v %v", r, err)
		}
		r, err = gc.Status(ctx, &tpb.StatusRequest{ModelName: "nope"})
		if err != nil || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_NOT_FOUND || r.GetServerStatus() != nil ||
			!strings.Contains(r.GetRequestStatus().GetMsg(), `"nope"`) {
			t.Fatalf("Status of an unknown model: %v %v", r, err)
		}
		pr, err := gc.Profile(ctx, &tpb.ProfileRequest{Cmd: "start"})
		if err != nil || pr.GetRequestStatus().GetCode() != tpb.RequestStatusCode_UNSUPPORTED || !strings.Contains(pr.GetRequestStatus().GetMsg(), "profiling is not available") {
			t.Fatalf("Profile: %v %v", pr, err)
		}
	})

	header := func(text string) *tpb.InferRequestHeader {
		var h tpb.InferRequestHeader
		if err := prototext.Unmarshal([]byte(text), &h); err != nil {
			t.Fatal(err)
		}
		return &h
	}
	llmRequest := func(id uint64, prompt string, maxTokens int32) *tpb.InferRequest {
		text, body := v1LLMRequest(prompt, maxTokens)
		h := header(text)
		h.Id = id
		n := 4 + len(prompt)
		return &tpb.InferRequest{ModelName: "stories260K", ModelVersion: -1, MetaData: h, RawInput: [][]byte{body[:n], body[n : n+4], body[n+4:]}}
	}

	t.Run("gRPC Infer", func(t *testing.T) {
		r, err := gc.Infer(ctx, llmRequest(9, v1Prompts[0], 6))
		if err != nil || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_SUCCESS || len(r.GetRawOutput()) != 1 {
			t.Fatalf("Infer: %v %v", r, err)
		}
		if got, want := v1Strings(t, r.GetRawOutput()[0]), openAIGreedy(t, p, v1Prompts[0], 6); len(got) != 1 || got[0] != want || r.GetMetaData().GetId() != 9 {
			t.Fatalf("Infer: %q (id %d), OpenAI %q", got, r.GetMetaData().GetId(), want)
		}

		x := mlpRows(3, 2)
		var raw []byte
		for _, v := range x {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
		r, err = gc.Infer(ctx, &tpb.InferRequest{ModelName: "mlp", ModelVersion: 1,
			MetaData: header(`batch_size: 2 input { name: "input" } output { name: "output" } output { name: "label" cls { count: 1 } }`), RawInput: [][]byte{raw}})
		// One raw_output per output, the classification's empty (v1.2.0).
		if err != nil || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_SUCCESS || len(r.GetRawOutput()) != 2 || len(r.GetRawOutput()[1]) != 0 {
			t.Fatalf("Infer mlp: %v %v", r, err)
		}
		v2, err := restBinary(t, repo, "mlp", x)
		if err != nil {
			t.Fatal(err)
		}
		if got := fp32Values(r.GetRawOutput()[0]); fmt.Sprint(got) != fmt.Sprint(v2.out) {
			t.Fatalf("gRPC v1 %v, V2 %v", got, v2.out)
		}

		// Errors come in request_status, the call succeeds.
		r, err = gc.Infer(ctx, &tpb.InferRequest{ModelName: "mlp", MetaData: header(`batch_size: 2 input { name: "input" }`), RawInput: [][]byte{raw[:40]}})
		if err != nil || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_INVALID_ARG || !strings.Contains(r.GetRequestStatus().GetMsg(), `input "input": shape [2, 6] of TYPE_FP32 takes 48 bytes but raw_input[0] has only 40`) {
			t.Fatalf("short raw_input: %v %v", r, err)
		}
		r, err = gc.Infer(ctx, &tpb.InferRequest{ModelName: "nope"})
		if err != nil || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_NOT_FOUND {
			t.Fatalf("unknown model: %v %v", r, err)
		}
	})

	t.Run("gRPC StreamInfer: 8 requests answered in order", func(t *testing.T) {
		stream, err := gc.StreamInfer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]string, len(v1Prompts))
		for i, prompt := range v1Prompts {
			want[i] = openAIGreedy(t, p, prompt, 3+i)
			if err := stream.Send(llmRequest(uint64(100+i), prompt, int32(3+i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		for i := range v1Prompts {
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
			if r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_SUCCESS || r.GetMetaData().GetId() != uint64(100+i) {
				t.Fatalf("answer %d: %v (id %d)", i, r.GetRequestStatus(), r.GetMetaData().GetId())
			}
			if got := v1Strings(t, r.GetRawOutput()[0]); len(got) != 1 || got[0] != want[i] {
				t.Fatalf("answer %d: %q, OpenAI %q", i, got, want[i])
			}
		}
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("after 8 answers: %v, want the end of the stream", err)
		}
	})

	t.Run("grpcurl through reflection", func(t *testing.T) {
		bin := grpcurlPath(t)
		out, errOut, ok := grpcurl(t, bin, p.grpcAddr, "", "list")
		if !ok || !strings.Contains(out, "nvidia.inferenceserver.GRPCService") || !strings.Contains(out, "inference.GRPCInferenceService") {
			t.Fatalf("list: %s %s", out, errOut)
		}
		// The docs' examples.
		out, errOut, ok = grpcurl(t, bin, p.grpcAddr, `{"mode": "ready"}`, "nvidia.inferenceserver.GRPCService/Health")
		if objs := jsonObjects(t, out); !ok || len(objs) != 1 || objs[0]["health"] != true {
			t.Fatalf("Health: %s %s", out, errOut)
		}
		out, errOut, ok = grpcurl(t, bin, p.grpcAddr, `{"model_name": "mlp"}`, "nvidia.inferenceserver.GRPCService/Status")
		if !ok || !strings.Contains(out, `"maxBatchSize": 4096`) || !strings.Contains(out, `"TYPE_FP32"`) {
			t.Fatalf("Status: %s %s", out, errOut)
		}
		prompt := "Once upon a time"
		raw := binary.LittleEndian.AppendUint32(nil, uint32(len(prompt)))
		req := fmt.Sprintf(`{"model_name": "stories260K", "meta_data": {"batch_size": 1, "input": [{"name": "text_input", "dims": [1]}, {"name": "max_tokens"}, {"name": "temperature"}]},
			"raw_input": [%q, %q, %q]}`, v1B64(append(raw, prompt...)), v1B64(binary.LittleEndian.AppendUint32(nil, 5)), v1B64(make([]byte, 4)))
		out, errOut, ok = grpcurl(t, bin, p.grpcAddr, req, "nvidia.inferenceserver.GRPCService/Infer")
		objs := jsonObjects(t, out)
		if !ok || len(objs) != 1 {
			t.Fatalf("Infer: %s %s", out, errOut)
		}
		outs, _ := objs[0]["rawOutput"].([]any)
		if len(outs) != 1 || !strings.Contains(out, `"SUCCESS"`) {
			t.Fatalf("Infer: %s", out)
		}
		if got := v1Strings(t, v1UnB64(t, outs[0].(string))); len(got) != 1 || got[0] != openAIGreedy(t, p, prompt, 5) {
			t.Fatalf("Infer: %q", got)
		}
	})
}

// TestTritonV1APIKey: --api-key covers the v1 routes and GRPCService as
// it covers V2's; health stays open.
func TestTritonV1APIKey(t *testing.T) {
	p := startTritonV1Server(t, "--api-key", "k1")
	if a := v1Do(t, "GET", p.url+"/api/health/ready", "", nil); a.code != 200 {
		t.Fatalf("health: %d", a.code)
	}
	for _, key := range []string{"", "k1"} {
		req, _ := http.NewRequest("GET", p.url+"/api/status", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[string]int{"": 401, "k1": 200}[key]; resp.StatusCode != want {
			t.Fatalf("status with key %q: %d, want %d", key, resp.StatusCode, want)
		}
		var rs tpb.RequestStatus
		if err := prototext.Unmarshal([]byte(resp.Header.Get("NV-Status")), &rs); err != nil ||
			(key == "" && (rs.GetCode() != tpb.RequestStatusCode_INVALID_ARG || !strings.Contains(rs.GetMsg(), "API key"))) {
			t.Fatalf("NV-Status with key %q: %q (%v)", key, resp.Header.Get("NV-Status"), err)
		}
	}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := tpb.NewGRPCServiceClient(conn)
	for _, key := range []string{"", "wrong", "k1"} {
		ctx := context.Background()
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
		}
		_, errStatus := gc.Status(ctx, &tpb.StatusRequest{})
		_, errHealth := gc.Health(ctx, &tpb.HealthRequest{Mode: "live"})
		stream, err := gc.StreamInfer(ctx)
		if err == nil {
			_ = stream.CloseSend()
			_, err = stream.Recv()
		}
		for what, e := range map[string]error{"Status": errStatus, "Health": errHealth, "StreamInfer": err} {
			wantOK := key == "k1"
			if what == "StreamInfer" && wantOK {
				if !errors.Is(e, io.EOF) {
					t.Fatalf("%s with key %q: %v, want the end of an empty stream", what, key, e)
				}
				continue
			}
			if wantOK != (e == nil) || (!wantOK && status.Code(e) != codes.Unauthenticated) {
				t.Fatalf("%s with key %q: %v", what, key, e)
			}
		}
	}
}

func v1B64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func v1UnB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTritonV1Head: llmserve head serves the v1 API over its workers'
// model too, HTTP and gRPC, behind its --api-key; the text is the head's
// own OpenAI route's.
func TestTritonV1Head(t *testing.T) {
	t.Parallel()
	w := startWorkerProc(t, "both", "--api-key", "k2")
	h := startHeadProc(t, []*headWorker{w}, "--api-key", "k2")
	hdr, body := v1LLMRequest("Once upon a time", 6)
	req, _ := http.NewRequest("POST", h.url+"/api/infer/stories260K", bytes.NewReader(body))
	req.Header.Set("NV-InferRequest", hdr)
	req.Header.Set("Authorization", "Bearer k2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	oa, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0})
	req, _ = http.NewRequest("POST", h.url+"/v1/completions", bytes.NewReader(oa))
	req.Header.Set("Authorization", "Bearer k2")
	oresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	err = json.NewDecoder(oresp.Body).Decode(&out)
	oresp.Body.Close()
	if err != nil || len(out.Choices) != 1 {
		t.Fatalf("completions: %v", err)
	}
	want := out.Choices[0].Text
	var rh tpb.InferResponseHeader
	if err := prototext.Unmarshal([]byte(resp.Header.Get("NV-InferResponse")), &rh); err != nil || resp.StatusCode != 200 || len(rh.GetOutput()) != 1 {
		t.Fatalf("v1 infer through the head: %d %s %q", resp.StatusCode, resp.Header.Get("NV-Status"), b)
	}
	if got := v1Strings(t, b[:rh.GetOutput()[0].GetRaw().GetBatchByteSize()]); len(got) != 1 || got[0] != want || want == "" {
		t.Fatalf("v1 through the head %q, OpenAI through the head %q", got, want)
	}

	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := tpb.NewGRPCServiceClient(conn)
	if _, err := gc.Status(context.Background(), &tpb.StatusRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Status without the key: %v", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer k2")
	st, err := gc.Status(ctx, &tpb.StatusRequest{ModelName: "stories260K"})
	if err != nil || st.GetRequestStatus().GetCode() != tpb.RequestStatusCode_SUCCESS ||
		st.GetServerStatus().GetModelStatus()["stories260K"].GetConfig().GetInput()[0].GetName() != "text_input" {
		t.Fatalf("Status through the head: %v %v", st, err)
	}
	var mh tpb.InferRequestHeader
	if err := prototext.Unmarshal([]byte(hdr), &mh); err != nil {
		t.Fatal(err)
	}
	n := 4 + len("Once upon a time")
	r, err := gc.Infer(ctx, &tpb.InferRequest{ModelName: "stories260K", MetaData: &mh, RawInput: [][]byte{body[:n], body[n : n+4], body[n+4:]}})
	if err != nil || r.GetRequestStatus().GetCode() != tpb.RequestStatusCode_SUCCESS || len(r.GetRawOutput()) != 1 {
		t.Fatalf("Infer through the head: %v %v", r, err)
	}
	if got := v1Strings(t, r.GetRawOutput()[0]); len(got) != 1 || got[0] != want {
		t.Fatalf("gRPC v1 through the head %q, want %q", got, want)
	}
}
