package openai

import (
	"context"

	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
)

// Backend is what the OpenAI routes need from the model registry.
type Backend interface {
	// Model returns the served model called name.
	Model(name string) (Model, bool)
	// Models lists the served models in a stable order.
	Models() []Model
}

// TensorModels is a Backend that also serves tensor models (classifiers,
// MLPs: not LLMs). The OpenAI routes answer a request naming one with a
// 400 that points to the V2 and KServe V1 routes, not a 404, and GET
// /v1/models/{id} gives its KServe V1 status.
type TensorModels interface {
	// TensorModel reports whether name is a served tensor model, and
	// whether it is ready.
	TensorModel(name string) (ready, ok bool)
}

// ModelWaiter is a Backend that may not know its model yet: a head
// (llmserve head) learns it from its first healthy worker. A request for
// a model the Backend does not have waits in WaitModel, which returns the
// model once known (nil when it is not called name: a 404 follows), or
// an error (scheduler.ErrNoWorker when no worker answered in time: a 503),
// or ctx's error.
type ModelWaiter interface {
	WaitModel(ctx context.Context, name string) (Model, error)
}

// Model is one served generative model: what the frontend needs of an
// LLM (frontend.Model: name, context length, request timeout, tokenizer,
// Submit) and the time it was loaded, which the model list shows.
type Model interface {
	frontend.Model
	// Created is the Unix time the model was loaded.
	Created() int64
}

// MediaModel is a Model with a multimodal projector (--mmproj): its chat
// prompts may carry images or audio. A request with media to a Model that
// is not a MediaModel is a 400 (media.ErrNoProjector).
type MediaModel interface {
	Model
	// ReadsMedia reports whether the projector encodes items of kind.
	ReadsMedia(kind media.Kind) bool
	// PrepareMedia tokenizes prompt, a rendered chat prompt that holds
	// media.Marker once per item in order, and encodes the items. It
	// returns the prompt's tokens, in which each item's positions are
	// placeholders (engine.MediaToken of its hash), and the spans for
	// scheduler.Request.Media. addSpecial adds the BOS token as
	// frontend.Prompt.Render's BOS rule says. An item the model cannot read is a
	// *media.Error naming its Param.
	PrepareMedia(ctx context.Context, prompt string, addSpecial bool, items []media.Item) ([]int32, []scheduler.Media, error)
}
