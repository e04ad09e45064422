package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// Error is an error of a runtime model for the client: Msg names the
// model and says what went wrong; errors.Is matches its Kind (one of
// ErrUnavailable, ErrTimeout, ErrBadAnswer, ErrInvalid, ErrClosed).
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string        { return e.Msg }
func (e *Error) Is(target error) bool { return target == e.Kind }

func (m *Model) errorf(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf("model %q: ", m.cfg.Name) + fmt.Sprintf(format, args...)}
}

// errRequestTimeout is the cause of a request's context ending at
// request_timeout.
var errRequestTimeout = errors.New("request_timeout")

// Model is a custom runtime model: its processes (Config.Workers of
// them, supervised) and the adaptive batcher in front of them. It is safe
// for concurrent use.
type Model struct {
	cfg   Config
	procs sync.WaitGroup // the supervisors
	ps    []*proc
	// ownDir is the socket folder Start made (removed by Close).
	ownDir string

	calls chan *call
	work  chan []*call
	quit  chan struct{}
	// ctx ends when the model stops: running calls to the runtimes end.
	ctx       context.Context //nolint:containedctx // the model's lifetime, which its calls to the runtime derive from
	cancel    context.CancelFunc
	stopOnce  sync.Once
	closeOnce sync.Once
	loops     sync.WaitGroup // the batcher and the executors

	inflight atomic.Int64 // requests in Infer and InferStream

	next     atomic.Uint64 // the process InferStream tries first
	ctMu     sync.Mutex
	reported []string // guarded by ctMu: content types the processes reported
}

// call is one request on its way through the batcher.
type call struct {
	ctx  context.Context //nolint:containedctx // the request's own, checked before its batch runs
	req  *pb.ModelInferRequest
	md   metadata.MD
	rows int    // 0: runs alone
	key  string // batchKey
	// done is closed once resp (with hdr) or err is set.
	done chan struct{}
	resp *pb.ModelInferResponse
	hdr  metadata.MD
	err  error
}

// Start starts the model's processes and returns once every one answers
// that it is ready; if one does not (it exits, or StartTimeout passes),
// it stops them all and the error says why (exit status, last output).
func Start(cfg Config) (*Model, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, calls: make(chan *call), work: make(chan []*call), quit: make(chan struct{})}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	dir := cfg.SocketDir
	if dir == "" {
		d, err := os.MkdirTemp("", "llmserve-rt-")
		if err != nil {
			return nil, fmt.Errorf("runtime socket folder: %w", err)
		}
		dir, m.ownDir = d, d
	}
	started := make(chan error, cfg.Workers)
	for i := range cfg.Workers {
		p := &proc{m: m, idx: i, sock: filepath.Join(dir, "w"+strconv.Itoa(i)+".sock"), changed: make(chan struct{})}
		m.ps = append(m.ps, p)
		m.procs.Add(1)
		go p.supervise(started)
	}
	var errs []error
	for range cfg.Workers {
		if err := <-started; err != nil {
			errs = append(errs, err)
		}
	}
	m.loops.Add(1 + len(m.ps))
	go m.batch()
	for _, p := range m.ps {
		go m.execute(p)
	}
	if len(errs) > 0 {
		_ = m.Close()
		return nil, errs[0]
	}
	return m, nil
}

// Name, Version and Config describe the model.
func (m *Model) Name() string    { return m.cfg.Name }
func (m *Model) Version() string { return m.cfg.Version }
func (m *Model) Config() Config  { return m.cfg }

// Ready reports whether a process can take requests: at least one is
// running and answered that it is ready.
func (m *Model) Ready() bool {
	select {
	case <-m.quit:
		return false
	default:
	}
	for _, p := range m.ps {
		if p.ready() {
			return true
		}
	}
	return false
}

// Idle reports whether no request is queued or running.
func (m *Model) Idle() bool { return m.inflight.Load() == 0 }

// start counts a request in flight and bounds it by the runtime's
// request_timeout; done undoes both.
func (m *Model) start(ctx context.Context) (_ context.Context, done func()) {
	m.inflight.Add(1)
	cancel := context.CancelFunc(func() {})
	if t := m.cfg.RequestTimeout; t > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, t, errRequestTimeout)
	}
	return ctx, func() {
		cancel()
		m.inflight.Add(-1)
	}
}

// Infer runs one request (batched with others when the model batches)
// and returns the runtime's answer and the headers it sent back. md is
// passed to the runtime as gRPC metadata (Headers makes it from a
// client's headers). The errors are *Error, or ctx's own.
func (m *Model) Infer(ctx context.Context, req *pb.ModelInferRequest, md metadata.MD) (*pb.ModelInferResponse, metadata.MD, error) {
	ctx, done := m.start(ctx)
	defer done()
	if err := m.toRaw(req); err != nil {
		return nil, nil, err
	}
	c := &call{ctx: ctx, req: req, md: md, done: make(chan struct{})}
	if m.cfg.MaxBatchSize > 1 {
		if c.rows = rowsOf(req); c.rows > 0 && c.rows < m.cfg.MaxBatchSize {
			c.key = batchKey(req)
		}
	}
	select {
	case m.calls <- c:
	case <-ctx.Done():
		return nil, nil, m.ctxErr(ctx)
	case <-m.quit:
		return nil, nil, m.errorf(ErrClosed, "the model was unloaded or the server is stopping; retry")
	}
	select {
	case <-c.done:
		return c.resp, c.hdr, c.err
	case <-ctx.Done():
		return nil, nil, m.ctxErr(ctx)
	}
}

func (m *Model) ctxErr(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errRequestTimeout) {
		return m.errorf(ErrTimeout, "the runtime did not answer within the model's request_timeout of %s", m.cfg.RequestTimeout)
	}
	return ctx.Err()
}

// toRaw puts every input in raw_input_contents.
func (m *Model) toRaw(req *pb.ModelInferRequest) error {
	ins := req.GetInputs()
	if n := len(req.GetRawInputContents()); n != 0 {
		if n != len(ins) {
			return m.errorf(ErrInvalid, "the request has %d inputs but %d raw_input_contents", len(ins), n)
		}
		return nil
	}
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		b, err := typedToRaw(in.GetDatatype(), in.GetContents())
		if err != nil {
			return m.errorf(ErrInvalid, "input %q: %v", in.GetName(), err)
		}
		raw[i] = b
		in.Contents = nil
	}
	if len(ins) > 0 {
		req.RawInputContents = raw
	}
	return nil
}

// openBatch is a batch still taking requests of its key.
type openBatch struct {
	key   string
	calls []*call
	rows  int
	timer *time.Timer
}

// batch owns the queue: it merges calls with the same batchKey into one
// open batch per key, closed at MaxBatchSize rows or MaxBatchTime after
// its first call, and hands closed batches, oldest first, to the
// executors. A call that cannot be batched is a batch of its own.
func (m *Model) batch() {
	defer m.loops.Done()
	var (
		open    = map[string]*openBatch{}
		ready   [][]*call // closed batches, in the order they closed
		expired = make(chan *openBatch)
	)
	maxRows := m.cfg.MaxBatchSize
	closeBatch := func(b *openBatch) {
		b.timer.Stop()
		delete(open, b.key)
		ready = append(ready, b.calls)
	}
	for {
		var (
			send chan<- []*call
			next []*call
		)
		if len(ready) > 0 {
			send, next = m.work, ready[0]
		}
		select {
		case c := <-m.calls:
			if c.key == "" {
				ready = append(ready, []*call{c})
				continue
			}
			b := open[c.key]
			if b != nil && b.rows+c.rows > maxRows {
				closeBatch(b)
				b = nil
			}
			if b == nil {
				b = &openBatch{key: c.key}
				b.timer = time.AfterFunc(m.cfg.MaxBatchTime, func() {
					select {
					case expired <- b:
					case <-m.quit:
					}
				})
				open[c.key] = b
			}
			b.calls = append(b.calls, c)
			b.rows += c.rows
			if b.rows >= maxRows {
				closeBatch(b)
			}
		case b := <-expired:
			if open[b.key] == b { // not closed since
				closeBatch(b)
			}
		case send <- next:
			ready = ready[1:]
		case <-m.quit:
			for _, b := range open {
				b.timer.Stop()
				ready = append(ready, b.calls)
			}
			for _, cs := range ready {
				for _, c := range cs {
					c.err = m.errorf(ErrClosed, "the model was unloaded or the server is stopping; retry")
					close(c.done)
				}
			}
			return
		}
	}
}

// execute runs batches on process p while it is ready.
func (m *Model) execute(p *proc) {
	defer m.loops.Done()
	for {
		inc, changed := p.current()
		if inc == nil || !inc.alive() {
			select {
			case <-changed:
				continue
			case <-m.quit:
				return
			}
		}
		select {
		case b := <-m.work:
			m.run(p, inc, b)
		case <-inc.dead:
		case <-changed:
		case <-m.quit:
			return
		}
	}
}

// run sends one batch to the process and answers its calls.
func (m *Model) run(p *proc, inc *incarnation, b []*call) {
	live := b[:0:0]
	for _, c := range b {
		if c.ctx.Err() != nil {
			c.err = m.ctxErr(c.ctx) // its Infer has returned, or is about to
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	answer := func(c *call, resp *pb.ModelInferResponse, hdr metadata.MD, err error) {
		c.resp, c.hdr, c.err = resp, hdr, err
		close(c.done)
	}
	// The call ends when the model stops or every request left.
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	left := atomic.Int64{}
	left.Store(int64(len(live)))
	for _, c := range live {
		stop := context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	req := live[0].req
	md := live[0].md
	rows := []int{live[0].rows}
	if len(live) > 1 {
		total := 0
		reqs := make([]*pb.ModelInferRequest, len(live))
		md = metadata.MD{}
		rows = rows[:0]
		for i, c := range live {
			reqs[i] = c.req
			total += c.rows
			rows = append(rows, c.rows)
			for k, v := range c.md { // a later request's header wins
				md[k] = v
			}
		}
		req = mergeRequests(reqs, total)
	}
	ctx = metadata.NewOutgoingContext(ctx, md)
	var hdr, trl metadata.MD
	resp, err := inc.client.ModelInfer(ctx, req, grpc.Header(&hdr), grpc.Trailer(&trl))
	back := Headers(metadata.Join(hdr, trl))
	switch {
	case err == nil:
		if nerr := normalizeResponse(resp); nerr != nil {
			err = m.errorf(ErrBadAnswer, "the runtime's answer is malformed: %v", nerr)
		}
	case ctx.Err() != nil && m.ctx.Err() == nil:
		// Every request of the batch went away; nobody reads this.
		err = m.errorf(ErrUnavailable, "the call was cancelled")
	default:
		err = m.callError(p, inc, err)
	}
	if err != nil {
		for _, c := range live {
			answer(c, nil, nil, err)
		}
		return
	}
	if len(live) == 1 {
		answer(live[0], resp, back, nil)
		return
	}
	parts, serr := splitResponse(resp, rows)
	for i, c := range live {
		if serr != nil {
			answer(c, nil, nil, m.errorf(ErrBadAnswer, "the runtime's answer does not fit the batch: %v", serr))
		} else {
			answer(c, parts[i], back, nil)
		}
	}
}

// callError turns a failed ModelInfer call into the client's error.
func (m *Model) callError(p *proc, inc *incarnation, err error) error {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return m.errorf(ErrInvalid, "%s", st.Message())
	case codes.DeadlineExceeded:
		return m.errorf(ErrTimeout, "the runtime did not answer in time: %s", st.Message())
	case codes.Canceled, codes.Unavailable:
		if m.ctx.Err() != nil {
			return m.errorf(ErrClosed, "the model was unloaded or the server is stopping; retry")
		}
		// A dying process ends the call as UNAVAILABLE, or as CANCELLED
		// when the supervisor closed its connection first. Give the
		// process a moment to be seen dead, to say how it ended.
		t := time.NewTimer(200 * time.Millisecond)
		defer t.Stop()
		select {
		case <-inc.dead:
			return m.errorf(ErrUnavailable, "its runtime process (worker %d) died while serving this request (%s); llmserve restarts it; retry", p.idx, inc.exit)
		case <-t.C:
		}
		return m.errorf(ErrUnavailable, "its runtime process (worker %d) stopped answering while serving this request (%s); retry", p.idx, st.Message())
	}
	return m.errorf(ErrBadAnswer, "the runtime failed: %s: %s", st.Code(), st.Message())
}

// Stop fails the queued requests and ends the running ones, and returns
// how many requests it ended. The processes run until Close.
func (m *Model) Stop() int64 {
	n := m.inflight.Load()
	m.stopOnce.Do(func() {
		close(m.quit)
		m.cancel()
	})
	m.loops.Wait()
	return n
}

// Close stops the model and its processes (SIGTERM, then SIGKILL after
// StopGrace) and removes its sockets. It is idempotent.
func (m *Model) Close() error {
	m.Stop()
	m.closeOnce.Do(func() {
		m.procs.Wait()
		if m.ownDir != "" {
			_ = os.RemoveAll(m.ownDir)
		}
	})
	return nil
}
