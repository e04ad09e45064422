package workercodec

import (
	"fmt"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// EncodeItems is the wire form of PrepareMedia's items.
func EncodeItems(items []media.Item) []*workerpb.MediaItem {
	out := make([]*workerpb.MediaItem, len(items))
	for i, it := range items {
		out[i] = &workerpb.MediaItem{Kind: string(it.Kind), Data: it.Data, Param: it.Param}
	}
	return out
}

// DecodeItems checks PrepareMedia's items and converts them.
func DecodeItems(in []*workerpb.MediaItem) ([]media.Item, error) {
	if len(in) == 0 {
		return nil, Invalid("items", "items must hold at least one image or audio clip.")
	}
	items := make([]media.Item, len(in))
	for i, it := range in {
		k := media.Kind(it.GetKind())
		switch {
		case k != media.Image && k != media.Audio:
			return nil, Invalid(fmt.Sprintf("items[%d].kind", i), "kind must be %q or %q, got %q.", media.Image, media.Audio, k)
		case len(it.GetData()) == 0:
			return nil, Invalid(fmt.Sprintf("items[%d].data", i), "an item must hold data.")
		}
		items[i] = media.Item{Kind: k, Data: it.GetData(), Param: it.GetParam()}
	}
	return items, nil
}

// EncodeMedia is the wire form of a prompt's media spans
// (PrepareMediaResponse.media, Request.media): the rows as little-endian
// float32; nil for none.
func EncodeMedia(spans []scheduler.Media) []*workerpb.MediaSpan {
	if len(spans) == 0 {
		return nil
	}
	out := make([]*workerpb.MediaSpan, len(spans))
	for i, m := range spans {
		out[i] = &workerpb.MediaSpan{Offset: int32(m.Offset), Rows: int32(m.Rows), Embd: media.EncodeRows(m.Embd)}
	}
	return out
}

// DecodeMedia checks a request's media spans against its prompt and the
// model (vocab ids, rows of width values) and converts them; nil for none.
// The prompt's ids inside a span must be placeholders (negative), those
// outside it in the vocabulary, so that a placeholder never stands for
// text in the prefix cache. An error is INVALID_ARGUMENT naming "media[i]"
// or "prompt[j]".
func DecodeMedia(in []*workerpb.MediaSpan, prompt []int32, vocab, width int) ([]scheduler.Media, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]scheduler.Media, len(in))
	next := 0 // the first prompt index not checked yet
	checkText := func(to int) error {
		for j := next; j < to; j++ {
			if t := prompt[j]; t < 0 || int(t) >= vocab {
				return Invalid(fmt.Sprintf("prompt[%d]", j), "token id %d is outside the vocabulary [0, %d) and in no media span.", t, vocab)
			}
		}
		return nil
	}
	for i, sp := range in {
		param := fmt.Sprintf("media[%d]", i)
		off, rows := int64(sp.GetOffset()), int64(sp.GetRows())
		switch {
		case rows < 1:
			return nil, Invalid(param, "a media span needs at least one row, got %d.", rows)
		case off < int64(next) || off+rows > int64(len(prompt)):
			return nil, Invalid(param, "the media span [%d, %d) is out of order or outside the prompt of %d tokens.", off, off+rows, len(prompt))
		case width <= 0:
			return nil, Invalid(param, "this model takes no embedded media rows.")
		case int64(len(sp.GetEmbd())) != 4*rows*int64(width):
			return nil, Invalid(param, "the media span has %d bytes of rows; %d rows of the model's width %d are %d bytes (float32).",
				len(sp.GetEmbd()), rows, width, 4*rows*int64(width))
		}
		if err := checkText(int(off)); err != nil {
			return nil, err
		}
		for j := off; j < off+rows; j++ {
			if prompt[j] >= 0 {
				return nil, Invalid(fmt.Sprintf("prompt[%d]", j), "token id %d is inside media span %d, which holds placeholders (negative ids).", prompt[j], i)
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

// DecodePreparedMedia converts PrepareMedia's spans on the head, checking
// only that they lie in order inside a prompt of n tokens, each with rows
// of one width: the worker that runs the request checks them against its
// model (DecodeMedia). The error is plain: a worker that answers so is
// broken, not the client's request.
func DecodePreparedMedia(in []*workerpb.MediaSpan, n int) ([]scheduler.Media, error) {
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
