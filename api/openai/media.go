package openai

import (
	"bytes"
	"context"
	"encoding/base64"
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

// This file finds images and audio in chat content parts and turns them
// into media.Items: the wire parts (image_url, input_audio) are parsed
// with the message (mediaRef, pure), and resolved once the request is
// known to go to a model (mediaConfig.resolve: base64 decoding, URL
// fetching, the limits, the check that the bytes are what they claim).
// The Messages and Responses APIs read their image blocks and parts into
// the same mediaRefs, named in their own terms.

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

// mediaConfig is MediaOptions with the defaults applied.
type mediaConfig struct {
	maxItems int
	maxBytes int64
	allowed  map[string]bool
	client   *http.Client
}

func newMediaConfig(o MediaOptions) *mediaConfig {
	c := &mediaConfig{maxItems: o.MaxPerPrompt, maxBytes: o.MaxBytes, allowed: map[string]bool{}}
	if c.maxItems == 0 {
		c.maxItems = DefaultMaxMediaPerPrompt
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxMediaBytes
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

// mediaRef is a media part of a message as the client sent it, checked
// for shape but not yet decoded or fetched. Param is "content[1]" while a
// chat message decodes, "messages[0].content[1]" after, or the Messages or
// Responses field it came from; Field names the field that holds the data
// ("content[1].image_url.url").
type mediaRef = frontend.MediaRef

// parseMediaPart reads a content part of type image_url or input_audio;
// param is the part's name ("content[1]"). Errors name the part's field.
func parseMediaPart(raw json.RawMessage, typ, param string) (mediaRef, error) {
	ref := mediaRef{Param: param}
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

// resolve turns the refs into items: base64 decoded, URLs fetched, each
// within the byte limit and checked to be the format it claims.
func (c *mediaConfig) resolve(ctx context.Context, refs []mediaRef) ([]media.Item, error) {
	items := make([]media.Item, len(refs))
	for i, ref := range refs {
		data, err := c.read(ctx, ref)
		if err != nil {
			return nil, err
		}
		items[i] = media.Item{Kind: ref.Kind, Data: data, Param: ref.Param}
	}
	return items, nil
}

// read returns one ref's bytes.
func (c *mediaConfig) read(ctx context.Context, ref mediaRef) ([]byte, error) {
	if ref.Kind == media.Audio {
		data, err := c.decodeBase64(ref.Data, ref.Field)
		if err != nil {
			return nil, err
		}
		want := map[string]string{"wav": "audio/wav", "mp3": "audio/mpeg"}[ref.Format]
		if got := sniff(data); got != want {
			return nil, invalid(ref.Field, "%s: the format is %s but the data is %s.", ref.Field, ref.Format, describe(got))
		}
		return data, nil
	}
	p := ref.Field
	if !strings.EqualFold(ref.URL[:min(len(ref.URL), 5)], "data:") {
		data, err := c.fetch(ctx, ref.URL, p)
		if err != nil {
			return nil, err
		}
		return data, checkImage(data, "", p)
	}
	meta, payload, _ := strings.Cut(ref.URL[len("data:"):], ",")
	declared, _, _ := strings.Cut(strings.ToLower(meta), ";")
	if !strings.HasPrefix(declared, "image/") {
		return nil, invalid(p, "%s: the data URL's type is %q, not an image (image/png, image/jpeg or image/webp).", p, frontend.Truncate(declared, 40))
	}
	data, err := c.decodeBase64(payload, p)
	if err != nil {
		return nil, err
	}
	return data, checkImage(data, declared, p)
}

// decodeBase64 decodes standard base64, padded or not, within the limit.
func (c *mediaConfig) decodeBase64(s, param string) ([]byte, error) {
	if n := int64(base64.RawStdEncoding.DecodedLen(len(strings.TrimRight(s, "=")))); n > c.maxBytes {
		return nil, c.tooLarge(param, n)
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if raw, rerr := base64.RawStdEncoding.DecodeString(s); rerr == nil {
			return raw, nil
		}
		return nil, invalid(param, "%s is not valid base64: %v.", param, err)
	}
	return data, nil
}

func (c *mediaConfig) tooLarge(param string, n int64) error {
	return invalid(param, "%s: the item has %d bytes, more than the limit of %d bytes per image or audio clip (--max-media-bytes).", param, n, c.maxBytes)
}

// Formats sniff returns that an image may have.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/webp": true}

// checkImage checks that data is a PNG, JPEG or WebP image, and the type
// declared (by a data URL; "" for none) when there is one.
func checkImage(data []byte, declared, param string) error {
	got := sniff(data)
	if declared == "image/jpg" {
		declared = "image/jpeg"
	}
	switch {
	case !imageTypes[got]:
		return invalid(param, "%s: the data is %s; images must be PNG, JPEG or WebP.", param, describe(got))
	case declared != "" && !imageTypes[declared]:
		return invalid(param, "%s: images of type %s are not supported; send PNG, JPEG or WebP.", param, frontend.Truncate(declared, 40))
	case declared != "" && declared != got:
		return invalid(param, "%s: the data URL declares %s but the data is %s.", param, declared, describe(got))
	}
	return nil
}

// sniff names the format of a media file by its magic numbers: the image
// and audio formats the projectors read, else http.DetectContentType's
// guess.
func sniff(b []byte) string {
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
	t, _, _ := strings.Cut(http.DetectContentType(b), ";")
	return t
}

// describe names a sniffed type in prose.
func describe(t string) string {
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
