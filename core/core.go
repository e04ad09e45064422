package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/scheduler"
)

// Config configures an EngineCore.
type Config struct {
	// Scheduler bounds the scheduler; KV sizes the KV manager. Both are
	// built anew, with a new executor, at every (re)start.
	Scheduler scheduler.Config
	KV        kvcache.Config
	// NewExecutor creates the executor the core drives, with slots KV
	// slots (KV.InitialSlots, or KV.Slots). It is called on the core's
	// goroutine, at start and after a failure of the executor.
	NewExecutor func(slots int) (engine.Executor, error)
	// Logger receives engine failures; nil discards.
	Logger *slog.Logger
	// Observer receives measurements; may be nil.
	Observer Observer
	// MaxRestarts is how many executor failures within RestartWindow the
	// core survives by restarting; one more ends Run with the error. 0
	// means 3 per minute.
	MaxRestarts   int
	RestartWindow time.Duration
	// IdleShrink is how long the core must be idle before it shrinks an
	// executor that grew (an engine.Resizer) back to KV.InitialSlots; 0
	// means a minute, negative never.
	IdleShrink time.Duration
	// Clock is the time the core reads (step times, deadlines, leases,
	// the idle shrink) and waits on; nil means clock.Real.
	Clock clock.Clock
}

// EngineCore is the one goroutine that owns a model's scheduler, KV manager
// and executor and runs schedule → execute → update (see doc.go). Other
// goroutines talk to it through Submit and the Streams it returns.
type EngineCore struct {
	cfg      Config
	clock    clock.Clock
	log      *slog.Logger
	obs      Observer
	maxQueue int64

	// decodeStep and prefillToken are paceLongPrefill's moving averages, in
	// seconds (0: not measured yet). Only the core's goroutine uses them.
	decodeStep, prefillToken float64
	longBudget               int // the last budget set (initialLongBudget at first)
	// pooledTokens and pooledSeconds are the prompt tokens and the time
	// they added of the steps not yet measured (fewer than
	// minMeasuredPrompt tokens so far).
	pooledTokens  int
	pooledSeconds float64

	// inbox holds submissions and aborts in the order they were made, so
	// that an abort never overtakes its request; wake signals it grew.
	mu      sync.Mutex
	inbox   []command // guarded by mu
	closed  bool      // guarded by mu
	wake    chan struct{}
	started chan struct{}
	done    chan struct{}

	queued   atomic.Int64 // submitted requests not yet started
	stats    atomic.Pointer[scheduler.Stats]
	ready    atomic.Bool
	restarts atomic.Uint64
	cut      atomic.Int64  // requests ended by shutdown
	doneRate atomic.Uint64 // float64 bits: EWMA of finished requests per second
	// layout is the executor's KV layout (nil when it does not say).
	layout        atomic.Pointer[engine.KVLayout]
	leasesExpired atomic.Uint64

	// Owned by the core's goroutine.
	exec     engine.Executor
	kv       *kvcache.Manager
	sched    *scheduler.Scheduler
	live     map[string]*liveRequest
	lastDone time.Time
	failures []time.Time
	// lastWork is when the core last executed a step; resizeAfter is when
	// a failed resize may be tried again.
	lastWork    time.Time
	resizeAfter time.Time
	// embeds are embedding inputs waiting for a step; inFlight those in
	// the step being executed, by tag.
	embeds   []embedItem
	inFlight map[uint64]embedItem
	embedSeq uint64
	// leases are the prefills whose KV is kept for a transfer, by id;
	// watches the readers of the prefix cache's events (transfer.go).
	leases  map[string]*Lease
	watches []*KVWatch
	// eventsDropped is the KV manager's count the watches last saw.
	eventsDropped uint64
}

type liveRequest struct {
	req    *scheduler.Request
	stream *Stream
}

// command is a batch of submissions, an embedding job, a function to run
// on the core's goroutine, or an abort.
type command struct {
	subs  []submission
	embed *embedJob
	fn    func()
	abort abortMsg
}

type submission struct {
	req    *scheduler.Request
	stream *Stream
	// lease keeps the request's prompt KV (Prefill); imp is KV to import
	// before it is added (SubmitWithKV).
	lease *Lease
	imp   *kvImport
}

type abortMsg struct {
	id      string
	choice  int
	stopped bool
}

// New returns an engine core. Call Run to start it.
func New(cfg Config) (*EngineCore, error) {
	if cfg.NewExecutor == nil {
		return nil, errors.New("core: no executor factory")
	}
	if err := cfg.KV.Validate(); err != nil {
		return nil, err
	}
	kvStats := kvcache.Stats{Slots: cfg.KV.Slots, SlotTokens: cfg.KV.SlotTokens, CapacityTokens: cfg.KV.CapacityTokens}
	if err := cfg.Scheduler.Validate(kvStats); err != nil {
		return nil, err
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = 3
	}
	if cfg.RestartWindow == 0 {
		cfg.RestartWindow = time.Minute
	}
	if cfg.IdleShrink == 0 {
		cfg.IdleShrink = time.Minute
	}
	c := &EngineCore{
		cfg:      cfg,
		clock:    clock.Or(cfg.Clock),
		log:      cfg.Logger,
		obs:      cfg.Observer,
		maxQueue: int64(cfg.Scheduler.MaxWaiting),
		wake:     make(chan struct{}, 1),
		started:  make(chan struct{}),
		done:     make(chan struct{}),
		live:     make(map[string]*liveRequest),
		inFlight: make(map[uint64]embedItem),
		leases:   make(map[string]*Lease),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	st := scheduler.Stats{KV: kvStats}
	c.stats.Store(&st)
	return c, nil
}

// Stats returns the snapshot published after the last step, before that
// step's outputs were delivered. Safe for concurrent use.
func (c *EngineCore) Stats() scheduler.Stats { return *c.stats.Load() }

// Ready reports whether the core serves requests: it started and has not
// stopped, and is not restarting its executor.
func (c *EngineCore) Ready() bool { return c.ready.Load() }

// Restarts is the number of times the executor failed and was replaced.
func (c *EngineCore) Restarts() uint64 { return c.restarts.Load() }

// Cut is the number of requests that shutdown ended before they finished.
func (c *EngineCore) Cut() int64 { return c.cut.Load() }

// Queued returns the number of submitted requests that have not started.
func (c *EngineCore) Queued() int { return int(c.queued.Load()) }

// Started is closed once Run built its first executor, or gave up: then
// Ready or Done tells which.
func (c *EngineCore) Started() <-chan struct{} { return c.started }

// Done is closed when Run has returned.
func (c *EngineCore) Done() <-chan struct{} { return c.done }

// Config returns the configuration.
func (c *EngineCore) Config() Config { return c.cfg }

// IndexError says which request of a batch an error is about.
type IndexError struct {
	Index int
	Err   error
}

func (e *IndexError) Error() string { return fmt.Sprintf("request %d: %v", e.Index, e.Err) }

// Unwrap returns Err.
func (e *IndexError) Unwrap() error { return e.Err }

// Submit hands requests to the core, all or none, and returns one stream
// per request. It fails fast: with an *IndexError wrapping a
// *scheduler.RequestError (or a contract error) when a request can never
// run, with a *scheduler.RequestError when the batch is larger than the
// waiting queue can ever hold, with a *scheduler.QueueFullError when the
// queue has no room now, and with scheduler.ErrClosed after the core
// stopped.
func (c *EngineCore) Submit(ctx context.Context, reqs []*scheduler.Request) ([]*Stream, error) {
	return c.submit(ctx, reqs, nil)
}

// submit is Submit; attach, when not nil, completes each submission.
func (c *EngineCore) submit(ctx context.Context, reqs []*scheduler.Request, attach func(*submission)) ([]*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, r := range reqs {
		if err := c.cfg.Scheduler.CheckRequest(r); err != nil {
			return nil, &IndexError{Index: i, Err: err}
		}
	}
	if err := c.cfg.Scheduler.CheckBatch(len(reqs)); err != nil {
		return nil, err
	}
	k := int64(len(reqs))
	if n := c.queued.Add(k); n > c.maxQueue {
		c.queued.Add(-k)
		return nil, &scheduler.QueueFullError{Waiting: int(n - k), RetryAfter: c.retryAfter(n - k)}
	}
	subs := make([]submission, len(reqs))
	streams := make([]*Stream, len(reqs))
	for i, r := range reqs {
		id := r.ID
		streams[i] = NewStream(id, r.N, func(choice int, stopped bool) {
			c.post(command{abort: abortMsg{id: id, choice: choice, stopped: stopped}})
		})
		subs[i] = submission{req: r, stream: streams[i]}
		if attach != nil {
			attach(&subs[i])
		}
	}
	if !c.post(command{subs: subs}) {
		c.queued.Add(-k)
		return nil, scheduler.ErrClosed
	}
	return streams, nil
}

// post appends a command to the inbox and wakes the core. It never blocks;
// it returns false after the core stopped.
func (c *EngineCore) post(cmd command) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.inbox = append(c.inbox, cmd)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns the commands posted since the last call.
func (c *EngineCore) take() []command {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmds := c.inbox
	c.inbox = nil
	return cmds
}

// retryAfter estimates when a place in the queue frees up from the recent
// rate of finished requests, between 1 s and 1 min.
func (c *EngineCore) retryAfter(waiting int64) time.Duration {
	rate := math.Float64frombits(c.doneRate.Load())
	if rate <= 0 {
		return time.Second
	}
	d := time.Duration(float64(waiting)/rate*float64(time.Second)) / 2
	return min(max(d, time.Second), time.Minute).Round(time.Second)
}

// Run drives the core until ctx ends (shutdown: every live request ends
// with scheduler.ErrClosed) or the executor fails more often than the
// restart policy allows (the error is returned; live requests end with
// scheduler.ErrEngine).
func (c *EngineCore) Run(ctx context.Context) (err error) {
	// The executor's thread pool works with the calling thread: keep it
	// one thread for the core's whole life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer c.stop()
	err = c.start()
	close(c.started)
	if err != nil {
		return err
	}
	for {
		// Every pass starts with the inbox, so a wake-up is never consumed
		// without looking at what was posted.
		c.intake()
		c.expireLeases(c.clock.Now())
		c.resize(c.clock.Now())
		generating := c.sched.HasWork()
		if !generating && len(c.embeds) == 0 {
			c.publish()
			if !c.sleep(ctx) {
				return nil
			}
			continue
		}
		now := c.clock.Now()
		c.lastWork = now
		step := &engine.Step{}
		var paced scheduler.Pacing
		if generating {
			c.sched.Expire(now)
			step = c.sched.Schedule()
			paced = c.sched.Pacing()
		}
		c.takeEmbeds(step)
		if step.Empty() {
			// Nothing can run now (the queue waits for a sibling or for
			// a slot): deliver what aborts produced, then wait for a post.
			c.publish()
			c.deliver(now)
			if !c.sleep(ctx) {
				return nil
			}
			continue
		}
		start := c.clock.Now()
		res, err := c.exec.Execute(ctx, step)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if err := c.restart(err); err != nil {
				return err
			}
			continue
		}
		c.deliverEmbeds(res.Embeddings)
		if generating {
			c.sched.Update(step, res)
		}
		end := c.clock.Now()
		events := c.drainEvents()
		st := c.publish()
		// After publish: a caller woken by its lease sees it in Stats.
		c.collectKept(end)
		c.observeStep(step, res, st, events, paced, end.Sub(start))
		if generating {
			c.paceLongPrefill(step, paced, end.Sub(start))
		}
		c.deliver(end)
	}
}

// start builds a fresh executor, KV manager and scheduler.
func (c *EngineCore) start() error {
	slots := c.cfg.KV.Slots
	if c.cfg.KV.InitialSlots > 0 {
		slots = c.cfg.KV.InitialSlots
	}
	exec, err := c.cfg.NewExecutor(slots)
	if err != nil {
		return fmt.Errorf("core: start the executor: %w", err)
	}
	kv, err := kvcache.New(c.cfg.KV)
	if err != nil {
		return errors.Join(err, exec.Close())
	}
	sched, err := scheduler.New(c.cfg.Scheduler, kv)
	if err != nil {
		return errors.Join(err, exec.Close())
	}
	c.exec, c.kv, c.sched = exec, kv, sched
	// The measured times outlive a restart; so does the budget.
	if c.longBudget == 0 {
		c.longBudget = initialLongBudget
	}
	sched.SetLongPrefillBudget(c.longBudget)
	if lr, ok := exec.(interface{ KVLayout() *engine.KVLayout }); ok {
		c.layout.Store(lr.KVLayout())
	}
	// A new KV manager has an empty cache: the watches start over.
	c.eventsDropped = 0
	c.fanout(nil, true)
	c.publish()
	c.ready.Store(true)
	return nil
}

// restart replaces a failed executor, ending the live requests with
// scheduler.ErrEngine. It returns an error when the failures come faster
// than the restart policy allows.
func (c *EngineCore) restart(cause error) error {
	c.ready.Store(false)
	now := c.clock.Now()
	c.log.Error("engine failed; ending its requests and restarting it", "err", cause)
	c.sched.AbortAll(fmt.Errorf("%w: %w", scheduler.ErrEngine, cause))
	c.failEmbeds(fmt.Errorf("%w: %w", scheduler.ErrEngine, cause))
	c.deliver(now)
	c.dropLeases(fmt.Errorf("%w: %w", scheduler.ErrEngine, cause), now)
	if err := c.exec.Close(); err != nil {
		c.log.Error("closing the failed executor", "err", err)
	}
	c.exec = nil
	c.kv.Close() // its host memory; start builds a new one
	c.restarts.Add(1)
	if c.obs != nil {
		c.obs.EngineRestarted()
	}
	recent := c.failures[:0]
	for _, t := range c.failures {
		if now.Sub(t) < c.cfg.RestartWindow {
			recent = append(recent, t)
		}
	}
	c.failures = append(recent, now)
	if len(c.failures) > c.cfg.MaxRestarts {
		return fmt.Errorf("core: the engine failed %d times within %s; giving up: %w", len(c.failures), c.cfg.RestartWindow, cause)
	}
	return c.start()
}

// stop ends every live request and refuses new ones; it runs when Run
// returns.
func (c *EngineCore) stop() {
	c.ready.Store(false)
	c.mu.Lock()
	c.closed = true
	cmds := c.inbox
	c.inbox = nil
	c.mu.Unlock()
	now := c.clock.Now()
	for _, cmd := range cmds {
		for _, s := range cmd.subs {
			c.queued.Add(-1)
			s.stream.Push(failAll(s.req, scheduler.ErrClosed), scheduler.Usage{})
			if s.lease != nil {
				s.lease.settle(KeptInfo{}, scheduler.ErrClosed, now)
			}
			if s.imp != nil {
				s.imp.done <- 0
			}
		}
		if cmd.embed != nil {
			c.queueEmbed(cmd.embed)
		}
	}
	c.failEmbeds(scheduler.ErrClosed)
	if c.sched != nil {
		c.cut.Add(int64(len(c.live)))
		c.sched.AbortAll(scheduler.ErrClosed)
		c.publish()
		c.deliver(now)
	}
	c.dropLeases(scheduler.ErrClosed, now)
	for _, w := range c.watches {
		w.Close()
	}
	c.watches = nil
	if c.exec != nil {
		if err := c.exec.Close(); err != nil {
			c.log.Error("closing the executor", "err", err)
		}
		c.exec = nil
	}
	if c.kv != nil {
		c.kv.Close()
	}
	close(c.done)
}

// resize grows a resizable executor when sequences wait for a slot (to
// twice its slots, or what they need, up to KV.Slots), and shrinks it back
// to KV.InitialSlots after IdleShrink without work. A failed resize leaves
// everything as it was and is not tried again for 10 seconds.
func (c *EngineCore) resize(now time.Time) {
	rs, ok := c.exec.(engine.Resizer)
	if !ok || now.Before(c.resizeAfter) {
		return
	}
	active, initial := c.kv.ActiveSlots(), c.kv.Stats().Slots
	if c.cfg.KV.InitialSlots > 0 {
		initial = c.cfg.KV.InitialSlots
	}
	target := active
	switch want := c.sched.SlotsWanted(); {
	case want > active:
		target = min(c.cfg.KV.Slots, max(2*active, want))
	case c.cfg.IdleShrink > 0 && active > initial && !c.sched.HasWork() && c.kv.HighestUsedSlot() < initial &&
		!c.lastWork.IsZero() && now.Sub(c.lastWork) >= c.cfg.IdleShrink:
		target = initial
	}
	if target == active {
		return
	}
	start := c.clock.Now()
	if err := rs.Resize(target); err != nil {
		c.log.Warn("could not resize the KV cache; trying again later", "slots", active, "want", target, "err", err)
		c.resizeAfter = now.Add(10 * time.Second)
		return
	}
	if err := c.kv.SetActiveSlots(target); err != nil {
		// The engine resized, the manager cannot follow: a bug.
		c.log.Error("KV manager refused the engine's new slot count", "slots", target, "err", err)
	}
	c.log.Info("KV cache resized", "slots", target, "from", active, "took", c.clock.Now().Sub(start).Round(time.Microsecond))
	c.publish()
}

// sleep waits for a post, for the earliest deadline of a live request, or
// for the time to shrink a grown executor; false means ctx ended.
func (c *EngineCore) sleep(ctx context.Context) bool {
	if idler, ok := c.exec.(engine.Idler); ok {
		idler.Idle()
	}
	var deadline time.Time
	for _, lr := range c.live {
		if d := lr.req.Deadline; !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	if at := c.expireLeases(c.clock.Now()); !at.IsZero() && (deadline.IsZero() || at.Before(deadline)) {
		deadline = at
	}
	if initial := c.cfg.KV.InitialSlots; initial > 0 && c.kv.ActiveSlots() > initial && c.cfg.IdleShrink > 0 && !c.lastWork.IsZero() {
		if at := c.lastWork.Add(c.cfg.IdleShrink); deadline.IsZero() || at.Before(deadline) {
			deadline = at
		}
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := c.clock.NewTimer(deadline.Sub(c.clock.Now()))
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-c.wake:
		return true
	case <-timeout:
		return true
	case <-ctx.Done():
		return false
	}
}

// intake applies every pending submission and abort.
func (c *EngineCore) intake() {
	for _, cmd := range c.take() {
		for _, s := range cmd.subs {
			c.add(s)
		}
		if cmd.embed != nil {
			c.queueEmbed(cmd.embed)
		}
		if cmd.fn != nil {
			cmd.fn()
		}
		if cmd.subs == nil && cmd.embed == nil && cmd.fn == nil {
			c.sched.Abort(cmd.abort.id, cmd.abort.choice, cmd.abort.stopped, nil)
		}
	}
}

func (c *EngineCore) add(s submission) {
	r := s.req
	if c.sched.Has(r.ID) {
		c.queued.Add(-1)
		s.stream.Push(failAll(r, fmt.Errorf("request id %q is already running", r.ID)), scheduler.Usage{})
		if s.lease != nil {
			s.lease.settle(KeptInfo{}, fmt.Errorf("request id %q is already running", r.ID), c.clock.Now())
		}
		if s.imp != nil {
			s.imp.done <- 0
		}
		return
	}
	if s.imp != nil {
		c.importKV(r, s.imp)
	}
	if s.lease != nil {
		c.leases[s.lease.name] = s.lease
	}
	c.live[r.ID] = &liveRequest{req: r, stream: s.stream}
	c.sched.Add(r)
}

func failAll(r *scheduler.Request, err error) []scheduler.Output {
	outs := make([]scheduler.Output, r.N)
	for i := range outs {
		outs[i] = scheduler.Output{Choice: i, Finish: scheduler.FinishAbort, Err: err}
	}
	return outs
}

// deliver pushes the scheduler's outputs to their streams, one Push per
// request, and records request-level measurements.
func (c *EngineCore) deliver(now time.Time) {
	c.queued.Add(-int64(c.sched.TakeStarted()))
	outs := c.sched.Outputs()
	for i := 0; i < len(outs); {
		id := outs[i].RequestID
		batch := make([]scheduler.Output, 0, 1)
		first := false
		j := i
		for ; j < len(outs) && outs[j].RequestID == id; j++ {
			batch = append(batch, outs[j].Output)
			first = first || outs[j].First
		}
		last := outs[j-1]
		i = j
		lr := c.live[id]
		if lr == nil {
			continue
		}
		lr.stream.Push(batch, last.Usage)
		if first && c.obs != nil {
			c.obs.FirstToken(now.Sub(lr.req.Arrival))
		}
		if last.Last {
			delete(c.live, id)
			c.finished(lr.req, last, now)
			if lr.req.KeepKV != "" {
				c.leaseEnded(lr.req, last.Output, now)
			}
		}
	}
}

func (c *EngineCore) finished(r *scheduler.Request, last scheduler.RequestOutput, now time.Time) {
	// EWMA of completions per second, for Retry-After.
	if !c.lastDone.IsZero() {
		if dt := now.Sub(c.lastDone).Seconds(); dt > 0 {
			inst := 1 / dt
			old := math.Float64frombits(c.doneRate.Load())
			if old == 0 {
				old = inst
			}
			c.doneRate.Store(math.Float64bits(0.9*old + 0.1*inst))
		}
	}
	c.lastDone = now
	if c.obs != nil {
		c.obs.RequestDone(RequestInfo{E2E: now.Sub(r.Arrival), Usage: last.Usage, Reason: last.Output.Finish, PromptChunks: last.PromptChunks})
	}
}

// initialLongBudget is the long-prefill budget until the first measured
// steps size it; minMeasuredPrompt is the fewest prompt tokens a
// measurement of their cost pools.
const initialLongBudget, minMeasuredPrompt = 16, 16

// paceLongPrefill sets the scheduler's long-prefill budget from measured
// step times, so that a step where long prompts compute beside decoding
// streams takes about two decode steps (their inter-token latency well
// under 3× what it is without the prompt): decodeStep is the time of
// a step that only decodes, prefillToken what each prompt token adds to a
// step; both are moving averages (a prompt token costs more as its
// position grows); paced is what the scheduler's limit did in the step d
// measured. The budget is at most the threshold
// (Config.Scheduler.LongPrefillTokens; the scheduler holds long prompts to
// it too), whatever the times say: on a busy machine a stretched decode
// step makes the target large, and a long prompt must still compute in
// chunks beside the streams.
func (c *EngineCore) paceLongPrefill(step *engine.Step, paced scheduler.Pacing, d time.Duration) {
	if c.cfg.Scheduler.LongPrefillTokens <= 0 {
		return
	}
	decodes, prompt := 0, 0
	for i := range step.Batch {
		if ch := &step.Batch[i]; len(ch.Tokens) == 1 && ch.Sample {
			decodes++
		} else {
			prompt += len(ch.Tokens)
		}
	}
	const alpha = 0.2
	ema := func(avg *float64, v float64) {
		if *avg == 0 {
			*avg = v
		} else {
			*avg += alpha * (v - *avg)
		}
	}
	switch {
	case decodes > 0 && prompt == 0:
		ema(&c.decodeStep, d.Seconds())
	case decodes > 0 && prompt > 0 && c.decodeStep > 0:
		// A few prompt tokens beside decodes say little of their cost:
		// steps are pooled until they computed minMeasuredPrompt. A budget
		// below it is measured too (before, it was not: one noisy step
		// on a busy machine left a long prompt at 2 tokens a step to its
		// end).
		c.pooledTokens += prompt
		c.pooledSeconds += max(d.Seconds()-c.decodeStep, 0)
		if c.pooledTokens < minMeasuredPrompt {
			return
		}
		ema(&c.prefillToken, c.pooledSeconds/float64(c.pooledTokens))
		c.pooledTokens, c.pooledSeconds = 0, 0
	default:
		return
	}
	// Long prompts add about one decode step's time to a step: twice the
	// inter-token latency of the streams beside them, within the 3× the
	// pacing promises when steps vary. The budget grows (at most doubling)
	// only after a step whose long prompts took all of it (the scheduler's
	// Pacing: short prompts' and drafts' tokens do not count), so that what
	// short prompts measured cannot let a long prompt's whole chunk
	// through.
	target := c.longBudget
	if c.prefillToken > 0 {
		target = int(c.decodeStep / c.prefillToken)
	}
	limit := c.longBudget
	if paced.Limit > 0 && paced.Tokens >= paced.Limit {
		limit = 2 * c.longBudget
	}
	c.longBudget = max(min(target, limit, c.cfg.Scheduler.LongPrefillTokens, c.cfg.Scheduler.MaxNumBatchedTokens), 2)
	c.sched.SetLongPrefillBudget(c.longBudget)
}

func (c *EngineCore) publish() scheduler.Stats {
	st := c.sched.Stats()
	if r, ok := c.exec.(engine.KVMemoryReporter); ok {
		st.EngineKV = r.KVMemory()
	}
	if r, ok := c.exec.(engine.AdapterSwitchReporter); ok {
		st.AdapterSwitches = r.AdapterSwitches()
	}
	c.stats.Store(&st)
	return st
}

// drainEvents takes the KV manager's events of the step and hands them to
// the watches (a snapshot instead when the manager dropped some).
func (c *EngineCore) drainEvents() []kvcache.Event {
	events := c.kv.DrainEvents()
	dropped := c.kv.Stats().EventsDropped
	c.fanout(events, dropped != c.eventsDropped)
	c.eventsDropped = dropped
	return events
}

func (c *EngineCore) observeStep(step *engine.Step, res engine.StepResult, st scheduler.Stats, events []kvcache.Event, paced scheduler.Pacing, d time.Duration) {
	if c.obs == nil {
		return
	}
	info := StepInfo{Duration: d, Tokens: step.NumTokens(), Failures: len(res.Failures), Paced: paced, Stats: st}
	var decoding map[engine.SeqID]bool
	for i := range step.Batch {
		if ch := &step.Batch[i]; len(ch.Tokens) > 1 || !ch.Sample {
			info.PrefillTokens += len(ch.Tokens)
		} else {
			if decoding == nil {
				decoding = make(map[engine.SeqID]bool, len(step.Batch))
			}
			decoding[ch.Seq] = true
		}
	}
	// Draft tokens count as decode tokens: the model computed them.
	info.DecodeTokens = info.Tokens - info.PrefillTokens
	for i := range res.Samples {
		n := 1 + len(res.Samples[i].Accepted)
		info.Generated += n
		if decoding[res.Samples[i].Seq] {
			info.DecodeSamples = append(info.DecodeSamples, n)
		}
	}
	for _, e := range events {
		switch e.Kind {
		case kvcache.BlockStored:
			info.BlocksStored++
		case kvcache.BlockRemoved:
			info.BlocksRemoved++
		}
	}
	c.obs.StepDone(info)
}
