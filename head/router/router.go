package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// Client is a connection to one worker's service.
type Client interface {
	workerpb.WorkerClient
	io.Closer
}

// Dialer opens a client to the worker at addr (host:port). It must not
// block on the network: the connection is made by the first call.
type Dialer func(addr string) (Client, error)

// Options configure a Router.
type Options struct {
	// Dial opens worker connections (required).
	Dial Dialer
	// CheckInterval is how often each worker's Info and Stats are polled
	// (default 1s); a worker is unhealthy after FailThreshold failed
	// checks in a row (default 2) or at once when a stream to it breaks.
	CheckInterval time.Duration
	FailThreshold int
	// RPCTimeout bounds every unary worker call (default 5s).
	RPCTimeout time.Duration
	// ProbeMin is how soon a worker that was just added, or failed a
	// check, is checked again (default 100ms); the delay doubles after
	// each failed check up to CheckInterval.
	ProbeMin time.Duration
	// NoWorkerWait is how long a request (or a migration) that finds no
	// healthy worker waits for one before it fails with
	// scheduler.ErrNoWorker (default 10s; negative: it fails at once).
	// The request's deadline and cancellation bound the wait too.
	NoWorkerWait time.Duration
	// OverlapWeight weighs a prompt's blocks that would be computed
	// against the worker's load (default 1, Dynamo's).
	OverlapWeight float64
	// PDMinPrefillTokens: a remote prefill is used only when the prompt's
	// uncached part on the chosen decode worker is at least this many
	// tokens (default 256; llm-d's threshold). Negative disables P/D.
	PDMinPrefillTokens int
	// MaxMigrations bounds how many times one request moves to another
	// worker after its stream broke (default 3; negative: never).
	MaxMigrations int
	// PrefillLease is the lease asked for a remote prefill's KV (default
	// 30s); TransferTimeout bounds the decode worker's pull (default 10s).
	PrefillLease, TransferTimeout time.Duration
	Logger                        *slog.Logger
	// Registerer receives the router's metrics (nil: none).
	Registerer prometheus.Registerer
	// Clock times the checks, the probes and the waits for a worker (nil:
	// clock.Real). RPC timeouts stay on the real clock.
	Clock clock.Clock
}

func (o *Options) defaults() {
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Second
	}
	if o.FailThreshold <= 0 {
		o.FailThreshold = 2
	}
	if o.RPCTimeout <= 0 {
		o.RPCTimeout = 5 * time.Second
	}
	if o.ProbeMin <= 0 {
		o.ProbeMin = 100 * time.Millisecond
	}
	o.ProbeMin = min(o.ProbeMin, o.CheckInterval)
	if o.NoWorkerWait == 0 {
		o.NoWorkerWait = 10 * time.Second
	}
	if o.OverlapWeight <= 0 {
		o.OverlapWeight = 1
	}
	if o.PDMinPrefillTokens == 0 {
		o.PDMinPrefillTokens = 256
	}
	if o.MaxMigrations == 0 {
		o.MaxMigrations = 3
	}
	if o.PrefillLease <= 0 {
		o.PrefillLease = 30 * time.Second
	}
	if o.TransferTimeout <= 0 {
		o.TransferTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.Or(o.Clock)
}

// Router keeps the worker set and picks workers for requests. It is safe
// for concurrent use; no method waits on the network while holding its
// lock.
type Router struct {
	opts Options
	log  *slog.Logger
	m    *metrics

	mu      sync.Mutex
	workers map[string]*worker // by address; guarded by mu
	rr      uint64             // round robin for ties; guarded by mu
	closed  bool               // guarded by mu
	// model is the model the head serves: the first healthy worker's
	// (its name and vocabulary digest); nil until then. guarded by mu
	model   *workerpb.InfoResponse
	changed chan struct{} // closed and replaced when a worker's health changes; guarded by mu
	// keys remembers the worker each routing key (scheduler.Request.RouteKey,
	// OpenAI's prompt_cache_key) last went to, the most recently used
	// last; at most maxRouteKeys. guarded by mu
	keys routeKeys
	wg   sync.WaitGroup
}

// worker is one worker's state as the router knows it.
type worker struct {
	addr   string
	client Client
	cancel context.CancelFunc

	// probe asks the monitor to check the worker soon (a request waits
	// for a healthy worker); a buffer of one, sends never block.
	probe chan struct{}

	// guarded by Router.mu:
	info     *workerpb.InfoResponse // nil until the first Info succeeds
	healthy  bool
	fails    int
	stats    *workerpb.StatsResponse
	blocks   map[kvcache.Hash]struct{}
	inflight int // requests the router has on it now
	removed  bool
	// gen counts the times the worker turned healthy: a request that saw
	// it break excludes it only until it is healthy again.
	gen uint64
	// breaks counts markBroken calls: a check that started before the
	// last one cannot make the worker healthy (it may have answered just
	// before the worker died).
	breaks uint64
	// refused says why the worker is not used although it answers (its
	// llama.cpp commit or model differs); "" when it is not refused.
	refused string
	// lastErr is the last failed check's error, logged when it changes.
	lastErr string
}

// New returns a Router with no workers; add them with SetWorkers.
func New(opts Options) (*Router, error) {
	if opts.Dial == nil {
		return nil, errors.New("router: Options.Dial is required")
	}
	opts.defaults()
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Router{opts: opts, log: opts.Logger, m: m, workers: map[string]*worker{}, changed: make(chan struct{})}, nil
}

// SetWorkers makes addrs the worker set: new addresses are dialled and
// watched, addresses no longer listed are dropped (requests running on
// them finish there).
func (r *Router) SetWorkers(addrs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
		if _, ok := r.workers[a]; ok {
			continue
		}
		c, err := r.opts.Dial(a)
		if err != nil {
			r.log.Warn("worker: cannot dial", "worker", a, "err", err)
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		w := &worker{addr: a, client: c, cancel: cancel, blocks: map[kvcache.Hash]struct{}{}, probe: make(chan struct{}, 1)}
		r.workers[a] = w
		r.log.Info("worker added", "worker", a)
		r.wg.Add(2)
		go r.monitor(ctx, w)
		go r.watchEvents(ctx, w)
	}
	for a, w := range r.workers {
		if !want[a] {
			r.dropLocked(w)
		}
	}
	r.updateGaugesLocked()
}

func (r *Router) dropLocked(w *worker) {
	delete(r.workers, w.addr)
	w.removed = true
	w.cancel()
	r.m.blocks.DeleteLabelValues(w.addr)
	r.log.Info("worker removed", "worker", w.addr)
	r.notifyLocked()
}

// Close stops watching every worker and closes their connections.
func (r *Router) Close() {
	r.mu.Lock()
	r.closed = true
	ws := make([]*worker, 0, len(r.workers))
	for _, w := range r.workers {
		ws = append(ws, w)
		w.cancel()
	}
	r.workers = map[string]*worker{}
	r.mu.Unlock()
	r.wg.Wait()
	for _, w := range ws {
		_ = w.client.Close()
	}
}

func (r *Router) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// monitor checks a worker until ctx ends: every CheckInterval while it is
// healthy; ProbeMin after it was added or failed a check, doubling after
// each failure up to CheckInterval; and, while a request waits for a
// healthy worker (probe), again as soon as ProbeMin has passed since the
// last check.
func (r *Router) monitor(ctx context.Context, w *worker) {
	defer r.wg.Done()
	t := r.opts.Clock.NewTimer(r.opts.CheckInterval) // (Go 1.23 timers: Reset drops a stale tick)
	defer t.Stop()
	backoff := r.opts.ProbeMin
	for {
		last := r.opts.Clock.Now()
		delay := r.opts.CheckInterval
		if !r.check(ctx, w) {
			delay, backoff = backoff, min(2*backoff, r.opts.CheckInterval)
		} else {
			backoff = r.opts.ProbeMin
		}
		t.Reset(delay)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-w.probe:
			// Someone waits for a worker: check again once ProbeMin has
			// passed since the last check.
			t.Reset(max(0, r.opts.ProbeMin-r.opts.Clock.Now().Sub(last)))
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
		}
	}
}

// check runs one health check (Info, then Stats) and reports whether the
// worker is usable after it.
func (r *Router) check(ctx context.Context, w *worker) bool {
	r.mu.Lock()
	breaks, healthy := w.breaks, w.healthy
	r.mu.Unlock()
	if !healthy {
		// A connection in its reconnect backoff fails calls at once: try
		// to connect now.
		if rc, ok := w.client.(interface{ ResetConnectBackoff() }); ok {
			rc.ResetConnectBackoff()
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.RPCTimeout)
	info, err := w.client.Info(cctx, &workerpb.InfoRequest{})
	var st *workerpb.StatsResponse
	if err == nil {
		st, err = w.client.Stats(cctx, &workerpb.StatsRequest{})
	}
	cancel()
	if ctx.Err() != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.removed {
		return false
	}
	if err != nil {
		w.fails++
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			if !w.healthy {
				r.log.Warn("worker not reachable; probing it again", "worker", w.addr, "err", err)
			}
		}
		if w.healthy && w.fails >= r.opts.FailThreshold {
			r.setHealthLocked(w, false, err)
		}
		return w.healthy
	}
	w.fails, w.lastErr = 0, ""
	if w.info == nil || w.info.GetVersion() != info.GetVersion() || w.info.GetCommit() != info.GetCommit() || w.info.GetLlamaCommit() != info.GetLlamaCommit() {
		r.log.Info("worker version", "worker", w.addr, "version", info.GetVersion(), "commit", info.GetCommit(),
			"llama_cpp", info.GetLlamaCommit(), "model", info.GetModelName(), "role", info.GetRole().String())
		defer r.updateGaugesLocked()
	}
	w.info, w.stats = info, st
	if why := r.mismatchLocked(w, info); why != w.refused {
		w.refused = why
		if why != "" {
			r.log.Error("worker refused: it does not match the others; it gets no requests until it does", "worker", w.addr, "why", why)
		} else if !w.healthy {
			r.log.Info("worker no longer refused", "worker", w.addr)
		}
		if w.healthy && why != "" {
			r.setHealthLocked(w, false, errors.New(why))
		}
		r.updateGaugesLocked()
	}
	if w.refused != "" {
		return false
	}
	if !w.healthy && w.breaks == breaks {
		r.setHealthLocked(w, true, nil)
	}
	return w.healthy
}

// mismatchLocked says why a worker answering info must not be used: its
// model (name and vocabulary digest, which covers every GGUF metadata
// key) or its reasoning parser is not the one the head serves, or its llama.cpp commit is not its
// healthy peers' (KV moves between workers in llama.cpp's own format).
// "" when it matches.
func (r *Router) mismatchLocked(w *worker, info *workerpb.InfoResponse) string {
	if m := r.model; m != nil && (info.GetModelName() != m.GetModelName() || !bytes.Equal(info.GetVocabularySha256(), m.GetVocabularySha256())) {
		return fmt.Sprintf("it serves model %q (vocabulary sha256 %.12x), the head serves %q (%.12x)",
			info.GetModelName(), info.GetVocabularySha256(), m.GetModelName(), m.GetVocabularySha256())
	}
	if m := r.model; m != nil && info.GetReasoningParser() != m.GetReasoningParser() {
		return fmt.Sprintf("its reasoning parser is %q, the head serves %q (the workers' --reasoning-parser must match)",
			info.GetReasoningParser(), m.GetReasoningParser())
	}
	addrs := make([]string, 0, len(r.workers))
	for a, o := range r.workers {
		if o != w && o.healthy {
			addrs = append(addrs, a)
		}
	}
	slices.Sort(addrs)
	for _, a := range addrs {
		if c := r.workers[a].info.GetLlamaCommit(); c != info.GetLlamaCommit() {
			return fmt.Sprintf("its llama.cpp commit is %q, healthy worker %s's is %q", info.GetLlamaCommit(), a, c)
		}
	}
	return ""
}

func (r *Router) setHealthLocked(w *worker, healthy bool, err error) {
	w.healthy = healthy
	if healthy {
		w.gen++
		if r.model == nil {
			r.model = w.info
		}
		r.log.Info("worker healthy", "worker", w.addr, "role", w.info.GetRole().String())
	} else {
		// Its blocks are forgotten when its event stream breaks (a
		// reconnect starts with a snapshot); unhealthy, it is not picked.
		r.log.Warn("worker unhealthy", "worker", w.addr, "err", err)
	}
	r.updateGaugesLocked()
	r.notifyLocked()
}

// markBroken makes a worker unhealthy at once (a stream to it broke); the
// next successful check brings it back.
func (r *Router) markBroken(addr string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[addr]; ok {
		w.breaks++
		probe(w)
		if w.healthy {
			w.fails = r.opts.FailThreshold
			r.setHealthLocked(w, false, err)
		}
	}
}

// probe asks w's monitor to check it soon; it never blocks.
func probe(w *worker) {
	select {
	case w.probe <- struct{}{}:
	default:
	}
}

// watchEvents keeps w.blocks equal to the worker's prefix cache, from its
// WatchKVEvents stream; on a broken stream it forgets the worker's blocks
// and reconnects (the new stream starts with a snapshot).
func (r *Router) watchEvents(ctx context.Context, w *worker) {
	defer r.wg.Done()
	for ctx.Err() == nil {
		r.mu.Lock()
		ok := w.healthy && w.info.GetPrefixCaching()
		ch := r.changed
		r.mu.Unlock()
		if !ok {
			r.pause(ctx, ch)
			continue
		}
		err := r.followEvents(ctx, w)
		r.mu.Lock()
		clear(w.blocks)
		if !w.removed {
			r.m.blocks.WithLabelValues(w.addr).Set(0)
		}
		r.mu.Unlock()
		if ctx.Err() == nil {
			r.log.Debug("worker: KV event stream ended; reconnecting", "worker", w.addr, "err", err)
			r.pause(ctx, nil)
		}
	}
}

// pause waits CheckInterval on the router's clock, or until changed (nil:
// never) closes or ctx ends.
func (r *Router) pause(ctx context.Context, changed <-chan struct{}) {
	t := r.opts.Clock.NewTimer(r.opts.CheckInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-changed:
	case <-t.C():
	}
}

func (r *Router) followEvents(ctx context.Context, w *worker) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := w.client.WatchKVEvents(ctx, &workerpb.WatchKVEventsRequest{})
	if err != nil {
		return err
	}
	for {
		ev, err := st.Recv()
		if err != nil {
			return err
		}
		r.mu.Lock()
		applyEvent(w.blocks, ev)
		if !w.removed {
			r.m.blocks.WithLabelValues(w.addr).Set(float64(len(w.blocks)))
		}
		r.mu.Unlock()
	}
}

// applyEvent updates a worker's block set with one event.
func applyEvent(blocks map[kvcache.Hash]struct{}, ev *workerpb.KVEvent) {
	var h kvcache.Hash
	switch ev.GetKind() {
	case workerpb.KVEventKind_KV_EVENT_KIND_STORED:
		if copy(h[:], ev.GetHash()) == len(h) {
			blocks[h] = struct{}{}
		}
	case workerpb.KVEventKind_KV_EVENT_KIND_REMOVED:
		if copy(h[:], ev.GetHash()) == len(h) {
			delete(blocks, h)
		}
	case workerpb.KVEventKind_KV_EVENT_KIND_CLEARED:
		clear(blocks)
	}
}

// Ready reports whether at least one healthy worker decodes (role both
// or decode).
func (r *Router) Ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		if w.healthy && w.info != nil && slices.Contains(rolesOf(poolDecode), w.info.Role) {
			return true
		}
	}
	return false
}

// Info returns the InfoResponse of a healthy worker, waiting until one
// is healthy or ctx ends.
func (r *Router) Info(ctx context.Context) (*workerpb.InfoResponse, Client, error) {
	for {
		r.mu.Lock()
		addrs := make([]string, 0, len(r.workers))
		for a := range r.workers {
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		for _, a := range addrs {
			if w := r.workers[a]; w.healthy && w.info != nil {
				info, c := w.info, w.client
				r.mu.Unlock()
				return info, c, nil
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-ch:
		}
	}
}

// candidate is a worker as the scoring sees it.
type candidate struct {
	addr string
	// cached is how many of the prompt's leading full blocks it holds.
	cached int
	// load is its waiting plus running requests (the larger of its last
	// Stats and the router's own count).
	load int
	// kvUsage is the fraction of its KV capacity in use (last Stats).
	kvUsage float64
}

// cost is Dynamo's KV router cost: the prompt blocks the worker would
// compute, weighted, plus its load (requests waiting and running, the
// decode work ahead; KV usage, between 0 and 1, parts workers whose
// request counts are equal). Lower is better.
func cost(c candidate, blocks int, weight float64) float64 {
	return weight*float64(blocks-c.cached) + float64(c.load) + c.kvUsage
}

// best returns the index of the lowest-cost candidate; ties go to the
// lower load, then round robin from rr.
func best(cands []candidate, blocks int, weight float64, rr uint64) int {
	if len(cands) == 0 {
		return -1
	}
	var ties []int
	bc, bl := 0.0, 0
	for i, c := range cands {
		k := cost(c, blocks, weight)
		switch {
		case len(ties) == 0 || k < bc || (k == bc && c.load < bl):
			ties, bc, bl = []int{i}, k, c.load
		case k == bc && c.load == bl:
			ties = append(ties, i)
		}
	}
	return ties[int(rr%uint64(len(ties)))]
}

// pool says which workers a pick takes from.
type pool int

const (
	poolDecode  pool = iota // both and decode workers (prefill ones when no other is healthy)
	poolPrefill             // prefill workers only
	poolAny                 // every role (embeddings)
)

// pick is a chosen worker with what scoring saw.
type pick struct {
	addr      string
	client    Client
	cached    int // prompt tokens cached there
	blockSize int
}

// choose picks the best healthy worker of a pool for a prompt, skipping
// the addresses in exclude; ok is false when there is none. The pick
// counts as in flight until release.
func (r *Router) choose(p pool, prompt []int32, salt string, exclude []string) (pick, bool) {
	return r.chooseWhere(p, prompt, salt, "", exclude, nil)
}

// chooseWhere is choose among the workers whose Info satisfies accept
// (nil: every worker). A request with a routing key goes to the worker
// its key last went to while that worker is a candidate (healthy, of
// the pool, not excluded); otherwise it is scored, and the key
// remembers the pick.
func (r *Router) chooseWhere(p pool, prompt []int32, salt, key string, exclude []string, accept func(*workerpb.InfoResponse) bool) (pick, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs := make([]string, 0, len(r.workers))
	for a := range r.workers {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var ws []*worker
	for _, want := range [][]workerpb.Role{rolesOf(p), {workerpb.Role_ROLE_PREFILL}} {
		for _, a := range addrs {
			w := r.workers[a]
			if w.healthy && w.info != nil && slices.Contains(want, w.info.Role) && !slices.Contains(exclude, a) && (accept == nil || accept(w.info)) {
				ws = append(ws, w)
			}
		}
		if len(ws) > 0 || p == poolPrefill {
			break
		}
	}
	if len(ws) == 0 {
		return pick{}, false
	}
	sticky := -1
	if addr, ok := r.keys.get(key); ok {
		sticky = slices.IndexFunc(ws, func(w *worker) bool { return w.addr == addr })
	}
	hashes := map[int][]kvcache.Hash{}
	cands := make([]candidate, len(ws))
	bsOf := make([]int, len(ws))
	maxBlocks := 0
	for i, w := range ws {
		bs := int(w.info.GetKvBlockSize())
		bsOf[i] = bs
		c := candidate{addr: w.addr, load: w.inflight}
		if st := w.stats; st != nil {
			c.load = max(c.load, int(st.Waiting+st.Running))
			c.kvUsage = min(max(st.KvUsage, 0), 1)
		}
		if bs > 0 {
			hs, ok := hashes[bs]
			if !ok {
				hs = kvcache.BlockHashes(prompt, salt, bs)
				hashes[bs] = hs
			}
			maxBlocks = max(maxBlocks, len(hs))
			for _, h := range hs {
				if _, ok := w.blocks[h]; !ok {
					break
				}
				c.cached++
			}
		}
		cands[i] = c
	}
	i := sticky
	if i < 0 {
		r.rr++
		i = best(cands, maxBlocks, r.opts.OverlapWeight, r.rr)
	}
	w := ws[i]
	r.keys.put(key, w.addr)
	w.inflight++
	return pick{addr: w.addr, client: w.client, cached: cands[i].cached * bsOf[i], blockSize: bsOf[i]}, true
}

// waitFor calls try until it reports true, waiting between tries for a
// worker's health to change (a worker turning healthy wakes it at once),
// and asking the monitors of the workers not healthy to probe them
// meanwhile. It gives up at until (zero: Options.NoWorkerWait from now)
// with scheduler.ErrNoWorker, or when ctx ends with ctx's error.
func (r *Router) waitFor(ctx context.Context, until time.Time, try func() bool) error {
	start := r.opts.Clock.Now()
	if until.IsZero() {
		until = r.waitUntil(time.Time{})
	}
	var expired <-chan time.Time
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if try() {
			return nil
		}
		if expired == nil {
			now := r.opts.Clock.Now()
			if !until.After(now) {
				return r.noWorkerError(now.Sub(start))
			}
			t := r.opts.Clock.NewTimer(until.Sub(now))
			defer t.Stop()
			expired = t.C()
		}
		r.mu.Lock()
		for _, w := range r.workers {
			if !w.healthy {
				probe(w)
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			if try() {
				return nil
			}
			return r.noWorkerError(r.opts.Clock.Now().Sub(start))
		case <-changed:
		}
	}
}

// waitUntil is when a wait for a worker that starts now gives up:
// Options.NoWorkerWait from now (now itself when it is negative), or
// deadline when that is sooner.
func (r *Router) waitUntil(deadline time.Time) time.Time {
	until := r.opts.Clock.Now().Add(max(r.opts.NoWorkerWait, 0))
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	return until
}

// WaitReady waits until Ready (within Options.NoWorkerWait; ctx bounds
// it too): scheduler.ErrNoWorker when no worker became ready.
func (r *Router) WaitReady(ctx context.Context) error {
	return r.waitFor(ctx, time.Time{}, r.Ready)
}

// noWorkerError is scheduler.ErrNoWorker after waiting waited, with the
// workers' states.
func (r *Router) noWorkerError(waited time.Duration) error {
	r.mu.Lock()
	h, u, f := r.countLocked()
	r.mu.Unlock()
	return fmt.Errorf("%w (waited %s; of its workers %d are healthy but were tried or serve another role, %d unhealthy, %d refused)",
		scheduler.ErrNoWorker, waited.Round(time.Millisecond), h, u, f)
}

// countLocked counts the workers by state: healthy, unhealthy, refused.
func (r *Router) countLocked() (healthy, unhealthy, refused int) {
	for _, w := range r.workers {
		switch {
		case w.healthy:
			healthy++
		case w.refused != "":
			refused++
		default:
			unhealthy++
		}
	}
	return healthy, unhealthy, refused
}

func rolesOf(p pool) []workerpb.Role {
	switch p {
	case poolPrefill:
		return []workerpb.Role{workerpb.Role_ROLE_PREFILL}
	case poolAny:
		return []workerpb.Role{workerpb.Role_ROLE_BOTH, workerpb.Role_ROLE_DECODE, workerpb.Role_ROLE_PREFILL}
	}
	return []workerpb.Role{workerpb.Role_ROLE_BOTH, workerpb.Role_ROLE_DECODE}
}

// gen is a worker's health generation (0 when unknown).
func (r *Router) gen(addr string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[addr]; ok {
		return w.gen
	}
	return 0
}

// stillExcluded lists the addresses of ex (address -> health generation
// when excluded) whose worker has not turned healthy since.
func (r *Router) stillExcluded(ex map[string]uint64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for a, g := range ex {
		if w, ok := r.workers[a]; !ok || w.gen == g {
			out = append(out, a)
		}
	}
	return out
}

// release ends a pick's in-flight count.
func (r *Router) release(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[addr]; ok && w.inflight > 0 {
		w.inflight--
	}
}

// hasPrefillPool reports whether a healthy prefill worker exists.
func (r *Router) hasPrefillPool() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		if w.healthy && w.info != nil && w.info.Role == workerpb.Role_ROLE_PREFILL {
			return true
		}
	}
	return false
}

// WorkerState is one worker as Workers reports it.
type WorkerState struct {
	Addr    string
	Healthy bool
	Role    workerpb.Role
	// Blocks is how many cached blocks the router knows of there.
	Blocks int
	// Version, Commit and LlamaCommit are from its last Info ("" before).
	Version, Commit, LlamaCommit string
	// Refused says why it gets no requests although it answers (its
	// model or llama.cpp commit differs); "" when it is not refused.
	Refused string
}

// Workers lists the worker set, sorted by address.
func (r *Router) Workers() []WorkerState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []WorkerState
	for _, w := range r.workers {
		out = append(out, WorkerState{Addr: w.addr, Healthy: w.healthy, Role: w.info.GetRole(), Blocks: len(w.blocks),
			Version: w.info.GetVersion(), Commit: w.info.GetCommit(), LlamaCommit: w.info.GetLlamaCommit(), Refused: w.refused})
	}
	slices.SortFunc(out, func(a, b WorkerState) int {
		if a.Addr < b.Addr {
			return -1
		}
		if a.Addr > b.Addr {
			return 1
		}
		return 0
	})
	return out
}

func (r *Router) updateGaugesLocked() {
	h, u, f := r.countLocked()
	r.m.info.Reset()
	for _, w := range r.workers {
		if w.info != nil {
			r.m.info.WithLabelValues(w.addr, w.info.GetVersion(), w.info.GetCommit(), w.info.GetLlamaCommit(), w.info.GetModelName(), w.refused).Set(1)
		}
	}
	r.m.workers.WithLabelValues("healthy").Set(float64(h))
	r.m.workers.WithLabelValues("unhealthy").Set(float64(u))
	r.m.workers.WithLabelValues("refused").Set(float64(f))
}

type metrics struct {
	requests   *prometheus.CounterVec
	migrations prometheus.Counter
	workers    *prometheus.GaugeVec
	blocks     *prometheus.GaugeVec
	info       *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmserve_router_requests_total", Help: "Requests (and migrated or prefill legs of them) the head sent to each worker.",
		}, []string{"worker"}),
		migrations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmserve_router_migrations_total", Help: "Times a request's stream broke and it moved to another worker.",
		}),
		workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmserve_router_workers", Help: "Workers known to the head, by state: healthy, unhealthy, or refused (it answers, but its model or llama.cpp commit differs from the others').",
		}, []string{"state"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmserve_router_worker_info", Help: "1 per worker that answered Info: its build (version, commit, llama.cpp commit), its model, and why the head refuses it (\"\" when it does not).",
		}, []string{"worker", "version", "commit", "llama_cpp", "model", "refused"}),
		blocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmserve_router_cached_blocks", Help: "Prefix-cache blocks the head knows each worker holds (from its KV events).",
		}, []string{"worker"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.migrations, m.workers, m.blocks, m.info} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
