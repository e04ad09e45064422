package synth

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/gguf"
)

// TestWriteLoRA: the adapter has convert_lora_to_gguf.py's keys and
// tensor layout; the merged model is the base with W + alpha/rank·B·A in
// place of each adapted weight, computed here element by element.
func TestWriteLoRA(t *testing.T) {
	vocab := writeFile(t, vocabKVs(64))
	sum, _, _ := mustWrite(t, Options{Shape: tiny, DType: F32, VocabPath: vocab, Seed: 7})
	dir := t.TempDir()
	adapter := filepath.Join(dir, "lora.gguf")
	ls, err := WriteLoRA(adapter, LoRAOptions{Base: sum.Path, Rank: 3, Alpha: 6, Seed: 2, Targets: []string{"attn_q", "ffn_down"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Adapted) != 2*tiny.Layers || ls.Architecture != "llama" {
		t.Fatalf("summary %+v", ls)
	}
	af, err := readGGUFFile(adapter)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{"general.type": "adapter", "adapter.type": "lora", "adapter.lora.alpha": float32(6), "general.architecture": "llama"} {
		if v, _ := af.Lookup(key); v != want {
			t.Errorf("%s = %v, want %v", key, v, want)
		}
	}
	shapes := map[string][]uint64{}
	for _, ti := range af.Tensors {
		shapes[ti.Name] = ti.Shape
	}
	if s := shapes["blk.0.ffn_down.weight.lora_a"]; len(s) != 2 || s[0] != uint64(tiny.FF) || s[1] != 3 {
		t.Errorf("ffn_down lora_a %v, want [%d 3]", s, tiny.FF)
	}
	if s := shapes["blk.1.attn_q.weight.lora_b"]; len(s) != 2 || s[0] != 3 || s[1] != uint64(tiny.Embd) {
		t.Errorf("attn_q lora_b %v, want [3 %d]", s, tiny.Embd)
	}

	merged := filepath.Join(dir, "merged.gguf")
	if err := WriteMerged(merged, sum.Path, adapter, 1); err != nil {
		t.Fatal(err)
	}
	read := func(path, name string) ([]float32, gguf.TensorInfo) {
		t.Helper()
		f, err := readGGUFFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data := readAll(t, path)
		for _, ti := range f.Tensors {
			if ti.Name == name {
				raw, err := f.TensorData(data, ti)
				if err != nil {
					t.Fatal(err)
				}
				return f32s(raw), ti
			}
		}
		t.Fatalf("%s: no %s", path, name)
		return nil, gguf.TensorInfo{}
	}
	const w = "blk.1.ffn_down.weight"
	base, bi := read(sum.Path, w)
	got, _ := read(merged, w)
	a, _ := read(adapter, w+".lora_a")
	b, _ := read(adapter, w+".lora_b")
	nIn, nOut, r := int(bi.Shape[0]), int(bi.Shape[1]), 3
	for _, ik := range [][2]int{{0, 0}, {nOut - 1, nIn - 1}, {5, 17}} {
		i, k := ik[0], ik[1]
		var d float64
		for j := range r {
			d += float64(b[i*r+j]) * float64(a[j*nIn+k])
		}
		want := float64(base[i*nIn+k]) + 6.0/3*d
		if math.Abs(float64(got[i*nIn+k])-want) > 1e-5 {
			t.Errorf("%s[%d][%d] = %g, want %g", w, i, k, got[i*nIn+k], want)
		}
	}
	unchanged, _ := read(merged, "blk.0.attn_k.weight")
	orig, _ := read(sum.Path, "blk.0.attn_k.weight")
	for i := range orig {
		if unchanged[i] != orig[i] {
			t.Fatal("an unadapted weight changed")
		}
	}
	if _, err := WriteLoRA(filepath.Join(dir, "x.gguf"), LoRAOptions{Base: sum.Path, Targets: []string{"nothing"}}); err == nil || !strings.Contains(err.Error(), "no weight matches") {
		t.Fatalf("no targets: %v", err)
	}
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
