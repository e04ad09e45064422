package infer

import (
	"encoding/base64"
	"strings"
	"testing"
)

var tinyPNG = []byte("\x89PNG\r\n\x1a\n rest of the file")

func TestImagesParam(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString(tinyPNG)
	for _, tc := range []struct {
		name string
		v    any
		n    int
		err  string
	}{
		{"base64", b64, 1, ""},
		{"data URL", "data:image/png;base64," + b64, 1, ""},
		{"list", []string{b64, b64}, 2, ""},
		{"tensor bytes", [][]byte{tinyPNG, []byte(b64)}, 2, ""},
		{"not base64", "%%%", 0, "image element 0"},
		{"base64 of text", base64.StdEncoding.EncodeToString([]byte("hello")), 0, "not a PNG"},
		{"data URL not an image", "data:text/plain;base64," + b64, 0, "data:image/"},
		{"a number", int64(3), 0, "must be an image"},
		{"too many", []string{b64, b64, b64, b64, b64, b64, b64, b64, b64}, 0, "at most 8"},
	} {
		imgs, err := imagesParam(Parameters{InputImage: tc.v})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || len(imgs) != tc.n {
			t.Errorf("%s: %d images, %v", tc.name, len(imgs), err)
		}
		for _, img := range imgs {
			if string(img) != string(tinyPNG) {
				t.Errorf("%s: image %q", tc.name, img)
			}
		}
	}
}

// FuzzImageBytes: any client bytes give an image file or an error, never
// a panic.
func FuzzImageBytes(f *testing.F) {
	f.Add(tinyPNG)
	f.Add([]byte(base64.StdEncoding.EncodeToString(tinyPNG)))
	f.Add([]byte("data:image/png;base64,"))
	f.Add([]byte("RIFF0000WEBP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := imageBytes(b)
		if err == nil && !isImage(img) {
			t.Fatalf("%q gave %q, which is no image", b, img)
		}
	})
}
