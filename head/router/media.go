package router

import (
	"context"
	"fmt"
	"slices"

	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// ReadsMedia reports whether the workers' projectors encode items of
// kind (api/openai.MediaModel): true when a healthy worker's Info says
// so; with none healthy, the Info of the model the head serves (the first
// healthy worker's) answers.
func (m *Model) ReadsMedia(kind media.Kind) bool {
	r := m.r
	r.mu.Lock()
	defer r.mu.Unlock()
	healthy := false
	for _, w := range r.workers {
		if w.healthy && w.info != nil {
			if infoReads(w.info, kind) {
				return true
			}
			healthy = true
		}
	}
	return !healthy && r.model != nil && infoReads(r.model, kind)
}

// infoReads reports whether a worker's Info says its projector encodes
// kind.
func infoReads(info *workerpb.InfoResponse, kind media.Kind) bool {
	switch kind {
	case media.Image:
		return info.GetReadsImages()
	case media.Audio:
		return info.GetReadsAudio()
	}
	return false
}

// PrepareMedia has a worker's projector tokenize a rendered chat prompt
// and encode its items (api/openai.MediaModel): the least loaded healthy
// worker of any role whose Info reads every kind of items, as Embed picks
// (no prefix scoring). When that worker is gone before it answers, it is
// marked broken and the call goes once more to another: PrepareMedia is
// idempotent. The rows come back with the prompt; Submit sends them with
// the request, so any worker of the model can run it. An item the worker
// cannot read is the *media.Error it named (a 400 naming the part); no
// projector is media.ErrNoProjector in one.
func (m *Model) PrepareMedia(ctx context.Context, prompt string, addSpecial bool, items []media.Item) ([]int32, []scheduler.Media, error) {
	req := &workerpb.PrepareMediaRequest{Prompt: prompt, AddSpecial: addSpecial, Items: workercodec.EncodeItems(items)}
	var kinds []media.Kind
	for _, it := range items {
		if !slices.Contains(kinds, it.Kind) {
			kinds = append(kinds, it.Kind)
		}
	}
	reads := func(info *workerpb.InfoResponse) bool {
		for _, k := range kinds {
			if !infoReads(info, k) {
				return false
			}
		}
		return true
	}
	var resp *workerpb.PrepareMediaResponse
	var addr string
	err := m.callAny(ctx, "preparing the media", reads, workercodec.DecodeMediaError, func(p pick) (err error) {
		addr = p.addr
		resp, err = p.client.PrepareMedia(ctx, req)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	spans, err := workercodec.DecodePreparedMedia(resp.GetMedia(), len(resp.GetPrompt()))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: worker %s: %w", scheduler.ErrEngine, addr, err)
	}
	return resp.GetPrompt(), spans, nil
}
