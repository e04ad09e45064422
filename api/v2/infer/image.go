package infer

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/oip"
	"github.com/llmserve/llmserve/scheduler"
)

// InputImage is the LLM input (and generate parameter) that carries
// encoded images (PNG, JPEG or WebP) beside text_input, one per element,
// for a model with a vision projector, as chat's image_url parts do.
const InputImage = "image"

// maxImages is the most images one prompt takes, as the OpenAI routes'
// default --max-media-per-prompt.
const maxImages = 8

// mediaInputs are what a model that reads images takes beyond llmInputs;
// its metadata lists them.
var mediaInputs = []TensorMetadata{
	{Name: InputImage, Datatype: oip.BYTES, Shape: []int64{-1}, Optional: true},
}

// MediaModel is a Model with a multimodal projector (*models.Generative
// loaded with --mmproj, the head's router model).
type MediaModel interface {
	// ReadsMedia reports whether the projector encodes items of kind.
	ReadsMedia(kind media.Kind) bool
	// PrepareMedia tokenizes prompt, which holds media.Marker once per item
	// in order, and encodes the items: the prompt's tokens with each
	// item's positions as placeholders, and the spans for
	// scheduler.Request.Media. An item the model cannot read is a
	// *media.Error naming its Param.
	PrepareMedia(ctx context.Context, prompt string, addSpecial bool, items []media.Item) ([]int32, []scheduler.Media, error)
}

// readsImages reports whether m takes images.
func readsImages(m Model) bool {
	mm, ok := m.(MediaModel)
	return ok && mm.ReadsMedia(media.Image)
}

// imagesParam reads the image parameter: a string or a list of strings
// (generate's JSON: base64, or a data: URL of an image), or the image
// input's elements ([][]byte: the files themselves, or base64 text when a
// JSON request sent them without the base64 content type).
func imagesParam(p Parameters) ([][]byte, error) {
	x, ok := p[InputImage]
	if !ok {
		return nil, nil
	}
	var raw [][]byte
	switch v := x.(type) {
	case [][]byte:
		raw = v
	case string:
		raw = [][]byte{[]byte(v)}
	case []string:
		for _, s := range v {
			raw = append(raw, []byte(s))
		}
	default:
		return nil, invalidf("parameter %s must be an image (base64, or a data: URL) or a list of them, got %s", InputImage, describeValue(x))
	}
	if len(raw) > maxImages {
		return nil, invalidf("%s has %d images; at most %d are accepted per prompt", InputImage, len(raw), maxImages)
	}
	out := make([][]byte, len(raw))
	for i, b := range raw {
		img, err := imageBytes(b)
		if err != nil {
			return nil, invalidf("%s element %d: %v", InputImage, i, err)
		}
		out[i] = img
	}
	return out, nil
}

// imageBytes is an image file from b: b itself when it starts like a PNG,
// JPEG or WebP file, else b read as base64 or as a base64 data: URL.
func imageBytes(b []byte) ([]byte, error) {
	if isImage(b) {
		return b, nil
	}
	s := strings.TrimSpace(string(b))
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(meta, ";base64") || !strings.HasPrefix(meta, "image/") {
			return nil, errors.New("a data: URL must be data:image/<type>;base64,<data>")
		}
		s = data
	}
	img, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not a PNG, JPEG or WebP file, nor base64 of one, nor a data: URL")
	}
	if !isImage(img) {
		return nil, errors.New("the decoded bytes are not a PNG, JPEG or WebP file")
	}
	return img, nil
}

// isImage reports whether b starts like a PNG, JPEG or WebP file.
func isImage(b []byte) bool {
	return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || bytes.HasPrefix(b, []byte("\xff\xd8\xff")) ||
		(len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")))
}

// prepareImages tokenizes prompt with its images: each goes where the
// prompt holds media.Marker, in order; a prompt without the marker has
// them all in front of its text (as chat's image-then-text). It returns
// the prompt text with the markers, its tokens and the media spans.
func prepareImages(ctx context.Context, m Model, prompt string, images [][]byte) (string, []int32, []scheduler.Media, error) {
	mm, ok := m.(MediaModel)
	if !ok || !mm.ReadsMedia(media.Image) {
		return "", nil, nil, invalidf("input %s: the model %q reads text only: %v", InputImage, m.Name(), media.ErrNoProjector)
	}
	switch n := strings.Count(prompt, media.Marker); n {
	case 0:
		prompt = strings.Repeat(media.Marker, len(images)) + prompt
	case len(images):
	default:
		return "", nil, nil, invalidf("%s holds %q %d times but %s has %d images: put the marker once where each image goes, or leave it out to put them all in front", InputText, media.Marker, n, InputImage, len(images))
	}
	items := make([]media.Item, len(images))
	for i, img := range images {
		items[i] = media.Item{Kind: media.Image, Data: img, Param: fmt.Sprintf("%s[%d]", InputImage, i)}
	}
	toks, spans, err := mm.PrepareMedia(ctx, prompt, true, items)
	if err != nil {
		var me *media.Error
		if errors.As(err, &me) {
			return "", nil, nil, invalidf("%v", me)
		}
		return "", nil, nil, AsError(err)
	}
	return prompt, toks, spans, nil
}
