package synth

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/gguf"
)

// TestWriteQwen3Layout checks the qwen3 architecture: qwen3.* keys, the
// per-head query and key norms, and with labels the reranker's pooling,
// labels and classifier head; a rerank template replaces the
// vocabulary's.
func TestWriteQwen3Layout(t *testing.T) {
	const nVocab = 40
	q := tiny
	q.Arch = "qwen3"
	vocabKV := append(vocabKVs(nVocab), gguf.KV{Key: "tokenizer.chat_template.rerank", Value: "old {query} {document}"})
	vocab := writeFile(t, vocabKV)
	for _, tc := range []struct {
		name     string
		labels   []string
		template string
	}{
		{"model", nil, ""},
		{"reranker", []string{"yes", "no"}, "Q: {query}\nD: {document}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, f := mustWrite(t, Options{Shape: q, DType: F32, VocabPath: vocab, Seed: 3, RerankLabels: tc.labels, RerankTemplate: tc.template})
			if v, _ := f.Lookup("general.architecture"); v != "qwen3" {
				t.Errorf("architecture %v", v)
			}
			for _, e := range f.KVs {
				if strings.HasPrefix(e.Key, "llama.") {
					t.Errorf("llama key %s in a qwen3 model", e.Key)
				}
			}
			for key, want := range map[string]any{
				"qwen3.embedding_length":     uint32(64),
				"qwen3.attention.head_count": uint32(4),
				"qwen3.block_count":          uint32(2),
			} {
				if v, _ := f.Lookup(key); !reflect.DeepEqual(v, want) {
					t.Errorf("%s = %v, want %v", key, v, want)
				}
			}
			pool, hasPool := f.Lookup("qwen3.pooling_type")
			labels, _ := f.Lookup("qwen3.classifier.output_labels")
			tmpl, _ := f.Lookup("tokenizer.chat_template.rerank")
			n := 0
			for _, e := range f.KVs {
				if e.Key == "tokenizer.chat_template.rerank" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d rerank templates", n)
			}
			shapes := map[string][]uint64{}
			for _, ti := range f.Tensors {
				shapes[ti.Name] = ti.Shape
			}
			for i := range 2 {
				for _, name := range []string{"attn_q_norm", "attn_k_norm"} {
					if s := shapes[fmt.Sprintf("blk.%d.%s.weight", i, name)]; !reflect.DeepEqual(s, []uint64{16}) {
						t.Errorf("blk.%d.%s: shape %v, want [16]", i, name, s)
					}
				}
			}
			cls := shapes["cls.output.weight"]
			if tc.labels == nil {
				if hasPool || labels != nil || cls != nil || tmpl != "old {query} {document}" {
					t.Errorf("plain model has pooling %v, labels %v, head %v, template %q", pool, labels, cls, tmpl)
				}
				return
			}
			if pool != uint32(4) || !reflect.DeepEqual(labels, tc.labels) || !reflect.DeepEqual(cls, []uint64{64, 2}) || tmpl != tc.template {
				t.Errorf("reranker has pooling %v, labels %v, head %v, template %q", pool, labels, cls, tmpl)
			}
		})
	}
}

func TestWriteQwen3Rejects(t *testing.T) {
	vocab := writeVocab(t, 40)
	bad := tiny
	bad.Arch = "gpt2"
	if _, err := Write(t.TempDir()+"/m.gguf", Options{Shape: bad, DType: F32, VocabPath: vocab}); err == nil || !strings.Contains(err.Error(), "architecture") {
		t.Errorf("unknown architecture: %v", err)
	}
	if _, err := Write(t.TempDir()+"/m.gguf", Options{Shape: tiny, DType: F32, VocabPath: vocab, RerankLabels: []string{"yes"}}); err == nil || !strings.Contains(err.Error(), "qwen3") {
		t.Errorf("llama reranker: %v", err)
	}
}
