package frontend

import (
	"net/url"
	"strings"

	"github.com/llmserve/llmserve/media"
)

// The shape checks of media parts that every protocol's decoder shares:
// an image's URL and detail, and the text that holds media.Marker itself.
// Whether a URL's host is allowed, and the bytes themselves, are checked
// when the items are resolved.

// CheckImageURL checks the shape of an image URL: a base64 data: URL or
// an http(s) URL; param names it.
func CheckImageURL(s, param string) error {
	if s == "" {
		return Invalid(param, "The image URL is empty: give a data: URL (data:image/png;base64,...) or an http(s) URL.")
	}
	scheme, rest, colon := strings.Cut(s, ":")
	switch strings.ToLower(scheme) {
	case "data":
		// "data" alone has no colon: it is no data URL either.
		meta, _, ok := strings.Cut(rest, ",")
		if !colon || !ok || !strings.HasSuffix(strings.ToLower(meta), ";base64") {
			return Invalid(param, "A data URL must be base64: data:image/png;base64,....")
		}
		return nil
	case "http", "https":
		if _, err := url.Parse(s); err != nil {
			return Invalid(param, "The image URL is not valid: %v.", err)
		}
		return nil
	default:
		return Invalid(param, "The image URL's scheme must be data, http or https, got %q.", Truncate(scheme, 20))
	}
}

// CheckDetail checks an image's detail (auto, low or high, checked and
// ignored as llama.cpp does); param is its field, name how the message
// calls it.
func CheckDetail(d *string, param, name string) error {
	if d != nil && *d != "auto" && *d != "low" && *d != "high" {
		return Invalid(param, "%s must be auto, low or high, got %q.", name, Truncate(*d, 20))
	}
	return nil
}

// MarkerText finds the first text of a request that holds media.Marker
// itself: with media in the request it would take an item's place. The
// zero value is ready.
type MarkerText struct{ param string }

// See notes text, the value of param.
func (m *MarkerText) See(param, text string) {
	if m.param == "" && strings.Contains(text, media.Marker) {
		m.param = param
	}
}

// Check returns the error for the text seen, when the request has media.
func (m *MarkerText) Check(hasMedia bool) error {
	if !hasMedia || m.param == "" {
		return nil
	}
	return MarkerError(m.param)
}
