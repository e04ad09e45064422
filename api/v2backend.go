package api

import (
	"context"
	"errors"
	"time"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/models/tensor"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// V2Backend adapts the registry to the V2 protocols' infer.Backend, for
// the REST routes here and the gRPC service cmd/llmserve registers.
// Tensor models are served too, as infer.TensorModel (infer.AsTensor).
func V2Backend(reg *models.Registry) infer.Backend { return v2Backend{reg} }

type v2Backend struct{ reg *models.Registry }

func (b v2Backend) Model(name string) (infer.Model, bool) {
	if g, ok := b.reg.Get(name); ok {
		return g, true
	}
	if t, ok := b.reg.GetTensor(name); ok {
		return v2Tensor{t}, true
	}
	return nil, false
}

func (b v2Backend) Models() []infer.Model {
	var out []infer.Model
	for _, g := range b.reg.List() {
		out = append(out, g)
	}
	for _, t := range b.reg.ListTensors() {
		out = append(out, v2Tensor{t})
	}
	return out
}

func (b v2Backend) Ready() bool { return b.reg.Ready() }

// v2Tensor is a tensor model as an infer.Model: the generative methods
// are never reached (infer.AsTensor is checked first), and refuse if they
// are.
type v2Tensor struct{ *models.TensorModel }

func (v2Tensor) MaxModelLen() int                { return 0 }
func (v2Tensor) RequestTimeout() time.Duration   { return 0 }
func (v2Tensor) Tokenizer() *tokenizer.Tokenizer { return nil }
func (t v2Tensor) Submit(context.Context, []*scheduler.Request) ([]*core.Stream, error) {
	return nil, infer.NotLLM(t, "generate")
}

// Infer maps an unloaded model's error to Unavailable.
func (t v2Tensor) Infer(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	out, err := t.TensorModel.Infer(ctx, in)
	if errors.Is(err, models.ErrClosed) {
		return nil, infer.Errorf(infer.Unavailable, "model %q was unloaded or the server is stopping; retry", t.Name())
	}
	return out, err
}
