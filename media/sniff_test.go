package media

import "testing"

func TestSniff(t *testing.T) {
	for _, tt := range []struct {
		data, want, prose string
	}{
		{"\x89PNG\r\n\x1a\n\x00", "image/png", "a PNG image"},
		{"\xff\xd8\xff\xe0", "image/jpeg", "a JPEG image"},
		{"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp", "a WebP image"},
		{"RIFF\x24\x00\x00\x00WAVEfmt ", "audio/wav", "WAV audio"},
		{"ID3\x03\x00", "audio/mpeg", "MP3 audio"},
		{"\xff\xfb\x90", "audio/mpeg", "MP3 audio"},
		{"GIF89a", "", "of type "},
		{"hello", "", "of type "},
	} {
		if got := Sniff([]byte(tt.data)); got != tt.want || Describe(got) != tt.prose {
			t.Errorf("Sniff(%q) = %q (%q), want %q (%q)", tt.data, got, Describe(got), tt.want, tt.prose)
		}
	}
	if d := Describe("application/octet-stream"); d != "in no recognized format" {
		t.Errorf("octet-stream: %q", d)
	}
}
