package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/models"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden answers in testdata/contenttypes")

// ctCase is one file of testdata/contenttypes: a V2 inference request
// shaped as MLServer's codecs shape it, for a model.
type ctCase struct {
	Model   string          `json:"model"`
	Request json.RawMessage `json:"request"`
}

// ctAnswer is what the golden file holds: the REST status and body.
type ctAnswer struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// TestContentTypesRESTAndGRPC sends every request of
// testdata/contenttypes (MLServer's content types on the LLM and on a
// tensor model, and the refusals) over V2 REST, compares the answer with
// its golden file (-update-golden rewrites them), and sends the same
// request over V2 gRPC, whose answer must agree: the same outputs with the
// same content_type, or INVALID_ARGUMENT with the same message.
func TestContentTypesRESTAndGRPC(t *testing.T) {
	llm := startServer(t, models.GenerativeConfig{})
	_, llmGRPC := llm.startGRPC(t)
	tens := startTensorServer(t)
	files, err := filepath.Glob("testdata/contenttypes/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	var answers = map[string]map[string]any{}
	for _, file := range files {
		if strings.HasSuffix(file, ".golden.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var c ctCase
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			s, client := llm, llmGRPC
			if c.Model != "stories260K" {
				s, client = tens.server, tens.grpc
			}
			code, _, body := s.v2Do(t, "POST", "/v2/models/"+c.Model+"/infer", c.Request, nil)
			got := ctAnswer{Status: code, Body: canonical(t, body)}
			golden := strings.TrimSuffix(file, ".json") + ".golden.json"
			if *updateGolden {
				b, _ := json.MarshalIndent(got, "", "  ")
				if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantRaw, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-golden to write it)", err)
			}
			var want ctAnswer
			if err := json.Unmarshal(wantRaw, &want); err != nil {
				t.Fatal(err)
			}
			if got.Status != want.Status || !bytes.Equal(got.Body, canonical(t, want.Body)) {
				t.Fatalf("REST answer\n%d %s\nwant (%s)\n%d %s", got.Status, got.Body, golden, want.Status, canonical(t, want.Body))
			}
			var rest map[string]any
			_ = json.Unmarshal(body, &rest)
			answers[name] = rest

			// The same request over gRPC.
			req := grpcFromJSON(t, c.Model, c.Request)
			resp, err := client.ModelInfer(context.Background(), req)
			if code != 200 {
				if status.Code(err) != codes.InvalidArgument || code != 400 {
					t.Fatalf("gRPC: %v; REST %d", err, code)
				}
				if msg := rest["error"]; status.Convert(err).Message() != msg {
					t.Fatalf("gRPC message %q, REST %q", status.Convert(err).Message(), msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("gRPC: %v", err)
			}
			if g, r := grpcOutputs(resp), restOutputs(rest); g != r {
				t.Fatalf("gRPC outputs\n%s\nREST\n%s", g, r)
			}
			if ct := resp.GetParameters()["content_type"].GetStringParam(); fmt.Sprint(rest["parameters"]) != fmt.Sprint(paramsMap(ct)) {
				t.Fatalf("gRPC response content_type %q, REST parameters %v", ct, rest["parameters"])
			}
		})
	}
	// What the content types mean, across cases.
	text := func(name string) string { return fmt.Sprint(outputData(answers[name], "text_output")) }
	if text("llm_str") != text("llm_base64") || text("llm_str") != text("llm_input_wins") {
		t.Errorf("base64 of the same prompt answers differently: str %s, base64 %s, base64 over a request-level str %s", text("llm_str"), text("llm_base64"), text("llm_input_wins"))
	}
	if d, plain := outputData(answers["llm_output_base64"], "text_output"), outputData(answers["llm_str"], "text_output"); len(d) != 1 || len(plain) != 1 {
		t.Errorf("llm_output_base64: %v, llm_str: %v", d, plain)
	} else if dec, err := base64.StdEncoding.DecodeString(d[0].(string)); err != nil || string(dec) != plain[0] {
		t.Errorf("text_output as base64 %q decodes to %q (%v), want %q", d[0], dec, err, plain[0])
	}
	if fmt.Sprint(outputData(answers["tensor_np"], "output")) != fmt.Sprint(outputData(answers["tensor_pd"], "output")) ||
		fmt.Sprint(outputData(answers["tensor_np"], "output")) != fmt.Sprint(outputData(answers["tensor_request_np"], "output")) {
		t.Errorf("np, request-level np and pd give different outputs for the same tensor")
	}
}

// TestContentTypeStrInvalidUTF8: bytes that are not UTF-8 under content
// type str are a 400 (REST, sent as binary data) and INVALID_ARGUMENT
// (gRPC) naming the input and the element.
func TestContentTypeStrInvalidUTF8(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	_, client := s.startGRPC(t)
	head := map[string]any{"inputs": []any{map[string]any{
		"name": "text_input", "datatype": "BYTES", "shape": []int{2},
		"parameters": map[string]any{"content_type": "str", "binary_data_size": 4 + 5 + 4 + 2},
	}}}
	body, hdr := binaryBody(t, head, bytesElems("hello", "\xff\xfe"))
	code, _, raw := s.v2Do(t, "POST", "/v2/models/stories260K/infer", body, hdr)
	const want = `input "text_input": element 1 is not valid UTF-8, which content type str requires`
	if code != 400 || v2Error(t, raw) != want {
		t.Fatalf("REST: %d %s", code, raw)
	}
	req := greedyRequest("u", "hello", 4)
	req.Inputs[0].Shape = []int64{2}
	req.Inputs[0].Contents.BytesContents = append(req.Inputs[0].Contents.BytesContents, []byte("\xff\xfe"))
	req.Inputs[0].Parameters = map[string]*pb.InferParameter{"content_type": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "str"}}}
	_, err := client.ModelInfer(context.Background(), req)
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
		t.Fatalf("gRPC: %v", err)
	}
	// The stream answers the same, in band.
	st, err := client.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	r, err := st.Recv()
	if err != nil || r.GetErrorMessage() != want {
		t.Fatalf("stream: %v %q", err, r.GetErrorMessage())
	}
}

// TestContentTypesStreams: streamed answers carry content_type str on
// text_output (REST infer_stream, gRPC ModelStreamInfer), and a base64
// prompt streams the same text as the plain one.
func TestContentTypesStreams(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	_, client := s.startGRPC(t)
	body := map[string]any{"parameters": map[string]any{"max_tokens": 6, "temperature": 0}, "inputs": []any{map[string]any{
		"name": "text_input", "datatype": "BYTES", "shape": []int{1}, "parameters": map[string]any{"content_type": "base64"},
		"data": []string{base64.StdEncoding.EncodeToString([]byte("Once upon a time"))},
	}}}
	events := s.stream(t, context.Background(), "/v2/models/stories260K/infer_stream", body)
	var text strings.Builder
	for _, e := range events {
		var ev struct {
			Outputs []struct {
				Data       []string          `json:"data"`
				Parameters map[string]string `json:"parameters"`
			} `json:"outputs"`
		}
		if err := json.Unmarshal([]byte(e), &ev); err != nil || len(ev.Outputs) != 1 {
			t.Fatalf("event %s: %v", e, err)
		}
		if ev.Outputs[0].Parameters["content_type"] != "str" {
			t.Fatalf("event %s has no content_type str", e)
		}
		text.WriteString(ev.Outputs[0].Data[0])
	}
	if want := s.v2Generate(t, "Once upon a time", 6); text.String() != want {
		t.Fatalf("infer_stream of a base64 prompt %q, generate %q", text.String(), want)
	}
	req := greedyRequest("b", "", 6)
	req.Inputs[0].Contents.BytesContents = [][]byte{[]byte(base64.StdEncoding.EncodeToString([]byte("Once upon a time")))}
	req.Inputs[0].Parameters = map[string]*pb.InferParameter{"content_type": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "base64"}}}
	st, err := client.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	var got strings.Builder
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		if r.GetErrorMessage() != "" {
			t.Fatal(r.GetErrorMessage())
		}
		out := r.GetInferResponse().GetOutputs()[0]
		if out.GetParameters()["content_type"].GetStringParam() != "str" {
			t.Fatalf("stream output parameters %v", out.GetParameters())
		}
		got.WriteString(deltaText(t, r.GetInferResponse()))
	}
	if got.String() != text.String() {
		t.Fatalf("ModelStreamInfer %q, infer_stream %q", got.String(), text.String())
	}
}

// canonical re-encodes JSON with sorted keys and no spaces.
func canonical(t *testing.T, b []byte) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	out, _ := json.Marshal(v)
	return out
}

func paramsMap(ct string) any {
	if ct == "" {
		return nil
	}
	return map[string]any{"content_type": ct}
}

func outputData(resp map[string]any, name string) []any {
	outs, _ := resp["outputs"].([]any)
	for _, o := range outs {
		m := o.(map[string]any)
		if m["name"] == name {
			d, _ := m["data"].([]any)
			return d
		}
	}
	return nil
}

// restOutputs and grpcOutputs describe outputs in one form: name,
// datatype, shape, content_type and data, one per line.
func restOutputs(resp map[string]any) string {
	var lines []string
	outs, _ := resp["outputs"].([]any)
	for _, o := range outs {
		m := o.(map[string]any)
		p, _ := m["parameters"].(map[string]any)
		lines = append(lines, fmt.Sprintf("%v %v %v %v %v", m["name"], m["datatype"], m["shape"], p["content_type"], m["data"]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func grpcOutputs(resp *pb.ModelInferResponse) string {
	var lines []string
	for _, o := range resp.GetOutputs() {
		c := o.GetContents()
		var data []any
		for _, b := range c.GetBytesContents() {
			data = append(data, string(b))
		}
		for _, v := range c.GetFp32Contents() {
			data = append(data, v) // float32: JSON writes it as REST does
		}
		for _, v := range c.GetInt64Contents() {
			data = append(data, float64(v))
		}
		for _, v := range c.GetIntContents() {
			data = append(data, float64(v))
		}
		shape := make([]any, len(o.GetShape()))
		for i, d := range o.GetShape() {
			shape[i] = float64(d)
		}
		// Through JSON, as the REST side was.
		jd, _ := json.Marshal(data)
		var back []any
		_ = json.Unmarshal(jd, &back)
		lines = append(lines, fmt.Sprintf("%v %v %v %v %v", o.GetName(), o.GetDatatype(), shape, o.GetParameters()["content_type"].GetStringParam(), back))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// grpcFromJSON turns a V2 JSON request into its gRPC form (typed
// contents).
func grpcFromJSON(t *testing.T, model string, raw json.RawMessage) *pb.ModelInferRequest {
	t.Helper()
	var w struct {
		Parameters map[string]any `json:"parameters"`
		Inputs     []struct {
			Name       string         `json:"name"`
			Datatype   string         `json:"datatype"`
			Shape      []int64        `json:"shape"`
			Parameters map[string]any `json:"parameters"`
			Data       []any          `json:"data"`
		} `json:"inputs"`
		Outputs []struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	params := func(m map[string]any) map[string]*pb.InferParameter {
		if len(m) == 0 {
			return nil
		}
		out := map[string]*pb.InferParameter{}
		for k, v := range m {
			switch x := v.(type) {
			case string:
				out[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: x}}
			case float64:
				if x == float64(int64(x)) {
					out[k] = intParam(int64(x))
				} else {
					out[k] = floatParam(x)
				}
			case bool:
				out[k] = boolParam(x)
			}
		}
		return out
	}
	req := &pb.ModelInferRequest{ModelName: model, Parameters: params(w.Parameters)}
	for _, in := range w.Inputs {
		c := &pb.InferTensorContents{}
		for _, v := range in.Data {
			switch in.Datatype {
			case "BYTES":
				c.BytesContents = append(c.BytesContents, []byte(v.(string)))
			case "INT32":
				c.IntContents = append(c.IntContents, int32(v.(float64)))
			case "FP32":
				c.Fp32Contents = append(c.Fp32Contents, float32(v.(float64)))
			default:
				t.Fatalf("datatype %s", in.Datatype)
			}
		}
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{
			Name: in.Name, Datatype: in.Datatype, Shape: in.Shape, Parameters: params(in.Parameters), Contents: c,
		})
	}
	for _, o := range w.Outputs {
		req.Outputs = append(req.Outputs, &pb.ModelInferRequest_InferRequestedOutputTensor{Name: o.Name, Parameters: params(o.Parameters)})
	}
	return req
}
