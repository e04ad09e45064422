package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/models"
)

// vLLM's runtime LoRA routes (VLLM_ALLOW_RUNTIME_LORA_UPDATING,
// --enable-lora-runtime-updates here):
//
//	POST /v1/load_lora_adapter   {"lora_name": "...", "lora_path": "..."}
//	POST /v1/unload_lora_adapter {"lora_name": "..."}
//
// Success is a 200 with vLLM's text ("Success: LoRA adapter 'x' added
// successfully."); errors are OpenAI error objects with vLLM's statuses:
// 400 for a missing field, a name already served, a file that is not a
// LoRA adapter for the model; 404 for an adapter file that does not exist
// and for unloading an adapter that is not loaded.

type loraRequest struct {
	LoRAName string `json:"lora_name"`
	LoRAPath string `json:"lora_path"`
	// BaseModelName picks the model the adapter is for when several are
	// served (vLLM's base_model_name); "" is the first.
	BaseModelName string `json:"base_model_name"`
}

func mountLoRA(r chi.Router, reg *models.Registry, log *slog.Logger) {
	r.Post("/v1/load_lora_adapter", func(w http.ResponseWriter, r *http.Request) {
		req, ok := readLoRARequest(w, r)
		if !ok {
			return
		}
		if req.LoRAName == "" || req.LoRAPath == "" {
			writeError(w, r, http.StatusBadRequest, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
			return
		}
		if _, err := reg.LoadAdapter(req.BaseModelName, models.LoRA{Name: req.LoRAName, Path: req.LoRAPath}); err != nil {
			code, typ, msg := loraError(req, err)
			log.Debug("load_lora_adapter failed", "lora_name", req.LoRAName, "lora_path", req.LoRAPath, "err", err)
			writeError(w, r, code, typ, msg)
			return
		}
		writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", req.LoRAName))
	})
	r.Post("/v1/unload_lora_adapter", func(w http.ResponseWriter, r *http.Request) {
		req, ok := readLoRARequest(w, r)
		if !ok {
			return
		}
		if req.LoRAName == "" {
			writeError(w, r, http.StatusBadRequest, "InvalidUserInput", "'lora_name' needs to be provided.")
			return
		}
		if err := reg.UnloadAdapter(req.LoRAName); err != nil {
			code, typ, msg := loraError(req, err)
			writeError(w, r, code, typ, msg)
			return
		}
		writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.LoRAName))
	})
}

func readLoRARequest(w http.ResponseWriter, r *http.Request) (loraRequest, bool) {
	var req loraRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "BadRequestError", "The body must be a JSON object with lora_name (and lora_path to load): "+err.Error())
		return req, false
	}
	return req, true
}

// loraError maps the models package's errors to vLLM's statuses.
func loraError(req loraRequest, err error) (int, string, string) {
	var ae *models.AdapterError
	switch {
	case errors.Is(err, models.ErrAdapterExists):
		return http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("The lora adapter '%s' has already been loaded.", req.LoRAName)
	case errors.Is(err, models.ErrAdapterNotFound):
		return http.StatusNotFound, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", req.LoRAName)
	case errors.Is(err, models.ErrNotServed):
		return http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.BaseModelName)
	case errors.Is(err, models.ErrNoLoRA):
		return http.StatusBadRequest, "BadRequestError", "LoRA adapters are not enabled for this model: start the server with --lora or --enable-lora-runtime-updates."
	case errors.As(err, &ae) && errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, "NotFoundError", fmt.Sprintf("Loading lora %s failed: No adapter found for %s", req.LoRAName, req.LoRAPath)
	case errors.As(err, &ae):
		return http.StatusBadRequest, "BadRequestError", fmt.Sprintf("Loading lora %s failed: %v", req.LoRAName, ae.Err)
	}
	return http.StatusInternalServerError, "InternalServerError", err.Error()
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, s)
}
