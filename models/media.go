package models

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
)

// Media in prompts
//
// A model loaded with a projector (GenerativeConfig.MMProj) reads images
// (and audio, when the projector has an audio encoder) in chat prompts.
// PrepareMedia turns a rendered prompt with media.Marker once per item
// into what the scheduler runs:
//
//  1. each image is decoded here, in Go (PNG, JPEG, WebP), after its
//     header's dimensions are checked against MaxImagePixels, so a corrupt
//     or oversized file is a 400 naming its part before any pixel is
//     allocated, and no C decoder reads a client's bytes; audio (WAV, MP3)
//     goes to libmtmd's helper, which decodes and resamples it as
//     llama.cpp's server does;
//  2. libmtmd tokenizes the prompt: text chunks, and a media chunk per
//     item with the text its projector puts around it;
//  3. each media chunk's rows come from the media cache (keyed by the
//     item's hash: a repeated image is not encoded again) or from the
//     encoder, and its positions in the prompt are placeholders
//     (engine.MediaToken of the hash), so the prefix cache keys them by the
//     item's bytes too.
//
// An image may give several media chunks (tiles and the whole image); a
// chunk is keyed by the projector file's SHA-256, its item's hash and its
// place among the item's chunks. The projector's digest keeps the rows of
// two projectors apart, and so the KV computed from them: a head's
// workers may load different projector files for one model.
// The cache holds encoded rows up to MediaCacheBytes, least recently used
// first out. Its queries and hits are vLLM's vllm:mm_cache_queries and
// vllm:mm_cache_hits.

// DefaultMaxImagePixels is the largest image (width × height) PrepareMedia
// decodes when GenerativeConfig.MaxImagePixels is 0.
const DefaultMaxImagePixels = 4096 * 4096

// DefaultMediaCacheBytes is the media cache's size when
// GenerativeConfig.MediaCacheBytes is 0.
const DefaultMediaCacheBytes = 256 << 20

// projector is a loaded projector with its media cache.
type projector struct {
	p         *llamacpp.Projector
	maxPixels int
	cache     *mediaCache
	// digest is the SHA-256 of the projector file: part of every media
	// chunk's key, so that rows (and the KV computed from them) of two
	// different projectors never share placeholders, in this server's
	// prefix cache or in a worker's behind a head.
	digest [32]byte
}

// loadProjector loads cfg.MMProj for m, or returns nil when it is "".
func loadProjector(cfg GenerativeConfig, m *llamacpp.Model) (*projector, error) {
	if cfg.MMProj == "" {
		return nil, nil
	}
	switch {
	case cfg.MaxImagePixels < 0:
		return nil, &ConfigError{"MaxImagePixels", fmt.Sprintf("%d is negative", cfg.MaxImagePixels)}
	case cfg.MediaCacheBytes < 0:
		return nil, &ConfigError{"MediaCacheBytes", fmt.Sprintf("%d is negative", cfg.MediaCacheBytes)}
	}
	digest, err := fileDigest(cfg.MMProj)
	if err != nil {
		return nil, &ConfigError{"MMProj", err.Error()}
	}
	p, err := m.LoadProjector(cfg.MMProj, llamacpp.ProjectorParams{Threads: max(cfg.Threads, 1), GPU: cfg.GPULayers != 0})
	if err != nil {
		return nil, &ConfigError{"MMProj", err.Error()}
	}
	pr := &projector{p: p, maxPixels: cfg.MaxImagePixels, cache: newMediaCache(cfg.MediaCacheBytes), digest: digest}
	if pr.maxPixels == 0 {
		pr.maxPixels = DefaultMaxImagePixels
	}
	return pr, nil
}

// ReadsMedia reports whether the model's projector encodes items of kind
// (api/openai.MediaModel).
func (g *Generative) ReadsMedia(kind media.Kind) bool {
	switch {
	case g.proj == nil:
		return false
	case kind == media.Image:
		return g.proj.p.Vision()
	case kind == media.Audio:
		return g.proj.p.Audio()
	}
	return false
}

// MediaCacheStats returns the media cache's queries and hits so far.
func (g *Generative) MediaCacheStats() (queries, hits uint64) {
	if g.proj == nil {
		return 0, 0
	}
	return g.proj.cache.stats()
}

// PrepareMedia tokenizes a rendered prompt holding media.Marker once per
// item and encodes the items (api/openai.MediaModel; see "Media in
// prompts" above).
func (g *Generative) PrepareMedia(ctx context.Context, prompt string, addSpecial bool, items []media.Item) ([]int32, []scheduler.Media, error) {
	pr := g.proj
	if pr == nil {
		param := ""
		if len(items) > 0 {
			param = items[0].Param
		}
		return nil, nil, &media.Error{Param: param, Err: media.ErrNoProjector}
	}
	hashes := make([][32]byte, len(items))
	ids := make(map[string]int, len(items))
	bitmaps := make([]*llamacpp.Bitmap, 0, len(items))
	defer func() {
		for _, b := range bitmaps {
			b.Free()
		}
	}()
	for i := range items {
		it := &items[i]
		if !g.ReadsMedia(it.Kind) {
			return nil, nil, &media.Error{Param: it.Param, Err: fmt.Errorf("model %s's projector does not read %s", g.name, it.Kind)}
		}
		hashes[i] = it.Hash()
		// The id names the item's place, so that each media chunk maps
		// back to its item (an image may give several: tiles and the
		// whole image).
		id := fmt.Sprintf("%d-%x", i, hashes[i][:8])
		ids[id] = i
		b, err := pr.bitmap(it, id)
		if err != nil {
			return nil, nil, &media.Error{Param: it.Param, Err: err}
		}
		bitmaps = append(bitmaps, b)
	}
	chunks, err := pr.p.Tokenize(prompt, addSpecial, bitmaps)
	if err != nil {
		if errors.Is(err, llamacpp.ErrMediaCount) {
			return nil, nil, fmt.Errorf("prepare media: %w", err)
		}
		param := ""
		if len(items) > 0 {
			param = items[0].Param
		}
		return nil, nil, &media.Error{Param: param, Err: err}
	}
	defer chunks.Free()
	var toks []int32
	var spans []scheduler.Media
	parts := make([]int, len(items)) // media chunks seen of each item
	for i := range chunks.Len() {
		if t, ok := chunks.Text(i); ok {
			if slices.ContainsFunc(t, func(id int32) bool { return id < 0 }) {
				// libmtmd looks the projector's marker tokens up by their
				// text and writes -1 for one the vocabulary lacks.
				return nil, nil, fmt.Errorf("prepare media: model %s's vocabulary lacks a token its projector puts around media (a projector made for another model?)", g.name)
			}
			toks = append(toks, t...)
			continue
		}
		k, ok := ids[chunks.ID(i)]
		if !ok {
			return nil, nil, fmt.Errorf("prepare media: libmtmd returned a media chunk of unknown id %q", chunks.ID(i))
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		// A chunk's key is the projector's digest, its item's hash and its
		// place among the item's chunks: the same bytes always give the
		// same chunks.
		key := sha256.Sum256(slices.Concat(pr.digest[:], hashes[k][:], []byte{byte(parts[k]), byte(parts[k] >> 8)}))
		parts[k]++
		rows := chunks.MediaRows(i)
		embd, ok := pr.cache.get(key)
		if !ok || len(embd) != rows*g.info.NEmbd {
			if embd, err = chunks.Encode(i); err != nil {
				return nil, nil, &media.Error{Param: items[k].Param, Err: err}
			}
			pr.cache.put(key, embd)
		}
		spans = append(spans, scheduler.Media{Offset: len(toks), Rows: rows, Embd: embd})
		for j := range rows {
			toks = append(toks, engine.MediaToken(key, j))
		}
	}
	for k, n := range parts {
		if n == 0 {
			return nil, nil, fmt.Errorf("prepare media: libmtmd gave item %d no media chunk", k)
		}
	}
	return toks, spans, nil
}

// bitmap decodes an item for libmtmd.
func (pr *projector) bitmap(it *media.Item, id string) (*llamacpp.Bitmap, error) {
	if it.Kind == media.Audio {
		b, err := pr.p.NewMediaBitmap(it.Data, id)
		if err != nil {
			return nil, fmt.Errorf("cannot decode the audio (WAV or MP3): %w", err)
		}
		if !b.IsAudio() {
			b.Free()
			return nil, errors.New("the data is not audio")
		}
		return b, nil
	}
	nx, ny, rgb, err := media.DecodeImage(it.Data, pr.maxPixels)
	if err != nil {
		return nil, err
	}
	return llamacpp.NewImageBitmap(nx, ny, rgb, id)
}

// mediaCache keeps encoded media rows by item hash, least recently used
// out first, within a byte budget.
type mediaCache struct {
	mu            sync.Mutex
	budget, used  int
	order         *list.List // front: most recent; values are *mediaEntry
	entries       map[[32]byte]*list.Element
	queries, hits uint64
}

type mediaEntry struct {
	hash [32]byte
	embd []float32
}

func newMediaCache(budget int64) *mediaCache {
	if budget == 0 {
		budget = DefaultMediaCacheBytes
	}
	return &mediaCache{budget: int(budget), order: list.New(), entries: make(map[[32]byte]*list.Element)}
}

func (c *mediaCache) get(h [32]byte) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries++
	e, ok := c.entries[h]
	if !ok {
		return nil, false
	}
	c.hits++
	c.order.MoveToFront(e)
	return e.Value.(*mediaEntry).embd, true
}

func (c *mediaCache) put(h [32]byte, embd []float32) {
	size := 4 * len(embd)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[h]; ok || size > c.budget {
		return
	}
	for c.used+size > c.budget {
		last := c.order.Back()
		e := last.Value.(*mediaEntry)
		c.order.Remove(last)
		delete(c.entries, e.hash)
		c.used -= 4 * len(e.embd)
	}
	c.entries[h] = c.order.PushFront(&mediaEntry{hash: h, embd: embd})
	c.used += size
}

func (c *mediaCache) stats() (queries, hits uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries, c.hits
}

// fileDigest is the SHA-256 of a file's bytes.
func fileDigest(path string) (sum [32]byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, fmt.Errorf("read %s: %w", path, err)
	}
	h.Sum(sum[:0])
	return sum, nil
}
