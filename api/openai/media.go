package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/frontend"
	"time"

	"github.com/llmserve/llmserve/media"
)

// This file finds images and audio in chat content parts: the wire parts
// (image_url, input_audio) are parsed with the message into
// frontend.MediaRefs, which the frontend resolves once the request is
// known to go to a model (frontend.MediaResolver: base64 decoding, the
// limits, the check that the bytes are what they claim), fetching URLs
// through this package (media_fetch.go). The Messages and Responses APIs
// read their image blocks and parts into the same MediaRefs, named in
// their own terms.

// Defaults of MediaOptions.
const (
	DefaultMaxMediaPerPrompt = 8
	DefaultMaxMediaBytes     = 20 << 20
	DefaultMediaFetchTimeout = 10 * time.Second
	// maxMediaRedirects bounds the redirects one fetch follows (each to
	// an allowed host).
	maxMediaRedirects = 5
)

// MediaOptions bound the images and audio clips a chat request may carry.
// The zero value takes the defaults and fetches no URLs.
type MediaOptions struct {
	// MaxPerPrompt is the most media items one request may carry
	// (--max-media-per-prompt); 0 means DefaultMaxMediaPerPrompt,
	// negative refuses every item.
	MaxPerPrompt int
	// MaxBytes is the most bytes of one item after base64 decoding or
	// fetching (--max-media-bytes); 0 means DefaultMaxMediaBytes.
	MaxBytes int64
	// AllowedDomains are the host names http(s) media URLs may name, and
	// redirect to (--allowed-media-domains, as vLLM's flag); empty
	// refuses URLs: only data: URLs and base64 are read.
	AllowedDomains []string
	// FetchTimeout bounds one URL's fetch; 0 means
	// DefaultMediaFetchTimeout.
	FetchTimeout time.Duration
	// Transport makes the fetches; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

// mediaConfig is MediaOptions with the defaults applied: the frontend's
// resolver, whose URLs it fetches (fetch).
type mediaConfig struct {
	res      frontend.MediaResolver
	maxBytes int64
	allowed  map[string]bool
	client   *http.Client
}

func newMediaConfig(o MediaOptions) *mediaConfig {
	c := &mediaConfig{res: frontend.MediaResolver{MaxItems: o.MaxPerPrompt}, maxBytes: o.MaxBytes, allowed: map[string]bool{}}
	if c.res.MaxItems == 0 {
		c.res.MaxItems = DefaultMaxMediaPerPrompt
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxMediaBytes
	}
	c.res.MaxBytes, c.res.Fetch = c.maxBytes, c.fetch
	c.res.Detect = func(b []byte) string {
		t, _, _ := strings.Cut(http.DetectContentType(b), ";")
		return t
	}
	for _, d := range o.AllowedDomains {
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
			c.allowed[d] = true
		}
	}
	timeout := o.FetchTimeout
	if timeout <= 0 {
		timeout = DefaultMediaFetchTimeout
	}
	c.client = &http.Client{
		Transport: o.Transport,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxMediaRedirects {
				return fmt.Errorf("more than %d redirects", maxMediaRedirects)
			}
			if err := c.checkURL(req.URL); err != nil {
				return fmt.Errorf("redirected to %s: %w", req.URL.Redacted(), err)
			}
			return nil
		},
	}
	return c
}

// bodyLimit is the request body limit that fits one item of the most
// bytes in base64 with room for the rest of the request, or def if that
// is larger: the body limit must not refuse what --max-media-bytes allows.
func (c *mediaConfig) bodyLimit(def int64) int64 {
	return max(def, 4*((c.maxBytes+2)/3)+1<<20)
}

// errMediaHost says a URL names a host outside --allowed-media-domains.
var errMediaHost = errors.New("host not allowed")

// checkURL checks an http(s) URL against the allowed domains.
func (c *mediaConfig) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q: only http and https are fetched", u.Scheme)
	}
	if !c.allowed[strings.ToLower(u.Hostname())] {
		return fmt.Errorf("%w: %q is not in --allowed-media-domains", errMediaHost, u.Hostname())
	}
	return nil
}

// parseMediaPart reads a content part of type image_url or input_audio;
// param is the part's name ("content[1]"). Errors name the part's field.
func parseMediaPart(raw json.RawMessage, typ, param string) (frontend.MediaRef, error) {
	ref := frontend.MediaRef{Param: param}
	switch typ {
	case "image_url":
		var part struct {
			ImageURL json.RawMessage `json:"image_url"`
		}
		if err := jsonwire.Decode(raw, &part); err != nil {
			return ref, withPrefix(param, err)
		}
		ref.Kind = media.Image
		p := param + ".image_url"
		ref.Field = p + ".url"
		switch jsonwire.Kind(part.ImageURL) {
		case "string":
			// Some clients send the URL itself (vLLM accepts it too).
			_ = json.Unmarshal(part.ImageURL, &ref.URL)
		case "object":
			var iu struct {
				URL    *string `json:"url"`
				Detail *string `json:"detail"`
			}
			if err := jsonwire.Decode(part.ImageURL, &iu); err != nil {
				return ref, withPrefix(p, err)
			}
			if iu.URL == nil {
				return ref, invalid(p+".url", "image_url.url is required: a data: URL (data:image/png;base64,...) or an http(s) URL.")
			}
			ref.URL = *iu.URL
			if err := frontend.CheckDetail(iu.Detail, p+".detail", "image_url.detail"); err != nil {
				return ref, err
			}
		case "nothing", "null":
			return ref, invalid(p, "An image_url part needs image_url: {\"url\": \"data:image/png;base64,...\"}.")
		default:
			return ref, jsonwire.TypeError(p, "an object with a url", jsonwire.Kind(part.ImageURL))
		}
		if err := frontend.CheckImageURL(ref.URL, p+".url"); err != nil {
			return ref, err
		}
	case "input_audio":
		var part struct {
			InputAudio *InputAudio `json:"input_audio"`
		}
		if err := jsonwire.Decode(raw, &part); err != nil {
			return ref, withPrefix(param, err)
		}
		ref.Kind = media.Audio
		p := param + ".input_audio"
		ref.Field = p + ".data"
		a := part.InputAudio
		if err := a.Check(p); err != nil {
			return ref, err
		}
		ref.Data, ref.Format = *a.Data, *a.Format
	}
	return ref, nil
}

// InputAudio is an input_audio object as chat and Responses parts
// carry it (api/responses decodes its input_audio parts into it).
type InputAudio struct {
	Data   *string `json:"data"`
	Format *string `json:"format"`
}

// Check reports what is missing or wrong in a (nil: absent): base64 data
// and a wav or mp3 format; p names it.
func (a *InputAudio) Check(p string) error {
	switch {
	case a == nil:
		return invalid(p, "An input_audio part needs input_audio: {\"data\": base64, \"format\": \"wav\" or \"mp3\"}.")
	case a.Data == nil || *a.Data == "":
		return invalid(p+".data", "input_audio.data is required: the audio file in base64.")
	case a.Format == nil || (*a.Format != "wav" && *a.Format != "mp3"):
		return invalid(p+".format", "input_audio.format must be either 'wav' or 'mp3', got %q.", frontend.Truncate(jsonwire.Str(a.Format), 20))
	}
	return nil
}
