package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// Request.thinking converts to scheduler.Thinking field for field (the
// head's wire form, router.wireThinking, is its inverse); bad markers are
// INVALID_ARGUMENT naming the field; Usage carries the reasoning tokens.
func TestThinkingConversion(t *testing.T) {
	wire := &workerpb.Thinking{Start: []int32{5}, End: []int32{6, 7}, After: []int32{8}, StartInside: true, Off: false, Budget: 9, Generated: 2}
	r, err := toRequest(&workerpb.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 4, Thinking: wire}, 10, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := &scheduler.Thinking{Start: []int32{5}, End: []int32{6, 7}, After: []int32{8}, StartInside: true, Budget: 9, Generated: 2}
	if !reflect.DeepEqual(r.Thinking, want) {
		t.Fatalf("thinking %+v, want %+v", r.Thinking, want)
	}
	off := &workerpb.Thinking{Start: []int32{5}, End: []int32{6}, Off: true, Budget: -1}
	if r, err := toRequest(&workerpb.Request{Prompt: []int32{1}, MaxTokens: 4, Thinking: off}, 10, 0, time.Now()); err != nil ||
		!r.Thinking.Off || r.Thinking.Budget != -1 || r.Thinking.After != nil {
		t.Fatalf("off: %+v, %v", r.Thinking, err)
	}
	if r, err := toRequest(&workerpb.Request{Prompt: []int32{1}, MaxTokens: 4}, 10, 0, time.Now()); err != nil || r.Thinking != nil {
		t.Fatalf("no thinking: %+v, %v", r.Thinking, err)
	}
	for param, th := range map[string]*workerpb.Thinking{
		"thinking.start":     {End: []int32{6}},
		"thinking.end":       {Start: []int32{5}},
		"thinking.after[0]":  {Start: []int32{5}, End: []int32{6}, After: []int32{10}},
		"thinking.end[1]":    {Start: []int32{5}, End: []int32{6, -1}},
		"thinking.generated": {Start: []int32{5}, End: []int32{6}, Generated: -1},
	} {
		_, err := toRequest(&workerpb.Request{Prompt: []int32{1}, MaxTokens: 4, Thinking: th}, 10, 0, time.Now())
		if e := ErrorDetail(err); e == nil || e.Param != param || e.Code != workerpb.ErrorCode_ERROR_CODE_INVALID {
			t.Errorf("%s: %v", param, err)
		}
	}
	if u := toUsage(scheduler.Usage{PromptTokens: 3, CompletionTokens: 7, ReasoningTokens: 5}); u.ReasoningTokens != 5 || u.CompletionTokens != 7 {
		t.Errorf("usage %v", u)
	}
	// The scheduler's refusal of a bad Generated names the wire field.
	if e := typedError(&scheduler.RequestError{Field: scheduler.FieldThinking, Err: scheduler.ErrInvalid}); e.Param != "thinking" {
		t.Errorf("param %q", e.Param)
	}
}

// Request.media converts to scheduler.Request.Media with the rows as they
// were (little-endian float32); a span that does not fit the prompt, the
// model's width or the placeholder rule is INVALID_ARGUMENT naming it.
func TestMediaConversion(t *testing.T) {
	const vocab, width = 10, 2
	embd := []float32{1.5, -2, float32(math.Inf(1)), 3e-39, 0, 7}
	wire := toMediaSpans([]scheduler.Media{{Offset: 1, Rows: 2, Embd: embd[:4]}, {Offset: 4, Rows: 1, Embd: embd[4:]}})
	if len(wire) != 2 || wire[0].Offset != 1 || wire[0].Rows != 2 || len(wire[0].Embd) != 16 || wire[1].Offset != 4 {
		t.Fatalf("wire %v", wire)
	}
	if b := wire[0].Embd[:4]; b[0] != 0 || b[1] != 0 || b[2] != 0xc0 || b[3] != 0x3f { // 1.5, little-endian
		t.Fatalf("bytes % x", b)
	}
	prompt := []int32{1, -5, -6, 2, -7, 3}
	r, err := toRequest(&workerpb.Request{Prompt: prompt, MaxTokens: 4, Media: wire}, vocab, width, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []scheduler.Media{{Offset: 1, Rows: 2, Embd: embd[:4]}, {Offset: 4, Rows: 1, Embd: embd[4:]}}
	if !reflect.DeepEqual(r.Media, want) {
		t.Fatalf("media %+v, want %+v", r.Media, want)
	}
	if toMediaSpans(nil) != nil {
		t.Error("no spans must be nil")
	}
	span := func(off, rows int32, n int) *workerpb.MediaSpan {
		return &workerpb.MediaSpan{Offset: off, Rows: rows, Embd: make([]byte, 4*n)}
	}
	for name, c := range map[string]struct {
		prompt []int32
		media  []*workerpb.MediaSpan
		param  string
	}{
		"no rows":          {prompt, []*workerpb.MediaSpan{span(1, 0, 0)}, "media[0]"},
		"past the prompt":  {prompt, []*workerpb.MediaSpan{span(5, 2, 4)}, "media[0]"},
		"negative offset":  {prompt, []*workerpb.MediaSpan{span(-1, 2, 4)}, "media[0]"},
		"overlap":          {prompt, []*workerpb.MediaSpan{span(1, 2, 4), span(2, 1, 2)}, "media[1]"},
		"short rows":       {prompt, []*workerpb.MediaSpan{span(1, 2, 3)}, "media[0]"},
		"long rows":        {prompt, []*workerpb.MediaSpan{span(1, 2, 5)}, "media[0]"},
		"huge rows":        {prompt, []*workerpb.MediaSpan{span(1, math.MaxInt32, 4)}, "media[0]"},
		"text in a span":   {[]int32{1, 5, -6, 2}, []*workerpb.MediaSpan{span(1, 2, 4)}, "prompt[1]"},
		"placeholder out":  {[]int32{1, -5, -6, -2}, []*workerpb.MediaSpan{span(1, 2, 4)}, "prompt[3]"},
		"placeholder bare": {[]int32{1, -5}, nil, "prompt[1]"},
		"id past vocab":    {[]int32{10, -5, -6}, []*workerpb.MediaSpan{span(1, 2, 4)}, "prompt[0]"},
	} {
		_, err := toRequest(&workerpb.Request{Prompt: c.prompt, MaxTokens: 4, Media: c.media}, vocab, width, time.Now())
		if e := ErrorDetail(err); e == nil || e.Param != c.param || e.Code != workerpb.ErrorCode_ERROR_CODE_INVALID || status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT naming %s", name, err, c.param)
		}
	}
	// A model without embedding rows (width 0) takes no spans.
	if _, err := toRequest(&workerpb.Request{Prompt: prompt, MaxTokens: 4, Media: wire}, vocab, 0, time.Now()); ErrorDetail(err).GetParam() != "media[0]" {
		t.Errorf("width 0: %v", err)
	}
}

// PrepareMedia's items are checked before the model is asked; the
// model's *media.Error comes back as INVALID_ARGUMENT naming the item,
// with the message of its Err alone; other failures are INTERNAL.
func TestPrepareMediaErrors(t *testing.T) {
	items, err := fromItems([]*workerpb.MediaItem{{Kind: "image", Data: []byte{1}, Param: "messages[0].content[1]"}, {Kind: "audio", Data: []byte{2}}})
	if err != nil || len(items) != 2 || items[0].Kind != media.Image || items[0].Param != "messages[0].content[1]" || items[1].Kind != media.Audio {
		t.Fatalf("items %+v, %v", items, err)
	}
	for param, in := range map[string][]*workerpb.MediaItem{
		"items":         nil,
		"items[1].kind": {{Kind: "image", Data: []byte{1}}, {Kind: "video", Data: []byte{1}}},
		"items[0].data": {{Kind: "audio"}},
	} {
		_, err := fromItems(in)
		if e := ErrorDetail(err); e == nil || e.Param != param || status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v", param, err)
		}
	}
	ctx := context.Background()
	err = mediaStatus(ctx, fmt.Errorf("wrapped: %w", &media.Error{Param: "messages[2].content[0]", Err: media.ErrNoProjector}))
	if e := ErrorDetail(err); status.Code(err) != codes.InvalidArgument || e.GetParam() != "messages[2].content[0]" ||
		e.GetMessage() != media.ErrNoProjector.Error() || e.GetCode() != workerpb.ErrorCode_ERROR_CODE_INVALID {
		t.Errorf("media error: %v (%v)", err, e)
	}
	err = mediaStatus(ctx, errors.New("prepare media: a projector of another model"))
	if e := ErrorDetail(err); status.Code(err) != codes.Internal || e.GetCode() != workerpb.ErrorCode_ERROR_CODE_ENGINE {
		t.Errorf("engine error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := mediaStatus(cctx, errors.New("x")); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}
