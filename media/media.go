package media

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/draw"
	_ "image/jpeg" // decoders for image.Decode
	_ "image/png"
	"math"

	_ "golang.org/x/image/webp"
)

// Marker is the text a rendered prompt carries where a media item goes,
// once per item, in order (libmtmd's default marker, as llama.cpp's server
// writes it).
const Marker = "<__media__>"

// Kind is what a media item is.
type Kind string

const (
	Image Kind = "image"
	Audio Kind = "audio"
)

// Item is one image or audio clip of a request, in prompt order.
type Item struct {
	Kind Kind
	// Data is the file as the client sent it (base64 decoded): PNG, JPEG
	// or WebP for an image; WAV or MP3 for audio.
	Data []byte
	// Param is the request field it came from, such as
	// "messages[1].content[0]": errors about the item name it.
	Param string
}

// Hash is the item's key in the media and prefix caches: the SHA-256 of
// its kind and bytes.
func (it *Item) Hash() [32]byte {
	h := sha256.New()
	h.Write([]byte(it.Kind))
	h.Write([]byte{0})
	h.Write(it.Data)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Error is a media item the model cannot read (corrupt, too large, of a
// kind its projector does not encode): a client error, which the API
// answers with a 400 naming Param.
type Error struct {
	Param string
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Param, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// ErrNoProjector says the model reads text only: it was loaded without a
// multimodal projector (--mmproj).
var ErrNoProjector = errors.New("the model has no multimodal projector (start it with --mmproj)")

// DecodeImage decodes a PNG, JPEG or WebP image to 8-bit RGB, dropping alpha
// as stb_image does for llama.cpp (the colour values of a non-premultiplied
// pixel are kept, not blended). An image of more than maxPixels pixels is
// refused from its header.
func DecodeImage(data []byte, maxPixels int) (width, height int, rgb []byte, err error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("cannot decode the image (PNG, JPEG or WebP): %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return 0, 0, nil, fmt.Errorf("the %s image is %d×%d pixels, more than the %d this server decodes", format, cfg.Width, cfg.Height, maxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("cannot decode the %s image: %w", format, err)
	}
	b := img.Bounds()
	nx, ny := b.Dx(), b.Dy()
	nrgba, ok := img.(*image.NRGBA)
	if !ok {
		nrgba = image.NewNRGBA(image.Rect(0, 0, nx, ny))
		draw.Draw(nrgba, nrgba.Bounds(), img, b.Min, draw.Src)
	}
	rgb = make([]byte, 0, nx*ny*3)
	for y := range ny {
		for x := range nx {
			c := nrgba.NRGBAAt(nrgba.Rect.Min.X+x, nrgba.Rect.Min.Y+y)
			rgb = append(rgb, c.R, c.G, c.B)
		}
	}
	return nx, ny, rgb, nil
}

// EncodeRows is the wire form of encoded media rows (the worker service's
// MediaSpan.embd): each float32 in little-endian order.
func EncodeRows(rows []float32) []byte {
	b := make([]byte, 4*len(rows))
	for i, v := range rows {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// DecodeRows is EncodeRows' inverse; a trailing partial value is ignored
// (callers check that len(b) is a multiple of 4).
func DecodeRows(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}
