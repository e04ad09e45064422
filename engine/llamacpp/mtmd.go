//go:build cgo

package llamacpp

/*
#include <stdlib.h>
#include "llama.h"
#include "mtmd/mtmd.h"
#include "mtmd/mtmd-helper.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Multimodal projectors (libmtmd)
//
// A Projector is a model's multimodal projector (the GGUF an --mmproj flag
// names: a CLIP vision encoder, or an audio encoder, and the layers that
// map its output into the text model's embedding space), loaded through
// llama.cpp's libmtmd, which the ollama module compiles and links. It does
// two things, both outside the engine's step:
//
//   - Tokenize splits a prompt that holds MediaMarker once per item into
//     text tokens and media chunks, with the text a projector puts around
//     an image (libmtmd's mtmd_tokenize: what llama.cpp's server does);
//   - Encode runs the encoder on one media chunk and returns its rows of
//     the text model's embedding width.
//
// The engine then decodes those rows as positions of the sequence
// (engine.MediaSpan, decodeMedia). A projector's encoder has its own ggml
// graph and threads; one encode runs at a time (the mutex), beside the
// engine's steps.
//
// Projectors whose text model needs M-RoPE positions (Qwen2-VL and its
// kind: several positions per token) or attends to an item's positions
// both ways (Gemma 3) are refused at load: the engine gives every row one
// position and decodes media with the causal mask, in pieces.

// Projector is a loaded multimodal projector. It is safe for concurrent
// use; Close must not race with other calls.
type Projector struct {
	mu     sync.Mutex
	c      *C.mtmd_context
	model  *Model
	nEmbd  int
	vision bool
	audio  bool
}

// LoadProjector loads the projector at path for model.
func (m *Model) LoadProjector(path string, p ProjectorParams) (*Projector, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.c == nil {
		return nil, ErrModelClosed
	}
	cp := C.mtmd_context_params_default()
	cp.use_gpu = C.bool(p.GPU)
	cp.print_timings = false
	cp.n_threads = C.int(max(p.Threads, 1))
	cp.warmup = false
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	c := C.mtmd_init_from_file(cpath, m.c, cp)
	if c == nil {
		return nil, fmt.Errorf("load projector %s: libmtmd could not load it (not a projector GGUF, or its output width does not match the model's; see the log)", path)
	}
	pr := &Projector{
		c: c, model: m, nEmbd: m.info.NEmbd,
		vision: bool(C.mtmd_support_vision(c)), audio: bool(C.mtmd_support_audio(c)),
	}
	if bool(C.mtmd_decode_use_non_causal(c)) {
		pr.Close()
		return nil, fmt.Errorf("load projector %s: its model attends to an image's positions both ways (Gemma 3's kind), which this server does not decode yet", path)
	}
	if bool(C.mtmd_decode_use_mrope(c)) {
		pr.Close()
		return nil, fmt.Errorf("load projector %s: its model needs M-RoPE positions (several per token), which this server does not compute", path)
	}
	return pr, nil
}

// Vision reports whether the projector encodes images.
func (p *Projector) Vision() bool { return p.vision }

// Audio reports whether the projector encodes audio.
func (p *Projector) Audio() bool { return p.audio }

// Close frees the projector. It is idempotent.
func (p *Projector) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil {
		C.mtmd_free(p.c)
		p.c = nil
	}
}

// Bitmap is one media item ready for Tokenize: an image's RGB pixels or
// an audio clip, made with NewImageBitmap or NewMediaBitmap.
type Bitmap struct {
	c *C.mtmd_bitmap
}

// NewImageBitmap makes a bitmap of an nx × ny image from its RGB pixels
// (3 bytes a pixel, row by row). id keys libmtmd's own caches.
func NewImageBitmap(nx, ny int, rgb []byte, id string) (*Bitmap, error) {
	if nx <= 0 || ny <= 0 || len(rgb) != nx*ny*3 {
		return nil, fmt.Errorf("%w: %d bytes for a %d×%d RGB image", ErrMediaData, len(rgb), nx, ny)
	}
	b := C.mtmd_bitmap_init(C.uint32_t(nx), C.uint32_t(ny), (*C.uchar)(unsafe.Pointer(&rgb[0])))
	if b == nil {
		return nil, fmt.Errorf("%w: libmtmd refused the image", ErrMediaData)
	}
	return newBitmap(b, id), nil
}

// NewMediaBitmap decodes a file's bytes with libmtmd's helper, as
// llama.cpp's server does: audio (WAV, MP3, FLAC, resampled to the
// encoder's rate) when the data is audio, else an image (stb_image).
func (p *Projector) NewMediaBitmap(data []byte, id string) (*Bitmap, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: no bytes", ErrMediaData)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return nil, ErrModelClosed
	}
	b := C.mtmd_helper_bitmap_init_from_buf(p.c, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)))
	if b == nil {
		return nil, ErrMediaData
	}
	return newBitmap(b, id), nil
}

func newBitmap(b *C.mtmd_bitmap, id string) *Bitmap {
	if id != "" {
		cid := C.CString(id)
		C.mtmd_bitmap_set_id(b, cid)
		C.free(unsafe.Pointer(cid))
	}
	return &Bitmap{c: b}
}

// IsAudio reports whether the bitmap holds audio.
func (b *Bitmap) IsAudio() bool { return b.c != nil && bool(C.mtmd_bitmap_is_audio(b.c)) }

// Free frees the bitmap. It is idempotent.
func (b *Bitmap) Free() {
	if b.c != nil {
		C.mtmd_bitmap_free(b.c)
		b.c = nil
	}
}

// Chunks is a tokenized multimodal prompt: text chunks and media chunks,
// in order. Free it when done.
type Chunks struct {
	c *C.mtmd_input_chunks
	p *Projector
}

// Tokenize splits text, which holds MediaMarker once per bitmap in order,
// into chunks. addSpecial adds the vocabulary's BOS to the first text
// chunk; special-token text is parsed.
func (p *Projector) Tokenize(text string, addSpecial bool, bitmaps []*Bitmap) (*Chunks, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return nil, ErrModelClosed
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	in := C.mtmd_input_text{text: ctext, add_special: C.bool(addSpecial), parse_special: true}
	var bms **C.mtmd_bitmap
	if len(bitmaps) > 0 {
		arr := (**C.mtmd_bitmap)(C.malloc(C.size_t(len(bitmaps)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
		defer C.free(unsafe.Pointer(arr))
		s := unsafe.Slice(arr, len(bitmaps))
		for i, b := range bitmaps {
			s[i] = b.c
		}
		bms = arr
	}
	out := C.mtmd_input_chunks_init()
	rc := C.mtmd_tokenize(p.c, out, &in, bms, C.size_t(len(bitmaps)))
	switch rc {
	case 0:
		return &Chunks{c: out, p: p}, nil
	case 1:
		C.mtmd_input_chunks_free(out)
		return nil, ErrMediaCount
	default:
		C.mtmd_input_chunks_free(out)
		return nil, fmt.Errorf("%w: libmtmd could not preprocess it (code %d)", ErrMediaData, int(rc))
	}
}

// Len is the number of chunks.
func (cs *Chunks) Len() int { return int(C.mtmd_input_chunks_size(cs.c)) }

// Free frees the chunks. It is idempotent.
func (cs *Chunks) Free() {
	if cs.c != nil {
		C.mtmd_input_chunks_free(cs.c)
		cs.c = nil
	}
}

// Text returns chunk i's tokens when it is a text chunk.
func (cs *Chunks) Text(i int) ([]int32, bool) {
	ch := C.mtmd_input_chunks_get(cs.c, C.size_t(i))
	if C.mtmd_input_chunk_get_type(ch) != C.MTMD_INPUT_CHUNK_TYPE_TEXT {
		return nil, false
	}
	var n C.size_t
	t := C.mtmd_input_chunk_get_tokens_text(ch, &n)
	out := make([]int32, int(n))
	if n > 0 {
		copy(out, unsafe.Slice((*int32)(unsafe.Pointer(t)), int(n)))
	}
	return out, true
}

// ID is the id of the bitmap media chunk i was made from (an image may
// give several chunks: tiles and the whole image).
func (cs *Chunks) ID(i int) string {
	id := C.mtmd_input_chunk_get_id(C.mtmd_input_chunks_get(cs.c, C.size_t(i)))
	if id == nil {
		return ""
	}
	return C.GoString(id)
}

// MediaRows is the number of positions media chunk i takes (its rows of
// embeddings).
func (cs *Chunks) MediaRows(i int) int {
	return int(C.mtmd_input_chunk_get_n_tokens(C.mtmd_input_chunks_get(cs.c, C.size_t(i))))
}

// Encode runs the encoder on media chunk i and returns its rows of the
// text model's embedding width, row-major.
func (cs *Chunks) Encode(i int) ([]float32, error) {
	p := cs.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return nil, ErrModelClosed
	}
	ch := C.mtmd_input_chunks_get(cs.c, C.size_t(i))
	if C.mtmd_input_chunk_get_type(ch) == C.MTMD_INPUT_CHUNK_TYPE_TEXT {
		return nil, fmt.Errorf("encode: chunk %d is text", i)
	}
	rows := int(C.mtmd_input_chunk_get_n_tokens(ch))
	if rc := C.mtmd_encode_chunk(p.c, ch); rc != 0 {
		return nil, fmt.Errorf("encode media: libmtmd failed with code %d", int(rc))
	}
	embd := C.mtmd_get_output_embd(p.c)
	if embd == nil {
		return nil, errors.New("encode media: libmtmd returned no embeddings")
	}
	out := make([]float32, rows*p.nEmbd)
	copy(out, unsafe.Slice((*float32)(unsafe.Pointer(embd)), len(out)))
	return out, nil
}
