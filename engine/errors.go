package engine

import "errors"

var (
	// ErrKVFull means the KV memory had no room for the batch. The memory is
	// as it was before the step; the caller can free space and try again.
	ErrKVFull = errors.New("engine: no KV cells left for the batch")

	// ErrInvalidBatch means the batch contradicted the engine's memory
	// (positions not consecutive, unknown sequence). It is a scheduler bug.
	ErrInvalidBatch = errors.New("engine: invalid batch")

	// ErrClosed is returned after Close.
	ErrClosed = errors.New("engine: closed")
)
