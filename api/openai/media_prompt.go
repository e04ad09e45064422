package openai

import (
	"context"

	"github.com/llmserve/llmserve/frontend"
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
	mm, err := frontend.MediaModelFor(m, refs)
	if err != nil {
		return promptInput{}, err
	}
	if p.promptLogprobs >= 0 {
		return promptInput{}, invalid("prompt_logprobs", "prompt_logprobs are not supported for prompts with images or audio.")
	}
	if err := frontend.CheckMarkers(msgs); err != nil {
		return promptInput{}, err
	}
	items, err := cfg.resolve(ctx, refs)
	if err != nil {
		return promptInput{}, err
	}
	toks, spans, text, err := cp.RenderMedia(ctx, mm, msgs, items, maxBytes)
	cp.rendered = text
	if err != nil {
		return promptInput{}, err
	}
	if p.truncate > 0 && len(toks) > p.truncate {
		return promptInput{}, invalid("truncate_prompt_tokens", "The prompt has %d tokens with its images and audio; truncate_prompt_tokens %d would cut into them, which is not supported.", len(toks), p.truncate)
	}
	return promptInput{tokens: toks, rendered: text, media: spans}, nil
}
