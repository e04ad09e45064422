package tests

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/llmserve/llmserve/models"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func openaiClient(s *server) *openai.Client {
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = s.URL + "/v1"
	return openai.NewClientWithConfig(cfg)
}

var embedTexts = []string{
	"Once upon a time there was a little girl named Lily.",
	"The dog ran to the park.",
	"Tom liked to eat apples with his mom.",
	"The sun was hot.",
	"Ben and Mia built a big tower of blocks, and then it fell down.",
}

// The go-openai client reads float and base64 embeddings alike: unit
// vectors of the model's width with exact usage.
func TestEmbeddingsGoOpenAI(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	client := openaiClient(s)
	ctx := context.Background()
	width := s.model.Info().NEmbd
	var tokens int
	for _, text := range embedTexts {
		var tk struct{ Count int }
		if code, _ := s.post(t, "/tokenize", map[string]any{"model": "stories260K", "prompt": text}, &tk); code != 200 {
			t.Fatalf("tokenize: %d", code)
		}
		tokens += tk.Count
	}
	var got [2][]openai.Embedding
	for i, format := range []openai.EmbeddingEncodingFormat{openai.EmbeddingEncodingFormatFloat, openai.EmbeddingEncodingFormatBase64} {
		resp, err := client.CreateEmbeddings(ctx, openai.EmbeddingRequest{Model: "stories260K", Input: embedTexts, EncodingFormat: format})
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if len(resp.Data) != len(embedTexts) || resp.Usage.PromptTokens != tokens || resp.Usage.TotalTokens != tokens {
			t.Fatalf("%s: %d vectors, usage %+v; want %d vectors, %d tokens", format, len(resp.Data), resp.Usage, len(embedTexts), tokens)
		}
		for j, d := range resp.Data {
			if d.Index != j || len(d.Embedding) != width || math.Abs(norm(d.Embedding)-1) > 1e-5 {
				t.Errorf("%s vector %d: index %d, %d dimensions, norm %g", format, j, d.Index, len(d.Embedding), norm(d.Embedding))
			}
		}
		got[i] = resp.Data
	}
	for j := range embedTexts {
		if !slices.Equal(got[0][j].Embedding, got[1][j].Embedding) {
			t.Errorf("vector %d: base64 differs from float", j)
		}
	}
	if c := cosine(got[0][0].Embedding, got[0][3].Embedding); c > 0.9999 {
		t.Errorf("different texts embed alike (cosine %g)", c)
	}
}

// Each input embedded among others' — concurrent requests, a generation
// running beside them — equals its single-request embedding.
func TestEmbeddingsBatchedEqualSingle(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	client := openaiClient(s)
	ctx := context.Background()
	single := make([][]float32, len(embedTexts))
	for i, text := range embedTexts {
		resp, err := client.CreateEmbeddings(ctx, openai.EmbeddingRequest{Model: "stories260K", Input: text})
		if err != nil {
			t.Fatal(err)
		}
		single[i] = resp.Data[0].Embedding
	}
	gen := make(chan error, 1)
	go func() {
		var out map[string]any
		code, _ := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true}, &out)
		if code != 200 {
			gen <- fmt.Errorf("generation beside embeddings: status %d", code)
		}
		close(gen)
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for c := range 8 {
		wg.Go(func() {
			for round := range 3 {
				// Each client sends the texts rotated, some repeated.
				var idx []int
				for k := range 2 + (c+round)%4 {
					idx = append(idx, (c+k)%len(embedTexts))
				}
				var inputs []string
				for _, i := range idx {
					inputs = append(inputs, embedTexts[i])
				}
				resp, err := client.CreateEmbeddings(ctx, openai.EmbeddingRequest{Model: "stories260K", Input: inputs})
				if err != nil {
					errs <- err
					return
				}
				for k, i := range idx {
					if cos := cosine(resp.Data[k].Embedding, single[i]); cos < 0.9999 {
						errs <- fmt.Errorf("client %d round %d: text %d batched vs single: cosine %.6f < 0.9999", c, round, i, cos)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-gen; err != nil {
		t.Error(err)
	}
}

func TestEmbeddingsMatryoshka(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{MatryoshkaDimensions: []int{16, 32}})
	client := openaiClient(s)
	full, err := client.CreateEmbeddings(context.Background(), openai.EmbeddingRequest{Model: "stories260K", Input: embedTexts[0]})
	if err != nil {
		t.Fatal(err)
	}
	cut, err := client.CreateEmbeddings(context.Background(), openai.EmbeddingRequest{Model: "stories260K", Input: embedTexts[0], Dimensions: 16})
	if err != nil {
		t.Fatal(err)
	}
	v := cut.Data[0].Embedding
	if len(v) != 16 || math.Abs(norm(v)-1) > 1e-5 {
		t.Fatalf("16 dimensions: got %d, norm %g", len(v), norm(v))
	}
	// The cut vector is the full one's first 16 components, renormalized.
	head := full.Data[0].Embedding[:16]
	if c := cosine(v, head); c < 0.999999 {
		t.Errorf("cut vector is not the renormalized head (cosine %g)", c)
	}
	var e errBody
	if code, _ := s.post(t, "/v1/embeddings", map[string]any{"model": "stories260K", "input": "a", "dimensions": 20}, &e); code != 400 || e.Error.Param != "dimensions" {
		t.Errorf("dimensions 20: %d %+v", code, e)
	}
}

type errBody struct {
	Error struct {
		Message string
		Param   string
		Code    *string
	}
}

func TestScoreAndRerank(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	var emb struct {
		Data []struct{ Embedding []float32 }
	}
	if code, _ := s.post(t, "/v1/embeddings", map[string]any{"model": "stories260K", "input": embedTexts}, &emb); code != 200 {
		t.Fatal(code)
	}
	want := func(i, j int) float64 { return cosine(emb.Data[i].Embedding, emb.Data[j].Embedding) }

	type scoreResp struct {
		Object string
		Data   []struct {
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
		if code, _ := s.post(t, path, map[string]any{"model": "stories260K", "text_1": embedTexts[0], "text_2": embedTexts[0]}, &one); code != 200 || len(one.Data) != 1 || math.Abs(one.Data[0].Score-1) > 1e-5 {
			t.Errorf("%s: a text against itself: %d %+v", path, code, one)
		}
		var bcast scoreResp
		if code, _ := s.post(t, path, map[string]any{"model": "stories260K", "text_1": embedTexts[0], "text_2": embedTexts[1:4]}, &bcast); code != 200 || len(bcast.Data) != 3 {
			t.Fatalf("%s: one against three: %d %+v", path, code, bcast)
		}
		for k, d := range bcast.Data {
			if d.Index != k || d.Object != "score" || math.Abs(d.Score-want(0, k+1)) > 1e-4 {
				t.Errorf("%s broadcast %d: %+v, want score %g", path, k, d, want(0, k+1))
			}
		}
		var zip scoreResp
		if code, _ := s.post(t, path, map[string]any{"model": "stories260K", "text_1": embedTexts[0:2], "text_2": embedTexts[2:4]}, &zip); code != 200 || len(zip.Data) != 2 {
			t.Fatalf("%s: zip: %d %+v", path, code, zip)
		}
		for k, d := range zip.Data {
			if math.Abs(d.Score-want(k, k+2)) > 1e-4 {
				t.Errorf("%s zip %d: score %g, want %g", path, k, d.Score, want(k, k+2))
			}
		}
		var e errBody
		if code, _ := s.post(t, path, map[string]any{"model": "stories260K", "text_1": embedTexts[0:2], "text_2": embedTexts[0:3]}, &e); code != 400 || e.Error.Param != "text_2" {
			t.Errorf("%s: mismatched lists: %d %+v", path, code, e)
		}
	}

	type rerankResp struct {
		Model   string
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
	docs := []any{embedTexts[1], map[string]string{"text": embedTexts[2]}, embedTexts[0], embedTexts[3]}
	for _, path := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		var rr rerankResp
		if code, _ := s.post(t, path, map[string]any{"model": "stories260K", "query": embedTexts[0], "documents": docs, "top_n": 3}, &rr); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		if len(rr.Results) != 3 || rr.Results[0].Index != 2 || rr.Usage.TotalTokens == 0 {
			t.Fatalf("%s: %+v (the query itself, document 2, must come first)", path, rr)
		}
		for k := 1; k < len(rr.Results); k++ {
			if rr.Results[k].RelevanceScore > rr.Results[k-1].RelevanceScore {
				t.Errorf("%s: results not sorted by relevance_score: %+v", path, rr.Results)
			}
		}
		if d := rr.Results[0].Document; d == nil || d.Text != embedTexts[0] {
			t.Errorf("%s: document not returned: %+v", path, rr.Results[0])
		}
		if (path == "/v2/rerank") != (rr.Meta != nil) {
			t.Errorf("%s: meta %v", path, rr.Meta)
		}
	}
	var rr rerankResp
	if code, _ := s.post(t, "/v1/rerank", map[string]any{"model": "stories260K", "query": "dog", "documents": docs, "return_documents": false}, &rr); code != 200 || len(rr.Results) != 4 || rr.Results[0].Document != nil {
		t.Errorf("return_documents false: %d %+v", code, rr)
	}
}

func TestTokenizeDetokenize(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	var tk struct {
		Count       int
		MaxModelLen int `json:"max_model_len"`
		Tokens      []int32
		TokenStrs   []string `json:"token_strs"`
	}
	if code, _ := s.post(t, "/tokenize", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "return_token_strs": true}, &tk); code != 200 {
		t.Fatal(code)
	}
	want, err := s.model.Tokenizer().Encode("Once upon a time", true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tk.Tokens, want) || tk.Count != len(want) || tk.MaxModelLen != s.model.MaxModelLen() || len(tk.TokenStrs) != len(want) {
		t.Fatalf("tokenize: %+v, want tokens %v", tk, want)
	}
	if strings.Join(tk.TokenStrs[1:], "") != " Once upon a time" && strings.Join(tk.TokenStrs[1:], "") != "Once upon a time" {
		t.Errorf("token strings %q", tk.TokenStrs)
	}
	var noSpecial struct{ Tokens []int32 }
	s.post(t, "/tokenize", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "add_special_tokens": false}, &noSpecial)
	if !slices.Equal(noSpecial.Tokens, want[1:]) {
		t.Errorf("add_special_tokens false: %v, want %v", noSpecial.Tokens, want[1:])
	}
	var chat struct{ Tokens []int32 }
	if code, _ := s.post(t, "/tokenize", map[string]any{"model": "stories260K", "messages": []map[string]string{{"role": "user", "content": "Hi"}}}, &chat); code != 200 || len(chat.Tokens) < 3 {
		t.Errorf("chat tokenize: %d %v", code, chat.Tokens)
	}
	var dt struct{ Prompt string }
	// SentencePiece's word-start space stays, as llama.cpp's server keeps it.
	if code, _ := s.post(t, "/detokenize", map[string]any{"model": "stories260K", "tokens": want[1:]}, &dt); code != 200 || strings.TrimPrefix(dt.Prompt, " ") != "Once upon a time" {
		t.Errorf("detokenize: %d %q", code, dt.Prompt)
	}
}

// Bad input on the new routes: a 400 naming the field.
func TestEmbeddingRoutesBadInput(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	tests := []struct {
		name, path string
		body       map[string]any
		param      string
	}{
		{"unknown encoding_format", "/v1/embeddings", map[string]any{"model": "stories260K", "input": "a", "encoding_format": "int8"}, "encoding_format"},
		{"dimensions without Matryoshka", "/v1/embeddings", map[string]any{"model": "stories260K", "input": "a", "dimensions": 8}, "dimensions"},
		{"empty input", "/v1/embeddings", map[string]any{"model": "stories260K", "input": ""}, "input"},
		{"empty input list", "/v1/embeddings", map[string]any{"model": "stories260K", "input": []string{}}, "input"},
		{"no input", "/v1/embeddings", map[string]any{"model": "stories260K"}, "input"},
		{"input of the wrong type", "/v1/embeddings", map[string]any{"model": "stories260K", "input": 5}, "input"},
		{"token outside the vocabulary", "/v1/embeddings", map[string]any{"model": "stories260K", "input": []int{1, 512}}, "input[1]"},
		{"tokens outside the vocabulary", "/v1/embeddings", map[string]any{"model": "stories260K", "input": [][]int{{1}, {-1}}}, "input[1][0]"},
		{"input too long", "/v1/embeddings", map[string]any{"model": "stories260K", "input": slices.Repeat([]int{5}, 600)}, "input"},
		{"missing model", "/v1/embeddings", map[string]any{"input": "a"}, "model"},
		{"bad truncate", "/v1/embeddings", map[string]any{"model": "stories260K", "input": "a", "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"},
		{"score without text_2", "/v1/score", map[string]any{"model": "stories260K", "text_1": "a"}, "text_2"},
		{"score with a number in text_1", "/v1/score", map[string]any{"model": "stories260K", "text_1": []any{"a", 5}, "text_2": "b"}, "text_1[1]"},
		{"score with text_2 an object", "/score", map[string]any{"model": "stories260K", "text_1": "a", "text_2": map[string]int{}}, "text_2"},
		{"rerank without query", "/v1/rerank", map[string]any{"model": "stories260K", "documents": []string{"a"}}, "query"},
		{"rerank with empty documents", "/rerank", map[string]any{"model": "stories260K", "query": "a", "documents": []string{}}, "documents"},
		{"rerank document without text", "/rerank", map[string]any{"model": "stories260K", "query": "a", "documents": []any{map[string]int{"x": 1}}}, "documents[0].text"},
		{"tokenize nothing", "/tokenize", map[string]any{"model": "stories260K"}, "prompt"},
		{"detokenize outside the vocabulary", "/detokenize", map[string]any{"model": "stories260K", "tokens": []int{1, 9999}}, "tokens[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e errBody
			code, _ := s.post(t, tt.path, tt.body, &e)
			if code != http.StatusBadRequest || e.Error.Param != tt.param || e.Error.Message == "" {
				t.Errorf("%d %+v, want 400 naming %q", code, e, tt.param)
			}
		})
	}
	// Truncation keeps the last tokens instead.
	var ok struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if code, _ := s.post(t, "/v1/embeddings", map[string]any{"model": "stories260K", "input": slices.Repeat([]int{5}, 600), "truncate_prompt_tokens": 100}, &ok); code != 200 || ok.Usage.PromptTokens != 100 {
		t.Errorf("truncate_prompt_tokens 100: %d %+v", code, ok)
	}
}

// /tokenize renders messages with the chat request's template fields.
func TestTokenizeChatTemplateFields(t *testing.T) {
	s := startServer(t, models.GenerativeConfig{})
	msgs := []map[string]string{{"role": "user", "content": "Hi"}}
	var plain, custom, open struct{ Tokens []int32 }
	s.post(t, "/tokenize", map[string]any{"model": "stories260K", "messages": msgs}, &plain)
	if code, _ := s.post(t, "/tokenize", map[string]any{"model": "stories260K", "messages": msgs,
		"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}!"}, &custom); code != 200 {
		t.Fatal(code)
	}
	want, _ := s.model.Tokenizer().Encode("Hi!", false)
	if !slices.Equal(custom.Tokens, want) || slices.Equal(custom.Tokens, plain.Tokens) {
		t.Errorf("chat_template: %v, want %v", custom.Tokens, want)
	}
	s.post(t, "/tokenize", map[string]any{"model": "stories260K", "messages": msgs, "add_generation_prompt": false}, &open)
	if len(open.Tokens) >= len(plain.Tokens) {
		t.Errorf("add_generation_prompt false: %d tokens, with it %d", len(open.Tokens), len(plain.Tokens))
	}
	var e errBody
	if code, _ := s.post(t, "/tokenize", map[string]any{"model": "stories260K", "messages": msgs, "chat_template": "{% for %}"}, &e); code != 400 || e.Error.Param != "chat_template" {
		t.Errorf("bad chat_template: %d %+v", code, e)
	}
}
