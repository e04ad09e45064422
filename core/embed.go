package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
)

// ErrCannotEmbed says the executor does not implement engine.Embedder.
var ErrCannotEmbed = errors.New("core: this engine does not embed")

// embedJob is one Embed call: its inputs are scheduled separately, in
// order, and the call returns when every input has a result.
type embedJob struct {
	ctx     context.Context //nolint:containedctx // the caller's, checked when its inputs are scheduled
	inputs  [][]int32
	vectors [][]float32
	err     error // the first input's failure; the job fails as a whole
	left    int
	done    chan struct{}
}

// embedItem is one input of a job waiting for, or in, a step.
type embedItem struct {
	job   *embedJob
	index int
}

// Embed computes one pooled, unnormalized vector per input on the model's
// embedding context. The inputs join the core's steps beside the running
// generation, batched with those of other calls, as many per step as the
// executor's engine.EmbedCapacity allows; each is evaluated in one piece.
// It returns when all are done, ctx ends, or the core stops
// (scheduler.ErrClosed). An input the engine refuses fails the call with an
// error wrapping engine.ErrInvalidBatch.
func (c *EngineCore) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(inputs) == 0 {
		return nil, nil
	}
	job := &embedJob{ctx: ctx, inputs: inputs, vectors: make([][]float32, len(inputs)), left: len(inputs), done: make(chan struct{})}
	if !c.post(command{embed: job}) {
		return nil, scheduler.ErrClosed
	}
	select {
	case <-job.done:
		return job.vectors, job.err
	case <-ctx.Done():
		// The core drops the job's inputs that have not run when it
		// schedules them; the job is nobody's after this.
		return nil, ctx.Err()
	}
}

// queueEmbed takes a posted job's inputs into the core's queue.
func (c *EngineCore) queueEmbed(job *embedJob) {
	for i := range job.inputs {
		c.embeds = append(c.embeds, embedItem{job: job, index: i})
	}
}

// takeEmbeds moves queued inputs into step, in order, within the
// executor's capacity and what the step's token budget leaves. An input
// too large for any step goes alone so that the engine says why.
func (c *EngineCore) takeEmbeds(step *engine.Step) {
	if len(c.embeds) == 0 {
		return
	}
	em, ok := c.exec.(engine.Embedder)
	if !ok {
		for _, it := range c.embeds {
			it.job.finish(it.index, nil, ErrCannotEmbed)
		}
		c.embeds = nil
		return
	}
	capacity := em.EmbedCapacity()
	// Embedding tokens share the step's token budget with the scheduled
	// batch, so that a burst of embeddings does not lengthen the steps of
	// the generating sequences beyond what max_num_batched_tokens allows.
	// The first input of the queue is always taken (up to the engine's
	// capacity), so that embeddings progress under any load: a step
	// exceeds the budget by at most one input.
	budget := min(capacity.Tokens, max(c.cfg.Scheduler.MaxNumBatchedTokens-step.NumTokens(), 0))
	tokens, n := 0, 0
	for n < len(c.embeds) {
		it := c.embeds[n]
		if it.job.ended() {
			// The caller went away or another input failed.
			c.embeds = append(c.embeds[:n], c.embeds[n+1:]...)
			continue
		}
		l := len(it.job.inputs[it.index])
		if len(step.Embeds) > 0 && (tokens+l > budget || len(step.Embeds) >= capacity.Inputs) {
			break
		}
		c.embedSeq++
		tag := c.embedSeq
		c.inFlight[tag] = it
		step.Embeds = append(step.Embeds, engine.EmbedInput{Tag: tag, Tokens: it.job.inputs[it.index]})
		tokens += l
		n++
	}
	c.embeds = c.embeds[n:]
}

// deliverEmbeds hands a step's embeddings to their jobs.
func (c *EngineCore) deliverEmbeds(res []engine.Embedding) {
	for _, e := range res {
		it, ok := c.inFlight[e.Tag]
		if !ok {
			continue
		}
		delete(c.inFlight, e.Tag)
		it.job.finish(it.index, e.Vector, e.Err)
	}
}

// failEmbeds ends every queued and in-flight input with err.
func (c *EngineCore) failEmbeds(err error) {
	for tag, it := range c.inFlight {
		delete(c.inFlight, tag)
		it.job.finish(it.index, nil, err)
	}
	for _, it := range c.embeds {
		it.job.finish(it.index, nil, err)
	}
	c.embeds = nil
}

// finish records one input's result; the core's goroutine calls it.
func (j *embedJob) finish(i int, v []float32, err error) {
	if j.left == 0 {
		return
	}
	if err != nil {
		if j.err == nil {
			j.err = fmt.Errorf("input %d: %w", i, err)
		}
		j.left = 0
		close(j.done)
		return
	}
	j.vectors[i] = v
	j.left--
	if j.left == 0 {
		close(j.done)
	}
}

// ended reports whether the job needs no more work.
func (j *embedJob) ended() bool { return j.left == 0 || j.ctx.Err() != nil }
