package batching

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/models/tensor"
)

// ErrClosed is returned for requests queued or made after Close.
var ErrClosed = errors.New("batching: the model is closed")

// Config configures a Batcher.
type Config struct {
	// MaxBatchSize is the most rows one Run takes; <= 1 turns batching
	// off (every request runs alone).
	MaxBatchSize int
	// MaxBatchTime bounds how long an open batch waits for requests known
	// to be on their way (in Infer, not yet queued) while a worker is
	// free: an upper bound, never a fixed cost (Triton's
	// max_queue_delay_microseconds). 0: a batch goes to the first free
	// worker at once.
	MaxBatchTime time.Duration
	// Workers is how many batches run at once (default 1).
	Workers int
	// Observer, if set, sees every batch and every request's queue time.
	Observer Observer
	// Clock times the window and the queue (nil: the system clock).
	Clock clock.Clock
}

// Observer records what the batcher does (metrics implement it).
type Observer interface {
	// Batch is called before a Run with the rows it holds.
	Batch(rows int)
	// Queued is called when a request's batch starts, with how long the
	// request waited since Infer.
	Queued(d time.Duration)
	// Arrived is called when a request enters Infer, before it queues,
	// with the requests then waiting for their batch to start (queued)
	// and those in batches the workers run (running): MLServer's
	// batch_request_queue and parallel_request_queue.
	Arrived(queued, running int)
}

// Batcher merges concurrent requests into batches for one Executor.
type Batcher struct {
	exec  tensor.Executor
	cfg   Config
	clock clock.Clock

	calls chan *call
	work  chan []*call
	quit  chan struct{}
	once  sync.Once
	loop  sync.WaitGroup // the queue's goroutine
	runs  sync.WaitGroup // the workers

	inflight atomic.Int64 // requests in Infer
	running  atomic.Int64 // requests in batches the workers run
	// slots holds a token per run in progress, Workers at most: the queue's
	// goroutine takes one before it hands a batch to a worker, which gives
	// it back when the batch ends; Infer takes one to run a request on its
	// own goroutine when nothing is queued; Close takes them all.
	slots chan struct{}
	// queued is the requests the queue's goroutine holds (its open batch
	// and the one waiting for the next).
	queued atomic.Int64
	// arriving counts the requests in Infer that the queue's goroutine
	// has not received yet: Infer adds one before it queues and takes it
	// back if it gives up; the goroutine takes it back when it receives.
	arriving atomic.Int64

	// received, if set (by tests), is called by the queue's goroutine
	// each time it takes a request.
	received func()
}

// call is one request: its inputs, where it came from, and its answer.
type call struct {
	ctx     context.Context //nolint:containedctx // the queued request's own context, which the worker checks before the run
	in      []tensor.Tensor
	rows    int
	arrived time.Time
	// done is closed once out or err is set, by the worker.
	done chan struct{}
	out  []tensor.Tensor
	err  error
}

// New starts a Batcher over exec. Close stops it; it does not close exec.
func New(exec tensor.Executor, cfg Config) *Batcher {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	b := &Batcher{
		exec:  exec,
		cfg:   cfg,
		clock: clock.Or(cfg.Clock),
		calls: make(chan *call),
		work:  make(chan []*call),
		slots: make(chan struct{}, cfg.Workers),
		quit:  make(chan struct{}),
	}
	b.loop.Add(1)
	go b.run()
	b.runs.Add(cfg.Workers)
	for range cfg.Workers {
		go b.worker()
	}
	return b
}

// Infer runs one request of in (one tensor per input, in the model's
// order, each with the same batch size Shape[0] >= 1) and returns its
// outputs, alone or as part of a batch.
func (b *Batcher) Infer(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(in) == 0 || len(in[0].Shape) == 0 || in[0].Shape[0] < 1 {
		return nil, fmt.Errorf("batching: a request needs inputs with a batch size of at least 1")
	}
	n := b.inflight.Add(1)
	defer b.inflight.Add(-1)
	if b.cfg.Observer != nil {
		running := b.running.Load()
		b.cfg.Observer.Arrived(int(max(n-1-running, 0)), int(running))
	}
	c := &call{ctx: ctx, in: in, rows: int(in[0].Shape[0]), arrived: b.clock.Now(), done: make(chan struct{})}
	if b.queued.Load() == 0 && b.arriving.Load() == 0 {
		// Nothing waits: with a run slot free, the request runs now, on
		// this goroutine (no hand-off to the queue and a worker).
		select {
		case <-b.quit:
			return nil, ErrClosed
		case b.slots <- struct{}{}:
			if b.received != nil {
				b.received()
			}
			b.execute([]*call{c}, nil)
			<-b.slots
			return c.out, c.err
		default:
		}
	}
	b.arriving.Add(1)
	select {
	case b.calls <- c:
	case <-ctx.Done():
		b.arriving.Add(-1)
		return nil, ctx.Err()
	case <-b.quit:
		b.arriving.Add(-1)
		return nil, ErrClosed
	}
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		// The worker drops the call if its batch has not started; if it
		// has, the rows are computed and thrown away.
		return nil, ctx.Err()
	}
}

// Idle reports whether no request is queued or running.
func (b *Batcher) Idle() bool { return b.inflight.Load() == 0 }

// Close fails the queued requests with ErrClosed and waits for the
// running batches to end. It is idempotent.
func (b *Batcher) Close() {
	b.once.Do(func() {
		close(b.quit)
		b.loop.Wait()
		b.runs.Wait()
		// The requests running on their own goroutines end too; the
		// slots stay taken, so later requests queue and meet quit.
		for range b.cfg.Workers {
			b.slots <- struct{}{}
		}
	})
}

// run owns the queue: it builds batches and hands them to the workers.
//
// The open batch goes to a worker, with a run slot, as soon as it is
// ready: full, followed by a request that does not fit it, its window
// over, or no request on its way (none in Infer that the goroutine has not
// received). So a request that finds the model idle runs at once (Infer
// runs it itself when nothing is queued), and requests that arrive while
// every slot is taken join the open batch until one frees.
func (b *Batcher) run() {
	defer b.loop.Done()
	defer close(b.work)
	var (
		cur     []*call // the open batch
		rows    int     // rows in cur
		pending *call   // a request that did not fit cur: first of the next
		expired bool    // cur's window is over
		slot    bool    // the goroutine holds a run slot for cur
		timer   clock.Timer
		timeout <-chan time.Time
	)
	maxRows := b.cfg.MaxBatchSize
	batching := maxRows > 1
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
		}
		timer, timeout = nil, nil
	}
	open := func(c *call) {
		cur, rows, expired = []*call{c}, c.rows, false
		if batching && c.rows < maxRows && b.cfg.MaxBatchTime > 0 {
			timer = b.clock.NewTimer(b.cfg.MaxBatchTime)
			timeout = timer.C()
		}
	}
	for {
		var (
			send chan<- []*call
			take chan<- struct{}
			recv <-chan *call
		)
		held := int64(len(cur))
		if pending != nil {
			held++
		}
		b.queued.Store(held)
		if cur == nil {
			recv = b.calls
		} else {
			if !batching || rows >= maxRows || pending != nil || expired || timeout == nil || b.arriving.Load() <= 0 {
				if slot {
					send = b.work
				} else {
					take = b.slots
				}
			}
			if batching && pending == nil && rows < maxRows {
				recv = b.calls
			}
		}
		select {
		case c := <-recv:
			b.arriving.Add(-1)
			switch {
			case cur == nil:
				open(c)
			case rows+c.rows <= maxRows && sameShape(cur[0].in, c.in):
				cur = append(cur, c)
				rows += c.rows
			default:
				pending = c
			}
			if b.received != nil {
				b.received()
			}
		case take <- struct{}{}:
			slot = true
		case send <- cur:
			slot = false // the worker gives it back
			stopTimer()
			cur, rows = nil, 0
			if pending != nil {
				c := pending
				pending = nil
				open(c)
			}
		case <-timeout:
			expired, timer, timeout = true, nil, nil
		case <-b.quit:
			stopTimer()
			if slot {
				<-b.slots
			}
			for _, c := range append(cur, pending) {
				if c != nil {
					c.err = ErrClosed
					close(c.done)
				}
			}
			return
		}
	}
}

// sameShape reports whether two requests' inputs agree on every dimension
// but the batch one, so that they can share a Run.
func sameShape(a, b []tensor.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DType != b[i].DType || len(a[i].Shape) != len(b[i].Shape) || !slices.Equal(a[i].Shape[1:], b[i].Shape[1:]) {
			return false
		}
	}
	return true
}

func (b *Batcher) worker() {
	defer b.runs.Done()
	var scratch mergeBuffers // this worker's merged inputs, reused batch after batch
	for batch := range b.work {
		b.execute(batch, &scratch)
		<-b.slots
	}
}

// execute runs one batch and answers its requests; a batch of several
// requests is merged into scratch (nil: fresh memory), which the Run
// reads and does not keep (tensor.Executor).
func (b *Batcher) execute(batch []*call, scratch *mergeBuffers) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	b.running.Add(int64(len(live)))
	defer b.running.Add(-int64(len(live)))
	now := b.clock.Now()
	rows := 0
	for _, c := range live {
		rows += c.rows
		if b.cfg.Observer != nil {
			b.cfg.Observer.Queued(now.Sub(c.arrived))
		}
	}
	if b.cfg.Observer != nil {
		b.cfg.Observer.Batch(rows)
	}
	ctx := live[0].ctx
	if len(live) > 1 {
		// A batch serves several clients: one going away must not stop
		// the others' run.
		ctx = context.WithoutCancel(ctx)
	}
	out, err := b.exec.Run(ctx, merge(live, rows, scratch))
	if err == nil {
		err = split(live, out, rows)
	}
	for _, c := range live {
		if err != nil {
			c.err = err
		}
		close(c.done)
	}
}

// mergeBuffers holds a worker's merged inputs between batches, one slice
// per model input, so that a batch of one-row requests does not allocate
// its inputs anew (at 32 concurrent CNN clients, a 100 kB []float32 a
// batch).
type mergeBuffers struct {
	f32 [][]float32
	i64 [][]int64
}

// merge concatenates the requests' inputs along dim 0 into buf's memory
// (grown as needed; nil: fresh memory); a single request's inputs pass as
// they are.
func merge(calls []*call, rows int, buf *mergeBuffers) []tensor.Tensor {
	if len(calls) == 1 {
		return calls[0].in
	}
	if buf == nil {
		buf = &mergeBuffers{}
	}
	first := calls[0].in
	for len(buf.f32) < len(first) {
		buf.f32 = append(buf.f32, nil)
		buf.i64 = append(buf.i64, nil)
	}
	in := make([]tensor.Tensor, len(first))
	for i, t := range first {
		m := tensor.Tensor{Name: t.Name, DType: t.DType, Shape: append([]int64{int64(rows)}, t.Shape[1:]...)}
		// Sized once: appending grows and copies the batch's inputs on the way.
		if t.F32 != nil {
			m.F32 = grow(buf.f32[i], len(t.F32)/max(calls[0].rows, 1)*rows)
			for _, c := range calls {
				m.F32 = append(m.F32, c.in[i].F32...)
			}
			buf.f32[i] = m.F32
		}
		if t.I64 != nil {
			m.I64 = grow(buf.i64[i], len(t.I64)/max(calls[0].rows, 1)*rows)
			for _, c := range calls {
				m.I64 = append(m.I64, c.in[i].I64...)
			}
			buf.i64[i] = m.I64
		}
		in[i] = m
	}
	return in
}

// grow returns s emptied, with room for n elements.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, 0, n)
	}
	return s[:0]
}

// split gives each request its rows of every output.
func split(calls []*call, out []tensor.Tensor, rows int) error {
	if len(calls) == 1 {
		calls[0].out = out
		return nil
	}
	for _, t := range out {
		if len(t.Shape) == 0 || t.Shape[0] != int64(rows) {
			return fmt.Errorf("batching: output %q has shape %v for a batch of %d rows", t.Name, t.Shape, rows)
		}
	}
	for _, c := range calls {
		c.out = make([]tensor.Tensor, len(out))
	}
	for j, t := range out {
		per := 0
		if rows > 0 {
			per = int(t.Elements()) / rows
		}
		at := 0
		for _, c := range calls {
			o := tensor.Tensor{Name: t.Name, DType: t.DType, Shape: append([]int64{int64(c.rows)}, t.Shape[1:]...)}
			n := c.rows * per
			// Each request's rows are its own part of the batch's
			// output, shared rather than copied: no one else holds it.
			switch {
			case t.F32 != nil:
				o.F32 = t.F32[at : at+n : at+n]
			case t.I64 != nil:
				o.I64 = t.I64[at : at+n : at+n]
			}
			at += n
			c.out[j] = o
		}
	}
	return nil
}
