package frontend

import (
	"context"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Model is what the frontend needs of an LLM: its limits and tokenizer to
// render a request, and Submit to start it. A protocol's own model
// interface embeds it (api/openai.Model adds its creation time).
type Model interface {
	// Name is the id clients put in "model".
	Name() string
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

// MediaModel is a Model with a multimodal projector: its chat prompts may
// carry images or audio (RenderMedia).
type MediaModel interface {
	Model
	// ReadsMedia reports whether the projector encodes items of kind.
	ReadsMedia(kind media.Kind) bool
	// PrepareMedia tokenizes prompt, a rendered chat prompt that holds
	// media.Marker once per item in order, and encodes the items. It
	// returns the prompt's tokens, in which each item's positions are
	// placeholders, and the spans for scheduler.Request.Media. addSpecial
	// adds the BOS token as the BOS rule says (StartsWithBOS). An item the
	// model cannot read is a *media.Error naming its Param.
	PrepareMedia(ctx context.Context, prompt string, addSpecial bool, items []media.Item) ([]int32, []scheduler.Media, error)
}

// GrammarChecker is a Model whose runtime parses a grammar itself before
// it runs one (llamacpp.Model.CheckGrammar): a grammar it rejects is
// refused with a BadRequest naming the field that asked for it.
type GrammarChecker interface {
	CheckGrammar(gbnf string) error
}
