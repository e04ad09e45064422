package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/responses/store"
	"github.com/llmserve/llmserve/frontend"
)

// This file serves what the Responses API stores: keeping a response,
// GET, DELETE and input_items of a stored one, input_tokens, and
// background responses with their cancel.

// storeResponse keeps a finished response when the request asked to.
// A failure to store is logged: the client still gets its answer.
func (h *handler) storeResponse(path string, rp *respParams, resp responseObject) {
	if !rp.store {
		return
	}
	rec := respRecord{Response: resp, Input: rp.input, Conversation: append(append([]respItem(nil), rp.conv...), resp.Output...)}
	// Reasoning items stay in the stored conversation: the template
	// decides whether a later turn shows them.
	b, err := json.Marshal(rec)
	if err == nil {
		err = h.store.Put(resp.ID, b)
	}
	if err != nil {
		h.s.Log().Error("store response", "id", resp.ID, "path", path, "err", err)
	}
}

// notFoundError is a response id the store does not hold; previous: the
// id came as previous_response_id, which the error names.
func notFoundError(id string, previous bool) *frontend.Error {
	if previous {
		// OpenAI answers an unknown previous_response_id with a 400.
		return &frontend.Error{Kind: frontend.BadRequest, Param: "previous_response_id", Code: "previous_response_not_found", Message: fmt.Sprintf("Previous response with id '%s' not found.", id)}
	}
	return &frontend.Error{Kind: frontend.NotFound, Message: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// loadResponse reads a stored record; previous: id came as
// previous_response_id.
func (h *handler) loadResponse(id string, previous bool) (*respRecord, error) {
	b, err := h.store.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFoundError(id, previous)
	}
	if err != nil {
		return nil, err
	}
	var rec respRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("stored response %s: %w", id, err)
	}
	return &rec, nil
}

// getResponse serves GET /v1/responses/{id}.
func (h *handler) getResponse(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.URL.Query().Get("stream") == "true" {
		h.streamStored(w, r, id)
		return
	}
	rec, err := h.loadResponse(id, false)
	if err != nil {
		h.s.Fail(w, r, id, err)
		return
	}
	openai.WriteJSON(w, http.StatusOK, rec.Response)
}

// deleteResponse serves DELETE /v1/responses/{id}.
func (h *handler) deleteResponse(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	err := h.store.Delete(id)
	if errors.Is(err, store.ErrNotFound) {
		err = notFoundError(id, false)
	}
	if err != nil {
		h.s.Fail(w, r, id, err)
		return
	}
	if run, ok := h.background(id); ok {
		run.cancel() // its goroutine sees the response gone and stores nothing
	}
	openai.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
}

// inputItems serves GET /v1/responses/{id}/input_items: the request's own
// input items (not those of the responses before it), with OpenAI's
// paging: limit (1 to 100, default 20), order ("desc", the default, or
// "asc"), after (an item id).
func (h *handler) inputItems(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	q := r.URL.Query()
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := parseInt(s)
		if err != nil || n < 1 || n > 100 {
			h.s.Fail(w, r, id, frontend.Invalid("limit", "limit must be an integer from 1 to 100, got %q.", s))
			return
		}
		limit = n
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		h.s.Fail(w, r, id, frontend.Invalid("order", "order must be \"asc\" or \"desc\", got %q.", order))
		return
	}
	rec, err := h.loadResponse(id, false)
	if err != nil {
		h.s.Fail(w, r, id, err)
		return
	}
	items := append([]respItem(nil), rec.Input...)
	if order == "desc" {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	if after := q.Get("after"); after != "" {
		k := -1
		for i := range items {
			if items[i].ID == after {
				k = i
			}
		}
		if k < 0 {
			h.s.Fail(w, r, id, frontend.Invalid("after", "No input item with id '%s' in response '%s'.", after, id))
			return
		}
		items = items[k+1:]
	}
	hasMore := len(items) > limit
	if hasMore {
		items = items[:limit]
	}
	list := map[string]any{"object": "list", "data": items, "has_more": hasMore, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		list["first_id"], list["last_id"] = items[0].ID, items[len(items)-1].ID
	} else {
		list["data"] = []respItem{}
	}
	openai.WriteJSON(w, http.StatusOK, list)
}

func parseInt(s string) (int, error) {
	var n int
	_, err := fmt.Sscanf(s, "%d", &n)
	if err == nil && fmt.Sprint(n) != s {
		err = errors.New("not an integer")
	}
	return n, err
}

// inputTokens serves POST /v1/responses/input_tokens: the number of
// tokens the request's input (with instructions, tools and the previous
// response's conversation) renders to.
func (h *handler) inputTokens(w http.ResponseWriter, r *http.Request) {
	id := "resp_" + h.s.RequestID(r)
	rp, err := h.readRequest(w, r)
	if err != nil {
		h.s.Fail(w, r, id, err)
		return
	}
	run, err := h.s.Prepare(r.Context(), rp.typed)
	if err != nil {
		h.s.Fail(w, r, id, err)
		return
	}
	openai.WriteJSON(w, http.StatusOK, map[string]any{"object": "response.input_tokens", "input_tokens": run.PromptTokens()})
}
