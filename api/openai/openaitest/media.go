package openaitest

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
)

// Files as far as sniffing reads them: their magic numbers.
var (
	PNG  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR-png")
	JPEG = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00-jpeg")
	WebP = []byte("RIFF\x10\x00\x00\x00WEBPVP8 -webp")
	GIF  = []byte("GIF89a\x01\x00\x01\x00-gif")
	WAV  = []byte("RIFF\x24\x00\x00\x00WAVEfmt -wav")
	MP3  = []byte("ID3\x03\x00\x00\x00\x00\x00\x00-mp3")
)

// B64 is b in standard base64.
func B64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// DataURL is b as a base64 data URL of the media type typ.
func DataURL(typ string, b []byte) string { return "data:" + typ + ";base64," + B64(b) }

// MediaRows is how many placeholder positions MediaModel gives each item.
const MediaRows = 3

// MediaModel is a Model with a projector (openai.MediaModel):
// PrepareMedia records what it got and tokenizes the text between the
// markers, each item taking MediaRows placeholder tokens.
//
// PrepareMedia sets the recorded fields under its lock; read them once
// the request that made the call has returned.
type MediaModel struct {
	*Model
	// Reads are the kinds of media the projector reads (NewMediaModel:
	// images and audio).
	Reads map[media.Kind]bool
	// Err, when set, is PrepareMedia's error.
	Err error

	mu sync.Mutex
	// PrepareCalls counts the calls of PrepareMedia.
	PrepareCalls int
	// Prompt, BOS and Items are the last call's arguments.
	Prompt string
	BOS    bool
	Items  []media.Item
	// Toks and Spans are the last call's results.
	Toks  []int32
	Spans []scheduler.Media
}

// NewMediaModel returns NewModel's model with 512 tokens of context and
// a projector that reads images and audio.
func NewMediaModel(t testing.TB) *MediaModel {
	m := NewModel(t)
	m.MaxLen = 512
	return &MediaModel{Model: m, Reads: map[media.Kind]bool{media.Image: true, media.Audio: true}}
}

// ReadsMedia reports Reads[k].
func (m *MediaModel) ReadsMedia(k media.Kind) bool { return m.Reads[k] }

// PrepareMedia records its arguments, and returns Err when set; else it
// tokenizes the pieces of prompt between the markers, each item's
// MediaRows placeholder tokens (engine.MediaToken of its hash) in between.
func (m *MediaModel) PrepareMedia(_ context.Context, prompt string, addSpecial bool, items []media.Item) ([]int32, []scheduler.Media, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.PrepareCalls++
	m.Prompt, m.BOS, m.Items = prompt, addSpecial, items
	if m.Err != nil {
		return nil, nil, m.Err
	}
	var (
		toks  []int32
		spans []scheduler.Media
	)
	for i, text := range strings.Split(prompt, media.Marker) {
		t, err := m.Tok.Encode(text, addSpecial && i == 0)
		if err != nil {
			return nil, nil, err
		}
		toks = append(toks, t...)
		if i < len(items) {
			h := items[i].Hash()
			spans = append(spans, scheduler.Media{Offset: len(toks), Rows: MediaRows, Embd: make([]float32, MediaRows)})
			for r := range MediaRows {
				toks = append(toks, engine.MediaToken(h, r))
			}
		}
	}
	m.Toks, m.Spans = toks, spans
	return toks, spans, nil
}
