package router

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

func (f *fakeWorker) PrepareMedia(_ context.Context, req *workerpb.PrepareMediaRequest, _ ...grpc.CallOption) (*workerpb.PrepareMediaResponse, error) {
	f.prepares.Add(1)
	if f.down.Load() {
		return nil, errDown
	}
	if f.prepare == nil {
		return nil, errWithDetail(codes.InvalidArgument, &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_INVALID,
			Message: media.ErrNoProjector.Error(), Param: req.Items[0].Param})
	}
	return f.prepare(req)
}

// TestPrepareMedia: ReadsMedia is what the healthy workers' Info says;
// PrepareMedia goes only to a worker whose projector reads the items'
// kinds, comes back as the prompt and float rows the worker encoded, is
// sent once more elsewhere when that worker is gone, and a refusal naming
// an item is a *media.Error naming it (media.ErrNoProjector kept).
func TestPrepareMedia(t *testing.T) {
	rows := []float32{1.5, -2, 0.25, 8}
	answer := func(req *workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error) {
		if req.Prompt != "a <__media__> b" || !req.AddSpecial || len(req.Items) != 1 || req.Items[0].Kind != "image" || string(req.Items[0].Data) != "png" {
			return nil, errors.New("unexpected request")
		}
		return &workerpb.PrepareMediaResponse{Prompt: []int32{1, -9, -8, 2}, Media: workercodec.EncodeMedia([]scheduler.Media{{Offset: 1, Rows: 2, Embd: rows}})}, nil
	}
	refuses := func(req *workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error) {
		return nil, errWithDetail(codes.InvalidArgument, &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_INVALID, Message: "cannot decode the image", Param: req.Items[0].Param})
	}
	bad := func(*workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error) {
		return &workerpb.PrepareMediaResponse{Prompt: []int32{1}, Media: workercodec.EncodeMedia([]scheduler.Media{{Offset: 0, Rows: 2, Embd: rows}})}, nil
	}
	items := []media.Item{{Kind: media.Image, Data: []byte("png"), Param: "messages[0].content[1]"}}
	tests := []struct {
		name          string
		first, second func(*workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error)
		firstDown     bool
		wantErr       error
		wantParam     string
		calls         [3]int32 // readers a, b, and c without a projector
	}{
		{"a reader answers", answer, answer, false, nil, "", [3]int32{1, 0, 0}},
		{"a dead reader: once more on another", answer, answer, true, nil, "", [3]int32{1, 1, 0}},
		{"a refusal names the item, not retried", refuses, answer, false, nil, "messages[0].content[1]", [3]int32{1, 0, 0}},
		{"rows that do not fit the prompt", bad, answer, false, scheduler.ErrEngine, "", [3]int32{1, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, c := newFake(workerpb.Role_ROLE_PREFILL), newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
			a.images, b.images, b.audio = true, true, true
			a.prepare, b.prepare = tt.first, tt.second
			b.load.Store(5)
			r, _ := newTestRouter(t, Options{FailThreshold: 1000}, map[string]*fakeWorker{"a:1": a, "b:1": b, "c:1": c})
			waitLoad(t, r, "b:1", 5)
			m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
			if !m.ReadsMedia(media.Image) || !m.ReadsMedia(media.Audio) || m.ReadsMedia("video") {
				t.Fatalf("ReadsMedia image %v audio %v", m.ReadsMedia(media.Image), m.ReadsMedia(media.Audio))
			}
			a.down.Store(tt.firstDown)
			toks, spans, err := m.PrepareMedia(context.Background(), "a <__media__> b", true, items)
			switch {
			case tt.wantParam != "":
				var me *media.Error
				if !errors.As(err, &me) || me.Param != tt.wantParam || me.Err.Error() != "cannot decode the image" {
					t.Fatalf("error %v, want a *media.Error naming %s", err, tt.wantParam)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
			default:
				want := []scheduler.Media{{Offset: 1, Rows: 2, Embd: rows}}
				if err != nil || !slices.Equal(toks, []int32{1, -9, -8, 2}) || !reflect.DeepEqual(spans, want) {
					t.Fatalf("PrepareMedia = %v %+v %v", toks, spans, err)
				}
			}
			if n := [3]int32{a.prepares.Load(), b.prepares.Load(), c.prepares.Load()}; n != tt.calls {
				t.Errorf("PrepareMedia calls (a, b, c) = %v, want %v", n, tt.calls)
			}
		})
	}
	// Audio goes only to the worker that reads it, however loaded.
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	a.images, b.images, b.audio = true, true, true
	a.prepare = func(*workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error) {
		return nil, errors.New("not me")
	}
	b.prepare = func(*workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error) {
		return &workerpb.PrepareMediaResponse{Prompt: []int32{-1}, Media: workercodec.EncodeMedia([]scheduler.Media{{Rows: 1, Embd: rows}})}, nil
	}
	b.load.Store(9)
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	if _, _, err := m.PrepareMedia(context.Background(), "<__media__>", false, []media.Item{{Kind: media.Image, Data: []byte{1}}, {Kind: media.Audio, Data: []byte{2}}}); err != nil || a.prepares.Load() != 0 {
		t.Errorf("image and audio: %v; calls a %d b %d", err, a.prepares.Load(), b.prepares.Load())
	}
	// Workers without a projector: ReadsMedia is false; a call anyway
	// comes back as media.ErrNoProjector naming the first item.
	c := newFake(workerpb.Role_ROLE_BOTH)
	r, _ = newTestRouter(t, Options{}, map[string]*fakeWorker{"c:1": c})
	m = NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	if m.ReadsMedia(media.Image) || m.ReadsMedia(media.Audio) {
		t.Error("a worker without a projector reads media")
	}
	if e := workercodec.DecodeMediaError(&workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_INVALID, Message: media.ErrNoProjector.Error(), Param: "messages[0].content[0]"}); !errors.Is(e, media.ErrNoProjector) {
		t.Errorf("no projector: %v", e)
	}
	if e := workercodec.DecodeMediaError(&workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_CLOSED, Message: "bye"}); !errors.Is(e, scheduler.ErrClosed) {
		t.Errorf("closed: %v", e)
	}
}

// waitLoad waits until the router saw a worker's load in its Stats.
func waitLoad(t *testing.T, r *Router, addr string, load int32) {
	t.Helper()
	await(t, r, addr+"'s load", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.workers[addr].stats.GetWaiting() == load
	})
}

// TestSubmitMedia: a request's media spans travel with it, in the rows'
// float32 bytes: in a whole Generate request, in both the prefill and the
// decode request of a P/D split, and in a migrated continuation (they
// cover the original prompt).
func TestSubmitMedia(t *testing.T) {
	spans := []scheduler.Media{{Offset: 1, Rows: 2, Embd: []float32{1, 2, 3, 4}}}
	want := workercodec.EncodeMedia(spans)
	prompt := []int32{1, -5, -6, 2, 3, 4}
	req := func() *scheduler.Request {
		return &scheduler.Request{ID: "r", Prompt: prompt, N: 1, MaxTokens: 4, Arrival: time.Now(), PromptLogprobs: -1, Media: spans}
	}
	same := func(what string, got []*workerpb.MediaSpan) {
		t.Helper()
		if len(got) != 1 || got[0].Offset != 1 || got[0].Rows != 2 || !slices.Equal(got[0].Embd, want[0].Embd) {
			t.Errorf("%s: media %v, want %v", what, got, want)
		}
	}
	// P/D: the prefill and the decode request.
	p, d := newFake(workerpb.Role_ROLE_PREFILL), newFake(workerpb.Role_ROLE_DECODE)
	d.script = func(req *workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, make([]int32, req.MaxTokens)...)}, nil
	}
	r, _ := newTestRouter(t, Options{PDMinPrefillTokens: 4}, map[string]*fakeWorker{"p:1": p, "d:1": d})
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	streams, err := m.Submit(context.Background(), []*scheduler.Request{req()})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, streams[0], 1)
	p.mu.Lock()
	prefills := slices.Clone(p.prefills)
	p.mu.Unlock()
	if len(prefills) != 1 || len(d.requests()) != 1 || d.requests()[0].KvSource == nil {
		t.Fatalf("%d prefills, %d decode requests", len(prefills), len(d.requests()))
	}
	same("prefill", prefills[0].Media)
	same("decode", d.requests()[0].Media)
	// Migration: the continuation carries the spans too.
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	dies := func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_NONE, 7)}, errDown
	}
	finishes := func(req *workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, make([]int32, req.MaxTokens)...)}, nil
	}
	a.script, b.script = dies, dies
	r, _ = newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	m = NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	a.script, b.script = dies, finishes
	b.load.Store(5)
	waitLoad(t, r, "b:1", 5)
	streams, err = m.Submit(context.Background(), []*scheduler.Request{req()})
	if err != nil {
		t.Fatal(err)
	}
	toks, _, _ := collect(t, streams[0], 1)
	if len(a.requests()) != 1 || len(b.requests()) != 1 || len(toks[0]) != 4 {
		t.Fatalf("requests a %d b %d, tokens %v", len(a.requests()), len(b.requests()), toks[0])
	}
	same("first", a.requests()[0].Media)
	cont := b.requests()[0]
	same("continuation", cont.Media)
	if !slices.Equal(cont.Prompt, append(slices.Clone(prompt), 7)) {
		t.Errorf("continuation prompt %v", cont.Prompt)
	}
}
