package openai

import (
	"context"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
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

// Model is one served generative model.
type Model interface {
	// Name is the id clients put in "model".
	Name() string
	// Created is the Unix time the model was loaded.
	Created() int64
	// MaxModelLen is the most tokens (prompt plus output) one sequence may
	// hold.
	MaxModelLen() int
	// RequestTimeout is the deadline the server gives every request, or 0.
	RequestTimeout() time.Duration
	// Tokenizer encodes prompts, renders chat templates and decodes output.
	Tokenizer() *tokenizer.Tokenizer
	// Submit starts generation of the requests, all or none, with one
	// stream each (see core.EngineCore.Submit for the errors).
	Submit(ctx context.Context, reqs []*scheduler.Request) ([]*core.Stream, error)
}
