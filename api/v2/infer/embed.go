package infer

import (
	"context"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/llmserve/llmserve/oip"
	"github.com/llmserve/llmserve/tokenizer"
)

// The embedding model's tensors: a model whose task is "embed" (its Task
// method; the model repository's parameters.task) answers infer with the
// normalized embedding of each text.
const OutputEmbedding = "embedding"

var embedInputs = []TensorMetadata{{Name: InputText, Datatype: oip.BYTES, Shape: []int64{-1}}}

var embedOutputs = []TensorMetadata{{Name: OutputEmbedding, Datatype: oip.FP32, Shape: []int64{-1, -1}}}

// Embedder is a model that pools embeddings (*models.Generative is one).
// An embedding model (KindEmbedding) is served through it; KServe V1's
// predict embeds with any model that is one.
type Embedder interface {
	Model
	Tokenizer() *tokenizer.Tokenizer
	// Pooling is how embeddings pool a sequence; "none" and "rank" have
	// no embeddings.
	Pooling() string
	// MaxEmbedTokens is the longest input Embed takes.
	MaxEmbedTokens() int
	// Embed returns one pooled, unnormalized vector per input.
	Embed(ctx context.Context, inputs [][]int32) ([][]float32, error)
}

// AsEmbedder returns m as an Embedder, or an Invalid error saying why it
// does not embed.
func AsEmbedder(m Model) (Embedder, error) {
	e, ok := m.(Embedder)
	if !ok || e.Pooling() == "none" || e.Pooling() == "rank" {
		return nil, invalidf("model %q does not embed: it has no embedding pooling (set pooling to mean, cls or last in its settings)", m.Name())
	}
	return e, nil
}

// EmbedTexts tokenizes texts (with the model's special tokens) and
// returns their L2-normalized embeddings. elem names an element in
// errors, e.g. "instances[%d]".
func EmbedTexts(ctx context.Context, e Embedder, texts []string, elem func(i int) string) ([][]float32, error) {
	tok := e.Tokenizer()
	maxLen := e.MaxEmbedTokens()
	maxBytes := tok.MaxTextBytes(maxLen)
	inputs := make([][]int32, len(texts))
	for i, text := range texts {
		switch {
		case text == "":
			return nil, invalidf("%s is empty; send some text", elem(i))
		case !utf8.ValidString(text):
			return nil, invalidf("%s is not valid UTF-8 text", elem(i))
		case len(text) > maxBytes:
			return nil, invalidf("%s has %d bytes, more than the model's %d tokens can hold; shorten it", elem(i), len(text), maxLen)
		}
		toks, err := tok.Encode(text, true)
		if err != nil {
			return nil, invalidf("%s could not be tokenized: %v", elem(i), err)
		}
		if len(toks) == 0 || len(toks) > maxLen {
			return nil, invalidf("%s has %d tokens; the model takes 1 to %d", elem(i), len(toks), maxLen)
		}
		inputs[i] = toks
	}
	vecs, err := e.Embed(ctx, inputs)
	if err != nil {
		return nil, AsError(err)
	}
	for _, v := range vecs {
		var sum float64
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		if sum > 0 {
			inv := float32(1 / math.Sqrt(sum))
			for j := range v {
				v[j] *= inv
			}
		}
	}
	return vecs, nil
}

// RunEmbed serves an inference request on an embedding model: text_input
// (BYTES, n texts) in, embedding (FP32 [n, dim], each row L2-normalized)
// out.
func RunEmbed(ctx context.Context, m Model, r *Request) (*Response, error) {
	e, err := AsEmbedder(m)
	if err != nil {
		return nil, err
	}
	if err := r.CheckInputs(); err != nil {
		return nil, err
	}
	if err := applyContentTypes(r); err != nil {
		return nil, err
	}
	for _, t := range r.Inputs {
		if t.Name != InputText {
			return nil, invalidf("unknown input %q: this embedding model takes only %s (BYTES)", truncate(t.Name), InputText)
		}
	}
	for _, o := range r.Outputs {
		if o.Name != OutputEmbedding {
			return nil, invalidf("unknown output %q: this embedding model produces only %s (FP32 [n, dim])", truncate(o.Name), OutputEmbedding)
		}
	}
	text := r.input(InputText)
	switch {
	case text == nil:
		return nil, invalidf("input %q (BYTES, one text per element) is required", InputText)
	case text.Datatype != oip.BYTES:
		return nil, invalidf("input %q must have datatype BYTES, got %s", InputText, text.Datatype)
	case len(text.Bytes) == 0:
		return nil, invalidf("input %q has no elements; send at least one text", InputText)
	}
	texts := make([]string, len(text.Bytes))
	for i, b := range text.Bytes {
		texts[i] = string(b)
	}
	vecs, err := EmbedTexts(ctx, e, texts, func(i int) string { return "input " + InputText + " element " + strconv.Itoa(i) })
	if err != nil {
		return nil, err
	}
	dim := len(vecs[0])
	flat := make([]float32, 0, len(vecs)*dim)
	for _, v := range vecs {
		flat = append(flat, v...)
	}
	out := NewFP32Tensor(OutputEmbedding, []int64{int64(len(vecs)), int64(dim)}, flat)
	resp := &Response{ModelName: m.Name(), ModelVersion: VersionOf(m), ID: r.ID, Outputs: []*Tensor{out}}
	if err := EncodeResponse(r, resp); err != nil {
		return nil, err
	}
	return resp, nil
}
