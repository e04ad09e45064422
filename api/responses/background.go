package responses

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/frontend"
)

// Background responses (background: true) run on a goroutine of their
// own, apart from the request that created them; the store holds their
// state (queued, then completed, incomplete, failed or cancelled). With
// stream: true as well, the goroutine writes the response's events into
// an event log (bgRun) that the creating request follows, and that
// GET /v1/responses/{id}?stream=true&starting_after=N follows from event
// N+1 on, as OpenAI resumes a background stream: a client that lost its
// connection picks up where it was. The logs of the last maxFinishedLogs
// finished streams are kept for that.
//
// The goroutine is the one that decides how a background response ends,
// and stores it before it says it is done. POST .../cancel cancels it and
// waits for that, then answers what the store holds: cancel, GET and the
// stream give one answer, even when the cancel comes as the answer ends
// (then it is completed, as OpenAI leaves a finished response).

// maxFinishedLogs bounds the event logs kept of finished background
// streams.
const maxFinishedLogs = 64

// errResponseCancelled ends a background response cancelled by
// POST /v1/responses/{id}/cancel.
var errResponseCancelled = errors.New("responses: response cancelled")

// bgRun is one background response.
type bgRun struct {
	cancel func()
	// done is closed once the final state is stored.
	done chan struct{}

	mu     sync.Mutex
	events []logEvent    // guarded by mu: in order
	closed bool          // guarded by mu: no more events
	more   chan struct{} // guarded by mu: closed and replaced when events grow or the log closes
}

// logEvent is one event of a log: its name and its JSON.
type logEvent struct {
	name string
	data json.RawMessage
}

func newBgRun(cancel func()) *bgRun {
	return &bgRun{cancel: cancel, done: make(chan struct{}), more: make(chan struct{})}
}

// Named appends one event to the log (an eventSink).
func (b *bgRun) Named(event string, v any) error {
	data, err := jsonwire.Marshal(v)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.events = append(b.events, logEvent{name: event, data: data})
	close(b.more)
	b.more = make(chan struct{})
	b.mu.Unlock()
	return nil
}

// close ends the log.
func (b *bgRun) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.more)
	}
	b.mu.Unlock()
}

// follow writes the events from index from on to sse as they come, until
// the log ends or ctx does.
func (b *bgRun) follow(ctx context.Context, sse *openai.SSE, from int) error {
	for {
		b.mu.Lock()
		events, closed, more := b.events[min(from, len(b.events)):], b.closed, b.more
		b.mu.Unlock()
		for _, e := range events {
			if err := sse.Named(e.name, e.data); err != nil {
				return err
			}
		}
		from += len(events)
		if closed {
			return nil
		}
		select {
		case <-more:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startBackground starts a background response: the queued response is
// stored and answered at once (with stream, the answer is the event log,
// followed), and the generation runs apart from the HTTP request.
func (h *handler) startBackground(w http.ResponseWriter, r *http.Request, rp *respParams, resp responseObject) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	rg, err := h.startResponse(ctx, rp, resp.ID, h.s.Now())
	if err != nil {
		cancel(nil)
		h.s.Fail(w, r, resp.ID, err)
		return
	}
	resp.Model = rg.m.Name()
	resp.Status = "queued"
	path := r.URL.Path // the request is not used after the handler returns
	h.storeResponse(path, rp, resp)
	run := newBgRun(func() { cancel(errResponseCancelled) })
	h.mu.Lock()
	h.bg[resp.ID] = run
	h.mu.Unlock()
	go func() {
		defer cancel(nil)
		defer rg.g.Close()
		defer close(run.done)
		if rp.stream {
			_, _ = h.streamTo(ctx, run, rg, rp, resp, path)
			run.close()
			h.finishBackground(resp.ID, true)
			return
		}
		defer h.finishBackground(resp.ID, false)
		o, err := rg.collectOutput(ctx, rp)
		final := resp
		switch {
		case err == nil:
			finishResponse(&final, o, newOutputIDs(), rg.g.Usage())
		case errors.Is(context.Cause(ctx), errResponseCancelled):
			final.Status = "cancelled"
		default:
			final.Status = "failed"
			final.Error = &respError{Code: "server_error", Message: openai.ErrorOf(err).Message}
		}
		h.storeFinal(path, rp, final)
	}()
	if rp.stream {
		sse := openai.StartSSE(w)
		if err := run.follow(r.Context(), sse, 0); err != nil {
			h.s.Log().Debug("client went away from a background stream", "id", resp.ID, "path", r.URL.Path)
		}
		return
	}
	openai.WriteJSON(w, http.StatusOK, resp)
}

// finishBackground forgets a finished background response, keeping the
// event log of a streamed one (the last maxFinishedLogs).
func (h *handler) finishBackground(id string, keepLog bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !keepLog {
		delete(h.bg, id)
		return
	}
	h.bgDone = append(h.bgDone, id)
	if len(h.bgDone) > maxFinishedLogs {
		delete(h.bg, h.bgDone[0])
		h.bgDone = h.bgDone[1:]
	}
}

// background returns the background response id, running or with its
// event log kept.
func (h *handler) background(id string) (*bgRun, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	run, ok := h.bg[id]
	return run, ok
}

// cancelBackground cancels a running background response and waits until
// its final state is stored (or ctx ends).
func (h *handler) cancelBackground(ctx context.Context, id string) error {
	run, ok := h.background(id)
	if !ok {
		return nil
	}
	run.cancel()
	select {
	case <-run.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cancelResponse serves POST /v1/responses/{id}/cancel: a background
// response still running is cancelled, and the answer is the response as
// the store has it once the generation stopped (cancelled, or completed
// when it finished first). Only background responses can be cancelled
// (400 otherwise, as OpenAI).
func (h *handler) cancelResponse(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	rec, err := h.loadResponse(id, false)
	if err != nil {
		h.s.Fail(w, r, id, err)
		return
	}
	if !rec.Response.Background {
		h.s.Fail(w, r, id, frontend.Invalid("", "Only responses created with background set to true can be cancelled."))
		return
	}
	if err := h.cancelBackground(r.Context(), id); err != nil {
		return // the client went away
	}
	if rec, err = h.loadResponse(id, false); err != nil {
		h.s.Fail(w, r, id, err)
		return
	}
	openai.WriteJSON(w, http.StatusOK, rec.Response)
}

// streamStored serves GET /v1/responses/{id}?stream=true: the events of a
// background stream from starting_after + 1 on (from the start without
// it), followed until the response ends.
func (h *handler) streamStored(w http.ResponseWriter, r *http.Request, id string) {
	from := 0
	if s := r.URL.Query().Get("starting_after"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < -1 {
			h.s.Fail(w, r, id, frontend.Invalid("starting_after", "starting_after must be an event's sequence_number, got %q.", s))
			return
		}
		from = n + 1
	}
	run, ok := h.background(id)
	if !ok {
		rec, err := h.loadResponse(id, false)
		if err != nil {
			h.s.Fail(w, r, id, err)
			return
		}
		msg := "Only background responses created with stream set to true can be streamed again."
		if rec.Response.Background {
			msg = "This response's events are no longer kept; GET it without stream."
		}
		h.s.Fail(w, r, id, frontend.Invalid("stream", "%s", msg))
		return
	}
	_ = run.follow(r.Context(), openai.StartSSE(w), from)
}
