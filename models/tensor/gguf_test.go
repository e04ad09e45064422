package tensor

import (
	"reflect"
	"testing"

	"github.com/llmserve/llmserve/gguf"
)

// TestGGUFReadsInt32: a graph whose integers another writer stored as int32
// (scalars and arrays) reads back as the same graph, widened to int64.
func TestGGUFReadsInt32(t *testing.T) {
	b, err := EncodeGGUF(richGraph(), onnxOpset)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	narrowed := 0
	kvs := make([]gguf.KV, len(f.KVs))
	for i, e := range f.KVs {
		switch v := e.Value.(type) {
		case int64:
			e.Value = int32(v)
			narrowed++
		case []int64:
			n := make([]int32, len(v))
			for j, x := range v {
				n[j] = int32(x)
			}
			e.Value = n
			narrowed++
		}
		kvs[i] = e
	}
	if narrowed < 3 {
		t.Fatalf("only %d int64 keys to narrow", narrowed)
	}
	var tensors []gguf.Tensor
	for _, ti := range f.Tensors {
		raw, err := f.TensorData(b, ti)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, ti.WithData(raw))
	}
	b32, err := gguf.Encode(kvs, tensors)
	if err != nil {
		t.Fatal(err)
	}
	g, opset, err := DecodeGGUF(b32)
	if err != nil {
		t.Fatal(err)
	}
	if want := richGraph(); opset != onnxOpset || !reflect.DeepEqual(g, want) {
		t.Errorf("opset %d, read\n%+v\nwant\n%+v", opset, g, want)
	}
}
