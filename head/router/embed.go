package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// Pooling is the workers' pooling (their Info): mean, cls, last, rank or
// none (then the API layer answers embedding routes with a 400, as serve
// does for a model started with --pooling none).
func (m *Model) Pooling() string {
	if m.pooling == "" {
		return "none"
	}
	return m.pooling
}

// MatryoshkaDimensions are the workers' --matryoshka-dimensions.
func (m *Model) MatryoshkaDimensions() []int { return slices.Clone(m.mrl) }

// MaxEmbedTokens is the longest input the workers' Embed takes.
func (m *Model) MaxEmbedTokens() int { return m.maxEmbed }

// Task is the workers' V2 task ("generate" or "embed").
func (m *Model) Task() string { return m.task }

// RerankTokens formats a rerank pair as the workers would
// (ModelOptions.RerankTokens: models.VocabRerankTokens over the head's
// vocabulary).
func (m *Model) RerankTokens(query, document string) ([]int32, error) {
	if m.rerank == nil {
		return nil, fmt.Errorf("%w: the head cannot format rerank pairs", errNoRerank)
	}
	return m.rerank(query, document)
}

// errNoRerank: a Model built without ModelOptions.RerankTokens.
var errNoRerank = errors.New("router: no rerank formatter")

// Embed pools inputs on one healthy worker (any role, the least loaded:
// no prefix scoring, embeddings do not use the prefix cache). When the
// worker is gone before it answers (the call breaks, or it is shutting
// down), the call is sent once more, to another worker: embeddings are
// idempotent. A refusal maps to the scheduler error the API layer maps
// locally.
func (m *Model) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	req := &workerpb.EmbedRequest{Inputs: workercodec.EncodeEmbedInputs(inputs)}
	var resp *workerpb.EmbedResponse
	var addr string
	err := m.callAny(ctx, "the embedding", nil, workercodec.DecodeError, func(p pick) (err error) {
		m.r.m.requests.WithLabelValues(p.addr).Inc()
		addr = p.addr
		resp, err = p.client.Embed(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetEmbeddings()) != len(inputs) {
		return nil, fmt.Errorf("%w: worker %s answered %d embeddings for %d inputs", scheduler.ErrEngine, addr, len(resp.GetEmbeddings()), len(inputs))
	}
	out := make([][]float32, len(inputs))
	for i, e := range resp.GetEmbeddings() {
		out[i] = e.GetValues()
	}
	return out, nil
}

// callAny runs call on one healthy worker of any role whose Info accept
// takes (nil: any), the least loaded (no prefix scoring), waiting for one
// as a request does. When that worker is gone before it answers (a
// retryable failure), it is marked broken and call runs once more on
// another worker: call must be idempotent. A worker's refusal is decode's
// mapping of its typed error; what names the call in the error after two
// failures.
func (m *Model) callAny(ctx context.Context, what string, accept func(*workerpb.InfoResponse) bool, decode func(*workerpb.Error) error, call func(pick) error) error {
	var exclude []string
	var lastErr error
	until := m.r.waitUntil(time.Time{})
	for range 2 {
		var p pick
		err := m.r.waitFor(ctx, until, func() bool {
			var ok bool
			p, ok = m.r.chooseWhere(poolAny, nil, "", "", exclude, accept)
			return ok
		})
		if err != nil {
			if lastErr != nil && errors.Is(err, scheduler.ErrNoWorker) {
				return fmt.Errorf("%w (the last worker tried failed: %w)", err, lastErr)
			}
			return err
		}
		err = call(p)
		m.r.release(p.addr)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			if e := workercodec.ErrorDetail(err); e != nil {
				return decode(e)
			}
			return err
		}
		m.r.markBroken(p.addr, err)
		exclude = append(exclude, p.addr)
		lastErr = err
	}
	return fmt.Errorf("%w: %s failed on two workers: %w", scheduler.ErrNoWorker, what, lastErr)
}
