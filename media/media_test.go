package media

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"strings"
	"testing"
)

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeImage checks the pixels of each kind of PNG (alpha dropped,
// colour kept as stb_image keeps it), a JPEG's size, and the refusals.
func TestDecodeImage(t *testing.T) {
	nrgba := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	nrgba.SetNRGBA(1, 0, color.NRGBA{R: 10, G: 20, B: 30, A: 0})
	nrgba.SetNRGBA(2, 1, color.NRGBA{R: 200, G: 100, B: 50, A: 128})
	gray := image.NewGray(image.Rect(0, 0, 2, 1))
	gray.SetGray(1, 0, color.Gray{Y: 77})
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewRGBA(image.Rect(0, 0, 16, 8)), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		max       int
		w, h      int
		pixel     int // index of a pixel to check
		rgb       [3]byte
		errSubstr string
	}{
		{name: "nrgba", data: encodePNG(t, nrgba), max: 100, w: 3, h: 2, pixel: 1, rgb: [3]byte{10, 20, 30}},
		{name: "nrgba half alpha", data: encodePNG(t, nrgba), max: 100, w: 3, h: 2, pixel: 5, rgb: [3]byte{200, 100, 50}},
		{name: "gray", data: encodePNG(t, gray), max: 100, w: 2, h: 1, pixel: 1, rgb: [3]byte{77, 77, 77}},
		{name: "jpeg", data: jpg.Bytes(), max: 1000, w: 16, h: 8},
		{name: "too many pixels", data: encodePNG(t, nrgba), max: 5, errSubstr: "3×2 pixels"},
		{name: "not an image", data: []byte("GIF89a but not really"), max: 100, errSubstr: "cannot decode the image"},
		{name: "truncated", data: encodePNG(t, nrgba)[:40], max: 100, errSubstr: "cannot decode"},
	} {
		w, h, rgb, err := DecodeImage(tc.data, tc.max)
		if tc.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSubstr) {
				t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.errSubstr)
			}
			continue
		}
		if err != nil || w != tc.w || h != tc.h || len(rgb) != w*h*3 {
			t.Errorf("%s: %d×%d, %d bytes, %v", tc.name, w, h, len(rgb), err)
			continue
		}
		if tc.pixel > 0 {
			if got := [3]byte(rgb[3*tc.pixel : 3*tc.pixel+3]); got != tc.rgb {
				t.Errorf("%s: pixel %d is %v, want %v", tc.name, tc.pixel, got, tc.rgb)
			}
		}
	}
}

// FuzzDecodeImage feeds client bytes to the image decoder: it must not
// panic, and what it returns must be consistent.
func FuzzDecodeImage(f *testing.F) {
	f.Add(encodePNG(f, image.NewNRGBA(image.Rect(0, 0, 4, 4))))
	f.Add(encodePNG(f, image.NewPaletted(image.Rect(0, 0, 3, 5), color.Palette{color.Black, color.White})))
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewRGBA(image.Rect(0, 0, 9, 7)), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(jpg.Bytes())
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, rgb, err := DecodeImage(data, 256*256)
		if err == nil && (w <= 0 || h <= 0 || w*h > 256*256 || len(rgb) != w*h*3) {
			t.Fatalf("%d×%d with %d bytes", w, h, len(rgb))
		}
	})
}

// TestRows checks that encoded rows survive the wire form bit for bit.
func TestRows(t *testing.T) {
	in := []float32{0, -1.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32, float32(math.NaN())}
	b := EncodeRows(in)
	if len(b) != 4*len(in) {
		t.Fatalf("%d bytes for %d values", len(b), len(in))
	}
	for i, v := range DecodeRows(b) {
		if math.Float32bits(v) != math.Float32bits(in[i]) {
			t.Errorf("value %d: %v, want %v", i, v, in[i])
		}
	}
}
