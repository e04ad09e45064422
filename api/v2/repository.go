package v2

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// MountRepository adds Triton's model repository extension to r:
//
//	POST /v2/repository/index                  {"ready": bool} → [{"name","version","state","reason"}]
//	POST /v2/repository/models/{m}/load        {} on success
//	POST /v2/repository/models/{m}/unload      {} on success
//
// A model that fails to load is a 400 whose error is the load error; an
// unknown model a 404; one being loaded or unloaded a 503.
func MountRepository(r chi.Router, repo infer.Repository, opts Options) {
	h := &handler{log: opts.Logger, maxBody: opts.MaxBodyBytes}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	r.Post("/v2/repository/index", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Ready bool `json:"ready"`
		}
		if !h.decodeOptional(w, r, &req) {
			return
		}
		writeJSON(w, http.StatusOK, repo.Index(req.Ready))
	})
	r.Post("/v2/repository/models/{model}/load", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parameters map[string]any `json:"parameters"`
		}
		if !h.decodeOptional(w, r, &req) {
			return
		}
		if len(req.Parameters) > 0 {
			h.fail(w, r, infer.Errorf(infer.Invalid, "load parameters are not supported: put the model's settings in its model-settings.json"))
			return
		}
		if err := repo.Load(r.Context(), pathParam(r, "model")); err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	r.Post("/v2/repository/models/{model}/unload", func(w http.ResponseWriter, r *http.Request) {
		if !h.decodeOptional(w, r, &struct {
			Parameters map[string]any `json:"parameters"`
		}{}) {
			return
		}
		if err := repo.Unload(r.Context(), pathParam(r, "model")); err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
}

// decodeOptional reads a JSON object body into v; an empty body is {}.
func (h *handler) decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return false
	}
	if len(body) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		h.fail(w, r, infer.Errorf(infer.Invalid, "the body is not a JSON object as the repository extension defines it: %v", err))
		return false
	}
	return true
}
