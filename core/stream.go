package core

import (
	"context"
	"io"
	"sync"

	"github.com/llmserve/llmserve/scheduler"
)

// Stream delivers a request's outputs to its caller. The engine core appends to it
// without ever blocking; the caller drains it with Recv at its own pace, so a
// slow client never stalls the batch.
type Stream struct {
	id     string
	n      int
	notify chan struct{} // cap 1: "something new"
	abort  func(choice int, stopped bool)

	mu      sync.Mutex
	pending []scheduler.Output // guarded by mu
	usage   scheduler.Usage    // guarded by mu
	open    int                // choices not finished; guarded by mu
}

// NewStream returns a stream for a request with n choices. abort is called
// by Cancel and StopChoice. Only the engine core and test doubles create
// streams.
func NewStream(id string, n int, abort func(choice int, stopped bool)) *Stream {
	return &Stream{id: id, n: n, open: n, notify: make(chan struct{}, 1), abort: abort}
}

// ID is the request id.
func (s *Stream) ID() string { return s.id }

// Recv returns the outputs produced since the last call, blocking until there
// is at least one. After the last choice finished and everything was
// returned, it returns io.EOF. It returns ctx.Err() when ctx ends first; the
// request keeps running until Cancel.
func (s *Stream) Recv(ctx context.Context) ([]scheduler.Output, error) {
	for {
		s.mu.Lock()
		if len(s.pending) > 0 {
			out := s.pending
			s.pending = nil
			s.mu.Unlock()
			return out, nil
		}
		if s.open == 0 {
			s.mu.Unlock()
			return nil, io.EOF
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Usage returns the token counts so far; they are final after Recv returned
// io.EOF.
func (s *Stream) Usage() scheduler.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

// Cancel aborts every choice that is still running and frees its KV memory
// within one step. It is safe to call more than once and after the end.
func (s *Stream) Cancel() {
	for i := range s.n {
		s.abort(i, false)
	}
}

// StopChoice ends one choice as if it had generated a stop token. The caller
// uses it when it found a stop string in the text; tokens already generated
// after that point may still arrive and are the caller's to discard.
func (s *Stream) StopChoice(choice int) {
	if choice >= 0 && choice < s.n {
		s.abort(choice, true)
	}
}

// Push appends outputs and the usage so far. Only the engine core and test
// doubles call it; it never blocks.
func (s *Stream) Push(outs []scheduler.Output, usage scheduler.Usage) {
	s.mu.Lock()
	s.pending = append(s.pending, outs...)
	for i := range outs {
		if outs[i].Finish != scheduler.FinishNone {
			s.open--
		}
	}
	s.usage = usage
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}
