//go:build cgo

package llamacpp

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Tokenizing the test strings of real vocabularies gives exactly the ids
// their families' own tokenizers give (llama.cpp's test-tokenizer-0
// vectors: no special tokens added, special text not parsed).
func TestTokenizerFamilies(t *testing.T) {
	files, err := filepath.Glob("testdata/vocabs/*.gguf")
	if err != nil || len(files) < 6 {
		t.Fatalf("vocabularies: %v %v", files, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf"), func(t *testing.T) {
			inp, err := os.ReadFile(path + ".inp")
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(path + ".out")
			if err != nil {
				t.Fatal(err)
			}
			texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
			// The file ends with a separator and a newline.
			if last := texts[len(texts)-1]; last == "" || last == "\n" {
				texts = texts[:len(texts)-1]
			}
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(texts) != len(lines) {
				t.Fatalf("%d strings, %d id lines", len(texts), len(lines))
			}
			m, err := Load(path, ModelParams{VocabOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for i, text := range texts {
				var want []int32
				for _, f := range strings.Fields(lines[i]) {
					id, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					want = append(want, int32(id))
				}
				got, err := m.Tokenize(text, false, false)
				if err != nil {
					t.Fatalf("string %d %q: %v", i, text, err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("string %d %q:\n got %v\nwant %v", i, text, got, want)
				}
			}
		})
	}
}
