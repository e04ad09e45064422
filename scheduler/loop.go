package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmserve/llmserve/engine"
)

// Observer receives what the loop measures. Implementations must be fast
// and safe for concurrent use; the metrics package provides one.
type Observer interface {
	// StepDone reports one executed step.
	StepDone(s StepInfo)
	// FirstToken reports a request's time to first token.
	FirstToken(ttft time.Duration)
	// RequestDone reports a finished request.
	RequestDone(r RequestInfo)
}

// StepInfo describes one executed step.
type StepInfo struct {
	Duration time.Duration
	// Tokens decoded in the step; Prefill and Decode split them by kind.
	Tokens, PrefillTokens, DecodeTokens int
	// Generated is the number of tokens sampled.
	Generated int
	Stats     Stats
}

// RequestInfo describes a finished request.
type RequestInfo struct {
	E2E    time.Duration
	Usage  Usage
	Reason FinishReason
}

// LoopConfig configures a Loop.
type LoopConfig struct {
	// Logger receives step errors; nil means slog.Default().
	Logger *slog.Logger
	// Observer receives measurements; may be nil.
	Observer Observer
}

// Loop is the one goroutine that owns a Scheduler and an Executor: it takes
// submissions and aborts from channels between steps and runs
// schedule → execute → update until its context ends. Everything else talks
// to it through Submit and the Streams it returns.
type Loop struct {
	sched    *Scheduler
	exec     engine.Executor
	log      *slog.Logger
	obs      Observer
	maxQueue int64

	// inbox holds submissions and aborts in the order they were made, so
	// that an abort never overtakes its request; wake signals it grew.
	mu       sync.Mutex
	inbox    []command // guarded by mu
	closed   bool      // guarded by mu
	wake     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	queued   atomic.Int64 // submitted requests not yet started
	stats    atomic.Pointer[Stats]
	doneRate atomic.Uint64 // float64 bits: EWMA of finished requests per second

	// Owned by the loop goroutine.
	lastDone time.Time
	live     map[string]*liveRequest
}

type liveRequest struct {
	req    *Request
	stream *Stream
}

type submission struct {
	req    *Request
	stream *Stream
}

// command is a submission or an abort.
type command struct {
	sub   *submission
	abort abortMsg
}

type abortMsg struct {
	id      string
	choice  int
	stopped bool
}

// NewLoop returns a loop over sched and exec. Call Run to start it.
func NewLoop(sched *Scheduler, exec engine.Executor, cfg LoopConfig) *Loop {
	l := &Loop{
		sched:    sched,
		exec:     exec,
		log:      cfg.Logger,
		obs:      cfg.Observer,
		maxQueue: int64(sched.cfg.MaxWaiting),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		live:     make(map[string]*liveRequest),
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	st := sched.Stats()
	l.stats.Store(&st)
	return l
}

// Stats returns the snapshot published after the last step. Safe for
// concurrent use.
func (l *Loop) Stats() Stats { return *l.stats.Load() }

// Queued returns the number of submitted requests that have not started.
func (l *Loop) Queued() int { return int(l.queued.Load()) }

// Submit hands a request to the loop and returns its stream. It fails fast
// with a *QueueFullError when MaxWaiting requests are already waiting, with
// an error wrapping ErrTooLong or describing a bad field when the request can
// never run, and with ErrClosed after the loop stopped.
func (l *Loop) Submit(ctx context.Context, r *Request) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := l.sched.CheckRequest(r); err != nil {
		return nil, err
	}
	if n := l.queued.Add(1); n > l.maxQueue {
		l.queued.Add(-1)
		return nil, &QueueFullError{Waiting: int(n - 1), RetryAfter: l.retryAfter(n - 1)}
	}
	st := NewStream(r.ID, r.N, func(choice int, stopped bool) {
		l.post(command{abort: abortMsg{id: r.ID, choice: choice, stopped: stopped}})
	})
	if !l.post(command{sub: &submission{req: r, stream: st}}) {
		l.queued.Add(-1)
		return nil, ErrClosed
	}
	return st, nil
}

// post appends a command to the inbox and wakes the loop. It never blocks;
// it returns false after the loop stopped.
func (l *Loop) post(c command) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.inbox = append(l.inbox, c)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns the commands posted since the last call.
func (l *Loop) take() []command {
	l.mu.Lock()
	defer l.mu.Unlock()
	cmds := l.inbox
	l.inbox = nil
	return cmds
}

// retryAfter estimates when a place in the queue frees up from the recent
// rate of finished requests, between 1 s and 1 min.
func (l *Loop) retryAfter(waiting int64) time.Duration {
	rate := math.Float64frombits(l.doneRate.Load())
	if rate <= 0 {
		return time.Second
	}
	d := time.Duration(float64(waiting)/rate*float64(time.Second)) / 2
	return min(max(d, time.Second), time.Minute).Round(time.Second)
}

// Done is closed when Run has returned.
func (l *Loop) Done() <-chan struct{} { return l.done }

// Run drives the scheduler until ctx ends or the engine fails. On return,
// every live request has ended with ErrClosed or ErrEngine.
func (l *Loop) Run(ctx context.Context) (err error) {
	defer func() {
		l.stopOnce.Do(func() { close(l.done) })
		if err == nil {
			err = ctx.Err()
		}
		l.sched.AbortAll(ErrClosed)
		l.drainSubmissions()
		l.deliver(time.Now())
	}()
	for {
		// Every pass starts with the inbox, so a wake-up is never consumed
		// without looking at what was posted.
		l.intake()
		if !l.sched.HasWork() {
			l.publish()
			if !l.sleep(ctx) {
				return nil
			}
			continue
		}
		now := time.Now()
		l.sched.Expire(now)
		step := l.sched.Schedule()
		l.deliver(now)
		if len(step.Batch) == 0 && len(step.MemOps) == 0 && len(step.Added) == 0 && len(step.Removed) == 0 {
			// Nothing can run now (the queue waits for a sibling or for
			// memory); wait until something is posted.
			l.publish()
			if !l.sleep(ctx) {
				return nil
			}
			continue
		}
		start := time.Now()
		res, err := l.exec.Execute(ctx, step)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.log.Error("engine step failed; ending all requests", "err", err, "tokens", step.NumTokens())
			l.sched.AbortAll(fmt.Errorf("%w: %v", ErrEngine, err))
			l.deliver(time.Now())
			if !errors.Is(err, engine.ErrKVFull) {
				return fmt.Errorf("engine: %w", err)
			}
			continue
		}
		l.sched.Update(step, res)
		end := time.Now()
		l.deliver(end)
		info := l.publish()
		if l.obs != nil {
			prefill := 0
			for i := range step.Batch {
				if len(step.Batch[i].Tokens) > 1 || !step.Batch[i].Sample {
					prefill += len(step.Batch[i].Tokens)
				}
			}
			n := step.NumTokens()
			l.obs.StepDone(StepInfo{
				Duration: end.Sub(start), Tokens: n, PrefillTokens: prefill, DecodeTokens: n - prefill,
				Generated: len(res.Samples), Stats: info,
			})
		}
	}
}

// sleep waits for a post; false means ctx ended.
func (l *Loop) sleep(ctx context.Context) bool {
	select {
	case <-l.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// intake applies every pending submission and abort.
func (l *Loop) intake() {
	for _, c := range l.take() {
		l.handle(c)
	}
}

func (l *Loop) handle(c command) {
	if c.sub != nil {
		l.add(c.sub, time.Now())
		return
	}
	l.sched.Abort(c.abort.id, c.abort.choice, c.abort.stopped, nil)
}

func (l *Loop) add(s *submission, now time.Time) {
	r := s.req
	if l.sched.Has(r.ID) {
		l.queued.Add(-1)
		s.stream.Push(l.failAll(r, fmt.Errorf("request id %q is already running", r.ID)), Usage{})
		return
	}
	if r.Arrival.IsZero() {
		r.Arrival = now
	}
	l.live[r.ID] = &liveRequest{req: r, stream: s.stream}
	l.sched.Add(r)
}

func (l *Loop) failAll(r *Request, err error) []Output {
	outs := make([]Output, r.N)
	for i := range outs {
		outs[i] = Output{Choice: i, Finish: FinishAbort, Err: err}
	}
	return outs
}

// drainSubmissions closes the inbox and fails submissions that were never
// added.
func (l *Loop) drainSubmissions() {
	l.mu.Lock()
	l.closed = true
	cmds := l.inbox
	l.inbox = nil
	l.mu.Unlock()
	for _, c := range cmds {
		if s := c.sub; s != nil {
			l.queued.Add(-1)
			s.stream.Push(l.failAll(s.req, ErrClosed), Usage{})
		}
	}
}

// deliver pushes the scheduler's outputs to their streams, one Push per
// request, and records request-level measurements.
func (l *Loop) deliver(now time.Time) {
	l.queued.Add(-int64(l.sched.TakeStarted()))
	outs := l.sched.Outputs()
	for i := 0; i < len(outs); {
		id := outs[i].RequestID
		batch := make([]Output, 0, 1)
		first := false
		j := i
		for ; j < len(outs) && outs[j].RequestID == id; j++ {
			batch = append(batch, outs[j].Output)
			first = first || outs[j].First
		}
		last := outs[j-1]
		i = j
		lr := l.live[id]
		if lr == nil {
			continue
		}
		lr.stream.Push(batch, last.Usage)
		if first && l.obs != nil {
			l.obs.FirstToken(now.Sub(lr.req.Arrival))
		}
		if last.Last {
			delete(l.live, id)
			l.finished(lr.req, last, now)
		}
	}
}

func (l *Loop) finished(r *Request, last RequestOutput, now time.Time) {
	// EWMA of completions per second, for Retry-After.
	if !l.lastDone.IsZero() {
		if dt := now.Sub(l.lastDone).Seconds(); dt > 0 {
			inst := 1 / dt
			old := math.Float64frombits(l.doneRate.Load())
			if old == 0 {
				old = inst
			}
			l.doneRate.Store(math.Float64bits(0.9*old + 0.1*inst))
		}
	}
	l.lastDone = now
	if l.obs != nil {
		l.obs.RequestDone(RequestInfo{E2E: now.Sub(r.Arrival), Usage: last.Usage, Reason: last.Output.Finish})
	}
}

func (l *Loop) publish() Stats {
	st := l.sched.Stats()
	l.stats.Store(&st)
	return st
}
