package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/scheduler"
)

// The Server is the KV transfer behind vLLM's kv_transfer_params on the
// OpenAI routes (api/openai.KVTransfer): a prefill request with
// do_remote_decode keeps its prompt's KV under a lease and answers where
// to pull it from; a decode request with do_remote_prefill pulls it over
// this service (PullKV on remote_host:remote_port) and continues.

// modelNamed returns the served model if it is called name.
func (s *Server) modelNamed(name string) (*models.Generative, error) {
	g, err := s.opts.Model()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", scheduler.ErrClosed, err)
	}
	if g.Name() != name {
		return nil, fmt.Errorf("worker: kv_transfer_params serves model %q, not %q", g.Name(), name)
	}
	return g, nil
}

// SubmitPrefill submits a prefill whose prompt KV a remote decode pulls;
// params gives the response's kv_transfer_params once the stream ended.
func (s *Server) SubmitPrefill(ctx context.Context, model string, r *scheduler.Request) (*core.Stream, func(context.Context) (map[string]any, error), error) {
	g, err := s.modelNamed(model)
	if err != nil {
		return nil, nil, err
	}
	if s.opts.GRPCPort == 0 {
		return nil, nil, errors.New("worker: no gRPC port to pull KV from")
	}
	st, l, err := g.Core().Prefill(ctx, r, s.opts.Lease)
	if err != nil {
		return nil, nil, err
	}
	// The host a router reached this server at is one the decode server
	// can reach it at too (the same network).
	host := "127.0.0.1"
	if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		if h, _, err := net.SplitHostPort(a.String()); err == nil && h != "" {
			host = h
		}
	}
	params := func(ctx context.Context) (map[string]any, error) {
		kv, err := l.Wait(ctx)
		if err != nil {
			return nil, err
		}
		bs := g.Core().Config().KV.BlockSize
		blocks := make([]int, (kv.Positions+bs-1)/bs)
		for i := range blocks {
			blocks[i] = i
		}
		return map[string]any{
			"do_remote_prefill": true,
			"do_remote_decode":  false,
			"remote_engine_id":  s.engineID,
			"remote_block_ids":  blocks,
			"remote_host":       host,
			"remote_port":       s.opts.GRPCPort,
			"transfer_id":       l.Name(),
			"kv_positions":      kv.Positions,
			"kv_bytes":          kv.Bytes,
		}, nil
	}
	return st, params, nil
}

// SubmitRemote pulls r's prompt KV from addr and submits r with it, or
// alone (computing the prompt) when the pull fails.
func (s *Server) SubmitRemote(ctx context.Context, model string, r *scheduler.Request, addr, transferID string) (*core.Stream, error) {
	g, err := s.modelNamed(model)
	if err != nil {
		return nil, err
	}
	st, _, err := SubmitWithTransfer(ctx, g, r, addr, transferID, TransferOptions{
		Timeout: DefaultPullTimeout, APIKey: s.opts.APIKey, Metrics: s.m, Logger: s.log,
	})
	return st, err
}
