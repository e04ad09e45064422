package openai

import (
	"context"
	"strings"

	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/media"
)

// prepareMedia renders a chat prompt that carries images or audio (refs,
// in prompt order) and has the model tokenize it and encode them
// (MediaModel.PrepareMedia): the tokens it returns, media positions
// included, are the prompt that max_model_len and usage count.
//
// What cannot work is refused first, before any URL is fetched: a model
// without a projector for the kind, more items than --max-media-per-prompt,
// prompt logprobs, a user text that holds media.Marker itself.
func (h *handler) prepareMedia(ctx context.Context, m Model, p *genParams, msgs []frontend.Message, cp *chatPrompt, refs []mediaRef, maxBytes int) (promptInput, error) {
	cfg := h.media
	if cfg.maxItems < 0 {
		return promptInput{}, invalid(refs[0].Param, "%s: this server takes no images or audio (--max-media-per-prompt 0).", refs[0].Param)
	}
	if len(refs) > cfg.maxItems {
		return promptInput{}, invalid(refs[cfg.maxItems].Param, "The request has %d images and audio clips; at most %d are accepted per prompt (--max-media-per-prompt).", len(refs), cfg.maxItems)
	}
	mm, err := mediaModelFor(m, refs)
	if err != nil {
		return promptInput{}, err
	}
	if p.promptLogprobs >= 0 {
		return promptInput{}, invalid("prompt_logprobs", "prompt_logprobs are not supported for prompts with images or audio.")
	}
	for _, msg := range msgs {
		if msg.MarkerParam != "" {
			return promptInput{}, markerError(msg.MarkerParam)
		}
	}
	items, err := cfg.resolve(ctx, refs)
	if err != nil {
		return promptInput{}, err
	}
	tok := m.Tokenizer()
	text, err := renderText(tok, msgs, cp, maxBytes)
	if err != nil {
		return promptInput{}, err
	}
	if n := strings.Count(text, media.Marker); n != len(items) {
		// The template dropped or repeated a message, or another field
		// (tools, documents, chat_template) holds the marker.
		return promptInput{}, invalid(cp.param, "The chat template rendered %d places for images and audio, not the %d the messages hold: it drops or repeats messages with media, or another field holds the text %q.", n, len(items), media.Marker)
	}
	toks, spans, err := mm.PrepareMedia(ctx, text, !startsWithBOS(tok, text), items)
	if err != nil {
		return promptInput{}, err
	}
	if len(toks) == 0 {
		return promptInput{}, invalid(cp.param, "The messages render to an empty prompt.")
	}
	if p.truncate > 0 && len(toks) > p.truncate {
		return promptInput{}, invalid("truncate_prompt_tokens", "The prompt has %d tokens with its images and audio; truncate_prompt_tokens %d would cut into them, which is not supported.", len(toks), p.truncate)
	}
	return promptInput{tokens: toks, rendered: text, media: spans}, nil
}

// mediaModelFor returns m as a MediaModel that reads every kind of refs,
// or a 400 naming the first part it cannot read.
func mediaModelFor(m Model, refs []mediaRef) (MediaModel, error) {
	mm, ok := m.(MediaModel)
	if !ok || (!mm.ReadsMedia(media.Image) && !mm.ReadsMedia(media.Audio)) {
		return nil, invalid(refs[0].Param, "%s: the model `%s` reads text only: %v.", refs[0].Param, m.Name(), media.ErrNoProjector)
	}
	for _, ref := range refs {
		if !mm.ReadsMedia(ref.Kind) {
			return nil, invalid(ref.Param, "%s: this model's projector does not read %s.", ref.Param, ref.Kind)
		}
	}
	return mm, nil
}
