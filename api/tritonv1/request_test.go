package tritonv1

import (
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

func mustHeader(t *testing.T, text string) *pb.InferRequestHeader {
	t.Helper()
	h, err := parseRequestHeader(text, true)
	if err != nil {
		t.Fatalf("header %q: %v", text, err)
	}
	return h
}

func TestSpecOf(t *testing.T) {
	s := specOf(&fakeTensor{ready: true})
	if s.MaxBatch != 4 || s.Version != "1" || s.Platform != "onnx" {
		t.Fatalf("tensor model spec %+v", s)
	}
	if got := names(s.Inputs); got != "x (TYPE_FP32 [3]), ids (TYPE_INT64 [1])" {
		t.Fatalf("inputs %s", got)
	}
	l := specOf(fakeLLM{})
	if l.MaxBatch != 0 || l.Platform != "llama.cpp" {
		t.Fatalf("LLM spec %+v", l)
	}
	in, ok := l.input("text_input")
	if !ok || in.Datatype != oip.BYTES || !slices.Equal(in.Dims, []int64{-1}) {
		t.Fatalf("LLM text_input %+v", in)
	}
	c := l.config()
	if c.GetInput()[0].GetDataType() != pb.DataType_TYPE_STRING || c.GetMaxBatchSize() != 0 {
		t.Fatalf("LLM config %v", c)
	}
}

func TestDecodeBody(t *testing.T) {
	s := specOf(&fakeTensor{ready: true})
	hdr := mustHeader(t, `id: 7 batch_size: 2 input { name: "x" } input { name: "ids" batch_byte_size: 16 } output { name: "probs" cls { count: 2 } } output { name: "label" }`)
	body := append(fp32(1, 2, 3, 4, 5, 6), i64(10, 20)...)
	d, err := decodeBody(hdr, s, body)
	if err != nil {
		t.Fatal(err)
	}
	if d.id != 7 || d.batch != 2 || len(d.req.Inputs) != 2 || len(d.outputs) != 2 || d.outputs[0].cls != 2 {
		t.Fatalf("decoded %+v", d)
	}
	if x := d.req.Inputs[0]; !slices.Equal(x.Shape, []int64{2, 3}) || x.Datatype != oip.FP32 || len(x.Raw) != 24 {
		t.Fatalf("x %+v", x)
	}
	if ids := d.req.Inputs[1]; !slices.Equal(ids.Shape, []int64{2}) || ids.Datatype != oip.INT64 {
		t.Fatalf("ids %+v", ids)
	}
	// ids, [] for the model, is dims [1] in v1 (reshaped): dims [1] or
	// none, the same.
	hdr = mustHeader(t, `batch_size: 2 input { name: "x" } input { name: "ids" dims: 1 }`)
	if d, err := decodeBody(hdr, s, body); err != nil || !slices.Equal(d.req.Inputs[1].Shape, []int64{2}) {
		t.Fatalf("ids with dims [1]: %v", err)
	}
	hdr = mustHeader(t, `batch_size: 2 input { name: "x" } input { name: "ids" dims: 2 }`)
	_, err = decodeBody(hdr, s, body)
	checkInvalid(t, err, `input "ids": dimension 0 of dims [2] is 2 but the model takes 1`)

	l := specOf(fakeLLM{})
	hdr = mustHeader(t, `batch_size: 1 input { name: "text_input" dims: 2 } input { name: "max_tokens" } output { name: "text_output" }`)
	d, err = decodeBody(hdr, l, append(str("Once", "upon ü"), 8, 0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if ti := d.req.Inputs[0]; ti.Datatype != oip.BYTES || len(ti.Bytes) != 2 || string(ti.Bytes[1]) != "upon ü" {
		t.Fatalf("text_input %+v", ti)
	}
	if mt := d.req.Inputs[1]; mt.Datatype != oip.INT32 || !slices.Equal(mt.Shape, []int64{1}) {
		t.Fatalf("max_tokens %+v", mt)
	}
}

// TestDecodeErrors: every bad request is INVALID_ARG (400) with a message
// naming what is at fault.
func TestDecodeErrors(t *testing.T) {
	tm, llm := specOf(&fakeTensor{ready: true}), specOf(fakeLLM{})
	row := fp32(1, 2, 3)
	for _, c := range []struct {
		name   string
		spec   *modelSpec
		header string
		body   []byte
		want   string
	}{
		{"batch 0", tm, `input { name: "x" }`, row, "batch_size is 0"},
		{"batch over max", tm, `batch_size: 5 input { name: "x" }`, row, "max_batch_size 4"},
		{"LLM batch 2", llm, `batch_size: 2 input { name: "text_input" dims: 1 }`, str("a"), "batch_size must be 1"},
		{"unknown input", tm, `batch_size: 1 input { name: "y" }`, row, `unexpected inference input "y"`},
		{"input twice", tm, `batch_size: 1 input { name: "x" } input { name: "x" }`, append(row, row...), `input "x" appears twice`},
		{"rank", tm, `batch_size: 1 input { name: "x" dims: [1, 3] }`, row, `input "x": dims [1, 3] have 2 dimensions but the model takes 1`},
		{"fixed dim", tm, `batch_size: 1 input { name: "x" dims: 4 }`, row, `dimension 0 of dims [4] is 4 but the model takes 3`},
		{"negative dim", llm, `batch_size: 1 input { name: "text_input" dims: -2 }`, nil, "dimensions must be 0 or more"},
		{"wildcard without dims", llm, `batch_size: 1 input { name: "text_input" }`, str("a"), `variable dimension (-1): give the input's dims`},
		{"byte size", tm, `batch_size: 1 input { name: "x" batch_byte_size: 8 }`, row, `input "x": batch_byte_size is 8 but shape [1, 3] of TYPE_FP32 takes 12 bytes`},
		{"byte size beyond body", tm, `batch_size: 1 input { name: "x" batch_byte_size: 400 }`, row, `batch_byte_size is 400 but the request body has only 12`},
		{"short body", tm, `batch_size: 2 input { name: "x" }`, row, `shape [2, 3] of TYPE_FP32 takes 24 bytes but the request body has only 12`},
		{"long body", tm, `batch_size: 1 input { name: "x" }`, append(row, 0), "the request body has 13 bytes but the inputs NV-InferRequest describes take 12"},
		{"no inputs, a body", tm, `batch_size: 1`, row, "the request body has 12 bytes"},
		{"string length short", llm, `batch_size: 1 input { name: "text_input" dims: 1 }`, []byte{5, 0}, "needs a 4-byte length"},
		{"string length beyond", llm, `batch_size: 1 input { name: "text_input" dims: 1 }`, []byte{9, 0, 0, 0, 'a'}, "has length 9 but the request body has 1 bytes left"},
		{"string byte size", llm, `batch_size: 1 input { name: "text_input" dims: 1 batch_byte_size: 7 }`, append(str("ab"), 0), "batch_byte_size is 7 but its 1 strings (4-byte length and bytes each) take 6 bytes"},
		{"bool not 0/1", llm, `batch_size: 1 input { name: "text_input" dims: 1 } input { name: "stream" }`, append(str("a"), 7), `input "stream": element 0 of a BOOL tensor is the byte 7`},
		{"unknown output", tm, `batch_size: 1 input { name: "x" } output { name: "logits" }`, row, `unexpected inference output "logits"`},
		{"output twice", tm, `batch_size: 1 output { name: "label" } output { name: "label" }`, nil, `output "label" is requested twice`},
		{"cls count 0", tm, `batch_size: 1 output { name: "probs" cls { } }`, nil, "cls { count } is 0"},
		{"cls on text", llm, `batch_size: 1 output { name: "text_output" cls { count: 1 } }`, nil, `output "text_output" is TYPE_STRING: cls (classification) needs a numeric output`},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := mustHeader(t, c.header)
			_, err := decodeBody(hdr, c.spec, c.body)
			checkInvalid(t, err, c.want)
		})
	}
	for _, c := range []struct{ name, header, want string }{
		{"missing", "", "the NV-InferRequest header is missing"},
		{"not text protobuf", `{"batch_size": 1}`, "the NV-InferRequest header is not a text InferRequestHeader"},
		{"unknown field", `batch_size: 1 parameters { }`, "the NV-InferRequest header is not a text InferRequestHeader"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseRequestHeader(c.header, c.header != "")
			checkInvalid(t, err, c.want)
		})
	}
}

func checkInvalid(t *testing.T, err error, want string) {
	t.Helper()
	var e *infer.Error
	if !errors.As(err, &e) || e.Code != infer.Invalid {
		t.Fatalf("error %v, want an Invalid one", err)
	}
	if o := outcomeOf(err); o.code != pb.RequestStatusCode_INVALID_ARG || o.http != http.StatusBadRequest {
		t.Fatalf("outcome %+v, want INVALID_ARG and 400", o)
	}
	if !strings.Contains(e.Msg, want) {
		t.Fatalf("message %q does not say %q", e.Msg, want)
	}
}

func TestDecodeRaw(t *testing.T) {
	tm := specOf(&fakeTensor{ready: true})
	hdr := mustHeader(t, `batch_size: 1 input { name: "x" } input { name: "ids" }`)
	if _, err := decodeRaw(hdr, tm, [][]byte{fp32(1, 2, 3), i64(4)}); err != nil {
		t.Fatal(err)
	}
	_, err := decodeRaw(hdr, tm, [][]byte{fp32(1, 2, 3)})
	checkInvalid(t, err, "the request has 1 raw_input but meta_data lists 2 inputs")
	_, err = decodeRaw(hdr, tm, [][]byte{fp32(1, 2, 3, 4), i64(4)})
	checkInvalid(t, err, `input "x": raw_input[0] has 16 bytes but shape [1, 3] of TYPE_FP32 takes 12`)
	_, err = decodeRaw(hdr, tm, [][]byte{fp32(1, 2), i64(4)})
	checkInvalid(t, err, "raw_input[0] has only 8")
	_, err = decodeRaw(nil, tm, nil)
	checkInvalid(t, err, "meta_data (the InferRequestHeader) is missing")
}

func TestClassify(t *testing.T) {
	nan := float32(math.NaN())
	x := infer.NewFP32Tensor("p", []int64{2, 4}, []float32{0.1, 0.7, 0.1, 0.1, nan, 0.2, 0.9, 0.2})
	got, err := classify(x, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`cls:{idx:1 value:0.7} cls:{value:0.1} cls:{idx:2 value:0.1}`,
		`cls:{idx:2 value:0.9} cls:{idx:1 value:0.2} cls:{idx:3 value:0.2}`,
	}
	for i, c := range got {
		if s := strings.Join(strings.Fields(prototext.MarshalOptions{}.Format(c)), " "); s != want[i] {
			t.Errorf("row %d: %s, want %s", i, s, want[i])
		}
	}
	// k beyond the row: every class.
	got, _ = classify(x, 1, 100)
	if len(got) != 1 || len(got[0].GetCls()) != 8 || got[0].GetCls()[7].GetIdx() != 4 {
		t.Fatalf("all classes: %v (the NaN last)", got)
	}
	if _, err := classify(x, 3, 1); err == nil {
		t.Fatal("8 values split into 3 rows")
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		code pb.RequestStatusCode
		http int
	}{
		{nil, pb.RequestStatusCode_SUCCESS, 200},
		{infer.Errorf(infer.Invalid, "x"), pb.RequestStatusCode_INVALID_ARG, 400},
		{infer.Errorf(infer.NotFound, "x"), pb.RequestStatusCode_NOT_FOUND, 404},
		{infer.Errorf(infer.Unavailable, "x"), pb.RequestStatusCode_UNAVAILABLE, 503},
		{infer.Errorf(infer.Exhausted, "x"), pb.RequestStatusCode_UNAVAILABLE, 503},
		{infer.Errorf(infer.Deadline, "x"), pb.RequestStatusCode_UNAVAILABLE, 504},
		{errors.New("disk on fire"), pb.RequestStatusCode_INTERNAL, 500},
	} {
		o := outcomeOf(c.err)
		if o.code != c.code || o.http != c.http {
			t.Errorf("%v: %v %d, want %v %d", c.err, o.code, o.http, c.code, c.http)
		}
		if c.err != nil && (o.msg == "" || strings.Contains(o.msg, "disk")) {
			t.Errorf("%v: message %q (internal errors keep their details)", c.err, o.msg)
		}
	}
}

// TestHeaderText: the NV-* headers are one ASCII line, whatever the
// message holds.
func TestHeaderText(t *testing.T) {
	rs := requestStatus(infer.Errorf(infer.Invalid, "input \"ü\nx\" is bad"))
	s := headerText(rs)
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			t.Fatalf("header %q has %q", s, r)
		}
	}
	var back pb.RequestStatus
	if err := prototext.Unmarshal([]byte(s), &back); err != nil || back.GetMsg() != rs.GetMsg() || back.GetRequestId() == 0 {
		t.Fatalf("header %q reads back as %v (%v)", s, &back, err)
	}
}

// TestHeaderParseErrorIsPlainText: a header that does not parse is refused
// with protobuf's error in plain ASCII (protobuf-go writes a non-breaking
// space after "proto:" at random).
func TestHeaderParseErrorIsPlainText(t *testing.T) {
	for range 20 {
		_, err := parseRequestHeader("batch_size: x", true)
		if err == nil || strings.Contains(err.Error(), "\u00a0") || !strings.Contains(err.Error(), "is not a text InferRequestHeader") {
			t.Fatalf("%q", err)
		}
	}
}
