package scheduler

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrQueueFull is returned by Submit when the waiting queue is at its
	// bound. The error is a *QueueFullError carrying a retry hint.
	ErrQueueFull = errors.New("scheduler: waiting queue is full")

	// ErrClosed is returned by Submit after the loop stopped.
	ErrClosed = errors.New("scheduler: closed")

	// ErrDeadline ends a request whose deadline passed.
	ErrDeadline = errors.New("scheduler: request deadline exceeded")

	// ErrEngine ends requests when the engine failed.
	ErrEngine = errors.New("scheduler: engine failure")

	// ErrTooLong is returned by Submit when a prompt cannot fit the model's
	// context or the KV capacity.
	ErrTooLong = errors.New("scheduler: prompt too long")
)

// QueueFullError is ErrQueueFull with a hint for the Retry-After header.
type QueueFullError struct {
	Waiting    int
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("%v (%d waiting); retry after %s", ErrQueueFull, e.Waiting, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }
