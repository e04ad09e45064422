package worker

import (
	"context"

	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/proto/workerpb"
)

// PrepareMedia tokenizes a rendered chat prompt and encodes its media on
// the worker's projector; see worker.proto.
func (s *Server) PrepareMedia(ctx context.Context, in *workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error) {
	items, err := workercodec.DecodeItems(in.GetItems())
	if err != nil {
		return nil, err
	}
	g, err := s.model()
	if err != nil {
		return nil, err
	}
	toks, spans, err := g.PrepareMedia(ctx, in.GetPrompt(), in.GetAddSpecial(), items)
	if err != nil {
		return nil, workercodec.MediaStatus(ctx, err)
	}
	return &workerpb.PrepareMediaResponse{Prompt: toks, Media: workercodec.EncodeMedia(spans)}, nil
}
