package synth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmserve/llmserve/gguf"
)

// Shape is the architecture of a model, everything that decides its compute
// except the vocabulary (which comes from the vocabulary file). All shapes
// are llama.cpp's "llama" architecture (or, with Arch "qwen3", its Qwen3:
// the same plus RMSNorms of the per-head queries and keys): RMSNorm, rotary
// embeddings, grouped-query attention and a SwiGLU feed-forward network.
type Shape struct {
	// Arch is llama.cpp's architecture: "" or "llama", or "qwen3".
	Arch string
	// Name is what --shape takes.
	Name string
	// Of names the real model whose shape this is.
	Of string
	// Embd is the width of the residual stream (llama.embedding_length).
	Embd int
	// Layers is the number of transformer blocks (llama.block_count).
	Layers int
	// Heads and HeadsKV are the query and key/value head counts; the head
	// size is Embd/Heads.
	Heads, HeadsKV int
	// FF is the hidden width of the feed-forward network
	// (llama.feed_forward_length).
	FF int
	// Context is the training context length (llama.context_length), which
	// servers use as the default maximum sequence length.
	Context int
	// RopeTheta is the rotary embedding base (llama.rope.freq_base).
	RopeTheta float32
	// RMSEps is the RMSNorm epsilon
	// (llama.attention.layer_norm_rms_epsilon).
	RMSEps float32
	// Tied says the output layer reuses token_embd.weight; otherwise the
	// file has its own output.weight.
	Tied bool
	// Vocab is the real model's vocabulary size, for reference only: the
	// synthesized model has the vocabulary of the file given to Write.
	Vocab int
}

// headDim is the size of one attention head.
func (s Shape) headDim() int { return s.Embd / s.Heads }

// arch is the general.architecture written, and the prefix of the
// hyperparameter keys.
func (s Shape) arch() string {
	if s.Arch == "" {
		return "llama"
	}
	return s.Arch
}

// Validate reports whether the shape is one llama.cpp can build.
func (s Shape) Validate() error {
	if s.Arch != "" && s.Arch != "llama" && s.Arch != "qwen3" {
		return fmt.Errorf("shape %q: unknown architecture %q (known: llama, qwen3)", s.Name, s.Arch)
	}
	if s.Embd <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.HeadsKV <= 0 || s.FF <= 0 || s.Context <= 0 {
		return fmt.Errorf("shape %q: sizes must be positive: %+v", s.Name, s)
	}
	if s.Embd%s.Heads != 0 {
		return fmt.Errorf("shape %q: embedding length %d is not a multiple of the %d heads", s.Name, s.Embd, s.Heads)
	}
	if s.Heads%s.HeadsKV != 0 {
		return fmt.Errorf("shape %q: %d heads are not a multiple of the %d KV heads", s.Name, s.Heads, s.HeadsKV)
	}
	if s.headDim()%2 != 0 {
		return fmt.Errorf("shape %q: head size %d is odd (rotary embeddings rotate pairs)", s.Name, s.headDim())
	}
	if !(s.RopeTheta > 0) || !(s.RMSEps > 0) {
		return fmt.Errorf("shape %q: rope theta and RMS epsilon must be positive", s.Name)
	}
	return nil
}

// shapes is the table of known shapes; doc.go repeats it.
var shapes = []Shape{
	{
		Name: "stories260k", Of: "karpathy/tinyllamas stories260K",
		Embd: 64, Layers: 5, Heads: 8, HeadsKV: 4, FF: 172, Context: 512,
		RopeTheta: 10000, RMSEps: 1e-5, Tied: false, Vocab: 512,
	},
	{
		Name: "smollm2-135m", Of: "HuggingFaceTB/SmolLM2-135M",
		Embd: 576, Layers: 30, Heads: 9, HeadsKV: 3, FF: 1536, Context: 8192,
		RopeTheta: 100000, RMSEps: 1e-5, Tied: true, Vocab: 49152,
	},
	{
		Name: "llama-1b", Of: "meta-llama/Llama-3.2-1B (without its llama3 RoPE scaling)",
		Embd: 2048, Layers: 16, Heads: 32, HeadsKV: 8, FF: 8192, Context: 131072,
		RopeTheta: 500000, RMSEps: 1e-5, Tied: true, Vocab: 128256,
	},
}

// Shapes returns the known shapes.
func Shapes() []Shape { return slices.Clone(shapes) }

// LookupShape returns the known shape with the given name.
func LookupShape(name string) (Shape, error) {
	return lookup(shapes, func(s Shape) string { return s.Name }, "shape", name)
}

// lookup returns the entry of table whose nameOf is name; the error for
// none names what a table entry is and lists the known names.
func lookup[T any](table []T, nameOf func(T) string, what, name string) (T, error) {
	names := make([]string, len(table))
	for i, s := range table {
		if nameOf(s) == name {
			return s, nil
		}
		names[i] = nameOf(s)
	}
	var zero T
	return zero, fmt.Errorf("unknown %s %q (known: %s)", what, name, strings.Join(names, ", "))
}

// DType is the element type of the weight matrices. Norm weights are
// always F32, as llama.cpp's converter and quantizer write them.
type DType string

const (
	F32  DType = "f32"
	F16  DType = "f16"
	Q8_0 DType = "q8_0"
)

// dtypes are the known DTypes, in the order errors list them.
var dtypes = []DType{F32, F16, Q8_0}

// ParseDType parses f32, f16 or q8_0 (any case).
func ParseDType(s string) (DType, error) {
	return lookup(dtypes, func(d DType) string { return string(d) }, "dtype", strings.ToLower(s))
}

// tensorType is the ggml type of the matrices.
func (d DType) tensorType() gguf.TensorType {
	switch d {
	case F16:
		return gguf.F16
	case Q8_0:
		return gguf.Q8_0
	}
	return gguf.F32
}

// fileType is the llama_ftype written as general.file_type.
func (d DType) fileType() uint32 {
	switch d {
	case F16:
		return 1 // LLAMA_FTYPE_MOSTLY_F16
	case Q8_0:
		return 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	}
	return 0 // LLAMA_FTYPE_ALL_F32
}
