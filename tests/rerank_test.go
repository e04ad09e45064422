package tests

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/stories260k"
)

// qwen3Tiny is a small Qwen3 shape (llama.cpp's LLM_ARCH_QWEN3).
var qwen3Tiny = synth.Shape{
	Arch: "qwen3", Name: "qwen3-tiny", Of: "a test", Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, FF: 128, Context: 512,
	RopeTheta: 10000, RMSEps: 1e-6,
}

// writeQwen3 writes a dummy-weight Qwen3 model with stories260K's
// vocabulary (SentencePiece, adds BOS only); with labels it is a reranker.
func writeQwen3(t *testing.T, labels []string, rerankTemplate string) string {
	t.Helper()
	dir := t.TempDir()
	vocab, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "qwen3.gguf")
	if _, err := synth.Write(path, synth.Options{
		Shape: qwen3Tiny, DType: synth.F32, VocabPath: vocab, Seed: 5, RerankLabels: labels, RerankTemplate: rerankTemplate,
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSynthQwen3Generates: llama.cpp loads the synthesized Qwen3 model
// (no head) and generates with it.
func TestSynthQwen3Generates(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{Name: "qwen3", Path: writeQwen3(t, nil, "")})
	if arch := s.model.Info().Architecture; arch != "qwen3" {
		t.Fatalf("architecture %q", arch)
	}
	var resp struct {
		Choices []struct{ Text string }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if code, _ := s.post(t, "/v1/completions", map[string]any{"model": "qwen3", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "ignore_eos": true}, &resp); code != 200 || len(resp.Choices) != 1 || resp.Usage.CompletionTokens != 8 {
		t.Fatalf("completion: %d %+v", code, resp)
	}
	if s.model.Pooling() == "rank" {
		t.Errorf("a model without a head pools with rank")
	}
}

// TestRankPoolingNeedsDeclaredRank: --pooling rank stays refused on a
// Qwen3 model without a classifier head (llama.cpp would abort), and is
// taken on a reranker.
func TestRankPoolingNeedsDeclaredRank(t *testing.T) {
	_, err := models.LoadGenerative(models.GenerativeConfig{Path: writeQwen3(t, nil, ""), CacheDir: t.TempDir(), Pooling: "rank"}, nil, nil)
	var ce *models.ConfigError
	if !errors.As(err, &ce) || ce.Setting != "Pooling" {
		t.Fatalf("rank on a model without a head: %v", err)
	}
	g, err := models.LoadGenerative(models.GenerativeConfig{Path: writeQwen3(t, []string{"yes", "no"}, ""), CacheDir: t.TempDir(), Pooling: "rank", MaxNumSeqs: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Pooling() != "rank" {
		t.Errorf("pooling %q", g.Pooling())
	}
}

var rerankDocs = []string{
	"The cat sat on the mat.",
	"Lily went to the park with her mom.",
	"Once upon a time there was a little dog.",
	"The sun was warm and the sky was blue.",
	"The cat sat on the mat.",
}

// TestCrossEncoderScoreAndRerank checks /score and the rerank routes on a
// reranker: each score is the model's first class output for the pair
// computed alone, however the pairs are batched.
func TestCrossEncoderScoreAndRerank(t *testing.T) {
	for _, tc := range []struct {
		name, template string
	}{
		{"joined with special tokens", ""},
		{"rerank template", "<s>Query: {query}\nDocument: {document}\nRelevant:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCrossEncoder(t, writeQwen3(t, []string{"yes", "no"}, tc.template), tc.template)
		})
	}
}

func testCrossEncoder(t *testing.T, path, template string) {
	s := startServer(t, models.GenerativeConfig{Name: "rr", Path: path})
	g := s.model
	if g.Pooling() != "rank" {
		t.Fatalf("pooling %q, want rank (declared by the GGUF)", g.Pooling())
	}
	const query = "Where is the cat?"
	if template != "" {
		// The pair is the template filled in, special tokens parsed.
		got, err := g.RerankTokens(query, rerankDocs[0])
		if err != nil {
			t.Fatal(err)
		}
		prompt := strings.NewReplacer("{query}", query, "{document}", rerankDocs[0]).Replace(template)
		want, err := g.Tokenizer().Encode(prompt, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || got[0] != g.Tokenizer().Vocab().BOS() {
			t.Errorf("template pair %v, want %v (starting with BOS)", got, want)
		}
	}
	// alone is the model's rank output for one pair, embedded alone.
	alone := func(q, d string) float64 {
		t.Helper()
		toks, err := g.RerankTokens(q, d)
		if err != nil {
			t.Fatal(err)
		}
		out, err := g.Embed(context.Background(), [][]int32{toks})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || len(out[0]) != 2 {
			t.Fatalf("rank output %v, want 2 scores", out)
		}
		sum := 0.0
		for _, x := range out[0] {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || x < 0 || x > 1 {
				t.Fatalf("rank output %v is not a softmax", out[0])
			}
			sum += float64(x)
		}
		if math.Abs(sum-1) > 1e-4 {
			t.Fatalf("rank output %v does not sum to 1", out[0])
		}
		return float64(out[0][0])
	}
	want := make([]float64, len(rerankDocs))
	for i, d := range rerankDocs {
		want[i] = alone(query, d)
	}
	if want[0] != want[4] {
		t.Errorf("the same pair scored %g and %g", want[0], want[4])
	}
	if slices.Min(want) == slices.Max(want) {
		t.Errorf("every pair scores %g: the head does not see the pair", want[0])
	}

	type scoreResp struct {
		Data []struct {
			Index  int
			Object string
			Score  float64
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	for _, path := range []string{"/score", "/v1/score"} {
		var one scoreResp
		if code, _ := s.post(t, path, map[string]any{"model": "rr", "text_1": query, "text_2": rerankDocs[1]}, &one); code != 200 || len(one.Data) != 1 || math.Abs(one.Data[0].Score-want[1]) > 1e-5 || one.Usage.PromptTokens == 0 {
			t.Errorf("%s one pair: %d %+v, want score %g", path, code, one, want[1])
		}
		// One query against every document: the pairs are batched in one
		// Embed call and each equals its score alone.
		var bcast scoreResp
		if code, _ := s.post(t, path, map[string]any{"model": "rr", "text_1": []string{query}, "text_2": rerankDocs}, &bcast); code != 200 || len(bcast.Data) != len(rerankDocs) {
			t.Fatalf("%s broadcast: %d %+v", path, code, bcast)
		}
		for k, d := range bcast.Data {
			if d.Index != k || d.Object != "score" || math.Abs(d.Score-want[k]) > 1e-5 {
				t.Errorf("%s broadcast %d: %+v, want score %g", path, k, d, want[k])
			}
		}
		// Zip: text_1[i] against text_2[i].
		q2 := []string{query, "Who went to the park?"}
		var zip scoreResp
		if code, _ := s.post(t, path, map[string]any{"model": "rr", "text_1": q2, "text_2": rerankDocs[:2]}, &zip); code != 200 || len(zip.Data) != 2 {
			t.Fatalf("%s zip: %d %+v", path, code, zip)
		}
		for k, d := range zip.Data {
			if w := alone(q2[k], rerankDocs[k]); math.Abs(d.Score-w) > 1e-5 {
				t.Errorf("%s zip %d: score %g, want %g", path, k, d.Score, w)
			}
		}
		var e errBody
		if code, _ := s.post(t, path, map[string]any{"model": "rr", "text_1": q2, "text_2": rerankDocs[:3]}, &e); code != 400 || e.Error.Param != "text_2" {
			t.Errorf("%s mismatched lists: %d %+v", path, code, e)
		}
		if code, _ := s.post(t, path, map[string]any{"model": "rr", "text_1": query, "text_2": []string{"a", ""}}, &e); code != 400 || e.Error.Param != "text_2[1]" {
			t.Errorf("%s empty document: %d %+v", path, code, e)
		}
	}

	type rerankResp struct {
		Results []struct {
			Index          int
			RelevanceScore float64 `json:"relevance_score"`
			Document       *struct{ Text string }
		}
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
		Meta map[string]any
	}
	order := make([]int, len(rerankDocs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case want[a] > want[b]:
			return -1
		case want[a] < want[b]:
			return 1
		}
		return 0
	})
	docs := []any{rerankDocs[0], map[string]string{"text": rerankDocs[1]}, rerankDocs[2], rerankDocs[3], rerankDocs[4]}
	for _, path := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		var rr rerankResp
		if code, _ := s.post(t, path, map[string]any{"model": "rr", "query": query, "documents": docs}, &rr); code != 200 || len(rr.Results) != len(docs) || rr.Usage.TotalTokens == 0 {
			t.Fatalf("%s: %d %+v", path, code, rr)
		}
		for k, r := range rr.Results {
			if r.Index != order[k] || math.Abs(r.RelevanceScore-want[r.Index]) > 1e-5 || r.Document == nil || r.Document.Text != rerankDocs[r.Index] {
				t.Errorf("%s result %d: %+v, want document %d scored %g", path, k, r, order[k], want[order[k]])
			}
		}
		if (path == "/v2/rerank") != (rr.Meta != nil) {
			t.Errorf("%s: meta %v", path, rr.Meta)
		}
	}
	var rr rerankResp
	if code, _ := s.post(t, "/v1/rerank", map[string]any{"model": "rr", "query": query, "documents": docs, "top_n": 2, "return_documents": false}, &rr); code != 200 || len(rr.Results) != 2 || rr.Results[0].Document != nil || rr.Results[0].Index != order[0] || rr.Results[1].Index != order[1] {
		t.Errorf("top_n 2 without documents: %d %+v", code, rr)
	}
	var e errBody
	if code, _ := s.post(t, "/v1/rerank", map[string]any{"model": "rr", "documents": docs}, &e); code != 400 || e.Error.Param != "query" {
		t.Errorf("rerank without query: %d %+v", code, e)
	}

	// A pair longer than the model's length is a 400 naming the document,
	// unless truncate_prompt_tokens keeps its last tokens.
	long := strings.Repeat("the cat sat on the mat and ", g.MaxEmbedTokens())
	if code, _ := s.post(t, "/v1/rerank", map[string]any{"model": "rr", "query": query, "documents": []string{"a", long}}, &e); code != 400 || e.Error.Param != "documents[1]" {
		t.Errorf("rerank with a too long pair: %d %+v", code, e)
	}
	if code, _ := s.post(t, "/score", map[string]any{"model": "rr", "text_1": query, "text_2": []string{long}}, &e); code != 400 || e.Error.Param != "text_2[0]" {
		t.Errorf("score with a too long pair: %d %+v", code, e)
	}
	var cut scoreResp
	if code, _ := s.post(t, "/score", map[string]any{"model": "rr", "text_1": query, "text_2": []string{long}, "truncate_prompt_tokens": 32}, &cut); code != 200 || len(cut.Data) != 1 || cut.Usage.PromptTokens != 32 {
		t.Errorf("score with truncate_prompt_tokens 32: %d %+v", code, cut)
	}
	if code, _ := s.post(t, "/score", map[string]any{"model": "rr", "text_1": query, "text_2": "a", "truncate_prompt_tokens": 0}, &e); code != 400 || e.Error.Param != "truncate_prompt_tokens" {
		t.Errorf("truncate_prompt_tokens 0: %d %+v", code, e)
	}

	// A reranker has no embeddings.
	if code, _ := s.post(t, "/v1/embeddings", map[string]any{"model": "rr", "input": "hello"}, &e); code != 400 || e.Error.Param != "model" || !strings.Contains(e.Error.Message, "reranker") {
		t.Errorf("embeddings on a reranker: %d %+v", code, e)
	}
}
