package synth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/llmserve/llmserve/gguf"
)

// Options says what Write writes.
type Options struct {
	// Shape is the architecture (see Shapes).
	Shape Shape
	// DType is the type of the weight matrices.
	DType DType
	// VocabPath is a GGUF file (vocabulary-only, or a whole model) whose
	// tokenizer.* metadata is copied. Its number of tokens is the number of
	// rows of token_embd.weight and of the output layer.
	VocabPath string
	// Context, when positive, replaces Shape.Context as the
	// llama.context_length written.
	Context int
	// Seed picks the pseudo-random weights; the same seed, shape and
	// vocabulary give the same file, byte for byte.
	Seed uint64
	// RerankLabels, when set, makes the model a reranker (cross-encoder):
	// {arch}.pooling_type = 4 (rank), {arch}.classifier.output_labels =
	// RerankLabels, and a classifier head cls.output.weight of
	// [Embd, len(RerankLabels)]. Only the qwen3 architecture takes it
	// (llama.cpp's llama loader has no classifier head).
	RerankLabels []string
	// RerankTemplate, when set, is written as tokenizer.chat_template.rerank
	// (replacing the vocabulary's): the prompt llama.cpp's server formats a
	// rerank pair with, {query} and {document} replaced.
	RerankTemplate string
	// AddedTokens are appended to the vocabulary as user-defined tokens
	// (token type 4, score 0), which llama.cpp's tokenizer matches as
	// whole tokens in any text: a reasoning test model gets <think> and
	// </think> this way (ReasoningTokens). Each must be new to the
	// vocabulary.
	AddedTokens []string
	// ChatTemplate, when set, is written as tokenizer.chat_template
	// (replacing the vocabulary's); ReasoningTemplate is one.
	ChatTemplate string
}

// ReasoningTokens are the added tokens of a reasoning test model.
var ReasoningTokens = []string{"<think>", "</think>"}

// ReasoningTemplate is a ChatML template whose generation prompt opens a
// thinking section, as Qwen3's thinking models (and QwQ) do: with
// ReasoningTokens and --reasoning-parser qwen3 (or deepseek_r1) the
// output starts inside the thinking section.
const ReasoningTemplate = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>
{% endif %}`

// Summary describes a written model.
type Summary struct {
	// Path is the file written.
	Path string
	// Bytes is its size.
	Bytes int64
	// Params is the number of weights (elements of all tensors; a tied
	// output layer counts once).
	Params uint64
	// VocabSize is the number of tokens of the vocabulary.
	VocabSize int
	// Tensors is the number of tensors in the file.
	Tensors int
	// F16Fallback lists the matrices written as F16 instead of Q8_0 because
	// their rows are not a whole number of 32-element blocks (as llama.cpp's
	// quantizer does for k-quants).
	F16Fallback []string
}

// Write writes a dummy-weight model to path, as writeGGUFFile writes: path
// never holds a partial model.
func Write(path string, opts Options) (sum Summary, err error) {
	if err := opts.Shape.Validate(); err != nil {
		return sum, err
	}
	if _, err := ParseDType(string(opts.DType)); err != nil {
		return sum, err
	}
	if len(opts.RerankLabels) > 0 && opts.Shape.arch() != "qwen3" {
		return sum, fmt.Errorf("a reranker head needs the qwen3 architecture, not %s", opts.Shape.arch())
	}
	if opts.Context < 0 {
		return sum, fmt.Errorf("context length %d is negative", opts.Context)
	}
	vocab, err := readVocab(opts.VocabPath)
	if err != nil {
		return sum, err
	}
	if vocab, err = vocab.withAdded(opts.AddedTokens); err != nil {
		return sum, err
	}
	kvs := metadata(opts, vocab)
	tensors, fallback := plan(opts.Shape, opts.DType, vocab.size, len(opts.RerankLabels))
	data := make([]gguf.Tensor, len(tensors))
	for i, t := range tensors {
		data[i] = gguf.Tensor{TensorInfo: t, Write: weights(t, opts.Seed)}
		sum.Params += t.Elements()
	}

	n, err := writeGGUFFile(path, kvs, data)
	if err != nil {
		return sum, err
	}
	sum.Path, sum.Bytes, sum.VocabSize, sum.Tensors, sum.F16Fallback = path, n, vocab.size, len(tensors), fallback
	return sum, nil
}

// writeGGUFFile writes a GGUF file to path and returns its size. The file is
// written under a temporary name in the same directory and renamed into
// place when complete, so path never holds a partial file.
func writeGGUFFile(path string, kvs []gguf.KV, tensors []gguf.Tensor) (n int64, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			// It may be closed already; the write error is what matters.
			_ = tmp.Close()
			err = errors.Join(err, os.Remove(tmp.Name()))
		}
	}()
	if err = gguf.Write(tmp, kvs, tensors); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	st, err := tmp.Stat()
	if err != nil {
		return 0, err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return 0, err
	}
	if err = tmp.Close(); err != nil {
		return 0, err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// vocab is the tokenizer metadata of a GGUF file.
type vocab struct {
	kvs  []gguf.KV // the tokenizer.* entries, in file order
	size int       // len(tokenizer.ggml.tokens)
}

// withAdded returns v with the tokens added at its end as user-defined
// tokens (see Options.AddedTokens).
func (v vocab) withAdded(added []string) (vocab, error) {
	if len(added) == 0 {
		return v, nil
	}
	out := vocab{size: v.size + len(added)}
	sawType := false
	for _, e := range v.kvs {
		switch e.Key {
		case "tokenizer.ggml.tokens":
			toks := e.Value.([]string) // checked by readVocab
			for _, a := range added {
				if a == "" || slices.Contains(toks, a) {
					return v, fmt.Errorf("added token %q is empty or already in the vocabulary", a)
				}
			}
			e.Value = slices.Concat(toks, added)
		case "tokenizer.ggml.token_type":
			sawType = true
			types := slices.Clone(e.Value.([]int32))
			for range added {
				types = append(types, 4) // LLAMA_TOKEN_TYPE_USER_DEFINED
			}
			e.Value = types
		case "tokenizer.ggml.scores":
			e.Value = slices.Concat(e.Value.([]float32), make([]float32, len(added)))
		}
		out.kvs = append(out.kvs, e)
	}
	if !sawType {
		return v, errors.New("added tokens need a vocabulary with tokenizer.ggml.token_type")
	}
	return out, nil
}

// readVocab reads the tokenizer.* metadata of the GGUF file at path and
// checks that llama.cpp can load it: a tokenizer model, a token list, and
// per-token arrays of the same length.
func readVocab(path string) (vocab, error) {
	var v vocab
	if path == "" {
		return v, errors.New("no vocabulary file given")
	}
	f, err := os.Open(path)
	if err != nil {
		return v, fmt.Errorf("vocabulary: %w", err)
	}
	defer f.Close() //nolint:errcheck // read only
	g, err := gguf.Read(f)
	if err != nil {
		return v, fmt.Errorf("vocabulary %s: %w", path, err)
	}
	for _, e := range g.KVs {
		if strings.HasPrefix(e.Key, "tokenizer.") {
			v.kvs = append(v.kvs, e)
		}
	}
	if m, _ := g.Lookup("tokenizer.ggml.model"); m == nil {
		return v, fmt.Errorf("vocabulary %s: no tokenizer.ggml.model", path)
	} else if _, ok := m.(string); !ok {
		return v, fmt.Errorf("vocabulary %s: tokenizer.ggml.model is a %T, not a string", path, m)
	}
	toks, _ := g.Lookup("tokenizer.ggml.tokens")
	tokens, ok := toks.([]string)
	if !ok || len(tokens) == 0 {
		return v, fmt.Errorf("vocabulary %s: tokenizer.ggml.tokens is not a non-empty string array", path)
	}
	v.size = len(tokens)
	for key, want := range map[string]string{"tokenizer.ggml.scores": "[]float32", "tokenizer.ggml.token_type": "[]int32"} {
		a, ok := g.Lookup(key)
		if !ok {
			continue
		}
		var n int
		switch a := a.(type) {
		case []float32:
			n = len(a)
		case []int32:
			n = len(a)
		}
		if got := fmt.Sprintf("%T", a); got != want || n != v.size {
			return v, fmt.Errorf("vocabulary %s: %s is a %s of %d, want a %s of %d", path, key, got, n, want, v.size)
		}
	}
	return v, nil
}

// metadata returns the key-values of the model: general.*, the {arch}.*
// hyperparameters llama.cpp's loader reads (with a reranker's pooling and
// labels), then the vocabulary's tokenizer.* entries (and the rerank
// template). Types are the ones llama.cpp requires (uint32 counts, float32
// constants).
func metadata(o Options, v vocab) []gguf.KV {
	s := o.Shape
	ctx := s.Context
	if o.Context > 0 {
		ctx = o.Context
	}
	u := func(n int) uint32 { return uint32(n) }
	a := s.arch()
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: s.arch()},
		{Key: "general.type", Value: "model"},
		{Key: "general.name", Value: "synth " + s.Name + " " + string(o.DType)},
		{Key: "general.description", Value: fmt.Sprintf("dummy weights (llmserve synth, seed %d) with the shape of %s: for speed measurements only", o.Seed, s.Of)},
		{Key: "general.file_type", Value: o.DType.fileType()},
	}
	if o.DType == Q8_0 {
		kvs = append(kvs, gguf.KV{Key: "general.quantization_version", Value: uint32(2)}) // GGML_QNT_VERSION
	}
	kvs = append(kvs,
		gguf.KV{Key: a + ".vocab_size", Value: u(v.size)},
		gguf.KV{Key: a + ".context_length", Value: u(ctx)},
		gguf.KV{Key: a + ".embedding_length", Value: u(s.Embd)},
		gguf.KV{Key: a + ".block_count", Value: u(s.Layers)},
		gguf.KV{Key: a + ".feed_forward_length", Value: u(s.FF)},
		gguf.KV{Key: a + ".rope.dimension_count", Value: u(s.headDim())},
		gguf.KV{Key: a + ".attention.head_count", Value: u(s.Heads)},
		gguf.KV{Key: a + ".attention.head_count_kv", Value: u(s.HeadsKV)},
		gguf.KV{Key: a + ".rope.freq_base", Value: s.RopeTheta},
		gguf.KV{Key: a + ".attention.layer_norm_rms_epsilon", Value: s.RMSEps},
	)
	if len(o.RerankLabels) > 0 {
		kvs = append(kvs,
			gguf.KV{Key: a + ".pooling_type", Value: uint32(4)}, // LLAMA_POOLING_TYPE_RANK
			gguf.KV{Key: a + ".classifier.output_labels", Value: slices.Clone(o.RerankLabels)},
		)
	}
	for _, e := range v.kvs {
		if o.RerankTemplate != "" && e.Key == "tokenizer.chat_template.rerank" ||
			o.ChatTemplate != "" && e.Key == "tokenizer.chat_template" {
			continue
		}
		kvs = append(kvs, e)
	}
	if o.ChatTemplate != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: o.ChatTemplate})
	}
	if o.RerankTemplate != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template.rerank", Value: o.RerankTemplate})
	}
	return kvs
}

// plan returns the tensors of a model of shape s with nVocab tokens and a
// classifier head of nLabels outputs (none when 0), with the dimensions
// llama.cpp's loader checks (ggml order: row length first), and the
// matrices that fall back to F16 because dt is Q8_0 and their rows are not
// whole blocks.
func plan(s Shape, dt DType, nVocab, nLabels int) (ts []gguf.TensorInfo, fallback []string) {
	embd, ff, kvDim := uint64(s.Embd), uint64(s.FF), uint64(s.headDim()*s.HeadsKV)
	qwen3 := s.arch() == "qwen3"
	vocab := uint64(nVocab)
	vector := func(name string, n uint64) {
		ts = append(ts, gguf.TensorInfo{Name: name, Shape: []uint64{n}, Type: gguf.F32})
	}
	norm := func(name string) { vector(name, embd) }
	matrix := func(name string, rowLen, rows uint64) {
		typ := dt.tensorType()
		if be, _ := typ.BlockSize(); rowLen%be != 0 {
			typ = gguf.F16
			fallback = append(fallback, name)
		}
		ts = append(ts, gguf.TensorInfo{Name: name, Shape: []uint64{rowLen, rows}, Type: typ})
	}
	matrix("token_embd.weight", embd, vocab)
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		norm(p + "attn_norm.weight")
		matrix(p+"attn_q.weight", embd, embd)
		matrix(p+"attn_k.weight", embd, kvDim)
		matrix(p+"attn_v.weight", embd, kvDim)
		matrix(p+"attn_output.weight", embd, embd)
		if qwen3 {
			vector(p+"attn_k_norm.weight", uint64(s.headDim()))
			vector(p+"attn_q_norm.weight", uint64(s.headDim()))
		}
		norm(p + "ffn_norm.weight")
		matrix(p+"ffn_gate.weight", embd, ff)
		matrix(p+"ffn_up.weight", embd, ff)
		matrix(p+"ffn_down.weight", ff, embd)
	}
	norm("output_norm.weight")
	if !s.Tied {
		matrix("output.weight", embd, vocab)
	}
	if nLabels > 0 {
		matrix("cls.output.weight", embd, uint64(nLabels))
	}
	return ts, fallback
}
