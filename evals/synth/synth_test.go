package synth

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/gguf"
)

// tiny is a small llama shape whose widths are all whole Q8_0 blocks.
var tiny = Shape{
	Name: "tiny", Of: "a test", Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, FF: 96, Context: 256,
	RopeTheta: 10000, RMSEps: 1e-6, Tied: false,
}

// vocabKVs returns the metadata of a vocabulary-only GGUF of n tokens in
// the style of llama.cpp's models/ggml-vocab-*.gguf: some model keys, which
// synth must not copy, and the tokenizer, with a uint8 array to check that
// uncommon types survive.
func vocabKVs(n int) []gguf.KV {
	tokens := make([]string, n)
	scores := make([]float32, n)
	types := make([]int32, n)
	for i := range tokens {
		tokens[i], scores[i], types[i] = fmt.Sprintf("▁t%d", i), -float32(i), 1
	}
	tokens[0], tokens[1], tokens[2] = "<unk>", "<s>", "</s>"
	types[0], types[1], types[2] = 2, 3, 3
	return []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: "test-vocab"},
		{Key: "llama.context_length", Value: uint32(4096)},
		{Key: "llama.embedding_length", Value: uint32(4096)},
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.scores", Value: scores},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
		{Key: "tokenizer.ggml.add_bos_token", Value: true},
		{Key: "tokenizer.ggml.precompiled_charsmap", Value: []uint8{1, 2, 3}},
	}
}

func writeFile(t testing.TB, kvs []gguf.KV) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := os.WriteFile(path, encode(t, kvs, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeVocab(t testing.TB, n int) string { return writeFile(t, vocabKVs(n)) }

func mustWrite(t testing.TB, opts Options) (Summary, []byte, *gguf.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	sum, err := Write(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sum, b, f
}

// data returns the bytes of the named tensor.
func data(t testing.TB, b []byte, f *gguf.File, name string) (gguf.TensorInfo, []byte) {
	t.Helper()
	for _, ti := range f.Tensors {
		if ti.Name == name {
			size, err := ti.Size()
			if err != nil {
				t.Fatal(err)
			}
			return ti, b[f.DataOffset+int64(ti.Offset):][:size]
		}
	}
	t.Fatalf("no tensor %q", name)
	return gguf.TensorInfo{}, nil
}

func TestWriteLlamaLayout(t *testing.T) {
	const nVocab = 40
	vocab := writeVocab(t, nVocab)
	for _, dt := range []DType{F32, F16, Q8_0} {
		t.Run(string(dt), func(t *testing.T) {
			sum, b, f := mustWrite(t, Options{Shape: tiny, DType: dt, VocabPath: vocab, Seed: 7})

			// Metadata: exact keys, order, types and values.
			want := []gguf.KV{
				{Key: "general.architecture", Value: "llama"},
				{Key: "general.type", Value: "model"},
				{Key: "general.name", Value: "synth tiny " + string(dt)},
				{Key: "general.description", Value: "dummy weights (llmserve synth, seed 7) with the shape of a test: for speed measurements only"},
				{Key: "general.file_type", Value: map[DType]uint32{F32: 0, F16: 1, Q8_0: 7}[dt]},
			}
			if dt == Q8_0 {
				want = append(want, gguf.KV{Key: "general.quantization_version", Value: uint32(2)})
			}
			want = append(want,
				gguf.KV{Key: "llama.vocab_size", Value: uint32(nVocab)},
				gguf.KV{Key: "llama.context_length", Value: uint32(256)},
				gguf.KV{Key: "llama.embedding_length", Value: uint32(64)},
				gguf.KV{Key: "llama.block_count", Value: uint32(2)},
				gguf.KV{Key: "llama.feed_forward_length", Value: uint32(96)},
				gguf.KV{Key: "llama.rope.dimension_count", Value: uint32(16)},
				gguf.KV{Key: "llama.attention.head_count", Value: uint32(4)},
				gguf.KV{Key: "llama.attention.head_count_kv", Value: uint32(2)},
				gguf.KV{Key: "llama.rope.freq_base", Value: float32(10000)},
				gguf.KV{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(1e-6)},
			)
			want = append(want, vocabKVs(nVocab)[4:]...)
			if !reflect.DeepEqual(f.KVs, want) {
				t.Errorf("metadata:\n got %v\nwant %v", f.KVs, want)
			}

			// Tensors: llama.cpp's names and dimensions, in order, aligned
			// and packed.
			mat := dt.tensorType()
			type tensor struct {
				name  string
				shape []uint64
				typ   gguf.TensorType
			}
			wantT := []tensor{{"token_embd.weight", []uint64{64, nVocab}, mat}}
			for i := range 2 {
				p := fmt.Sprintf("blk.%d.", i)
				wantT = append(wantT,
					tensor{p + "attn_norm.weight", []uint64{64}, gguf.F32},
					tensor{p + "attn_q.weight", []uint64{64, 64}, mat},
					tensor{p + "attn_k.weight", []uint64{64, 32}, mat},
					tensor{p + "attn_v.weight", []uint64{64, 32}, mat},
					tensor{p + "attn_output.weight", []uint64{64, 64}, mat},
					tensor{p + "ffn_norm.weight", []uint64{64}, gguf.F32},
					tensor{p + "ffn_gate.weight", []uint64{64, 96}, mat},
					tensor{p + "ffn_up.weight", []uint64{64, 96}, mat},
					tensor{p + "ffn_down.weight", []uint64{96, 64}, mat},
				)
			}
			wantT = append(wantT, tensor{"output_norm.weight", []uint64{64}, gguf.F32}, tensor{"output.weight", []uint64{64, nVocab}, mat})
			var gotT []tensor
			var end, params uint64
			for _, ti := range f.Tensors {
				gotT = append(gotT, tensor{ti.Name, ti.Shape, ti.Type})
				if ti.Offset%32 != 0 || ti.Offset < end {
					t.Errorf("%s at offset %d (previous ends at %d)", ti.Name, ti.Offset, end)
				}
				size, err := ti.Size()
				if err != nil {
					t.Fatal(err)
				}
				end = ti.Offset + size
				params += ti.Elements()
			}
			if !reflect.DeepEqual(gotT, wantT) {
				t.Errorf("tensors:\n got %v\nwant %v", gotT, wantT)
			}
			if got := int64(len(b)); got != f.DataOffset+int64(end) || got != sum.Bytes {
				t.Errorf("file is %d bytes, data ends at %d, summary says %d", got, f.DataOffset+int64(end), sum.Bytes)
			}
			if sum.Params != params || sum.Tensors != len(wantT) || sum.VocabSize != nVocab || len(sum.F16Fallback) != 0 {
				t.Errorf("summary %+v, want %d params, %d tensors", sum, params, len(wantT))
			}

			for _, name := range []string{"blk.0.attn_norm.weight", "blk.1.ffn_norm.weight", "output_norm.weight"} {
				_, d := data(t, b, f, name)
				for i := 0; i < len(d); i += 4 {
					if v := math.Float32frombits(binary.LittleEndian.Uint32(d[i:])); v != 1 {
						t.Fatalf("%s[%d] = %g, want 1", name, i/4, v)
					}
				}
			}
		})
	}
}

// TestWeightValues checks the values: small, centred, varied, and the
// same numbers in every dtype (each dtype's encoding of the F32 values).
func TestWeightValues(t *testing.T) {
	vocab := writeVocab(t, 40)
	const name = "blk.1.ffn_down.weight" // rows of 96
	files := map[DType][]byte{}
	for _, dt := range []DType{F32, F16, Q8_0} {
		_, b, f := mustWrite(t, Options{Shape: tiny, DType: dt, VocabPath: vocab, Seed: 7})
		_, files[dt] = data(t, b, f, name)
	}
	x := make([]float32, len(files[F32])/4)
	var sum, sq float64
	bound := float32(1 / math.Sqrt(96))
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(files[F32][4*i:]))
		if !(x[i] >= -bound && x[i] < bound) {
			t.Fatalf("x[%d] = %g outside ±%g", i, x[i], bound)
		}
		sum += float64(x[i])
		sq += float64(x[i]) * float64(x[i])
	}
	n := float64(len(x))
	mean, std := sum/n, math.Sqrt(sq/n-sum*sum/n/n)
	wantStd := float64(bound) / math.Sqrt(3) // uniform
	if math.Abs(mean) > 0.1*wantStd || math.Abs(std-wantStd) > 0.05*wantStd {
		t.Errorf("mean %g, std %g; want about 0 and %g", mean, std, wantStd)
	}
	if !bytes.Equal(files[F16], appendF16(nil, x)) {
		t.Error("F16 data is not the F32 values rounded to half")
	}
	if !bytes.Equal(files[Q8_0], appendQ8_0(nil, x)) {
		t.Error("Q8_0 data is not the F32 values quantized")
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	vocab := writeVocab(t, 40)
	opts := Options{Shape: tiny, DType: Q8_0, VocabPath: vocab, Seed: 7}
	_, a, _ := mustWrite(t, opts)
	_, b, _ := mustWrite(t, opts)
	if !bytes.Equal(a, b) {
		t.Error("two writes with the same options differ")
	}
	opts.Seed = 8
	_, c, _ := mustWrite(t, opts)
	if len(c) != len(a) || bytes.Equal(a, c) {
		t.Error("another seed gives the same file (or another size)")
	}
}

func TestWriteContextOverride(t *testing.T) {
	_, _, f := mustWrite(t, Options{Shape: tiny, DType: F16, VocabPath: writeVocab(t, 40), Context: 1234})
	if v, _ := f.Lookup("llama.context_length"); v != uint32(1234) {
		t.Errorf("llama.context_length = %#v, want uint32(1234)", v)
	}
}

// TestQ8_0FallsBackToF16 uses stories260k, whose feed-forward width (172)
// is not a whole number of blocks: its ffn_down is F16, as in
// llama.cpp's own Q8_0 stories260K.
func TestQ8_0FallsBackToF16(t *testing.T) {
	s, err := LookupShape("stories260k")
	if err != nil {
		t.Fatal(err)
	}
	sum, _, f := mustWrite(t, Options{Shape: s, DType: Q8_0, VocabPath: writeVocab(t, 512), Seed: 1})
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("blk.%d.ffn_down.weight", i))
	}
	if !slices.Equal(sum.F16Fallback, want) {
		t.Errorf("fallback %v, want %v", sum.F16Fallback, want)
	}
	for _, ti := range f.Tensors {
		wantT := gguf.Q8_0
		switch {
		case len(ti.Shape) == 1:
			wantT = gguf.F32
		case strings.HasSuffix(ti.Name, "ffn_down.weight"):
			wantT = gguf.F16
		}
		if ti.Type != wantT {
			t.Errorf("%s is %v, want %v", ti.Name, ti.Type, wantT)
		}
	}
	if sum.Params != 292800 {
		t.Errorf("%d params, want stories260K's 292800", sum.Params)
	}
}

// TestShapesMatchRealModels checks that, with the real vocabulary sizes,
// the shapes have exactly the real models' parameter counts.
func TestShapesMatchRealModels(t *testing.T) {
	want := map[string]struct {
		params  uint64
		tensors int
	}{
		"stories260k":  {292800, 48},      // the GGUF in llama.cpp's tests
		"smollm2-135m": {134515008, 272},  // HuggingFaceTB/SmolLM2-135M
		"llama-1b":     {1235814400, 146}, // meta-llama/Llama-3.2-1B
	}
	if len(Shapes()) != len(want) {
		t.Fatalf("%d shapes, %d expected counts", len(Shapes()), len(want))
	}
	for _, s := range Shapes() {
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
		ts, _ := plan(s, F32, s.Vocab, 0)
		var n uint64
		for _, ti := range ts {
			n += ti.Elements()
		}
		if w := want[s.Name]; n != w.params || len(ts) != w.tensors {
			t.Errorf("%s: %d params in %d tensors, want %d in %d", s.Name, n, len(ts), w.params, w.tensors)
		}
	}
}

// TestSmolLM2File writes the standard benchmark model, with a vocabulary of
// SmolLM2's size, and checks its size.
func TestSmolLM2File(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes 145 MB: 1 s, or 15 s under the race detector")
	}
	s, _ := LookupShape("smollm2-135m")
	sum, _, f := mustWrite(t, Options{Shape: s, DType: Q8_0, VocabPath: writeVocab(t, s.Vocab), Seed: 1})
	if sum.Params != 134515008 || len(f.Tensors) != 272 {
		t.Errorf("%d params in %d tensors", sum.Params, len(f.Tensors))
	}
	// 134,515,008 weights of which 17,856 norm weights in F32, the rest in
	// Q8_0 at 34/32 bytes each, plus the header and alignment.
	data := uint64(134515008-17856)/32*34 + 17856*4
	if sum.Bytes < int64(data) || sum.Bytes > int64(data)+2<<20 {
		t.Errorf("file is %d bytes, want %d and a header", sum.Bytes, data)
	}
	t.Logf("%s: %d bytes", s.Name, sum.Bytes)
}

func TestWriteRejects(t *testing.T) {
	vocab := writeVocab(t, 40)
	notGGUF := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(notGGUF, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	without := func(key string) string {
		kvs := slices.DeleteFunc(vocabKVs(40), func(e gguf.KV) bool { return e.Key == key })
		return writeFile(t, kvs)
	}
	badScores := vocabKVs(40)
	badScores[7].Value = []float32{1, 2}
	badShape := tiny
	badShape.Heads = 5
	gqa := tiny
	gqa.HeadsKV = 3
	for name, c := range map[string]struct {
		opts Options
		want string
	}{
		"no vocab":         {Options{Shape: tiny, DType: F16}, "no vocabulary"},
		"missing vocab":    {Options{Shape: tiny, DType: F16, VocabPath: "/nonexistent.gguf"}, "no such file"},
		"not gguf":         {Options{Shape: tiny, DType: F16, VocabPath: notGGUF}, "not a GGUF"},
		"no model":         {Options{Shape: tiny, DType: F16, VocabPath: without("tokenizer.ggml.model")}, "tokenizer.ggml.model"},
		"no tokens":        {Options{Shape: tiny, DType: F16, VocabPath: without("tokenizer.ggml.tokens")}, "tokenizer.ggml.tokens"},
		"short scores":     {Options{Shape: tiny, DType: F16, VocabPath: writeFile(t, badScores)}, "tokenizer.ggml.scores"},
		"heads":            {Options{Shape: badShape, DType: F16, VocabPath: vocab}, "not a multiple of the 5 heads"},
		"kv heads":         {Options{Shape: gqa, DType: F16, VocabPath: vocab}, "KV heads"},
		"dtype":            {Options{Shape: tiny, DType: "q4_0", VocabPath: vocab}, "unknown dtype"},
		"negative context": {Options{Shape: tiny, DType: F16, VocabPath: vocab, Context: -1}, "negative"},
	} {
		dir := t.TempDir()
		_, err := Write(filepath.Join(dir, "model.gguf"), c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, c.want)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%s: left %v behind", name, left)
		}
	}
}

// Added tokens extend every per-token array and the tensors' rows, and a
// chat template replaces the vocabulary's; a token already there is
// refused.
func TestAddedTokensAndTemplate(t *testing.T) {
	base, err := readVocab(writeVocab(t, 40))
	if err != nil {
		t.Fatal(err)
	}
	v, err := base.withAdded(ReasoningTokens)
	if err != nil {
		t.Fatal(err)
	}
	if v.size != base.size+2 {
		t.Fatalf("size %d, want %d", v.size, base.size+2)
	}
	for _, e := range v.kvs {
		switch x := e.Value.(type) {
		case []string:
			if e.Key == "tokenizer.ggml.tokens" && (len(x) != v.size || x[v.size-2] != "<think>" || x[v.size-1] != "</think>") {
				t.Errorf("tokens end with %q", x[len(x)-2:])
			}
		case []int32:
			if e.Key == "tokenizer.ggml.token_type" && (len(x) != v.size || x[v.size-1] != 4) {
				t.Errorf("%s: %d entries, last %d", e.Key, len(x), x[len(x)-1])
			}
		case []float32:
			if len(x) != v.size {
				t.Errorf("%s: %d entries", e.Key, len(x))
			}
		}
	}
	if _, err := v.withAdded([]string{"<think>"}); err == nil {
		t.Error("a token already in the vocabulary was added")
	}
	kvs := metadata(Options{Shape: tiny, DType: F32, ChatTemplate: ReasoningTemplate}, v)
	n := 0
	for _, e := range kvs {
		if e.Key == "tokenizer.chat_template" {
			n++
			if e.Value != ReasoningTemplate {
				t.Errorf("chat template %q", e.Value)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d chat templates", n)
	}
}
