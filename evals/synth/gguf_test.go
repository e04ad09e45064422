package synth

import (
	"bytes"
	"io"
	"math"
	"os"
	"testing"

	"github.com/llmserve/llmserve/gguf"
)

func encode(t testing.TB, kvs []gguf.KV, tensors []gguf.Tensor) []byte {
	t.Helper()
	b, err := gguf.Encode(kvs, tensors)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func constTensor(name string, typ gguf.TensorType, shape []uint64, fill byte) gguf.Tensor {
	ti := gguf.TensorInfo{Name: name, Shape: shape, Type: typ}
	return gguf.Tensor{TensorInfo: ti, Write: func(w io.Writer) error {
		n, _ := ti.Size()
		_, err := w.Write(bytes.Repeat([]byte{fill}, int(n)))
		return err
	}}
}

// TestLlamaCppHeader reads the header of a file llama.cpp wrote (see
// testdata/README.md), then writes the same metadata and tensors with
// gguf.Write: the bytes must be llama.cpp's, offsets and padding included.
func TestLlamaCppHeader(t *testing.T) {
	real, err := os.ReadFile("testdata/stories260K-q8_0-mixed.header.gguf")
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(real))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || len(f.KVs) != 21 || len(f.Tensors) != 48 || f.DataOffset != int64(len(real)) {
		t.Fatalf("version %d, %d key-values, %d tensors, data at %d", f.Version, len(f.KVs), len(f.Tensors), f.DataOffset)
	}
	for key, want := range map[string]any{
		"general.architecture":                   "llama",
		"general.file_type":                      uint32(18),
		"llama.feed_forward_length":              uint32(172),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"tokenizer.ggml.padding_token_id":        uint32(math.MaxUint32),
	} {
		if got, _ := f.Lookup(key); got != want {
			t.Errorf("%s = %#v, want %#v", key, got, want)
		}
	}
	if toks, _ := f.Lookup("tokenizer.ggml.tokens"); len(toks.([]string)) != 512 || toks.([]string)[1] != "<s>" {
		t.Errorf("tokens %v", toks)
	}
	types := map[gguf.TensorType]int{}
	for _, ti := range f.Tensors {
		types[ti.Type]++
	}
	if types[gguf.Q8_0] != 32 || types[gguf.F16] != 5 || types[gguf.F32] != 11 {
		t.Errorf("tensor types %v", types)
	}

	var tensors []gguf.Tensor
	for _, ti := range f.Tensors {
		tensors = append(tensors, constTensor(ti.Name, ti.Type, ti.Shape, 0))
	}
	ours := encode(t, f.KVs, tensors)
	if !bytes.Equal(ours[:len(real)], real) {
		i := 0
		for i < len(real) && ours[i] == real[i] {
			i++
		}
		t.Fatalf("our header differs from llama.cpp's from byte %d", i)
	}
	for i, td := range tensors {
		if td.Offset != f.Tensors[i].Offset {
			t.Errorf("%s at %d, llama.cpp put it at %d", td.Name, td.Offset, f.Tensors[i].Offset)
		}
	}
	if v, err := readVocab("testdata/stories260K-q8_0-mixed.header.gguf"); err != nil || v.size != 512 || len(v.kvs) != 9 {
		t.Errorf("as a vocabulary: %d tokens, %d keys, %v", v.size, len(v.kvs), err)
	}
}
