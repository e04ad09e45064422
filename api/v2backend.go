package api

import (
	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/models"
)

// V2Backend adapts the registry to the V2 protocols' infer.Backend, for
// the REST routes here and the gRPC service cmd/llmserve registers.
func V2Backend(reg *models.Registry) infer.Backend { return v2Backend{reg} }

type v2Backend struct{ reg *models.Registry }

func (b v2Backend) Model(name string) (infer.Model, bool) {
	g, ok := b.reg.Get(name)
	if !ok {
		return nil, false
	}
	return g, true
}

func (b v2Backend) Models() []infer.Model {
	var out []infer.Model
	for _, g := range b.reg.List() {
		out = append(out, g)
	}
	return out
}

func (b v2Backend) Ready() bool { return b.reg.Ready() }
