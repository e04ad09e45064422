package workercodec

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

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// Request.thinking converts to scheduler.Thinking field for field (the
// head's wire form, encodeThinking, is its inverse); bad markers are
// INVALID_ARGUMENT naming the field; Usage carries the reasoning tokens.
func TestThinkingConversion(t *testing.T) {
	wire := &workerpb.Thinking{Start: []int32{5}, End: []int32{6, 7}, After: []int32{8}, StartInside: true, Off: false, Budget: 9, Generated: 2}
	r, err := DecodeRequest(&workerpb.Request{Prompt: []int32{1, 2, 3}, MaxTokens: 4, Thinking: wire}, 10, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := &scheduler.Thinking{Start: []int32{5}, End: []int32{6, 7}, After: []int32{8}, StartInside: true, Budget: 9, Generated: 2}
	if !reflect.DeepEqual(r.Thinking, want) {
		t.Fatalf("thinking %+v, want %+v", r.Thinking, want)
	}
	off := &workerpb.Thinking{Start: []int32{5}, End: []int32{6}, Off: true, Budget: -1}
	if r, err := DecodeRequest(&workerpb.Request{Prompt: []int32{1}, MaxTokens: 4, Thinking: off}, 10, 0, time.Now()); err != nil ||
		!r.Thinking.Off || r.Thinking.Budget != -1 || r.Thinking.After != nil {
		t.Fatalf("off: %+v, %v", r.Thinking, err)
	}
	if r, err := DecodeRequest(&workerpb.Request{Prompt: []int32{1}, MaxTokens: 4}, 10, 0, time.Now()); err != nil || r.Thinking != nil {
		t.Fatalf("no thinking: %+v, %v", r.Thinking, err)
	}
	for param, th := range map[string]*workerpb.Thinking{
		"thinking.start":     {End: []int32{6}},
		"thinking.end":       {Start: []int32{5}},
		"thinking.after[0]":  {Start: []int32{5}, End: []int32{6}, After: []int32{10}},
		"thinking.end[1]":    {Start: []int32{5}, End: []int32{6, -1}},
		"thinking.generated": {Start: []int32{5}, End: []int32{6}, Generated: -1},
	} {
		_, err := DecodeRequest(&workerpb.Request{Prompt: []int32{1}, MaxTokens: 4, Thinking: th}, 10, 0, time.Now())
		if e := ErrorDetail(err); e == nil || e.Param != param || e.Code != workerpb.ErrorCode_ERROR_CODE_INVALID {
			t.Errorf("%s: %v", param, err)
		}
	}
	if u := EncodeUsage(scheduler.Usage{PromptTokens: 3, CompletionTokens: 7, ReasoningTokens: 5}); u.ReasoningTokens != 5 || u.CompletionTokens != 7 {
		t.Errorf("usage %v", u)
	}
	// The scheduler's refusal of a bad Generated names the wire field.
	if e := EncodeError(&scheduler.RequestError{Field: scheduler.FieldThinking, Err: scheduler.ErrInvalid}); e.Param != "thinking" {
		t.Errorf("param %q", e.Param)
	}
}

// Request.media converts to scheduler.Request.Media with the rows as they
// were (little-endian float32); a span that does not fit the prompt, the
// model's width or the placeholder rule is INVALID_ARGUMENT naming it.
func TestMediaConversion(t *testing.T) {
	const vocab, width = 10, 2
	embd := []float32{1.5, -2, float32(math.Inf(1)), 3e-39, 0, 7}
	wire := EncodeMedia([]scheduler.Media{{Offset: 1, Rows: 2, Embd: embd[:4]}, {Offset: 4, Rows: 1, Embd: embd[4:]}})
	if len(wire) != 2 || wire[0].Offset != 1 || wire[0].Rows != 2 || len(wire[0].Embd) != 16 || wire[1].Offset != 4 {
		t.Fatalf("wire %v", wire)
	}
	if b := wire[0].Embd[:4]; b[0] != 0 || b[1] != 0 || b[2] != 0xc0 || b[3] != 0x3f { // 1.5, little-endian
		t.Fatalf("bytes % x", b)
	}
	prompt := []int32{1, -5, -6, 2, -7, 3}
	r, err := DecodeRequest(&workerpb.Request{Prompt: prompt, MaxTokens: 4, Media: wire}, vocab, width, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []scheduler.Media{{Offset: 1, Rows: 2, Embd: embd[:4]}, {Offset: 4, Rows: 1, Embd: embd[4:]}}
	if !reflect.DeepEqual(r.Media, want) {
		t.Fatalf("media %+v, want %+v", r.Media, want)
	}
	if EncodeMedia(nil) != nil {
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
		_, err := DecodeRequest(&workerpb.Request{Prompt: c.prompt, MaxTokens: 4, Media: c.media}, vocab, width, time.Now())
		if e := ErrorDetail(err); e == nil || e.Param != c.param || e.Code != workerpb.ErrorCode_ERROR_CODE_INVALID || status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT naming %s", name, err, c.param)
		}
	}
	// A model without embedding rows (width 0) takes no spans.
	if _, err := DecodeRequest(&workerpb.Request{Prompt: prompt, MaxTokens: 4, Media: wire}, vocab, 0, time.Now()); ErrorDetail(err).GetParam() != "media[0]" {
		t.Errorf("width 0: %v", err)
	}
}

// PrepareMedia's items are checked before the model is asked; the
// model's *media.Error comes back as INVALID_ARGUMENT naming the item,
// with the message of its Err alone; other failures are INTERNAL.
func TestPrepareMediaErrors(t *testing.T) {
	items, err := DecodeItems([]*workerpb.MediaItem{{Kind: "image", Data: []byte{1}, Param: "messages[0].content[1]"}, {Kind: "audio", Data: []byte{2}}})
	if err != nil || len(items) != 2 || items[0].Kind != media.Image || items[0].Param != "messages[0].content[1]" || items[1].Kind != media.Audio {
		t.Fatalf("items %+v, %v", items, err)
	}
	for param, in := range map[string][]*workerpb.MediaItem{
		"items":         nil,
		"items[1].kind": {{Kind: "image", Data: []byte{1}}, {Kind: "video", Data: []byte{1}}},
		"items[0].data": {{Kind: "audio"}},
	} {
		_, err := DecodeItems(in)
		if e := ErrorDetail(err); e == nil || e.Param != param || status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v", param, err)
		}
	}
	ctx := context.Background()
	err = MediaStatus(ctx, fmt.Errorf("wrapped: %w", &media.Error{Param: "messages[2].content[0]", Err: media.ErrNoProjector}))
	if e := ErrorDetail(err); status.Code(err) != codes.InvalidArgument || e.GetParam() != "messages[2].content[0]" ||
		e.GetMessage() != media.ErrNoProjector.Error() || e.GetCode() != workerpb.ErrorCode_ERROR_CODE_INVALID {
		t.Errorf("media error: %v (%v)", err, e)
	}
	err = MediaStatus(ctx, errors.New("prepare media: a projector of another model"))
	if e := ErrorDetail(err); status.Code(err) != codes.Internal || e.GetCode() != workerpb.ErrorCode_ERROR_CODE_ENGINE {
		t.Errorf("engine error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := MediaStatus(cctx, errors.New("x")); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}

// The head's encodings and the worker's decodings are each other's
// inverse: a request, an output, an error and a media error survive the
// trip field for field.
func TestRoundTrip(t *testing.T) {
	now := time.Unix(1700000000, 0)
	q := &scheduler.Request{
		ID: "r", Prompt: []int32{1, -5, -6, 2}, N: 2, MaxTokens: 8, MinTokens: 1, StopTokens: []int32{3},
		BadWords: [][]int32{{4, 5}}, IgnoreEOS: true, Priority: -2, Arrival: now, Deadline: now.Add(time.Minute).UTC(),
		CacheSalt: "salt", PromptLogprobs: 2,
		Thinking: &scheduler.Thinking{Start: []int32{5}, End: []int32{6}, Budget: 7, Generated: 1},
		Sampling: engine.Sampling{Temperature: 0.5, TopK: 3, TopP: 0.9, MinP: 0.1, RepetitionPenalty: 1.1, PresencePenalty: 0.2,
			FrequencyPenalty: 0.3, Seed: 42, LogitBias: []engine.TokenBias{{Token: 2, Bias: -1}}, AllowedTokens: []int32{1, 2, 3},
			Logprobs: true, TopLogprobs: 2, Grammar: `root ::= "a"`},
		Media: []scheduler.Media{{Offset: 1, Rows: 2, Embd: []float32{1, 2, 3, 4}}},
	}
	w := EncodeRequest(q)
	w.Media = EncodeMedia(q.Media)
	got, err := DecodeRequest(w, 10, 2, now)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, q) {
		t.Errorf("request\n got %+v\nwant %+v", got, q)
	}
	// Neutral top_p and repetition_penalty are left out and come back 1;
	// no prompt logprobs is -1.
	d := &scheduler.Request{ID: "d", Prompt: []int32{1}, N: 1, MaxTokens: 1, Arrival: now, PromptLogprobs: -1, Sampling: engine.DefaultSampling()}
	if w := EncodeRequest(d); w.Sampling.TopP != nil || w.Sampling.RepetitionPenalty != nil || w.PromptLogprobs != nil {
		t.Errorf("defaults on the wire: %v", w)
	} else if got, err := DecodeRequest(w, 10, 0, now); err != nil || !reflect.DeepEqual(got, d) {
		t.Errorf("defaults: %+v, %v", got, err)
	}

	lp := engine.Logprobs{Chosen: engine.TokenLogprob{Token: 1, Logprob: -0.5}, Rank: 1, Top: []engine.TokenLogprob{{Token: 1, Logprob: -0.5}}}
	for _, o := range []scheduler.Output{
		{Choice: 1, Tokens: []int32{7, 8}, Logprobs: []engine.Logprobs{lp, lp}},
		{Choice: 0, PromptLogprobs: []engine.Logprobs{lp}, Finish: scheduler.FinishStop},
		{Choice: 0, Finish: scheduler.FinishLength},
	} {
		if got := DecodeOutput(EncodeOutput(&o), o.Choice); !reflect.DeepEqual(got, o) {
			t.Errorf("output\n got %+v\nwant %+v", got, o)
		}
	}
	// -Inf travels as the lowest float.
	inf := engine.Logprobs{Chosen: engine.TokenLogprob{Logprob: float32(math.Inf(-1))}}
	if got := DecodeLogprob(EncodeLogprob(&inf)); got.Chosen.Logprob != -math.MaxFloat32 {
		t.Errorf("-Inf: %v", got.Chosen.Logprob)
	}
	for _, f := range []scheduler.FinishReason{scheduler.FinishNone, scheduler.FinishStop, scheduler.FinishLength, scheduler.FinishAbort} {
		if got := DecodeFinish(EncodeFinish(f)); got != f {
			t.Errorf("finish %q: %q", f, got)
		}
	}

	// Errors: the sentinel, a RequestError's numbers, Retry-After.
	for _, err := range []error{scheduler.ErrTooLong, scheduler.ErrLimit, scheduler.ErrInvalid, scheduler.ErrClosed, scheduler.ErrDeadline} {
		if got := DecodeError(ErrorDetail(SubmitStatus(fmt.Errorf("wrapped: %w", err)))); !errors.Is(got, err) {
			t.Errorf("%v: %v", err, got)
		}
	}
	re := &scheduler.RequestError{Field: scheduler.FieldMaxTokens, Err: scheduler.ErrTooLong, Value: 9, Limit: 8, PromptTokens: 3, MaxTokens: 9}
	var gotRE *scheduler.RequestError
	if got := DecodeError(EncodeError(re)); !errors.As(got, &gotRE) || *gotRE != *re {
		t.Errorf("request error: %v", got)
	}
	var qf *scheduler.QueueFullError
	if got := DecodeError(EncodeError(&scheduler.QueueFullError{RetryAfter: 3 * time.Second})); !errors.As(got, &qf) || qf.RetryAfter != 3*time.Second ||
		!errors.Is(got, scheduler.ErrQueueFull) {
		t.Errorf("queue full: %v", got)
	}
	if got := DecodeError(EncodeError(errors.New("boom"))); !errors.Is(got, scheduler.ErrEngine) {
		t.Errorf("engine: %v", got)
	}
	// Each code's gRPC status; the engine's refusals are INVALID; a lease
	// not found and a role refusal are no scheduler error on the head.
	for err, want := range map[error]codes.Code{
		scheduler.ErrQueueFull: codes.ResourceExhausted, scheduler.ErrTooLong: codes.InvalidArgument, scheduler.ErrLimit: codes.InvalidArgument,
		scheduler.ErrInvalid: codes.InvalidArgument, engine.ErrInvalidBatch: codes.InvalidArgument, core.ErrCannotEmbed: codes.InvalidArgument,
		scheduler.ErrClosed: codes.Unavailable, scheduler.ErrDeadline: codes.DeadlineExceeded, core.ErrNoLease: codes.NotFound,
		errors.New("boom"): codes.Internal,
	} {
		if got := status.Code(SubmitStatus(err)); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
	if got := DecodeError(EncodeError(engine.ErrInvalidBatch)); !errors.Is(got, scheduler.ErrInvalid) {
		t.Errorf("invalid batch: %v", got)
	}
	for _, c := range []workerpb.ErrorCode{workerpb.ErrorCode_ERROR_CODE_NOT_FOUND, workerpb.ErrorCode_ERROR_CODE_ROLE} {
		if got := DecodeError(&workerpb.Error{Code: c, Message: "x"}); !errors.Is(got, scheduler.ErrEngine) {
			t.Errorf("%v: %v", c, got)
		}
	}
	if got := StatusCode(workerpb.ErrorCode_ERROR_CODE_ROLE); got != codes.FailedPrecondition {
		t.Errorf("role: %v", got)
	}
	var me *media.Error
	sent := &media.Error{Param: "messages[0].content[1]", Err: media.ErrNoProjector}
	if got := DecodeMediaError(ErrorDetail(MediaStatus(context.Background(), sent))); !errors.As(got, &me) || me.Param != sent.Param ||
		!errors.Is(got, media.ErrNoProjector) {
		t.Errorf("media error: %v", got)
	}

	inputs := [][]int32{{1, 2}, {3}}
	if got, err := DecodeEmbedInputs(EncodeEmbedInputs(inputs), 10, 4); err != nil || !reflect.DeepEqual(got, inputs) {
		t.Errorf("embed inputs: %v, %v", got, err)
	}
	items := []media.Item{{Kind: media.Image, Data: []byte{1}, Param: "messages[0].content[0]"}}
	if got, err := DecodeItems(EncodeItems(items)); err != nil || !reflect.DeepEqual(got, items) {
		t.Errorf("items: %v, %v", got, err)
	}
}
