package frontend

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
)

// MediaResolver turns a request's MediaRefs into media.Items: base64
// decoded, URLs fetched, each within MaxBytes and checked to be the format
// it claims. Fetching is the protocol's (net/http is not the frontend's):
// Fetch reads an http(s) URL, checked for shape by CheckImageURL.
type MediaResolver struct {
	// MaxItems is the most items one prompt may carry; negative refuses
	// every item.
	MaxItems int
	// MaxBytes is the most bytes of one item after base64 decoding or
	// fetching.
	MaxBytes int64
	// Fetch reads an image URL's bytes within MaxBytes; every failure but
	// the client's going away is a BadRequest naming param.
	Fetch func(ctx context.Context, url, param string) ([]byte, error)
	// Detect names the MIME type of data media.Sniff does not know, for
	// the error that refuses it (api/openai: net/http's content
	// sniffing); nil names none.
	Detect func(data []byte) string
}

// PrepareMedia renders a chat prompt that carries images or audio (refs,
// in prompt order) and has the model tokenize it and encode them
// (MediaModel.PrepareMedia): the tokens it returns, media positions
// included, are the prompt that max_model_len and usage count; text is
// the rendered prompt.
//
// What cannot work is refused first, before any URL is fetched: a model
// without a projector for the kind, more items than r.MaxItems, prompt
// logprobs, a user text that holds media.Marker itself, and a
// truncate_prompt_tokens that would cut into the media.
func (p *Prompt) PrepareMedia(ctx context.Context, r *MediaResolver, m Model, params *Params, msgs []Message, refs []MediaRef, maxBytes int) (toks []int32, spans []scheduler.Media, text string, err error) {
	if r.MaxItems < 0 {
		return nil, nil, "", Invalid(refs[0].Param, "%s: this server takes no images or audio (--max-media-per-prompt 0).", refs[0].Param)
	}
	if len(refs) > r.MaxItems {
		return nil, nil, "", Invalid(refs[r.MaxItems].Param, "The request has %d images and audio clips; at most %d are accepted per prompt (--max-media-per-prompt).", len(refs), r.MaxItems)
	}
	mm, err := MediaModelFor(m, refs)
	if err != nil {
		return nil, nil, "", err
	}
	if params.PromptLogprobs >= 0 {
		return nil, nil, "", Invalid("prompt_logprobs", "prompt_logprobs are not supported for prompts with images or audio.")
	}
	if err := CheckMarkers(msgs); err != nil {
		return nil, nil, "", err
	}
	items, err := r.Resolve(ctx, refs)
	if err != nil {
		return nil, nil, "", err
	}
	toks, spans, text, err = p.RenderMedia(ctx, mm, msgs, items, maxBytes)
	if err != nil {
		return nil, nil, text, err
	}
	if params.Truncate > 0 && len(toks) > params.Truncate {
		return nil, nil, text, Invalid("truncate_prompt_tokens", "The prompt has %d tokens with its images and audio; truncate_prompt_tokens %d would cut into them, which is not supported.", len(toks), params.Truncate)
	}
	return toks, spans, text, nil
}

// Resolve turns the refs into items: base64 decoded, URLs fetched, each
// within the byte limit and checked to be the format it claims.
func (r *MediaResolver) Resolve(ctx context.Context, refs []MediaRef) ([]media.Item, error) {
	items := make([]media.Item, len(refs))
	for i, ref := range refs {
		data, err := r.read(ctx, ref)
		if err != nil {
			return nil, err
		}
		items[i] = media.Item{Kind: ref.Kind, Data: data, Param: ref.Param}
	}
	return items, nil
}

// read returns one ref's bytes.
func (r *MediaResolver) read(ctx context.Context, ref MediaRef) ([]byte, error) {
	if ref.Kind == media.Audio {
		data, err := r.decodeBase64(ref.Data, ref.Field)
		if err != nil {
			return nil, err
		}
		want := map[string]string{"wav": "audio/wav", "mp3": "audio/mpeg"}[ref.Format]
		if got := r.sniff(data); got != want {
			return nil, Invalid(ref.Field, "%s: the format is %s but the data is %s.", ref.Field, ref.Format, media.Describe(got))
		}
		return data, nil
	}
	p := ref.Field
	if !strings.EqualFold(ref.URL[:min(len(ref.URL), 5)], "data:") {
		data, err := r.Fetch(ctx, ref.URL, p)
		if err != nil {
			return nil, err
		}
		return data, r.checkImage(data, "", p)
	}
	meta, payload, _ := strings.Cut(ref.URL[len("data:"):], ",")
	declared, _, _ := strings.Cut(strings.ToLower(meta), ";")
	if !strings.HasPrefix(declared, "image/") {
		return nil, Invalid(p, "%s: the data URL's type is %q, not an image (image/png, image/jpeg or image/webp).", p, Truncate(declared, 40))
	}
	data, err := r.decodeBase64(payload, p)
	if err != nil {
		return nil, err
	}
	return data, r.checkImage(data, declared, p)
}

// decodeBase64 decodes standard base64, padded or not, within the limit.
func (r *MediaResolver) decodeBase64(s, param string) ([]byte, error) {
	if n := int64(base64.RawStdEncoding.DecodedLen(len(strings.TrimRight(s, "=")))); n > r.MaxBytes {
		return nil, r.TooLarge(param, n)
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if raw, rerr := base64.RawStdEncoding.DecodeString(s); rerr == nil {
			return raw, nil
		}
		return nil, Invalid(param, "%s is not valid base64: %v.", param, err)
	}
	return data, nil
}

// TooLarge is the error for an item of n bytes, above MaxBytes.
func (r *MediaResolver) TooLarge(param string, n int64) error {
	return Invalid(param, "%s: the item has %d bytes, more than the limit of %d bytes per image or audio clip (--max-media-bytes).", param, n, r.MaxBytes)
}

// sniff names data's format: media.Sniff's, else Detect's.
func (r *MediaResolver) sniff(data []byte) string {
	if t := media.Sniff(data); t != "" {
		return t
	}
	if r.Detect != nil {
		return r.Detect(data)
	}
	return "application/octet-stream"
}

// Formats media.Sniff returns that an image may have.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/webp": true}

// checkImage checks that data is a PNG, JPEG or WebP image, and the type
// declared (by a data URL; "" for none) when there is one.
func (r *MediaResolver) checkImage(data []byte, declared, param string) error {
	got := r.sniff(data)
	if declared == "image/jpg" {
		declared = "image/jpeg"
	}
	switch {
	case !imageTypes[got]:
		return Invalid(param, "%s: the data is %s; images must be PNG, JPEG or WebP.", param, media.Describe(got))
	case declared != "" && !imageTypes[declared]:
		return Invalid(param, "%s: images of type %s are not supported; send PNG, JPEG or WebP.", param, Truncate(declared, 40))
	case declared != "" && declared != got:
		return Invalid(param, "%s: the data URL declares %s but the data is %s.", param, declared, media.Describe(got))
	}
	return nil
}
