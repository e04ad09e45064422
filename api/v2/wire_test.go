package v2

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api/v2/infer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecodeInferBinary(t *testing.T) {
	hdr := []byte(`{"id":"7","parameters":{"binary_data_output":true},"inputs":[` +
		`{"name":"a","datatype":"UINT32","shape":[2,2],"parameters":{"binary_data_size":16}},` +
		`{"name":"b","datatype":"BOOL","shape":[3],"data":[true,false,true]},` +
		`{"name":"c","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}}],` +
		`"outputs":[{"name":"x","parameters":{"binary_data":false}},{"name":"y"}]}`)
	body := append([]byte(nil), hdr...)
	for i := range 4 {
		body = binary.LittleEndian.AppendUint32(body, uint32(i+1))
	}
	body = append(body, 3, 0, 0, 0, 'a', 'b', 'c')
	d, err := decodeInfer(body, strconv.Itoa(len(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "7" || len(d.Inputs) != 3 || !d.binaryAll || d.binaryOut["x"] || len(d.Outputs) != 2 {
		t.Fatalf("%+v", d)
	}
	if v, _ := d.Inputs[0].Int(3); v != 4 {
		t.Fatalf("a[3] = %d", v)
	}
	if string(d.Inputs[2].Bytes[0]) != "abc" {
		t.Fatalf("c = %q", d.Inputs[2].Bytes)
	}

	resp := &infer.Response{ModelName: "m", ModelVersion: "1", ID: "7", Outputs: []*infer.Tensor{
		infer.NewInt32Tensor("x", []int64{1}, []int32{5}),
		infer.NewBytesTensor("y", []int64{1}, [][]byte{[]byte("hi")}),
	}}
	out, n, err := encodeInfer(d, resp)
	if err != nil || n < 0 {
		t.Fatal(n, err)
	}
	var w struct {
		Outputs []struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
			Data       []any          `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(out[:n], &w); err != nil {
		t.Fatal(err)
	}
	if w.Outputs[0].Data[0] != float64(5) || w.Outputs[1].Parameters["binary_data_size"] != float64(6) || !bytes.Equal(out[n:], []byte{2, 0, 0, 0, 'h', 'i'}) {
		t.Fatalf("%s", out)
	}
}

// FuzzDecodeInfer: any body with any header is decoded or refused as
// Invalid; it never panics.
func FuzzDecodeInfer(f *testing.F) {
	hdr := `{"inputs":[{"name":"text_input","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":8}}]}`
	f.Add([]byte(hdr+"\x04\x00\x00\x00abcd"), strconv.Itoa(len(hdr)))
	f.Add([]byte(`{"id":"1","inputs":[{"name":"x","datatype":"FP16","shape":[2,1],"data":[[1],[2]]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`), "")
	f.Add([]byte("raw text"), "0")
	f.Add([]byte(`{"inputs":[{"name":"x","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":-1}}]}`), "10")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		d, err := decodeInfer(body, header)
		if err != nil {
			var e *infer.Error
			if !errors.As(err, &e) || e.Code != infer.Invalid || e.Msg == "" {
				t.Fatalf("error %#v is not Invalid with a message", err)
			}
			return
		}
		for _, in := range d.Inputs {
			if err := in.Check(); err != nil {
				t.Fatalf("accepted input %q fails its check: %v", in.Name, err)
			}
		}
	})
}

// BenchmarkDecodeInfer decodes the request `llmserve bench --binary`
// sends: one 1×1×28×28 FP32 input as binary data, binary outputs.
func BenchmarkDecodeInfer(b *testing.B) {
	head := []byte(`{"inputs":[{"datatype":"FP32","name":"input","parameters":{"binary_data_size":3136},"shape":[1,1,28,28]}],"parameters":{"binary_data_output":true}}`)
	body := append(append([]byte{}, head...), make([]byte, 3136)...)
	header := strconv.Itoa(len(head))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeInfer(body, header); err != nil {
			b.Fatal(err)
		}
	}
}
