package frontend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

// mediaModel is a MediaModel that reads images only and gives each item
// one placeholder token.
type mediaModel struct {
	tok   *tokenizer.Tokenizer
	items []media.Item
}

func (m *mediaModel) Name() string                    { return "vision" }
func (m *mediaModel) MaxModelLen() int                { return 64 }
func (m *mediaModel) RequestTimeout() time.Duration   { return 0 }
func (m *mediaModel) Tokenizer() *tokenizer.Tokenizer { return m.tok }
func (m *mediaModel) Submit(context.Context, []*scheduler.Request) ([]*core.Stream, error) {
	return nil, nil
}
func (m *mediaModel) ReadsMedia(k media.Kind) bool { return k == media.Image }
func (m *mediaModel) PrepareMedia(_ context.Context, prompt string, _ bool, items []media.Item) ([]int32, []scheduler.Media, error) {
	m.items = items
	var toks []int32
	var spans []scheduler.Media
	for i, part := range strings.Split(prompt, media.Marker) {
		if i > 0 {
			spans = append(spans, scheduler.Media{Offset: len(toks), Rows: 1})
			toks = append(toks, 0)
		}
		t, err := m.tok.Encode(part, false)
		if err != nil {
			return nil, nil, err
		}
		toks = append(toks, t...)
	}
	return toks, spans, nil
}

// A request with media renders one marker per item, which the model
// encodes in order; what it cannot read is refused naming the item.
func TestRenderMedia(t *testing.T) {
	m := &mediaModel{tok: testTokenizer(t, echo)}
	img := MediaRef{Kind: media.Image, Param: "messages[0].content[1]"}
	msgs := []Message{{Role: "user", Content: "Hi\n" + media.Marker, HasContent: true, Media: []MediaRef{img}}}
	refs := MediaOf(msgs)
	mm, err := MediaModelFor(m, refs)
	if err != nil || len(refs) != 1 {
		t.Fatal(refs, err)
	}
	p := NewPrompt(&Request{Messages: msgs, Template: Template{AddGenerationPrompt: true}})
	items := []media.Item{{Kind: media.Image, Data: []byte("png"), Param: img.Param}}
	toks, spans, text, err := p.RenderMedia(context.Background(), mm, msgs, items, 1000)
	if err != nil || len(spans) != 1 || len(toks) == 0 || !strings.Contains(text, media.Marker) || len(m.items) != 1 {
		t.Fatalf("%v %v %q %v", toks, spans, text, err)
	}
	_, _, _, err = p.RenderMedia(context.Background(), mm, msgs, append(items, items...), 1000)
	badParam(t, err, "messages")

	audio := MediaRef{Kind: media.Audio, Param: "messages[0].content[2]"}
	_, err = MediaModelFor(m, []MediaRef{img, audio})
	badParam(t, err, audio.Param)
	_, err = MediaModelFor(struct{ Model }{m}, refs)
	badParam(t, err, img.Param)
	badParam(t, CheckMarkers([]Message{{MarkerParam: "messages[1].content"}}), "messages[1].content")
	if p.ToolTemplate(m.tok) != echo {
		t.Error("the model's template renders the tools")
	}
}

// fimVocab is a vocabulary with fill-in-the-middle tokens.
type fimVocab struct{ *tokenizertest.Vocab }

func (v fimVocab) FIMTokens() (pre, suf, mid int32) { return 300, 301, 302 }

// Raw prompts: texts with special tokens, token ids checked against the
// vocabulary, a suffix as fill-in-the-middle, truncation.
func TestRenderRaw(t *testing.T) {
	tok := testTokenizer(t, "")
	in, err := RenderRaw(tok, &RawPrompt{Field: "prompt", Texts: []string{"Hi", "HiHiHi"}}, nil, 64, 2, false)
	if err != nil || len(in) != 2 || in[0].Text != "Hi" || len(in[1].Tokens) != 2 || in[1].Text != "HiHi" {
		t.Fatalf("texts %+v %v", in, err)
	}
	in, err = RenderRaw(tok, &RawPrompt{Field: "prompt", Single: true, Tokens: [][]int64{{5, 6}}}, nil, 64, 0, true)
	if err != nil || len(in) != 1 || len(in[0].Tokens) != 2 || in[0].Text == "" {
		t.Fatalf("token ids %+v %v", in, err)
	}
	_, err = RenderRaw(tok, &RawPrompt{Field: "prompt", Tokens: [][]int64{{5}, {1 << 40}}}, nil, 64, 0, false)
	badParam(t, err, "prompt[1][0]")
	_, err = RenderRaw(tok, &RawPrompt{Field: "prompt", Texts: []string{""}}, nil, 64, 0, false)
	badParam(t, err, "prompt[0]")
	_, err = RenderRaw(tok, &RawPrompt{Field: "prompt", Single: true, Texts: []string{strings.Repeat("x", 10000)}}, nil, 4, 0, false)
	badParam(t, err, "prompt")
	suffix := "Hi"
	_, err = RenderRaw(tok, &RawPrompt{Field: "prompt", Texts: []string{"Hi"}}, &suffix, 64, 0, false)
	badParam(t, err, "suffix")

	v := fimVocab{tokenizertest.New(tokenizertest.Spec{Pieces: []string{"Hi"}, AddBOS: true})}
	fim, err := tokenizer.New(v, "")
	if err != nil {
		t.Fatal(err)
	}
	in, err = RenderRaw(fim, &RawPrompt{Field: "prompt", Texts: []string{"Hi"}}, &suffix, 64, 0, false)
	if err != nil || len(in) != 1 {
		t.Fatal(in, err)
	}
	got := in[0].Tokens
	if len(got) != 6 || got[0] != tokenizertest.BOS || got[1] != 300 || got[3] != 301 || got[5] != 302 {
		t.Errorf("infill prompt %v, want BOS PRE Hi SUF Hi MID", got)
	}
	_, err = RenderRaw(fim, &RawPrompt{Field: "prompt", Tokens: [][]int64{{5}}}, &suffix, 64, 0, false)
	badParam(t, err, "suffix")
}

// vLLM's extensions go into the scheduler request, and are refused naming
// the field where they cannot.
func TestExtensionsApply(t *testing.T) {
	tok := testTokenizer(t, "")
	base := scheduler.Request{N: 1, PromptLogprobs: -1}
	no := false
	x, err := (&Extensions{BadWords: []string{"Hi"}, AllowedTokenIDs: []int64{5}, SkipSpecialTokens: &no,
		TruncatePromptTokens: ptr(-1), PromptLogprobs: ptr(3)}).Apply(&base, tok, 64, false)
	if err != nil || !x.KeepSpecial || x.Truncate != 64 || x.PromptLogprobs != 3 || len(base.BadWords) != 2 ||
		len(base.Sampling.AllowedTokens) != 1 || base.PromptLogprobs != 3 {
		t.Fatalf("%+v %+v %v", x, base, err)
	}
	for _, tt := range []struct {
		e      Extensions
		stream bool
		param  string
	}{
		{Extensions{BestOf: ptr(2)}, false, "best_of"},
		{Extensions{AllowedTokenIDs: []int64{}}, false, "allowed_token_ids"},
		{Extensions{BadWords: []string{""}}, false, "bad_words[0]"},
		{Extensions{TruncatePromptTokens: ptr(0)}, false, "truncate_prompt_tokens"},
		{Extensions{PromptLogprobs: ptr(1)}, true, "prompt_logprobs"},
	} {
		_, err := tt.e.Apply(&scheduler.Request{N: 1}, tok, 64, tt.stream)
		badParam(t, err, tt.param)
	}
}
