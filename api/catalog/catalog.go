package catalog

import (
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/llmserve/llmserve/api/openai"
)

// Mount adds GET /v1/models and GET /v1/models/{id} over b's models to r.
func Mount(r chi.Router, b openai.Backend) {
	h := &handler{backend: b}
	r.Get("/v1/models", h.listModels)
	r.Get("/v1/models/*", h.getModel)
}

// AdapterModel is a Model that is a LoRA adapter of another: GET
// /v1/models shows its parent and root, as vLLM does.
type AdapterModel interface {
	openai.Model
	// Parent is the id of the model the adapter runs on.
	Parent() string
	// Root is the adapter's file.
	Root() string
}

type handler struct{ backend openai.Backend }

// Object names and the owned_by of every model object.
const (
	objectModel = "model"
	objectList  = "list"
	ownedBy     = "llmserve"
)

// modelObject is OpenAI's Model plus vLLM's max_model_len.
type modelObject struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
	// Root and Parent are set for a LoRA adapter (vLLM's shape): its file
	// and the id of the model it runs on.
	Root   string  `json:"root,omitempty"`
	Parent *string `json:"parent,omitempty"`
}

// modelList is ListModelsResponse.
type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func modelObjectOf(m openai.Model) modelObject {
	o := modelObject{
		ID:          m.Name(),
		Object:      objectModel,
		Created:     m.Created(),
		OwnedBy:     ownedBy,
		MaxModelLen: m.MaxModelLen(),
	}
	if a, ok := m.(AdapterModel); ok {
		parent := a.Parent()
		o.Parent, o.Root = &parent, a.Root()
	}
	return o
}

// anthropicModel is Anthropic's ModelInfo, GET /v1/models' answer to a
// client that sends anthropic-version (Anthropic's SDKs, Claude Code's
// gateway discovery): max_input_tokens is the context window, as
// Anthropic's Models API reports it.
type anthropicModel struct {
	Type           string `json:"type"`
	ID             string `json:"id"`
	DisplayName    string `json:"display_name"`
	CreatedAt      string `json:"created_at"`
	MaxInputTokens int    `json:"max_input_tokens"`
	MaxTokens      int    `json:"max_tokens"`
}

func anthropicModelOf(m openai.Model) anthropicModel {
	return anthropicModel{Type: "model", ID: m.Name(), DisplayName: m.Name(),
		CreatedAt: time.Unix(m.Created(), 0).UTC().Format(time.RFC3339), MaxInputTokens: m.MaxModelLen(), MaxTokens: m.MaxModelLen()}
}

// anthropicClient reports whether r comes from an Anthropic client, which
// sends anthropic-version on every request.
func anthropicClient(r *http.Request) bool { return r.Header.Get("anthropic-version") != "" }

// listModels serves GET /v1/models: OpenAI's list, or Anthropic's
// ({data, has_more, first_id, last_id}) to an Anthropic client.
func (h *handler) listModels(w http.ResponseWriter, r *http.Request) {
	ms := h.backend.Models()
	if anthropicClient(r) {
		type page struct {
			Data    []anthropicModel `json:"data"`
			HasMore bool             `json:"has_more"`
			FirstID *string          `json:"first_id"`
			LastID  *string          `json:"last_id"`
		}
		p := page{Data: make([]anthropicModel, 0, len(ms))}
		for _, m := range ms {
			p.Data = append(p.Data, anthropicModelOf(m))
		}
		if n := len(p.Data); n > 0 {
			p.FirstID, p.LastID = &p.Data[0].ID, &p.Data[n-1].ID
		}
		openai.WriteJSON(w, http.StatusOK, p)
		return
	}
	list := modelList{Object: objectList, Data: make([]modelObject, 0, len(ms))}
	for _, m := range ms {
		list.Data = append(list.Data, modelObjectOf(m))
	}
	if wantsCodexCatalog(r) {
		cat := codexCatalog{modelList: list, Models: make([]codexModel, 0, len(ms))}
		for _, m := range ms {
			cat.Models = append(cat.Models, codexModelOf(m))
		}
		openai.WriteJSON(w, http.StatusOK, cat)
		return
	}
	openai.WriteJSON(w, http.StatusOK, list)
}

// kserveModel is GET /v1/models/{id}'s answer: OpenAI's model object and
// KServe V1's model status ({"name", "ready"}) in one document.
type kserveModel struct {
	modelObject
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
}

// getModel serves GET /v1/models/{id}. Model ids such as
// "org/name" contain slashes, so the route is a wildcard; an escaped
// slash (%2F) works too. The answer is also KServe V1's model status.
func (h *handler) getModel(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "*")
	if r.URL.RawPath != "" {
		// chi routed on the escaped path, so the parameter is escaped.
		if u, err := url.PathUnescape(name); err == nil {
			name = u
		}
	}
	m, ok := h.backend.Model(name)
	if tb, tok := h.backend.(openai.TensorModels); !ok && tok && name != "" {
		if ready, ok := tb.TensorModel(name); ok {
			// KServe V1's model status; a tensor model is no OpenAI model.
			openai.WriteJSON(w, http.StatusOK, map[string]any{"name": name, "ready": ready})
			return
		}
	}
	if !ok || name == "" {
		openai.WriteError(w, openai.ModelNotFound(name))
		return
	}
	if anthropicClient(r) {
		openai.WriteJSON(w, http.StatusOK, anthropicModelOf(m))
		return
	}
	ready := true
	if r, ok := m.(interface{ Ready() bool }); ok {
		ready = r.Ready()
	}
	openai.WriteJSON(w, http.StatusOK, kserveModel{modelObject: modelObjectOf(m), Name: m.Name(), Ready: ready})
}
