package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	req := &workerpb.PrepareMediaRequest{Prompt: prompt, AddSpecial: addSpecial, Items: make([]*workerpb.MediaItem, len(items))}
	var kinds []media.Kind
	for i, it := range items {
		req.Items[i] = &workerpb.MediaItem{Kind: string(it.Kind), Data: it.Data, Param: it.Param}
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
	var exclude []string
	var lastErr error
	until := m.r.waitUntil(time.Time{})
	for range 2 {
		var p pick
		err := m.r.waitFor(ctx, until, func() bool {
			var ok bool
			p, ok = m.r.chooseWhere(poolAny, nil, "", "", exclude, reads)
			return ok
		})
		if err != nil {
			if lastErr != nil && errors.Is(err, scheduler.ErrNoWorker) {
				return nil, nil, fmt.Errorf("%w (the last worker tried failed: %w)", err, lastErr)
			}
			return nil, nil, err
		}
		resp, err := p.client.PrepareMedia(ctx, req)
		m.r.release(p.addr)
		if err == nil {
			spans, err := fromMediaSpans(resp.GetMedia(), len(resp.GetPrompt()))
			if err != nil {
				return nil, nil, fmt.Errorf("%w: worker %s: %w", scheduler.ErrEngine, p.addr, err)
			}
			return resp.GetPrompt(), spans, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if !retryable(err) {
			if e := errorDetail(err); e != nil {
				return nil, nil, mediaError(e)
			}
			return nil, nil, err
		}
		m.r.markBroken(p.addr, err)
		exclude = append(exclude, p.addr)
		lastErr = err
	}
	return nil, nil, fmt.Errorf("%w: preparing the media failed on two workers: %w", scheduler.ErrNoWorker, lastErr)
}

// mediaError maps PrepareMedia's typed error back: INVALID_ARGUMENT
// naming an item is the *media.Error the worker's model returned (with
// media.ErrNoProjector when that was its message); the rest as toError.
func mediaError(e *workerpb.Error) error {
	if e.GetCode() != workerpb.ErrorCode_ERROR_CODE_INVALID || e.GetParam() == "" {
		return toError(e)
	}
	err := errors.New(e.GetMessage())
	if e.GetMessage() == media.ErrNoProjector.Error() {
		err = media.ErrNoProjector
	}
	return &media.Error{Param: e.GetParam(), Err: err}
}

// wireMedia is the wire form of a request's media spans (Request.media):
// the rows as little-endian float32.
func wireMedia(spans []scheduler.Media) []*workerpb.MediaSpan {
	if len(spans) == 0 {
		return nil
	}
	out := make([]*workerpb.MediaSpan, len(spans))
	for i, m := range spans {
		out[i] = &workerpb.MediaSpan{Offset: int32(m.Offset), Rows: int32(m.Rows), Embd: media.EncodeRows(m.Embd)}
	}
	return out
}

// fromMediaSpans converts PrepareMedia's spans, checking that they lie in
// order inside a prompt of n tokens, each with rows of one width (the
// worker that runs the request checks the width against its model).
func fromMediaSpans(in []*workerpb.MediaSpan, n int) ([]scheduler.Media, error) {
	var out []scheduler.Media
	next := int64(0)
	for i, sp := range in {
		off, rows, size := int64(sp.GetOffset()), int64(sp.GetRows()), int64(len(sp.GetEmbd()))
		if rows < 1 || off < next || off+rows > int64(n) || size == 0 || size%(4*rows) != 0 {
			return nil, fmt.Errorf("media span %d ([%d, %d), %d bytes) does not fit its prompt of %d tokens", i, off, off+rows, size, n)
		}
		out = append(out, scheduler.Media{Offset: int(off), Rows: int(rows), Embd: media.DecodeRows(sp.GetEmbd())})
		next = off + rows
	}
	return out, nil
}
