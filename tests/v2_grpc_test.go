package tests

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/api"
	v2grpc "github.com/llmserve/llmserve/api/v2/grpc"
	"github.com/llmserve/llmserve/models"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// startGRPC serves the V2 gRPC service (with reflection) for s's models
// on loopback and returns its address and a client.
func (s *server) startGRPC(t *testing.T) (string, pb.GRPCInferenceServiceClient) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	v2grpc.Register(gs, api.V2Backend(s.registry), v2grpc.Options{})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ln.Addr().String(), pb.NewGRPCInferenceServiceClient(conn)
}

func boolParam(b bool) *pb.InferParameter {
	return &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: b}}
}

func intParam(v int64) *pb.InferParameter {
	return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: v}}
}

func floatParam(v float64) *pb.InferParameter {
	return &pb.InferParameter{ParameterChoice: &pb.InferParameter_DoubleParam{DoubleParam: v}}
}

// greedyRequest is a typed-contents ModelInfer request for a greedy
// continuation of prompt.
func greedyRequest(id, prompt string, maxTokens int64) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{
		ModelName: "stories260K", Id: id,
		Parameters: map[string]*pb.InferParameter{"max_tokens": intParam(maxTokens), "temperature": floatParam(0)},
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{
			Name: "text_input", Datatype: "BYTES", Shape: []int64{1},
			Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte(prompt)}},
		}},
	}
}

// isFinal reports the Triton final-response marker of a response.
func isFinal(r *pb.ModelInferResponse) bool {
	p, ok := r.GetParameters()["triton_final_response"]
	return ok && p.GetBoolParam()
}

// streamText reads one text_output delta of a stream response.
func deltaText(t *testing.T, r *pb.ModelInferResponse) string {
	t.Helper()
	if len(r.GetOutputs()) != 1 || r.GetOutputs()[0].GetName() != "text_output" {
		t.Fatalf("outputs %v", r.GetOutputs())
	}
	b := r.GetOutputs()[0].GetContents().GetBytesContents()
	if len(b) != 1 {
		t.Fatalf("text_output contents %v", r.GetOutputs()[0].GetContents())
	}
	return string(b[0])
}

// TestV2SameGreedyTextEveryProtocol: OpenAI /v1/completions, V2 generate,
// generate_stream, infer (JSON and binary), gRPC ModelInfer (typed and raw
// contents) and ModelStreamInfer give the same greedy text.
func TestV2SameGreedyTextEveryProtocol(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	_, c := s.startGRPC(t)
	ctx := context.Background()
	for _, prompt := range []string{"Once upon a time", "The little dog"} {
		const maxTokens = 24
		var comp struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0}, &comp); code != 200 {
			t.Fatalf("completions: %d", code)
		}
		want := comp.Choices[0].Text
		if want == "" {
			t.Fatal("empty completion")
		}
		got := map[string]string{}
		got["generate"] = s.v2Generate(t, prompt, maxTokens)

		var sb strings.Builder
		for _, ev := range s.v2GenerateStream(t, ctx, map[string]any{"text_input": prompt, "parameters": map[string]any{"max_tokens": maxTokens, "temperature": 0}}) {
			sb.WriteString(ev["text_output"].(string))
		}
		got["generate_stream"] = sb.String()

		body, _ := json.Marshal(map[string]any{"parameters": map[string]any{"max_tokens": maxTokens, "temperature": 0}, "inputs": []any{textInput(prompt)}})
		code, _, raw := s.v2Do(t, "POST", "/v2/models/stories260K/infer", body, nil)
		var ir v2InferResponse
		if code != 200 || json.Unmarshal(raw, &ir) != nil {
			t.Fatalf("infer: %d %s", code, raw)
		}
		got["infer"] = ir.output(t, "text_output").Data.([]any)[0].(string)

		resp, err := c.ModelInfer(ctx, greedyRequest("x", prompt, maxTokens))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() != "x" || resp.GetModelName() != "stories260K" || resp.GetModelVersion() != "1" || len(resp.GetRawOutputContents()) != 0 {
			t.Fatalf("ModelInfer answer %v", resp)
		}
		got["ModelInfer"] = string(resp.GetOutputs()[0].GetContents().GetBytesContents()[0])

		rawReq := greedyRequest("y", prompt, maxTokens)
		rawReq.Inputs[0].Contents = nil
		rawReq.RawInputContents = [][]byte{bytesElems(prompt)}
		resp, err = c.ModelInfer(ctx, rawReq)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetRawOutputContents()) != 1 {
			t.Fatalf("raw ModelInfer answer %v", resp)
		}
		rawOut := resp.GetRawOutputContents()[0]
		if n := binary.LittleEndian.Uint32(rawOut); int(n) != len(rawOut)-4 {
			t.Fatalf("raw text_output % x", rawOut)
		}
		got["ModelInfer raw"] = string(rawOut[4:])

		st, err := c.ModelStreamInfer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(greedyRequest("z", prompt, maxTokens)); err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		sb.Reset()
		finals := 0
		for {
			r, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.GetErrorMessage() != "" || r.GetInferResponse().GetId() != "z" || finals > 0 {
				t.Fatalf("stream response %v after %d finals", r, finals)
			}
			sb.WriteString(deltaText(t, r.GetInferResponse()))
			if isFinal(r.GetInferResponse()) {
				finals++
			}
		}
		if finals != 1 {
			t.Fatalf("%d final responses", finals)
		}
		got["ModelStreamInfer"] = sb.String()

		for k, v := range got {
			if v != want {
				t.Errorf("%q: %s gives %q, /v1/completions %q", prompt, k, v, want)
			}
		}
	}
}

// TestV2StreamInterleaved: one ModelStreamInfer stream carries 8 LLM
// requests with different prompts and a bad one; every request's tokens
// arrive in order under its id with one final marker at the end, the bad
// one gets an in-band error, and the others finish.
func TestV2StreamInterleaved(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MaxNumSeqs: 16})
	_, c := s.startGRPC(t)
	ctx := context.Background()
	prompts := []string{"Once upon a time", "The little dog", "Lily and Tom", "One day, a bird", "The sun was", "A big red ball", "Mom said", "In the park"}
	const maxTokens = 30
	want := map[string]string{}
	for i, p := range prompts {
		resp, err := c.ModelInfer(ctx, greedyRequest("", p, maxTokens))
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("r%d", i)] = string(resp.GetOutputs()[0].GetContents().GetBytesContents()[0])
	}

	st, err := c.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range prompts {
		if err := st.Send(greedyRequest(fmt.Sprintf("r%d", i), p, maxTokens)); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			bad := greedyRequest("bad", p, maxTokens)
			bad.Parameters["temperature"] = floatParam(-1)
			if err := st.Send(bad); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.CloseSend()
	got := map[string]*strings.Builder{}
	final := map[string]bool{}
	var badMsg string
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		id := r.GetInferResponse().GetId()
		if r.GetErrorMessage() != "" {
			if id != "bad" || badMsg != "" {
				t.Fatalf("unexpected error %q for %q", r.GetErrorMessage(), id)
			}
			badMsg = r.GetErrorMessage()
			continue
		}
		if final[id] {
			t.Fatalf("response for %q after its final one", id)
		}
		if got[id] == nil {
			got[id] = &strings.Builder{}
		}
		got[id].WriteString(deltaText(t, r.GetInferResponse()))
		final[id] = isFinal(r.GetInferResponse())
	}
	if !strings.Contains(badMsg, "temperature") {
		t.Errorf("bad request's error %q does not name temperature", badMsg)
	}
	for id, w := range want {
		if !final[id] {
			t.Errorf("%s: no final response", id)
		}
		if got[id] == nil || got[id].String() != w {
			t.Errorf("%s: streamed %q, want %q", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("responses for %d ids, want %d", len(got), len(want))
	}
}

func TestV2GRPCMetadata(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	_, c := s.startGRPC(t)
	ctx := context.Background()
	if r, err := c.ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil || !r.GetLive() {
		t.Fatal(r, err)
	}
	if r, err := c.ServerReady(ctx, &pb.ServerReadyRequest{}); err != nil || !r.GetReady() {
		t.Fatal(r, err)
	}
	if r, err := c.ServerMetadata(ctx, &pb.ServerMetadataRequest{}); err != nil || r.GetName() != "llmserve" || r.GetVersion() == "" || len(r.GetExtensions()) == 0 {
		t.Fatal(r, err)
	}
	for _, v := range []string{"", "1"} {
		if r, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "stories260K", Version: v}); err != nil || !r.GetReady() {
			t.Fatal(r, err)
		}
		r, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "stories260K", Version: v})
		if err != nil || r.GetPlatform() != "llama.cpp" || r.GetVersions()[0] != "1" || r.GetInputs()[0].GetName() != "text_input" ||
			r.GetInputs()[0].GetShape()[0] != -1 || r.GetOutputs()[0].GetDatatype() != "BYTES" {
			t.Fatal(r, err)
		}
	}
	if r, err := c.RepositoryIndex(ctx, &pb.RepositoryIndexRequest{}); err != nil || len(r.GetModels()) != 1 || r.GetModels()[0].GetState() != "READY" {
		t.Fatal(r, err)
	}
}

// TestV2GRPCBadInput: each bad request is INVALID_ARGUMENT or NOT_FOUND
// with a message; on a stream the error is in-band.
func TestV2GRPCBadInput(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	_, c := s.startGRPC(t)
	ctx := context.Background()
	mod := func(f func(r *pb.ModelInferRequest)) *pb.ModelInferRequest {
		r := greedyRequest("b", "Once upon a time", 4)
		f(r)
		return r
	}
	fp32 := func(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
	cases := []struct {
		name string
		req  *pb.ModelInferRequest
		code codes.Code
		want string
	}{
		{"unknown model", mod(func(r *pb.ModelInferRequest) { r.ModelName = "nope" }), codes.NotFound, "nope"},
		{"unknown version", mod(func(r *pb.ModelInferRequest) { r.ModelVersion = "2" }), codes.NotFound, "version"},
		{"shape and data length differ", mod(func(r *pb.ModelInferRequest) { r.Inputs[0].Shape = []int64{3} }), codes.InvalidArgument, "3 elements"},
		{"wrong datatype", mod(func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "FP32" }), codes.InvalidArgument, "bytes_contents"},
		{"unknown datatype", mod(func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "TEXT" }), codes.InvalidArgument, "datatype"},
		{"unknown input", mod(func(r *pb.ModelInferRequest) {
			r.Inputs = append(r.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: "pixels", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}})
		}), codes.InvalidArgument, "pixels"},
		{"unknown output", mod(func(r *pb.ModelInferRequest) {
			r.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "logits"}}
		}), codes.InvalidArgument, "logits"},
		{"text_input not BYTES", mod(func(r *pb.ModelInferRequest) {
			r.Inputs[0] = &pb.ModelInferRequest_InferInputTensor{Name: "text_input", Datatype: "INT32", Shape: []int64{1}, Contents: &pb.InferTensorContents{IntContents: []int32{1}}}
		}), codes.InvalidArgument, "BYTES"},
		{"INT8 overflow", mod(func(r *pb.ModelInferRequest) {
			r.Inputs = append(r.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: "max_tokens", Datatype: "INT8", Shape: []int64{1}, Contents: &pb.InferTensorContents{IntContents: []int32{1000}}})
		}), codes.InvalidArgument, "INT8"},
		{"raw contents count", mod(func(r *pb.ModelInferRequest) {
			r.Inputs[0].Contents = nil
			r.RawInputContents = [][]byte{bytesElems("a"), fp32(1)}
		}), codes.InvalidArgument, "raw_input_contents"},
		{"raw BYTES truncated", mod(func(r *pb.ModelInferRequest) {
			r.Inputs[0].Contents = nil
			r.RawInputContents = [][]byte{bytesElems("Once upon a time")[:10]}
		}), codes.InvalidArgument, "bytes"},
		{"raw and typed mixed", mod(func(r *pb.ModelInferRequest) { r.RawInputContents = [][]byte{bytesElems("a")} }), codes.InvalidArgument, "raw_input_contents"},
		{"raw FP32 of the wrong size", mod(func(r *pb.ModelInferRequest) {
			r.Inputs = append(r.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: "temperature", Datatype: "FP32", Shape: []int64{1}})
			r.Inputs[0].Contents = nil
			r.RawInputContents = [][]byte{bytesElems("a"), fp32(1)[:3]}
		}), codes.InvalidArgument, "needs 4 bytes"},
		{"FP16 typed", mod(func(r *pb.ModelInferRequest) {
			r.Inputs = append(r.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: "temperature", Datatype: "FP16", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}})
		}), codes.InvalidArgument, "raw_input_contents"},
		{"top_k below -1", mod(func(r *pb.ModelInferRequest) { r.Parameters["top_k"] = intParam(-5) }), codes.InvalidArgument, "top_k"},
		{"stream on ModelInfer", mod(func(r *pb.ModelInferRequest) { r.Parameters["stream"] = boolParam(true) }), codes.InvalidArgument, "ModelStreamInfer"},
		{"no inputs", mod(func(r *pb.ModelInferRequest) { r.Inputs = nil }), codes.InvalidArgument, "inputs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ModelInfer(ctx, tc.req)
			st, _ := status.FromError(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("%v, want %v mentioning %q", err, tc.code, tc.want)
			}
			if tc.name == "stream on ModelInfer" {
				return // fine on a stream
			}
			// The same request on a stream: an in-band error.
			stream, err := c.ModelStreamInfer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(tc.req); err != nil {
				t.Fatal(err)
			}
			stream.CloseSend()
			r, err := stream.Recv()
			if err != nil || r.GetErrorMessage() != st.Message() || r.GetInferResponse().GetId() != "b" {
				t.Fatalf("stream: %v %v, want the error %q in-band", r, err, st.Message())
			}
			if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the error: %v", err)
			}
		})
	}
	for _, name := range []string{"ModelReady", "ModelMetadata"} {
		for _, m := range [][2]string{{"nope", ""}, {"stories260K", "7"}} {
			var err error
			if name == "ModelReady" {
				_, err = c.ModelReady(ctx, &pb.ModelReadyRequest{Name: m[0], Version: m[1]})
			} else {
				_, err = c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: m[0], Version: m[1]})
			}
			if st, _ := status.FromError(err); st.Code() != codes.NotFound || st.Message() == "" {
				t.Errorf("%s %v: %v, want NOT_FOUND", name, m, err)
			}
		}
	}
}

// TestV2GRPCCancel: cancelling a stream or a unary call frees the
// sequences it was generating.
func TestV2GRPCCancel(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MaxModelLen: 512})
	_, c := s.startGRPC(t)
	long := func(id string) *pb.ModelInferRequest {
		r := greedyRequest(id, "Once upon a time", 400)
		r.Parameters["ignore_eos"] = boolParam(true)
		return r
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := st.Send(long(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 2 })
	cancel()
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 0 })

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.ModelInfer(ctx, long("u"))
		done <- err
	}()
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 1 })
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled ModelInfer: %v", err)
	}
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 0 })
}

// TestV2QueueFull: a full waiting queue is RESOURCE_EXHAUSTED on gRPC and
// 429 with Retry-After on REST.
func TestV2QueueFull(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MaxNumSeqs: 1, MaxWaiting: 1, MaxModelLen: 512})
	_, c := s.startGRPC(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run", "wait"} {
		r := greedyRequest(id, "Once upon a time", 400)
		r.Parameters["ignore_eos"] = boolParam(true)
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
		if id == "run" {
			s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 1 })
		}
	}
	s.waitMetric(t, "vllm:num_requests_waiting", func(v float64) bool { return v == 1 })

	_, err = c.ModelInfer(context.Background(), greedyRequest("x", "hi", 2))
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "waiting") {
		t.Fatalf("ModelInfer with a full queue: %v", err)
	}
	body, _ := json.Marshal(map[string]any{"inputs": []any{textInput("hi")}})
	code, hdr, raw := s.v2Do(t, "POST", "/v2/models/stories260K/infer", body, nil)
	if code != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("infer with a full queue: %d %v %s", code, hdr, raw)
	}
	v2Error(t, raw)
	cancel()
	s.waitMetric(t, "vllm:num_requests_running", func(v float64) bool { return v == 0 })
}
