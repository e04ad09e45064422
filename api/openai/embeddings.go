package openai

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/llmserve/llmserve/frontend"
)

// Embedder is a Model that also embeds: the same loaded weights serve
// generation and embeddings at once, through the same engine loop.
type Embedder interface {
	Model
	// Pooling is how a sequence's hidden states become one vector: mean,
	// cls, last, rank (a reranker's score) or none (no embeddings).
	Pooling() string
	// MatryoshkaDimensions lists the sizes embeddings may be cut to.
	MatryoshkaDimensions() []int
	// MaxEmbedTokens is the longest input Embed takes.
	MaxEmbedTokens() int
	// Embed returns one pooled, unnormalized vector per input; with rank
	// pooling, the classifier's outputs (the first is the relevance score).
	Embed(ctx context.Context, inputs [][]int32) ([][]float32, error)
	// RerankTokens formats a (query, document) pair as a reranker's input
	// (the model's rerank template, or query and document joined with the
	// vocabulary's special tokens). Only meaningful with rank pooling.
	RerankTokens(query, document string) ([]int32, error)
}

// embeddingRequest is POST /v1/embeddings: OpenAI's fields and vLLM's
// normalize, truncate_prompt_tokens and add_special_tokens.
type embeddingRequest struct {
	Model                string     `json:"model"`
	Input                inputField `json:"input"`
	EncodingFormat       *string    `json:"encoding_format"`
	Dimensions           *int       `json:"dimensions"`
	User                 *string    `json:"user"`
	Normalize            *bool      `json:"normalize"`
	TruncatePromptTokens *int       `json:"truncate_prompt_tokens"`
	AddSpecialTokens     *bool      `json:"add_special_tokens"`
}

// inputField is the embeddings "input": the completions prompt's forms
// (promptField), its errors naming input.
type inputField struct{ promptField }

func (f *inputField) UnmarshalJSON(raw []byte) error {
	return renameParam(f.promptField.UnmarshalJSON(raw), "prompt", "input")
}

// poolingList is the answer of the routes whose results are a list, one
// per input (embeddings: embeddingData; score: scoreData): OpenAI's list
// object with the response id, the model and the tokens run.
type poolingList[T any] struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Data    []T        `json:"data"`
	Usage   embedUsage `json:"usage"`
}

// poolingListOf is c's answer of data, from m, that ran tokens.
func poolingListOf[T any](c *jsonCall, m Model, data []T, tokens int) poolingList[T] {
	return poolingList[T]{ID: c.id, Object: "list", Created: c.arrival.Unix(), Model: m.Name(), Data: data,
		Usage: embedUsage{PromptTokens: tokens, TotalTokens: tokens}}
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

// embedUsage is the usage of requests that generate nothing.
type embedUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func (r embeddingRequest) modelName() string { return r.Model }

// embeddings answers POST /v1/embeddings (serveJSON).
func (h *handler) embeddings(c *jsonCall, req *embeddingRequest, m Embedder) (any, error) {
	if m.Pooling() == "rank" {
		// A reranker's pooled vector is its classifier's outputs, not an
		// embedding.
		return nil, invalid("model", "The model `%s` is a reranker (cross-encoder, rank pooling): it scores pairs and has no embeddings. Use it with /v1/score or /v1/rerank, or use an embedding model here.", m.Name())
	}
	format := "float"
	if req.EncodingFormat != nil {
		format = *req.EncodingFormat
	}
	if format != "float" && format != "base64" {
		return nil, invalid("encoding_format", "Unknown encoding_format %q; use \"float\" or \"base64\".", format)
	}
	dims, err := checkDimensions(m, req.Dimensions)
	if err != nil {
		return nil, err
	}
	addSpecial := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	inputs, err := embedInputs(m, &req.Input.promptField, "input", addSpecial, req.TruncatePromptTokens)
	if err != nil {
		return nil, err
	}
	vecs, err := m.Embed(c.r.Context(), inputs)
	if err != nil {
		return nil, err
	}
	normalize := req.Normalize == nil || *req.Normalize
	data, tokens := make([]embeddingData, len(vecs)), 0
	for i, v := range vecs {
		if dims > 0 {
			v = v[:dims]
		}
		if normalize {
			normalizeL2(v)
		}
		d := embeddingData{Object: "embedding", Index: i, Embedding: v}
		if format == "base64" {
			d.Embedding = base64Floats(v)
		}
		data[i] = d
		tokens += len(inputs[i])
	}
	return poolingListOf(c, m, data, tokens), nil
}

// poolingModel is serveJSON's find for the routes of pooling models
// (embeddings, score, rerank): embedModel on the request's route.
func (h *handler) poolingModel(c *jsonCall, name string) (Embedder, error) {
	return h.embedModel(c.r.Context(), name, c.r.URL.Path)
}

// embedModel finds the model a request names and checks that it pools
// (embeds, or with rank pooling scores pairs).
func (h *handler) embedModel(ctx context.Context, name, route string) (Embedder, error) {
	m, err := h.model(ctx, name)
	if err != nil {
		return nil, err
	}
	em, ok := m.(Embedder)
	if !ok {
		// A model with no embedding side at all (llmserve head's remote
		// model has one: it embeds through its workers).
		return nil, invalid("model", "The model `%s` serves generation only, not %s. Send %s to a model served with --pooling mean, cls or last.", m.Name(), route, route)
	}
	if em.Pooling() == "none" {
		return nil, invalid("model", "The model `%s` does not serve %s: it has no pooling. Serve it with --pooling mean, cls or last.", m.Name(), route)
	}
	return em, nil
}

// truncateKeep validates truncate_prompt_tokens (-1 means maxLen) and
// returns how many last tokens of an input to keep, 0 for all.
func truncateKeep(maxLen int, truncate *int) (int, error) {
	if truncate == nil {
		return 0, nil
	}
	switch t := *truncate; {
	case t == -1:
		return maxLen, nil
	case t >= 1 && t <= maxLen:
		return t, nil
	default:
		return 0, invalid("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 (the model's length) or in [1, %d], got %d.", maxLen, t)
	}
}

// checkDimensions validates "dimensions" and returns the size to cut
// vectors to, or 0 for all.
func checkDimensions(m Embedder, d *int) (int, error) {
	if d == nil {
		return 0, nil
	}
	allowed := m.MatryoshkaDimensions()
	if len(allowed) == 0 {
		return 0, invalid("dimensions", "The model `%s` does not support Matryoshka dimensions (serve it with --matryoshka-dimensions if it was trained for them); leave out dimensions.", m.Name())
	}
	if !slices.Contains(allowed, *d) {
		return 0, invalid("dimensions", "The model `%s` supports dimensions %v, not %d.", m.Name(), allowed, *d)
	}
	return *d, nil
}

// embedInputs checks and tokenizes the inputs of an embedding-like
// request. Token ids are checked against the vocabulary; each input must
// fit the model's embedding length, or be cut to its last tokens when
// truncate (vLLM's truncate_prompt_tokens; -1 means the model's length)
// says so.
func embedInputs(m Embedder, pf *promptField, field string, addSpecial bool, truncate *int) ([][]int32, error) {
	param := func(i int) string {
		if pf.single {
			return field
		}
		return fmt.Sprintf("%s[%d]", field, i)
	}
	if !pf.set {
		return nil, invalid(field, "%s is required.", field)
	}
	if len(pf.texts) == 0 && len(pf.tokens) == 0 {
		return nil, invalid(field, "%s must not be empty.", field)
	}
	maxLen := m.MaxEmbedTokens()
	keep, err := truncateKeep(maxLen, truncate)
	if err != nil {
		return nil, err
	}
	tok := m.Tokenizer()
	nVocab := tok.Vocab().NumTokens()
	maxBytes := tok.MaxTextBytes(maxLen)
	var out [][]int32
	for i, text := range pf.texts {
		if text == "" {
			return nil, invalid(param(i), "An input must not be empty.")
		}
		if keep == 0 && len(text) > maxBytes {
			return nil, tooMuchText(param(i), len(text), maxLen, maxBytes)
		}
		toks, err := tok.Encode(text, addSpecial)
		if err != nil {
			return nil, invalid(param(i), "The input could not be tokenized: %v", err)
		}
		out = append(out, toks)
	}
	for i, ids := range pf.tokens {
		if len(ids) == 0 {
			return nil, invalid(param(i), "An input must not be empty.")
		}
		toks := make([]int32, len(ids))
		for j, id := range ids {
			if id < 0 || id >= int64(nVocab) {
				return nil, invalid(fmt.Sprintf("%s[%d]", param(i), j), "Token id %d is outside the vocabulary [0, %d).", id, nVocab)
			}
			toks[j] = int32(id)
		}
		out = append(out, toks)
	}
	for i, toks := range out {
		switch {
		case len(toks) == 0:
			return nil, invalid(param(i), "The input is empty after tokenization.")
		case keep > 0 && len(toks) > keep:
			out[i] = toks[len(toks)-keep:]
		case len(toks) > maxLen:
			return nil, &frontend.Error{Param: param(i), Code: "context_length_exceeded", Message: fmt.Sprintf(
				"This model's maximum context length is %d tokens; the %s has %d. Shorten it, or set truncate_prompt_tokens to keep its last tokens.",
				maxLen, param(i), len(toks))}
		}
	}
	return out, nil
}

// normalizeL2 scales v to unit length (a zero vector stays zero).
func normalizeL2(v []float32) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}

// base64Floats is OpenAI's base64 encoding: the little-endian float32
// bytes of the vector.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// renameParam rewrites the field name at the start of a validation error's
// param, for fields that share a decoder (prompt → input).
func renameParam(err error, from, to string) error {
	var v *frontend.Error
	if !errors.As(err, &v) || !strings.HasPrefix(v.Param, from) {
		return err
	}
	rest := strings.TrimPrefix(v.Param, from)
	if rest != "" && rest[0] != '[' && rest[0] != '.' {
		return err
	}
	msg := strings.ReplaceAll(v.Message, "'"+from, "'"+to)
	return &frontend.Error{Param: to + rest, Message: msg, Code: v.Code}
}
