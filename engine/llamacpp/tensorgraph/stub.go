//go:build !cgo

package tensorgraph

import (
	"context"

	"github.com/llmserve/llmserve/engine/graph"
	"github.com/llmserve/llmserve/engine/llamacpp"
)

// ErrModelClosed is returned by a Run after Close.
var ErrModelClosed = llamacpp.ErrModelClosed

// GraphModel is a tensor graph; without cgo it cannot be loaded.
type GraphModel struct{}

// LoadGraph returns llamacpp.ErrNoCgo.
func LoadGraph(*graph.Checked, GraphOptions) (*GraphModel, error) { return nil, llamacpp.ErrNoCgo }

// Run returns llamacpp.ErrNoCgo.
func (*GraphModel) Run(context.Context, int, [][]float32) ([]GraphOutput, error) {
	return nil, llamacpp.ErrNoCgo
}

// RunInputs returns llamacpp.ErrNoCgo.
func (*GraphModel) RunInputs(context.Context, int, []GraphInput) ([]GraphOutput, error) {
	return nil, llamacpp.ErrNoCgo
}

// Close does nothing.
func (*GraphModel) Close() error { return nil }
