package tensor

import (
	"errors"

	"github.com/llmserve/llmserve/engine/graph"
)

const ggufMagic = "GGUF"

// DecodeGGUF reads a GGUF graph model.
func DecodeGGUF(data []byte) (*graph.Graph, int64, error) {
	return nil, 0, &graph.Error{Err: errors.New("GGUF graphs are not supported yet")}
}
