package synth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// allTypes has one key per GGUF value type and array element type.
var allTypes = []kv{
	{"t.u8", uint8(200)}, {"t.i8", int8(-100)}, {"t.u16", uint16(60000)}, {"t.i16", int16(-30000)},
	{"t.u32", uint32(4000000000)}, {"t.i32", int32(-2000000000)}, {"t.u64", uint64(1) << 60}, {"t.i64", int64(-1) << 60},
	{"t.f32", float32(1.5)}, {"t.f64", math.Pi}, {"t.true", true}, {"t.false", false}, {"t.str", "héllo"}, {"t.empty", ""},
	{"a.u8", []uint8{1, 2, 255}}, {"a.i8", []int8{-1, 2}}, {"a.u16", []uint16{7}}, {"a.i16", []int16{-7}},
	{"a.u32", []uint32{1, 2}}, {"a.i32", []int32{-1}}, {"a.u64", []uint64{1 << 40}}, {"a.i64", []int64{-1 << 40}},
	{"a.f32", []float32{0.25, -2}}, {"a.f64", []float64{1e300}}, {"a.bool", []bool{true, false}},
	{"a.str", []string{"a", "", "ccc"}}, {"a.empty", []string{}},
}

func encode(t testing.TB, kvs []kv, tensors []tensorData) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeGGUF(&b, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func constTensor(name string, typ tensorType, shape []uint64, fill byte) tensorData {
	ti := tensorInfo{name: name, shape: shape, typ: typ}
	return tensorData{tensorInfo: ti, write: func(w io.Writer) error {
		n, _ := ti.size()
		_, err := w.Write(bytes.Repeat([]byte{fill}, int(n)))
		return err
	}}
}

func TestGGUFRoundTrip(t *testing.T) {
	tensors := []tensorData{
		constTensor("a", tensorF32, []uint64{3}, 0xa1),      // 12 bytes, next at 32
		constTensor("b", tensorQ8_0, []uint64{64, 2}, 0xb2), // 136 bytes, next at 192
		constTensor("c", tensorF16, []uint64{5, 1, 1}, 0xc3),
	}
	b := encode(t, allTypes, tensors)
	f, err := readGGUF(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if f.version != 3 {
		t.Errorf("version %d", f.version)
	}
	if !reflect.DeepEqual(f.kvs, allTypes) {
		t.Errorf("key-values differ:\n got %#v\nwant %#v", f.kvs, allTypes)
	}
	if f.dataOffset%32 != 0 {
		t.Errorf("data offset %d is not aligned", f.dataOffset)
	}
	wantOff := []uint64{0, 32, 192}
	for i, ti := range f.tensors {
		want := tensors[i].tensorInfo
		want.offset = wantOff[i]
		if !reflect.DeepEqual(ti, want) {
			t.Errorf("tensor %d: %+v, want %+v", i, ti, want)
		}
		size, _ := ti.size()
		data := b[f.dataOffset+int64(ti.offset):][:size]
		if !bytes.Equal(data, bytes.Repeat(data[:1], int(size))) || data[0] != []byte{0xa1, 0xb2, 0xc3}[i] {
			t.Errorf("tensor %s data % x", ti.name, data)
		}
	}
	if got, want := int64(len(b)), f.dataOffset+192+10; got != want {
		t.Errorf("file is %d bytes, want %d (no padding after the last tensor)", got, want)
	}
}

// TestGGUFGoldenBytes pins the encoding to gguf.h's layout, written out by
// hand.
func TestGGUFGoldenBytes(t *testing.T) {
	b := encode(t, []kv{{"ab", uint32(7)}, {"s", []string{"xy"}}}, []tensorData{constTensor("w", tensorF32, []uint64{2}, 0x11)})
	want := strings.Join([]string{
		// "GGUF", version 3, 1 tensor, 2 key-values
		"47475546", "03000000", "0100000000000000", "0200000000000000",
		// "ab": uint32 7
		"0200000000000000", "6162", "04000000", "07000000",
		// "s": array of 1 string, "xy"
		"0100000000000000", "73", "09000000", "08000000", "0100000000000000", "0200000000000000", "7879",
		// "w": 1 dimension of 2, F32, offset 0
		"0100000000000000", "77", "01000000", "0200000000000000", "00000000", "0000000000000000",
	}, "")
	hdr := len(want) / 2 // 110 bytes: pad to 128
	want += strings.Repeat("00", 128-hdr) + "1111111111111111"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestReadGGUFRejects(t *testing.T) {
	valid := encode(t, allTypes, []tensorData{constTensor("w", tensorF32, []uint64{4, 2}, 1)})
	f, err := readGGUF(bytes.NewReader(valid))
	if err != nil {
		t.Fatal(err)
	}
	// Every truncation of the header fails cleanly; the reader needs nothing
	// past the last tensor info, not even the padding.
	first := -1
	for n := range int(f.dataOffset) + 1 {
		_, err := readGGUF(bytes.NewReader(valid[:n]))
		if err == nil && first < 0 {
			first = n
		}
		if err != nil && first >= 0 {
			t.Fatalf("prefix of %d bytes fails after the one of %d read: %v", n, first, err)
		}
	}
	if first < 0 || alignUp(int64(first), 32) != f.dataOffset {
		t.Errorf("header read from %d bytes, data at %d", first, f.dataOffset)
	}
	for name, mutate := range map[string]func([]byte){
		"magic":     func(b []byte) { b[0] = 'g' },
		"version 1": func(b []byte) { b[4] = 1 },
		"version 4": func(b []byte) { b[4] = 4 },
		"kv count":  func(b []byte) { b[23] = 0x7f },
		"value type": func(b []byte) {
			// the first key is "t.u8" (8+4 bytes from offset 24), then its type
			b[36] = 99
		},
	} {
		b := bytes.Clone(valid)
		mutate(b)
		if _, err := readGGUF(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	if _, err := readGGUF(strings.NewReader("GGML....")); !errors.Is(err, errNotGGUF) {
		t.Errorf("ggml magic: %v, want errNotGGUF", err)
	}
}

func TestWriteGGUFRejects(t *testing.T) {
	var b bytes.Buffer
	if err := writeGGUF(&b, []kv{{"k", 3}}, nil); err == nil {
		t.Error("int value written")
	}
	if err := writeGGUF(&b, nil, []tensorData{constTensor("q", tensorQ8_0, []uint64{31}, 0)}); err == nil {
		t.Error("Q8_0 row of 31 written")
	}
	short := tensorData{tensorInfo: tensorInfo{name: "s", shape: []uint64{4}, typ: tensorF32},
		write: func(w io.Writer) error { _, err := w.Write(make([]byte, 15)); return err }}
	if err := writeGGUF(&b, nil, []tensorData{short}); err == nil || !strings.Contains(err.Error(), "wrote 15 bytes, want 16") {
		t.Errorf("short tensor: %v", err)
	}
}

// FuzzReadGGUF checks that no input makes the reader panic or allocate
// without bound, and that what it reads encodes back to itself.
func FuzzReadGGUF(f *testing.F) {
	f.Add(encode(f, allTypes, []tensorData{constTensor("w", tensorF32, []uint64{4, 2}, 1)}))
	f.Add(encode(f, []kv{{"tokenizer.ggml.tokens", []string{"a", "b"}}}, nil))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := readGGUF(bytes.NewReader(b))
		if err != nil {
			return
		}
		once := encode(t, g.kvs, nil)
		g2, err := readGGUF(bytes.NewReader(once))
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if twice := encode(t, g2.kvs, nil); !bytes.Equal(once, twice) {
			t.Fatal("key-values do not survive a round trip")
		}
	})
}

// TestLlamaCppHeader reads the header of a file llama.cpp wrote (see
// testdata/README.md), then writes the same metadata and tensors with
// writeGGUF: the bytes must be llama.cpp's, offsets and padding included.
func TestLlamaCppHeader(t *testing.T) {
	real, err := os.ReadFile("testdata/stories260K-q8_0-mixed.header.gguf")
	if err != nil {
		t.Fatal(err)
	}
	f, err := readGGUF(bytes.NewReader(real))
	if err != nil {
		t.Fatal(err)
	}
	if f.version != 3 || len(f.kvs) != 21 || len(f.tensors) != 48 || f.dataOffset != int64(len(real)) {
		t.Fatalf("version %d, %d key-values, %d tensors, data at %d", f.version, len(f.kvs), len(f.tensors), f.dataOffset)
	}
	for key, want := range map[string]any{
		"general.architecture":                   "llama",
		"general.file_type":                      uint32(18),
		"llama.feed_forward_length":              uint32(172),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"tokenizer.ggml.padding_token_id":        uint32(math.MaxUint32),
	} {
		if got, _ := f.lookup(key); got != want {
			t.Errorf("%s = %#v, want %#v", key, got, want)
		}
	}
	if toks, _ := f.lookup("tokenizer.ggml.tokens"); len(toks.([]string)) != 512 || toks.([]string)[1] != "<s>" {
		t.Errorf("tokens %v", toks)
	}
	types := map[tensorType]int{}
	for _, ti := range f.tensors {
		types[ti.typ]++
	}
	if types[tensorQ8_0] != 32 || types[tensorF16] != 5 || types[tensorF32] != 11 {
		t.Errorf("tensor types %v", types)
	}

	var tensors []tensorData
	for _, ti := range f.tensors {
		tensors = append(tensors, constTensor(ti.name, ti.typ, ti.shape, 0))
	}
	ours := encode(t, f.kvs, tensors)
	if !bytes.Equal(ours[:len(real)], real) {
		i := 0
		for i < len(real) && ours[i] == real[i] {
			i++
		}
		t.Fatalf("our header differs from llama.cpp's from byte %d", i)
	}
	for i, td := range tensors {
		if td.offset != f.tensors[i].offset {
			t.Errorf("%s at %d, llama.cpp put it at %d", td.name, td.offset, f.tensors[i].offset)
		}
	}
	if v, err := readVocab("testdata/stories260K-q8_0-mixed.header.gguf"); err != nil || v.size != 512 || len(v.kvs) != 9 {
		t.Errorf("as a vocabulary: %d tokens, %d keys, %v", v.size, len(v.kvs), err)
	}
}
