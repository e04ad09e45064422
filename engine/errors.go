package engine

import "errors"

var (
	// ErrKVFull means the KV memory had no room for a sequence. The caller
	// can free space (preempt) and try again.
	ErrKVFull = errors.New("engine: no KV cells left for the sequence")

	// ErrInvalidBatch means a step contradicted the engine's memory
	// (positions not consecutive, unknown sequence, a slot out of range). It
	// is a scheduler bug.
	ErrInvalidBatch = errors.New("engine: invalid batch")

	// ErrSampling means the model produced logits the sampler cannot use
	// (NaN, infinities, or magnitudes beyond Sampling.SafeLogitBound).
	ErrSampling = errors.New("engine: the model produced logits that cannot be sampled")

	// ErrClosed is returned after Close.
	ErrClosed = errors.New("engine: closed")
)
