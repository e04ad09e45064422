//go:build cgo

package llamacpp

import (
	"crypto/sha256"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/evals/synth"
	"github.com/llmserve/llmserve/models/stories260k"
)

// mtmdGolden is what llama-mtmd-cli gave on the synthesized vision model
// (evals/synth/testdata/mmproj/golden.json says how it was made).
type mtmdGolden struct {
	Prompt       string `json:"prompt"`
	AddBOS       bool   `json:"add_bos"`
	PromptChunks []struct {
		Text        []int32 `json:"text"`
		ImageTokens int     `json:"image_tokens"`
	} `json:"prompt_chunks"`
	NPredict     int     `json:"n_predict"`
	GeneratedIDs []int32 `json:"generated_ids"`
	Image        struct {
		File string `json:"file"`
	} `json:"image"`
}

const mmprojTestdata = "../../evals/synth/testdata/mmproj"

// loadVision writes stories260K with idefics3's image tokens and the tiny
// projector of seed 1 (the golden's files) and loads both.
func loadVision(t testing.TB) (*Model, *Projector) {
	t.Helper()
	dir := t.TempDir()
	base, err := stories260k.File(dir)
	if err != nil {
		t.Fatal(err)
	}
	text, mm, err := synth.WriteTinyVision(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	m := loadFile(t, text)
	p, err := m.LoadProjector(mm, ProjectorParams{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return m, p
}

// imageBitmap decodes an opaque PNG to a bitmap.
func imageBitmap(t testing.TB, path string) *Bitmap {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	rgb := make([]byte, 0, b.Dx()*b.Dy()*3)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			rgb = append(rgb, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	bm, err := NewImageBitmap(b.Dx(), b.Dy(), rgb, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bm.Free)
	return bm
}

// mediaPrompt is a prompt whose media positions are placeholders, with
// the encoded rows of each item.
type mediaPrompt struct {
	tokens []int32
	media  []promptMedia
}

type promptMedia struct {
	offset, rows int
	embd         []float32
}

// spans are the media spans of the chunk [from, to) of the prompt.
func (mp *mediaPrompt) spans(from, to int) []engine.MediaSpan {
	var out []engine.MediaSpan
	for _, m := range mp.media {
		a, b := max(m.offset, from), min(m.offset+m.rows, to)
		if a >= b {
			continue
		}
		w := len(m.embd) / m.rows
		out = append(out, engine.MediaSpan{Offset: a - from, Rows: b - a, Embd: m.embd[(a-m.offset)*w : (b-m.offset)*w]})
	}
	return out
}

// tokenizeMedia tokenizes and encodes a prompt with its bitmaps as
// models.Generative.PrepareMedia does.
func tokenizeMedia(t testing.TB, p *Projector, text string, addBOS bool, bms []*Bitmap) (*mediaPrompt, [][]int32, []int) {
	t.Helper()
	cs, err := p.Tokenize(text, addBOS, bms)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Free()
	mp := &mediaPrompt{}
	var texts [][]int32
	var images []int
	for i := range cs.Len() {
		if toks, ok := cs.Text(i); ok {
			texts = append(texts, toks)
			mp.tokens = append(mp.tokens, toks...)
			continue
		}
		rows := cs.MediaRows(i)
		images = append(images, rows)
		embd, err := cs.Encode(i)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256([]byte{byte(i)})
		mp.media = append(mp.media, promptMedia{offset: len(mp.tokens), rows: rows, embd: embd})
		for j := range rows {
			mp.tokens = append(mp.tokens, engine.MediaToken(h, j))
		}
	}
	return mp, texts, images
}

// TestMediaMatchesMtmdCLI decodes the golden's image prompt through the
// engine (media spans as embedding rows) and checks that greedy decoding
// gives the tokens llama.cpp's own llama-mtmd-cli gave on the same files,
// alone, with the prompt cut into chunks that end inside the images, and
// as 8 sequences decoded together, each bit for bit its solo run.
func TestMediaMatchesMtmdCLI(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(mmprojTestdata, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g mtmdGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	m, p := loadVision(t)
	if !p.Vision() || p.Audio() {
		t.Fatalf("projector reads vision %v, audio %v; want vision only", p.Vision(), p.Audio())
	}
	bm := imageBitmap(t, filepath.Join(mmprojTestdata, g.Image.File))
	mp, texts, images := tokenizeMedia(t, p, g.Prompt, g.AddBOS, []*Bitmap{bm})
	var wantTexts [][]int32
	var wantImages []int
	for _, c := range g.PromptChunks {
		if c.ImageTokens > 0 {
			wantImages = append(wantImages, c.ImageTokens)
		} else {
			wantTexts = append(wantTexts, c.Text)
		}
	}
	if !slices.EqualFunc(texts, wantTexts, slices.Equal) || !slices.Equal(images, wantImages) {
		t.Fatalf("chunks: text %v images %v\nwant text %v images %v", texts, images, wantTexts, wantImages)
	}

	c := newContext(t, m, ContextParams{Slots: 8})
	solo := driveMedia(t, c, g.NPredict, 0, mp)[0]
	if !slices.Equal(solo.out, g.GeneratedIDs) {
		t.Fatalf("generated %v\nllama-mtmd-cli %v", solo.out, g.GeneratedIDs)
	}
	if chunked := driveMedia(t, c, g.NPredict, 7, mp)[0]; !sameRun(chunked, solo) {
		t.Errorf("prompt in chunks of 7: %v, alone %v", chunked.out, solo.out)
	}
	for i, r := range driveMedia(t, c, g.NPredict, 0, mp, mp, mp, mp, mp, mp, mp, mp) {
		if !sameRun(r, solo) {
			t.Errorf("sequence %d of 8: %v %v, alone %v %v", i, r.out, r.lps, solo.out, solo.lps)
		}
	}
}

// driveMedia runs a sequence per prompt together, greedily, each in its
// slot, feeding the prompt in chunks of chunk positions (0: whole).
func driveMedia(t testing.TB, c *Context, n, chunk int, prompts ...*mediaPrompt) []*seqRun {
	t.Helper()
	runs := make([]*seqRun, len(prompts))
	for i, mp := range prompts {
		runs[i] = &seqRun{seq: engine.SeqID(i + 1), slot: engine.Slot(i), prompt: mp.tokens, n: n, chunk: chunk}
	}
	driveWith(t, c, func(r *seqRun, ch *engine.Chunk) {
		mp := prompts[r.seq-1]
		ch.Media = mp.spans(int(ch.Pos), int(ch.Pos)+len(ch.Tokens))
	}, runs...)
	return runs
}
