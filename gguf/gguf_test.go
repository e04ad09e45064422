package gguf

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

// allTypes has one key per GGUF value type and array element type.
var allTypes = []KV{
	{"t.u8", uint8(200)}, {"t.i8", int8(-100)}, {"t.u16", uint16(60000)}, {"t.i16", int16(-30000)},
	{"t.u32", uint32(4000000000)}, {"t.i32", int32(-2000000000)}, {"t.u64", uint64(1) << 60}, {"t.i64", int64(-1) << 60},
	{"t.f32", float32(1.5)}, {"t.f64", math.Pi}, {"t.true", true}, {"t.false", false}, {"t.str", "héllo"}, {"t.empty", ""},
	{"a.u8", []uint8{1, 2, 255}}, {"a.i8", []int8{-1, 2}}, {"a.u16", []uint16{7}}, {"a.i16", []int16{-7}},
	{"a.u32", []uint32{1, 2}}, {"a.i32", []int32{-1}}, {"a.u64", []uint64{1 << 40}}, {"a.i64", []int64{-1 << 40}},
	{"a.f32", []float32{0.25, -2}}, {"a.f64", []float64{1e300}}, {"a.bool", []bool{true, false}},
	{"a.str", []string{"a", "", "ccc"}}, {"a.empty", []string{}},
}

func encode(t testing.TB, kvs []KV, tensors []Tensor) []byte {
	t.Helper()
	b, err := Encode(kvs, tensors)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func constTensor(name string, typ TensorType, shape []uint64, fill byte) Tensor {
	ti := TensorInfo{Name: name, Shape: shape, Type: typ}
	n, _ := ti.Size()
	return ti.WithData(bytes.Repeat([]byte{fill}, int(n)))
}

// readBoth reads b with Decode and with Read: both must agree on what they
// read and on whether it is an error. Decode may find an error to be
// ErrTruncated sooner (an array longer than the bytes left), never later.
func readBoth(t testing.TB, b []byte) (*File, error) {
	t.Helper()
	mf, merr := Decode(b)
	sf, serr := Read(bytes.NewReader(b))
	if (merr == nil) != (serr == nil) || errors.Is(serr, ErrTruncated) && !errors.Is(merr, ErrTruncated) || errors.Is(merr, ErrNotGGUF) != errors.Is(serr, ErrNotGGUF) {
		t.Fatalf("Decode: %v; Read: %v", merr, serr)
	}
	if merr == nil && !reflect.DeepEqual(mf, sf) {
		t.Fatalf("Decode read\n%#v\nRead read\n%#v", mf, sf)
	}
	return mf, merr
}

func TestGGUFRoundTrip(t *testing.T) {
	tensors := []Tensor{
		constTensor("a", F32, []uint64{3}, 0xa1),      // 12 bytes, next at 32
		constTensor("b", Q8_0, []uint64{64, 2}, 0xb2), // 136 bytes, next at 192
		constTensor("c", F16, []uint64{5, 1, 1}, 0xc3),
	}
	b := encode(t, allTypes, tensors)
	f, err := readBoth(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 {
		t.Errorf("version %d", f.Version)
	}
	if !reflect.DeepEqual(f.KVs, allTypes) {
		t.Errorf("key-values differ:\n got %#v\nwant %#v", f.KVs, allTypes)
	}
	if f.DataOffset%32 != 0 {
		t.Errorf("data offset %d is not aligned", f.DataOffset)
	}
	wantOff := []uint64{0, 32, 192}
	for i, ti := range f.Tensors {
		want := tensors[i].TensorInfo
		want.Offset = wantOff[i]
		if !reflect.DeepEqual(ti, want) {
			t.Errorf("tensor %d: %+v, want %+v", i, ti, want)
		}
		size, _ := ti.Size()
		data := b[f.DataOffset+int64(ti.Offset):][:size]
		if !bytes.Equal(data, bytes.Repeat(data[:1], int(size))) || data[0] != []byte{0xa1, 0xb2, 0xc3}[i] {
			t.Errorf("tensor %s data % x", ti.Name, data)
		}
	}
	if got, want := int64(len(b)), f.DataOffset+192+10; got != want {
		t.Errorf("file is %d bytes, want %d (no padding after the last tensor)", got, want)
	}
}

// TestGGUFGoldenBytes pins the encoding to gguf.h's layout, written out by
// hand.
func TestGGUFGoldenBytes(t *testing.T) {
	b := encode(t, []KV{{"ab", uint32(7)}, {"s", []string{"xy"}}}, []Tensor{constTensor("w", F32, []uint64{2}, 0x11)})
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
	valid := encode(t, allTypes, []Tensor{constTensor("w", F32, []uint64{4, 2}, 1)})
	f, err := readBoth(t, valid)
	if err != nil {
		t.Fatal(err)
	}
	// Every truncation of the header fails cleanly; the reader needs nothing
	// past the last tensor info, not even the padding.
	first := -1
	for n := range int(f.DataOffset) + 1 {
		_, err := readBoth(t, valid[:n])
		if err == nil && first < 0 {
			first = n
		}
		if err != nil && first >= 0 {
			t.Fatalf("prefix of %d bytes fails after the one of %d read: %v", n, first, err)
		}
	}
	if first < 0 || AlignUp(int64(first), 32) != f.DataOffset {
		t.Errorf("header read from %d bytes, data at %d", first, f.DataOffset)
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
		if _, err := readBoth(t, b); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	if _, err := readBoth(t, []byte("GGML....")); !errors.Is(err, ErrNotGGUF) {
		t.Errorf("ggml magic: %v, want ErrNotGGUF", err)
	}
}

func TestWriteGGUFRejects(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, []KV{{"k", 3}}, nil); err == nil {
		t.Error("int value written")
	}
	if err := Write(&b, nil, []Tensor{constTensor("q", Q8_0, []uint64{31}, 0)}); err == nil {
		t.Error("Q8_0 row of 31 written")
	}
	short := Tensor{TensorInfo: TensorInfo{Name: "s", Shape: []uint64{4}, Type: F32},
		Write: func(w io.Writer) error { _, err := w.Write(make([]byte, 15)); return err }}
	if err := Write(&b, nil, []Tensor{short}); err == nil || !strings.Contains(err.Error(), "wrote 15 bytes, want 16") {
		t.Errorf("short tensor: %v", err)
	}
}

// TestTensorData: a tensor's bytes are sliced out of the file, and data
// past its end is ErrTruncated, however large the declared offset.
func TestTensorData(t *testing.T) {
	b := encode(t, nil, []Tensor{constTensor("a", F32, []uint64{3}, 0xa1), constTensor("b", I64, []uint64{2}, 0xb2)})
	f, err := readBoth(t, b)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]byte{bytes.Repeat([]byte{0xa1}, 12), bytes.Repeat([]byte{0xb2}, 16)} {
		if got, err := f.TensorData(b, f.Tensors[i]); err != nil || !bytes.Equal(got, want) {
			t.Errorf("tensor %d: % x, %v", i, got, err)
		}
	}
	for _, ti := range []TensorInfo{
		{Name: "short", Shape: []uint64{5}, Type: I64, Offset: 32},
		{Name: "far", Shape: []uint64{1}, Type: F32, Offset: 1 << 63},
		{Name: "huge", Shape: []uint64{1 << 62}, Type: I64},
	} {
		if _, err := f.TensorData(b, ti); err == nil {
			t.Errorf("%s: no error", ti.Name)
		}
	}
	if _, err := f.TensorData(b[:len(b)-1], f.Tensors[1]); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated file: %v", err)
	}
	if _, err := f.TensorData(b, TensorInfo{Name: "x", Shape: []uint64{1}, Type: 99}); err == nil || !strings.Contains(err.Error(), "type99") {
		t.Errorf("unknown type: %v", err)
	}
}

// TestReadLimits: declared lengths larger than the input, alignments and
// shapes llama.cpp refuses are errors, found before anything large is
// allocated.
func TestReadLimits(t *testing.T) {
	le := binary.LittleEndian
	header := func(tensors, kvs uint64) []byte {
		b := append([]byte(Magic), 3, 0, 0, 0)
		return le.AppendUint64(le.AppendUint64(b, tensors), kvs)
	}
	str := func(b []byte, s string) []byte { return append(le.AppendUint64(b, uint64(len(s))), s...) }
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"string of 1 GiB":  {le.AppendUint64(header(0, 1), 1<<30), ErrTruncated},
		"array of 2^26":    {le.AppendUint64(le.AppendUint32(le.AppendUint32(str(header(0, 1), "k"), uint32(TypeArray)), uint32(TypeUint8)), 1<<26), ErrTruncated},
		"nested array":     {le.AppendUint64(le.AppendUint32(le.AppendUint32(str(header(0, 1), "k"), uint32(TypeArray)), uint32(TypeArray)), 1), nil},
		"bool 2":           {append(le.AppendUint32(str(header(0, 1), "k"), uint32(TypeBool)), 2), nil},
		"alignment 3":      {le.AppendUint32(le.AppendUint32(str(header(0, 1), "general.alignment"), uint32(TypeUint32)), 3), nil},
		"alignment uint64": {le.AppendUint64(le.AppendUint32(str(header(0, 1), "general.alignment"), uint32(TypeUint64)), 64), nil},
		"5 dimensions":     {le.AppendUint32(str(header(1, 0), "w"), 5), nil},
		"0 dimensions":     {le.AppendUint32(str(header(1, 0), "w"), 0), nil},
		"2^64 elements":    {le.AppendUint64(le.AppendUint64(le.AppendUint32(str(header(1, 0), "w"), 2), 1<<32), 1<<32), nil},
		"2^21 tensors":     {header(1<<21, 0), nil},
	} {
		allocs := testing.AllocsPerRun(1, func() {
			_, err := readBoth(t, tc.b)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("%s: %v, want %v", name, err, tc.want)
			}
		})
		if allocs > 50 {
			t.Errorf("%s: %v allocations", name, allocs)
		}
	}
	aligned := le.AppendUint32(le.AppendUint32(str(header(0, 1), "general.alignment"), uint32(TypeUint32)), 64)
	if f, err := readBoth(t, aligned); err != nil || f.DataOffset != 64 {
		t.Errorf("general.alignment 64: data at %v, %v", f, err)
	}
}

// FuzzDecode checks that no input makes either reader panic or allocate
// without bound, that Decode and Read agree, that tensor data is sliced
// within the input, and that what they read encodes back to itself.
func FuzzDecode(f *testing.F) {
	f.Add(encode(f, allTypes, []Tensor{constTensor("w", F32, []uint64{4, 2}, 1)}))
	f.Add(encode(f, []KV{{"tokenizer.ggml.tokens", []string{"a", "b"}}}, nil))
	f.Add(encode(f, []KV{{"general.alignment", uint32(64)}}, []Tensor{constTensor("i", I64, []uint64{3, 1}, 7), constTensor("q", Q8_0, []uint64{32}, 1)}))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Add([]byte("GGUF\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := readBoth(t, b)
		if err != nil {
			return
		}
		for _, ti := range g.Tensors {
			if p, err := g.TensorData(b, ti); err == nil {
				if size, _ := ti.Size(); uint64(len(p)) != size {
					t.Fatalf("tensor %q: %d bytes, size %d", ti.Name, len(p), size)
				}
			}
		}
		once := encode(t, g.KVs, nil)
		g2, err := readBoth(t, once)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if twice := encode(t, g2.KVs, nil); !bytes.Equal(once, twice) {
			t.Fatal("key-values do not survive a round trip")
		}
	})
}
