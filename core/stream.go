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

// Receive reads the streams of one HTTP or gRPC request and calls fn, on
// the caller's goroutine, with each batch of outputs in the order the
// batches arrive, or with the error that ended a stream (io.EOF at its
// end), until fn returns done or an error, or ctx ends (ctx.Err()). Several
// streams are read concurrently, so a slow one does not hold back the
// others; a single stream is read on the caller's goroutine.
func Receive(ctx context.Context, streams []*Stream, fn func(i int, outs []scheduler.Output, err error) (done bool, ferr error)) error {
	if len(streams) == 1 {
		for {
			outs, err := streams[0].Recv(ctx)
			if done, ferr := fn(0, outs, err); done || ferr != nil {
				return ferr
			}
			if err != nil {
				// The stream ended and fn did not stop: nothing more comes.
				return nil
			}
		}
	}
	type batch struct {
		i    int
		outs []scheduler.Output
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan batch)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i, s := range streams {
		wg.Go(func() {
			for {
				outs, err := s.Recv(ctx)
				select {
				case ch <- batch{i, outs, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		})
	}
	for {
		select {
		case b := <-ch:
			if done, ferr := fn(b.i, b.outs, b.err); done || ferr != nil {
				return ferr
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
