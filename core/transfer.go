package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/scheduler"
)

// ErrNoLease is returned for a transfer that is not held: unknown, its
// lease ended, released, or its prefill did not keep the KV.
var ErrNoLease = errors.New("core: no such KV transfer (unknown, expired or released)")

// Lease is the KV of a prefill kept for a transfer (Prefill). The engine
// core owns it; the caller waits for it with Wait and frees it with
// EngineCore.ReleaseLease, or the core frees it when it expires.
type Lease struct {
	name string
	dur  time.Duration
	// tokens and salt are the prompt the KV covers and its cache salt.
	tokens []int32
	salt   string
	// ready closes when the KV was kept or could not be; kept and err are
	// set before.
	ready chan struct{}
	kept  KeptInfo
	err   error
	// Owned by the core's goroutine.
	settled bool
	expires time.Time
}

// Name is the transfer id.
func (l *Lease) Name() string { return l.name }

// KeptInfo says what a Lease keeps: its positions and their bytes. The
// bytes themselves are read with EngineCore.LeaseKV.
type KeptInfo struct {
	Positions int
	Bytes     int64
}

// Wait returns what was kept once the prefill's export came back (a step
// after its last output), or why it was not kept.
func (l *Lease) Wait(ctx context.Context) (KeptInfo, error) {
	select {
	case <-l.ready:
		return l.kept, l.err
	case <-ctx.Done():
		return KeptInfo{}, ctx.Err()
	}
}

// settle is called on the core's goroutine.
func (l *Lease) settle(kept KeptInfo, err error, now time.Time) {
	if l.settled {
		return
	}
	l.settled, l.kept, l.err, l.expires = true, kept, err, now.Add(l.dur)
	close(l.ready)
}

// newTransferID returns a random transfer id.
func newTransferID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "kvx-" + hex.EncodeToString(b[:])
}

// Prefill submits a request (N must be 1) whose prompt's KV the core keeps
// under a new transfer id when it finishes: the caller reads its outputs
// from the stream as Submit's, then Lease.Wait for the KV. The KV is held
// (outside the prefix cache's budget) until ReleaseLease, or until lease
// after it was kept, when it is freed and counted in LeasesExpired.
func (c *EngineCore) Prefill(ctx context.Context, r *scheduler.Request, lease time.Duration) (*Stream, *Lease, error) {
	if lease <= 0 {
		return nil, nil, errors.New("core: a lease must be positive")
	}
	l := &Lease{name: newTransferID(), dur: lease, ready: make(chan struct{}), tokens: slices.Clone(r.Prompt), salt: r.CacheSalt}
	r.KeepKV = l.name
	streams, err := c.submit(ctx, []*scheduler.Request{r}, func(s *submission) { s.lease = l })
	if err != nil {
		return nil, nil, err
	}
	return streams[0], l, nil
}

// SubmitWithKV submits one request after filing kv, received from another
// node, into the prefix cache (kvcache.Manager.Import) under the request's
// prompt and cache salt, on the core's goroutine, so that the request
// restores it instead of computing it. kv must hold positions [0, kv.N) of
// r.Prompt. imported receives the positions the cache holds for the prompt
// afterwards (0: nothing was imported, e.g. prefix caching is off or the
// layout differs from this engine's; the request then computes its prompt).
func (c *EngineCore) SubmitWithKV(ctx context.Context, r *scheduler.Request, kv *engine.KV) (_ *Stream, imported <-chan int, err error) {
	ch := make(chan int, 1)
	streams, err := c.submit(ctx, []*scheduler.Request{r}, func(s *submission) { s.imp = &kvImport{kv: kv, done: ch} })
	if err != nil {
		return nil, nil, err
	}
	return streams[0], ch, nil
}

// kvImport is KV to import before a submission is added.
type kvImport struct {
	kv   *engine.KV
	done chan int
}

// importKV runs on the core's goroutine.
func (c *EngineCore) importKV(r *scheduler.Request, imp *kvImport) {
	n := 0
	if l := c.KVLayout(); imp.kv != nil && (l == nil || imp.kv.Layout.Equal(l)) {
		kv := *imp.kv
		if l != nil {
			kv.Layout = l
		}
		n = c.kv.Import(r.Prompt, r.CacheKey(), &kv) // the namespace Admit looks in (the adapter's, for one)
	}
	imp.done <- n
}

// KVLayout is the layout of the KV the executor exports and restores, or
// nil when the executor does not say (it implements
// KVLayout() *engine.KVLayout, as engine/llamacpp's Context does).
func (c *EngineCore) KVLayout() *engine.KVLayout { return c.layout.Load() }

// LeaseKV returns a reference to the KV kept for a transfer, the prompt
// tokens it covers and their cache salt, or ErrNoLease. The KV lives in
// host memory off the Go heap: it stays valid until the caller releases
// the reference (kv.Release(), on any goroutine), whatever the core does
// meanwhile (ReleaseLease, an expiry, a restart), and not a moment longer.
// The lease stays held; the caller releases it with ReleaseLease when done.
func (c *EngineCore) LeaseKV(ctx context.Context, name string) (kv *kvcache.KeptRef, tokens []int32, salt string, err error) {
	// A caller that goes away (ctx) before the core ran fn must not leave
	// a reference behind: gone tells fn so, or fn's reference is dropped.
	var mu sync.Mutex
	gone := false
	err = c.call(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if l := c.leases[name]; !gone && l != nil && l.settled && l.err == nil {
			kv, tokens, salt = c.kv.Lease(name), l.tokens, l.salt
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		gone = true
		if kv != nil {
			kv.Release()
		}
		return nil, nil, "", err
	}
	if kv == nil {
		return nil, nil, "", ErrNoLease
	}
	return kv, tokens, salt, nil
}

// ReleaseLease frees the KV kept for a transfer; false when none was held.
func (c *EngineCore) ReleaseLease(ctx context.Context, name string) (bool, error) {
	released := false
	err := c.call(ctx, func() {
		if l := c.leases[name]; l != nil && l.settled {
			released = c.kv.Release(name)
			delete(c.leases, name)
			c.publish() // the caller sees the KV gone in Stats
		}
	})
	return released, err
}

// LeasesExpired counts leases the core freed because nobody pulled or
// released them in time.
func (c *EngineCore) LeasesExpired() uint64 { return c.leasesExpired.Load() }

// call runs fn on the core's goroutine and waits for it.
func (c *EngineCore) call(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	if !c.post(command{fn: func() { fn(); close(done) }}) {
		return scheduler.ErrClosed
	}
	select {
	case <-done:
		return nil
	case <-c.done:
		// Run returned; fn may have run before.
		select {
		case <-done:
			return nil
		default:
			return scheduler.ErrClosed
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// collectKept settles the leases whose KV came back, after a step.
func (c *EngineCore) collectKept(now time.Time) {
	for _, k := range c.kv.TakeKept() {
		l := c.leases[k.Name]
		if l == nil {
			// Released or expired meanwhile: nobody will pull it.
			c.kv.Release(k.Name)
			continue
		}
		if l.settled {
			// A second keep of the same prompt (the sequence was
			// preempted after its prompt and kept it then): the same
			// positions, the same bytes; the lease stays as it is.
			continue
		}
		if !k.OK {
			delete(c.leases, k.Name)
			l.settle(KeptInfo{}, errors.New("core: the engine could not export the prefill's KV, or no host memory was left for it"), now)
			continue
		}
		l.settle(KeptInfo{Positions: k.Positions, Bytes: k.Bytes}, nil, now)
	}
}

// leaseEnded is called when a request with a lease delivered its last
// output: if its KV is not on its way, it never will be.
func (c *EngineCore) leaseEnded(r *scheduler.Request, last scheduler.Output, now time.Time) {
	l := c.leases[r.KeepKV]
	if l == nil || l.settled || c.kv.Keeping(r.KeepKV) {
		return
	}
	delete(c.leases, r.KeepKV)
	err := last.Err
	if err == nil {
		err = fmt.Errorf("core: the prefill ended (%s) before its prompt's KV was kept", last.Finish)
	}
	l.settle(KeptInfo{}, err, now)
}

// expireLeases frees the leases that ended; it returns the next expiry.
// Stats are published before the expiries are counted, so that whoever
// sees the count sees the KV gone.
func (c *EngineCore) expireLeases(now time.Time) (next time.Time) {
	expired := 0
	for name, l := range c.leases {
		if !l.settled {
			continue
		}
		if !now.Before(l.expires) {
			c.kv.Release(name)
			delete(c.leases, name)
			expired++
			continue
		}
		if next.IsZero() || l.expires.Before(next) {
			next = l.expires
		}
	}
	if expired > 0 {
		c.publish()
		c.leasesExpired.Add(uint64(expired))
	}
	return next
}

// dropLeases ends every lease (the KV manager is being replaced, or the
// core stops).
func (c *EngineCore) dropLeases(err error, now time.Time) {
	for name, l := range c.leases {
		l.settle(KeptInfo{}, err, now)
		delete(c.leases, name)
	}
}

// KVBatch is what a KVWatch receives: the prefix cache's events in order,
// or, with Snapshot, every block cached now (the receiver forgets what it
// knew of this cache first).
type KVBatch struct {
	Snapshot bool
	Events   []kvcache.Event
}

// maxWatchBacklog bounds the events a KVWatch holds for a slow reader;
// beyond it they are replaced by a snapshot.
const maxWatchBacklog = 1 << 16

// KVWatch streams the prefix cache's events to one reader (WatchKV). The
// core never blocks on it: events pile up until Recv, up to a bound beyond
// which they are replaced by a fresh snapshot.
type KVWatch struct {
	notify chan struct{}
	mu     sync.Mutex
	queue  []KVBatch // guarded by mu
	n      int       // events in queue; guarded by mu
	closed bool      // guarded by mu
	resync bool      // guarded by mu: the next push must be a snapshot
}

// Recv returns the batches since the last call, blocking until there is
// one or ctx ends.
func (w *KVWatch) Recv(ctx context.Context) ([]KVBatch, error) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			q := w.queue
			w.queue, w.n = nil, 0
			w.mu.Unlock()
			return q, nil
		}
		closed := w.closed
		w.mu.Unlock()
		if closed {
			return nil, scheduler.ErrClosed
		}
		select {
		case <-w.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close ends the watch; the core forgets it at its next step.
func (w *KVWatch) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wake()
}

func (w *KVWatch) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// push appends b, or asks for a snapshot when the backlog is too long.
// It reports whether the watch is still open.
func (w *KVWatch) push(b KVBatch) bool {
	w.mu.Lock()
	defer w.wake()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if !b.Snapshot && (w.resync || w.n+len(b.Events) > maxWatchBacklog) {
		w.queue, w.n, w.resync = nil, 0, true
		return true
	}
	if b.Snapshot {
		w.queue, w.n, w.resync = nil, 0, false
	}
	w.queue = append(w.queue, b)
	w.n += len(b.Events)
	return true
}

func (w *KVWatch) needsSnapshot() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resync
}

// WatchKV starts a watch of the prefix cache's events: its first batch is
// a snapshot of every block cached now, then the events as the core drains
// them after each step. Close it when done.
func (c *EngineCore) WatchKV(ctx context.Context) (*KVWatch, error) {
	w := &KVWatch{notify: make(chan struct{}, 1)}
	err := c.call(ctx, func() {
		w.push(KVBatch{Snapshot: true, Events: c.kv.Snapshot()})
		c.watches = append(c.watches, w)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// fanout hands a step's events to the watches. When the KV manager
// dropped events (its outbox overflowed), or a watch fell too far behind,
// that watch gets a snapshot instead.
func (c *EngineCore) fanout(events []kvcache.Event, reset bool) {
	if len(c.watches) == 0 {
		return
	}
	var snap []kvcache.Event
	snapshot := func() []kvcache.Event {
		if snap == nil {
			snap = c.kv.Snapshot()
		}
		return snap
	}
	open := c.watches[:0]
	for _, w := range c.watches {
		var ok bool
		switch {
		case reset || w.needsSnapshot():
			ok = w.push(KVBatch{Snapshot: true, Events: snapshot()})
		case len(events) > 0:
			ok = w.push(KVBatch{Events: events})
			if ok && w.needsSnapshot() {
				// It fell behind just now: resync at once, not at the
				// next step (there may be none for a while).
				ok = w.push(KVBatch{Snapshot: true, Events: snapshot()})
			}
		default:
			w.mu.Lock()
			ok = !w.closed
			w.mu.Unlock()
		}
		if ok {
			open = append(open, w)
		}
	}
	clear(c.watches[len(open):])
	c.watches = open
}
