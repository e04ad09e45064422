package worker

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// PrepareMedia tokenizes a rendered chat prompt and encodes its media on
// the worker's projector; see worker.proto.
func (s *Server) PrepareMedia(ctx context.Context, in *workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error) {
	items, err := fromItems(in.GetItems())
	if err != nil {
		return nil, err
	}
	g, err := s.model()
	if err != nil {
		return nil, err
	}
	toks, spans, err := g.PrepareMedia(ctx, in.GetPrompt(), in.GetAddSpecial(), items)
	if err != nil {
		return nil, mediaStatus(ctx, err)
	}
	return &workerpb.PrepareMediaResponse{Prompt: toks, Media: toMediaSpans(spans)}, nil
}

// mediaStatus is the status of a PrepareMedia failure: a *media.Error (an
// item the model cannot read, or no projector) is INVALID_ARGUMENT naming
// the item, with the message of its Err alone, so that a head rebuilds the
// same *media.Error.
func mediaStatus(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	var me *media.Error
	if errors.As(err, &me) {
		return invalid(me.Param, "%s", me.Err.Error())
	}
	return statusError(codes.Internal, &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_ENGINE, Message: err.Error()})
}

// fromItems checks PrepareMedia's items and converts them.
func fromItems(in []*workerpb.MediaItem) ([]media.Item, error) {
	if len(in) == 0 {
		return nil, invalid("items", "items must hold at least one image or audio clip.")
	}
	items := make([]media.Item, len(in))
	for i, it := range in {
		k := media.Kind(it.GetKind())
		switch {
		case k != media.Image && k != media.Audio:
			return nil, invalid(fmt.Sprintf("items[%d].kind", i), "kind must be %q or %q, got %q.", media.Image, media.Audio, k)
		case len(it.GetData()) == 0:
			return nil, invalid(fmt.Sprintf("items[%d].data", i), "an item must hold data.")
		}
		items[i] = media.Item{Kind: k, Data: it.GetData(), Param: it.GetParam()}
	}
	return items, nil
}

// toMediaSpans is the wire form of a prompt's media spans.
func toMediaSpans(spans []scheduler.Media) []*workerpb.MediaSpan {
	if len(spans) == 0 {
		return nil
	}
	out := make([]*workerpb.MediaSpan, len(spans))
	for i, m := range spans {
		out[i] = &workerpb.MediaSpan{Offset: int32(m.Offset), Rows: int32(m.Rows), Embd: media.EncodeRows(m.Embd)}
	}
	return out
}

// fromMedia checks a request's media spans against its prompt and the
// model (vocab ids, rows of width values) and converts them; nil for none.
// The prompt's ids inside a span must be placeholders (negative), those
// outside it in the vocabulary, so that a placeholder never stands for
// text in the prefix cache.
func fromMedia(in []*workerpb.MediaSpan, prompt []int32, vocab, width int) ([]scheduler.Media, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]scheduler.Media, len(in))
	next := 0 // the first prompt index not checked yet
	checkText := func(to int) error {
		for j := next; j < to; j++ {
			if t := prompt[j]; t < 0 || int(t) >= vocab {
				return invalid(fmt.Sprintf("prompt[%d]", j), "token id %d is outside the vocabulary [0, %d) and in no media span.", t, vocab)
			}
		}
		return nil
	}
	for i, sp := range in {
		param := fmt.Sprintf("media[%d]", i)
		off, rows := int64(sp.GetOffset()), int64(sp.GetRows())
		switch {
		case rows < 1:
			return nil, invalid(param, "a media span needs at least one row, got %d.", rows)
		case off < int64(next) || off+rows > int64(len(prompt)):
			return nil, invalid(param, "the media span [%d, %d) is out of order or outside the prompt of %d tokens.", off, off+rows, len(prompt))
		case width <= 0:
			return nil, invalid(param, "this model takes no embedded media rows.")
		case int64(len(sp.GetEmbd())) != 4*rows*int64(width):
			return nil, invalid(param, "the media span has %d bytes of rows; %d rows of the model's width %d are %d bytes (float32).",
				len(sp.GetEmbd()), rows, width, 4*rows*int64(width))
		}
		if err := checkText(int(off)); err != nil {
			return nil, err
		}
		for j := off; j < off+rows; j++ {
			if prompt[j] >= 0 {
				return nil, invalid(fmt.Sprintf("prompt[%d]", j), "token id %d is inside media span %d, which holds placeholders (negative ids).", prompt[j], i)
			}
		}
		out[i] = scheduler.Media{Offset: int(off), Rows: int(rows), Embd: media.DecodeRows(sp.GetEmbd())}
		next = int(off + rows)
	}
	if err := checkText(len(prompt)); err != nil {
		return nil, err
	}
	return out, nil
}
