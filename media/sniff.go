package media

import "bytes"

// Sniff names the format of a media file by its magic numbers: the image
// and audio formats the projectors read ("image/png", "image/jpeg",
// "image/webp", "audio/wav", "audio/mpeg"), or "" for another.
func Sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "image/jpeg"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return "audio/wav"
	case bytes.HasPrefix(b, []byte("ID3")), len(b) >= 2 && b[0] == 0xff && b[1]&0xe0 == 0xe0:
		return "audio/mpeg"
	}
	return ""
}

// Describe names a MIME type (Sniff's, or a content sniffer's for the
// other formats) in prose, for error messages ("a PNG image", "MP3 audio",
// "of type text/plain").
func Describe(t string) string {
	switch t {
	case "image/png":
		return "a PNG image"
	case "image/jpeg":
		return "a JPEG image"
	case "image/webp":
		return "a WebP image"
	case "audio/wav":
		return "WAV audio"
	case "audio/mpeg":
		return "MP3 audio"
	case "application/octet-stream":
		return "in no recognized format"
	default:
		return "of type " + t
	}
}
