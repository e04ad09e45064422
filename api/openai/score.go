package openai

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
)

// This file serves vLLM's POST /score (text_1 against text_2) and the
// rerank routes in the Jina and Cohere shapes (query against documents).
// For an embedding model a score is the cosine similarity of the two
// texts' embeddings, as vLLM scores with embedding models. For a reranker
// (rank pooling: a cross-encoder) each pair runs through the model as one
// input, formatted as llama.cpp's server formats a rerank prompt, and the
// score is its classifier's first output.

type scoreRequest struct {
	Model                string          `json:"model"`
	Text1                json.RawMessage `json:"text_1"` // a string or strings
	Text2                json.RawMessage `json:"text_2"`
	TruncatePromptTokens *int            `json:"truncate_prompt_tokens"`
	User                 *string         `json:"user"`
}

type scoreData struct {
	Index  int     `json:"index"`
	Object string  `json:"object"`
	Score  float64 `json:"score"`
}

// rerankRequest is the Jina / Cohere rerank request.
type rerankRequest struct {
	Model           string          `json:"model"`
	Query           *string         `json:"query"`
	Documents       rerankDocuments `json:"documents"`
	TopN            *int            `json:"top_n"`
	ReturnDocuments *bool           `json:"return_documents"`
	User            *string         `json:"user"`
}

// rerankDocuments are strings or {"text": ...} objects.
type rerankDocuments struct {
	set   bool
	texts []string
}

func (d *rerankDocuments) UnmarshalJSON(raw []byte) error {
	elems, set, err := jsonwire.OptionalArray(raw, "documents", "an array of strings or of {\"text\": ...} objects")
	*d = rerankDocuments{set: set}
	if err != nil {
		return err
	}
	for i, e := range elems {
		param := fmt.Sprintf("documents[%d]", i)
		if jsonwire.Kind(e) == "string" {
			s, err := jsonwire.String(e, param, "a string")
			if err != nil {
				return err
			}
			d.texts = append(d.texts, s)
			continue
		}
		var o struct {
			Text *string `json:"text"`
		}
		if err := jsonwire.Object(e, param, "a string or a {\"text\": ...} object", &o); err != nil {
			return err
		}
		if o.Text == nil {
			return invalid(param+".text", "A document object needs text.")
		}
		d.texts = append(d.texts, *o.Text)
	}
	return nil
}

type rerankResponse struct {
	ID      string         `json:"id"`
	Model   string         `json:"model"`
	Usage   rerankUsage    `json:"usage"`
	Results []rerankResult `json:"results"`
	// Meta is Cohere's, on /v2/rerank.
	Meta any `json:"meta,omitempty"`
}

type rerankUsage struct {
	TotalTokens int `json:"total_tokens"`
}

type rerankResult struct {
	Index          int           `json:"index"`
	Document       *rerankDocOut `json:"document,omitempty"`
	RelevanceScore float64       `json:"relevance_score"`
}

type rerankDocOut struct {
	Text string `json:"text"`
}

func (r scoreRequest) modelName() string  { return r.Model }
func (r rerankRequest) modelName() string { return r.Model }

// score answers POST /v1/score and /score (serveJSON).
func (h *handler) score(c *jsonCall, req *scoreRequest, m Embedder) (any, error) {
	var texts [2][]string
	for i, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"text_1", req.Text1}, {"text_2", req.Text2}} {
		var err error
		if texts[i], err = parseStringList(f.raw, f.name); err == nil && len(texts[i]) == 0 {
			err = invalid(f.name, "%s is required: a string or a non-empty array of strings.", f.name)
		}
		if err != nil {
			return nil, err
		}
	}
	t1, t2 := texts[0], texts[1]
	if len(t1) != 1 && len(t1) != len(t2) {
		return nil, invalid("text_2", "text_1 has %d texts and text_2 %d: a list of text_1 is paired with a list of text_2 of the same length (or give one text_1 to score against every text_2).", len(t1), len(t2))
	}
	scores, tokens, err := h.scores(c.r, m, t1, "text_1", t2, "text_2", req.TruncatePromptTokens)
	if err != nil {
		return nil, err
	}
	var data []scoreData
	for i, s := range scores {
		data = append(data, scoreData{Index: i, Object: "score", Score: s})
	}
	return poolingListOf(c, m, data, tokens), nil
}

// rerank answers POST /v1/rerank, /rerank and /v2/rerank (serveJSON).
func (h *handler) rerank(c *jsonCall, req *rerankRequest, m Embedder) (any, error) {
	switch {
	case req.Query == nil:
		return nil, invalid("query", "query is required.")
	case !req.Documents.set || len(req.Documents.texts) == 0:
		return nil, invalid("documents", "documents is required: a non-empty array of strings or {\"text\": ...} objects.")
	case req.TopN != nil && *req.TopN < 0:
		return nil, invalid("top_n", "top_n must be 0 (all) or positive, got %d.", *req.TopN)
	}
	docs := req.Documents.texts
	scores, tokens, err := h.scores(c.r, m, []string{*req.Query}, "query", docs, "documents", nil)
	if err != nil {
		return nil, err
	}
	results := make([]rerankResult, len(docs))
	withDocs := req.ReturnDocuments == nil || *req.ReturnDocuments
	for i, s := range scores {
		results[i] = rerankResult{Index: i, RelevanceScore: s}
		if withDocs {
			results[i].Document = &rerankDocOut{Text: docs[i]}
		}
	}
	slices.SortStableFunc(results, func(a, b rerankResult) int { return cmp.Compare(b.RelevanceScore, a.RelevanceScore) })
	if req.TopN != nil && *req.TopN > 0 && *req.TopN < len(results) {
		results = results[:*req.TopN]
	}
	resp := rerankResponse{ID: c.id, Model: m.Name(), Usage: rerankUsage{TotalTokens: tokens}, Results: results}
	if c.r.URL.Path == "/v2/rerank" {
		resp.Meta = map[string]any{"api_version": map[string]string{"version": "2"}, "billed_units": map[string]int{"search_units": 1}}
	}
	return resp, nil
}

// scores scores a[i or 0] (one text, or as many as b) against b[i] for
// every i, and returns the tokens run through the model.
func (h *handler) scores(r *http.Request, m Embedder, a []string, aField string, b []string, bField string, truncate *int) ([]float64, int, error) {
	if m.Pooling() == "rank" {
		return h.crossScores(r, m, a, aField, b, bField, truncate)
	}
	return h.cosineScores(r, m, a, aField, b, bField, truncate)
}

// crossScores runs every pair (a[i or 0], b[i]) through a reranker in one
// Embed call and returns each pair's first class output. A pair longer
// than the model's length is refused, or cut to its last tokens when
// truncate says so.
func (h *handler) crossScores(r *http.Request, m Embedder, a []string, aField string, b []string, bField string, truncate *int) ([]float64, int, error) {
	param := func(field string, i int) string {
		if field == "query" {
			return field
		}
		return fmt.Sprintf("%s[%d]", field, i)
	}
	maxLen := m.MaxEmbedTokens()
	keep, err := truncateKeep(maxLen, truncate)
	if err != nil {
		return nil, 0, err
	}
	for i, t := range a {
		if t == "" {
			return nil, 0, invalid(param(aField, i), "An input must not be empty.")
		}
	}
	maxBytes := m.Tokenizer().MaxTextBytes(maxLen)
	inputs := make([][]int32, len(b))
	tokens := 0
	for i, doc := range b {
		if doc == "" {
			return nil, 0, invalid(param(bField, i), "An input must not be empty.")
		}
		ai := 0
		if len(a) > 1 {
			ai = i
		}
		if keep == 0 && len(a[ai])+len(doc) > maxBytes {
			return nil, 0, tooMuchText(param(bField, i), len(a[ai])+len(doc), maxLen, maxBytes)
		}
		toks, err := m.RerankTokens(a[ai], doc)
		if err != nil {
			return nil, 0, invalid(param(bField, i), "The pair could not be tokenized: %v", err)
		}
		switch {
		case len(toks) == 0:
			return nil, 0, invalid(param(bField, i), "The pair is empty after tokenization.")
		case keep > 0 && len(toks) > keep:
			toks = toks[len(toks)-keep:]
		case len(toks) > maxLen:
			return nil, 0, &frontend.Error{Param: param(bField, i), Code: "context_length_exceeded", Message: fmt.Sprintf(
				"This model's maximum context length is %d tokens; the pair of %s and %s has %d. Shorten them, or set truncate_prompt_tokens to keep its last tokens.",
				maxLen, param(aField, ai), param(bField, i), len(toks))}
		}
		inputs[i] = toks
		tokens += len(toks)
	}
	outs, err := m.Embed(r.Context(), inputs)
	if err != nil {
		return nil, 0, err
	}
	scores := make([]float64, len(outs))
	for i, o := range outs {
		if len(o) == 0 {
			return nil, 0, fmt.Errorf("the reranker returned no score for pair %d", i)
		}
		scores[i] = float64(o[0])
	}
	return scores, tokens, nil
}

// cosineScores embeds a (one text, or as many as b) and b in one call and
// returns cosine(a[i or 0], b[i]) for every i, and the tokens embedded.
func (h *handler) cosineScores(r *http.Request, m Embedder, a []string, aField string, b []string, bField string, truncate *int) ([]float64, int, error) {
	pa := promptField{set: true, single: len(a) == 1 && aField == "query", texts: a}
	pb := promptField{set: true, texts: b}
	inA, err := embedInputs(m, &pa, aField, true, truncate)
	if err != nil {
		return nil, 0, err
	}
	inB, err := embedInputs(m, &pb, bField, true, truncate)
	if err != nil {
		return nil, 0, err
	}
	vecs, err := m.Embed(r.Context(), append(slices.Clip(inA), inB...))
	if err != nil {
		return nil, 0, err
	}
	va, vb := vecs[:len(inA)], vecs[len(inA):]
	tokens := 0
	for _, in := range append(slices.Clip(inA), inB...) {
		tokens += len(in)
	}
	scores := make([]float64, len(vb))
	for i := range vb {
		x := va[0]
		if len(va) > 1 {
			x = va[i]
		}
		scores[i] = cosine(x, vb[i])
	}
	return scores, tokens, nil
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
