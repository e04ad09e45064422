package openai

import (
	"context"

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

// Model is one served generative model.
type Model interface {
	// Name is the id clients put in "model".
	Name() string
	// Created is the Unix time the model was loaded.
	Created() int64
	// MaxModelLen is the most tokens (prompt plus output) one sequence may
	// hold.
	MaxModelLen() int
	// Tokenizer encodes prompts, renders chat templates and decodes output.
	Tokenizer() *tokenizer.Tokenizer
	// Submit starts generation. Errors: scheduler.ErrQueueFull (a
	// *scheduler.QueueFullError), scheduler.ErrTooLong, scheduler.ErrClosed.
	Submit(ctx context.Context, req *scheduler.Request) (*scheduler.Stream, error)
}
