package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Model is a model served by the router's workers: it implements
// api/openai.Model and api/v2/infer.Model, so the public API layer runs
// over it as over a local model. Each request's token ids and sampling go
// to a worker's Generate; the outputs come back into a core.Stream.
type Model struct {
	r       *Router
	name    string
	created int64
	maxLen  int
	timeout time.Duration
	tok     *tokenizer.Tokenizer

	// The workers' embedding side (their Info).
	pooling  string
	mrl      []int
	maxEmbed int
	task     string
	rerank   func(query, document string) ([]int32, error)
	// reasoning is the workers' reasoning parser.
	reasoning string

	mu      sync.Mutex
	runs    map[*run]struct{} // requests not finished; guarded by mu
	stopped bool              // guarded by mu
}

// ModelOptions describe the remote model.
type ModelOptions struct {
	Name           string
	MaxModelLen    int
	RequestTimeout time.Duration
	Tokenizer      *tokenizer.Tokenizer
	// Pooling, MatryoshkaDimensions, MaxEmbedTokens and Task are the
	// workers' (InfoResponse); Pooling "" means none. MaxEmbedTokens 0
	// means MaxModelLen.
	Pooling              string
	MatryoshkaDimensions []int
	MaxEmbedTokens       int
	Task                 string
	// RerankTokens formats a rerank pair as the workers do
	// (models.VocabRerankTokens); nil when the head cannot.
	RerankTokens func(query, document string) ([]int32, error)
	// ReasoningParser is the workers' (InfoResponse.reasoning_parser);
	// "" for none.
	ReasoningParser string
}

// NewModel returns the model the router's workers serve.
func NewModel(r *Router, o ModelOptions) *Model {
	maxEmbed := o.MaxEmbedTokens
	if maxEmbed <= 0 {
		maxEmbed = o.MaxModelLen
	}
	return &Model{r: r, name: o.Name, created: time.Now().Unix(), maxLen: o.MaxModelLen, timeout: o.RequestTimeout, tok: o.Tokenizer,
		pooling: o.Pooling, mrl: slices.Clone(o.MatryoshkaDimensions), maxEmbed: maxEmbed, task: o.Task, rerank: o.RerankTokens,
		reasoning: o.ReasoningParser, runs: map[*run]struct{}{}}
}

// errStopped ends the requests Stop cuts.
var errStopped = fmt.Errorf("%w: the head is shutting down", scheduler.ErrClosed)

// Stop ends every request still running (scheduler.ErrClosed, which the
// client sees as an error event or a 503) and refuses new ones; it
// returns how many it ended.
func (m *Model) Stop() int64 {
	m.mu.Lock()
	m.stopped = true
	runs := make([]*run, 0, len(m.runs))
	for r := range m.runs {
		runs = append(runs, r)
	}
	m.mu.Unlock()
	for _, r := range runs {
		r.stop(errStopped)
	}
	return int64(len(runs))
}

// track adds or removes a run from the live set; false when stopped.
func (m *Model) track(r *run, live bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !live {
		delete(m.runs, r)
		return true
	}
	if m.stopped {
		return false
	}
	m.runs[r] = struct{}{}
	return true
}

// Name is the served model name.
func (m *Model) Name() string { return m.name }

// Created is when the head started.
func (m *Model) Created() int64 { return m.created }

// MaxModelLen is the workers' context length.
func (m *Model) MaxModelLen() int { return m.maxLen }

// RequestTimeout is the head's --request-timeout.
func (m *Model) RequestTimeout() time.Duration { return m.timeout }

// NoKVTransfer is why the head refuses kv_transfer_params (the API layer
// answers it as the 400's message).
func (m *Model) NoKVTransfer() string {
	return "This server is an llmserve head: it splits prefill and decode over its workers itself and takes no kv_transfer_params. Send the request without them, or send them to a worker's own HTTP port."
}

// ReasoningParser is the workers' --reasoning-parser ("" for none; their
// Info): the API layer splits reasoning and builds Request.Thinking with
// it as on serve.
func (m *Model) ReasoningParser() string { return m.reasoning }

// Tokenizer is the head's tokenizer (the workers' vocabulary).
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Ready reports whether a healthy worker serves requests.
func (m *Model) Ready() bool { return m.r.Ready() }

// WaitReady waits until a healthy worker serves requests, within the
// router's Options.NoWorkerWait and ctx (api/v2/infer.ReadyWaiter):
// scheduler.ErrNoWorker when none did.
func (m *Model) WaitReady(ctx context.Context) error { return m.r.WaitReady(ctx) }

// Submit sends each request to a worker and returns its stream once every
// request started (its first output arrived) or one failed to start (then
// the others are cancelled and the error is returned).
func (m *Model) Submit(ctx context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	runs := make([]*run, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		runs[i] = newRun(m, req)
		if !m.track(runs[i], true) {
			for _, r := range runs[:i] {
				r.cancel()
			}
			return nil, errStopped
		}
		wg.Go(func() { errs[i] = runs[i].start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, r := range runs {
			r.cancel()
			m.track(r, false)
		}
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
	}
	streams := make([]*core.Stream, len(runs))
	for i, r := range runs {
		streams[i] = r.stream
	}
	return streams, nil
}

// run is one request through the head: one or more legs (Generate calls)
// that together produce its choices.
type run struct {
	m      *Model
	req    *scheduler.Request
	stream *core.Stream
	// media is req.Media's wire form, built once: every leg (a P/D
	// prefill and its decode, a migrated continuation) carries the same
	// spans, which cover the original prompt.
	media  []*workerpb.MediaSpan
	ctx    context.Context //nolint:containedctx // the request's life: Cancel ends it
	cancel context.CancelFunc

	mu         sync.Mutex
	toks       [][]int32       // per choice: tokens delivered; guarded by mu
	done       []bool          // per choice; guarded by mu
	stopped    []bool          // per choice: StopChoice asked; guarded by mu
	legOf      []*leg          // per choice: the leg running it; guarded by mu
	usage      scheduler.Usage // guarded by mu
	migrations int             // guarded by mu
	stopErr    error           // why the run was stopped (nil: the client cancelled); guarded by mu
	legs       int             // wire requests built; guarded by mu
	// think counts each choice's reasoning tokens over the tokens
	// delivered, whichever workers generated them (usage.ReasoningTokens
	// is their sum); nil without req.Thinking. guarded by mu
	think []*scheduler.ThinkingCount
	// exclude holds the workers that failed under this request, each with
	// its health generation then: it is skipped until it is healthy again
	// (a restarted worker at the same address). guarded by mu
	exclude map[string]uint64
}

// leg is one Generate call running some of a run's choices.
type leg struct {
	addr    string
	choices []int // leg choice j is the run's choice choices[j]
	call    workerpb.Worker_GenerateClient
	cancel  context.CancelFunc
	sendMu  sync.Mutex
}

func (l *leg) stopChoice(j int) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	_ = l.call.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_StopChoice{StopChoice: &workerpb.StopChoice{Choice: int32(j)}}})
}

func newRun(m *Model, req *scheduler.Request) *run {
	n := max(req.N, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{m: m, req: req, ctx: ctx, cancel: cancel,
		toks: make([][]int32, n), done: make([]bool, n), stopped: make([]bool, n), legOf: make([]*leg, n), exclude: map[string]uint64{}}
	r.usage.PromptTokens = len(req.Prompt)
	if req.Thinking != nil {
		r.think = make([]*scheduler.ThinkingCount, n)
		for i := range r.think {
			r.think[i] = scheduler.NewThinkingCount(req.Thinking)
		}
	}
	r.media = workercodec.EncodeMedia(req.Media)
	r.stream = core.NewStream(req.ID, n, r.abort)
	return r
}

// stop ends the run with err.
func (r *run) stop(err error) {
	r.mu.Lock()
	r.stopErr = err
	r.mu.Unlock()
	r.cancel()
}

// cancelled is the error of choices ended by a cancel: nil when the
// client cancelled, the Stop error otherwise.
func (r *run) cancelled() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopErr
}

// abort is the stream's Cancel and StopChoice.
func (r *run) abort(choice int, stopped bool) {
	if !stopped {
		r.cancel()
		return
	}
	r.mu.Lock()
	r.stopped[choice] = true
	l := r.legOf[choice]
	r.mu.Unlock()
	if l != nil {
		if j := slices.Index(l.choices, choice); j >= 0 {
			l.stopChoice(j)
		}
	}
}

// start opens the first leg (with a remote prefill when it pays) and
// starts following it.
func (r *run) start(ctx context.Context) error {
	choices := make([]int, len(r.toks))
	for i := range choices {
		choices[i] = i
	}
	l, first, err := r.open(ctx, choices, true)
	if err != nil {
		r.cancel()
		return err
	}
	if l == nil { // finished by the prefill alone
		return nil
	}
	go r.follow(l, first)
	return nil
}

// wireRequest is the request a leg sends for choices: the whole request
// when nothing was delivered yet, else one choice continued from its
// delivered tokens (prompt + them, max_tokens and min_tokens reduced, the
// choice's own seed).
func (r *run) wireRequest(choices []int) *workerpb.Request {
	q := r.req
	w := workercodec.EncodeRequest(q)
	w.N, w.Media = int32(len(choices)), r.media
	r.mu.Lock()
	r.legs++
	if r.legs > 1 {
		w.RequestId = fmt.Sprintf("%s-%d", q.ID, r.legs) // unique on a worker that gets two legs
	}
	r.mu.Unlock()
	if len(choices) == 1 {
		c := choices[0]
		r.mu.Lock()
		got := slices.Clone(r.toks[c])
		r.mu.Unlock()
		w.Sampling.Seed += uint32(c)
		if len(got) > 0 {
			w.Prompt = append(slices.Clone(q.Prompt), got...)
			w.MaxTokens -= int32(len(got))
			w.MinTokens = max(0, w.MinTokens-int32(len(got)))
			w.PromptLogprobs = nil
			if w.Thinking != nil {
				// The worker's thinking state starts from the tokens
				// delivered, so the budget spans the whole choice.
				w.Thinking.Generated = int32(len(got))
			}
		}
	}
	return w
}

// open starts a leg for choices on the best worker that takes it, and
// waits for its first message. A worker that is unavailable is marked
// broken and the next is tried; a request the worker refuses is the
// error. With pd, a remote prefill runs first when it pays; a nil leg then
// means the prefill finished the request.
//
// When no healthy worker can take it, open waits for one (Router.waitFor)
// for the router's Options.NoWorkerWait in all, within the request's
// deadline, ctx and the run's own context; then it fails with
// scheduler.ErrNoWorker.
func (r *run) open(ctx context.Context, choices []int, pd bool) (*leg, *workerpb.GenerateResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	until := r.m.r.waitUntil(r.req.Deadline)
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, nil, r.ended(err)
		}
		wreq := r.wireRequest(choices)
		var p pick
		err := r.m.r.waitFor(ctx, until, func() bool {
			var ok bool
			p, ok = r.m.r.chooseWhere(poolDecode, wreq.Prompt, wreq.CacheSalt, r.req.RouteKey, r.excluded(), nil)
			return ok
		})
		if err != nil {
			if r.ctx.Err() != nil {
				err = r.ended(r.ctx.Err())
			}
			return nil, nil, err
		}
		if pd && len(choices) == 1 && wreq.PromptLogprobs == nil && r.m.r.opts.PDMinPrefillTokens > 0 &&
			len(wreq.Prompt)-p.cached >= r.m.r.opts.PDMinPrefillTokens && r.m.r.hasPrefillPool() {
			next, done, err := r.prefill(ctx, wreq, choices[0], p)
			if err != nil {
				r.m.r.release(p.addr)
				return nil, nil, err
			}
			if done {
				r.m.r.release(p.addr)
				return nil, nil, nil
			}
			pd = false
			if next != nil {
				wreq = next // continues from the prefill's first token, with its KV
			}
		}
		l, first, err := r.call(ctx, p, wreq, choices)
		if err == nil {
			return l, first, nil
		}
		r.m.r.release(p.addr)
		if !retryable(err) || r.ctx.Err() != nil {
			return nil, nil, err
		}
		r.m.r.markBroken(p.addr, err)
		r.excludeWorker(p.addr)
	}
}

// excludeWorker keeps this request off a worker that failed under it
// until that worker is healthy again.
func (r *run) excludeWorker(addr string) {
	gen := r.m.r.gen(addr)
	r.mu.Lock()
	r.exclude[addr] = gen
	r.mu.Unlock()
}

// excluded lists the workers this request must not go to now.
func (r *run) excluded() []string {
	r.mu.Lock()
	ex := maps.Clone(r.exclude)
	r.mu.Unlock()
	return r.m.r.stillExcluded(ex)
}

// ended is the error of a run whose context ended: the Stop error (the
// head is shutting down), else err (the client cancelled).
func (r *run) ended(err error) error {
	if e := r.cancelled(); e != nil {
		return e
	}
	return err
}

// retryable reports whether a failed call may go to another worker: the
// worker is gone, shutting down, or does not serve the call.
func retryable(err error) bool {
	if e := workercodec.ErrorDetail(err); e != nil {
		return e.Code == workerpb.ErrorCode_ERROR_CODE_CLOSED || e.Code == workerpb.ErrorCode_ERROR_CODE_ROLE
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false // a typed refusal already mapped (workercodec.DecodeError) or the caller's context
	}
	switch st.Code() {
	case codes.Unavailable, codes.Unknown, codes.Internal, codes.FailedPrecondition, codes.Aborted:
		return true
	}
	return false
}

// prefill runs the prompt on a prefill worker (P/D). On success the first
// token is delivered and next is the decode worker's request: continuing
// from that token, pulling the KV from the prefill worker; done is true
// when that token ended the request. When the prefill fails (but for a
// request the decode worker would refuse as well), next is nil and the
// decode worker does everything.
func (r *run) prefill(ctx context.Context, wreq *workerpb.Request, choice int, decode pick) (next *workerpb.Request, done bool, err error) {
	pp, ok := r.m.r.choose(poolPrefill, wreq.Prompt, wreq.CacheSalt, []string{decode.addr})
	if !ok {
		return nil, false, nil
	}
	defer r.m.r.release(pp.addr)
	r.m.r.m.requests.WithLabelValues(pp.addr).Inc()
	cctx, cancel := context.WithTimeout(ctx, r.m.r.opts.PrefillTimeout())
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	res, err := pp.client.Prefill(cctx, &workerpb.PrefillRequest{Request: wreq, LeaseMs: r.m.r.opts.PrefillLease.Milliseconds()})
	cancel()
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, false, r.ctx.Err()
		}
		switch e := workercodec.ErrorDetail(err); e.GetCode() {
		case workerpb.ErrorCode_ERROR_CODE_INVALID, workerpb.ErrorCode_ERROR_CODE_TOO_LONG, workerpb.ErrorCode_ERROR_CODE_LIMIT, workerpb.ErrorCode_ERROR_CODE_DEADLINE:
			return nil, false, workercodec.DecodeError(e) // the request itself: the decode worker would refuse it too
		}
		r.m.r.log.Warn("remote prefill failed; the decode worker computes the prompt", "prefill", pp.addr, "err", err)
		if retryable(err) {
			r.m.r.markBroken(pp.addr, err)
		}
		return nil, false, nil
	}
	out := scheduler.Output{Choice: choice, Tokens: []int32{res.FirstToken}, Finish: workercodec.DecodeFinish(res.FinishReason)}
	if res.FirstLogprobs != nil {
		out.Logprobs = []engine.Logprobs{workercodec.DecodeLogprob(res.FirstLogprobs)}
	}
	if out.Finish == scheduler.FinishNone && wreq.MaxTokens <= 1 {
		out.Finish = scheduler.FinishLength
	}
	r.mu.Lock()
	r.usage.CachedTokens = max(r.usage.CachedTokens, int(res.GetUsage().GetCachedTokens()))
	r.mu.Unlock()
	r.deliver(out)
	if out.Finish != scheduler.FinishNone {
		rctx, rcancel := context.WithTimeout(context.Background(), r.m.r.opts.RPCTimeout)
		_, _ = pp.client.ReleaseKV(rctx, &workerpb.ReleaseKVRequest{TransferId: res.TransferId})
		rcancel()
		return nil, true, nil
	}
	next = r.wireRequest([]int{choice})
	next.KvSource = &workerpb.KVSource{Address: pp.addr, TransferId: res.TransferId, TimeoutMs: r.m.r.opts.TransferTimeout.Milliseconds()}
	return next, false, nil
}

// PrefillTimeout bounds a remote prefill call.
func (o *Options) PrefillTimeout() time.Duration { return max(2*time.Minute, o.RPCTimeout) }

// call opens Generate on p and waits for the first message.
func (r *run) call(ctx context.Context, p pick, wreq *workerpb.Request, choices []int) (*leg, *workerpb.GenerateResponse, error) {
	r.m.r.m.requests.WithLabelValues(p.addr).Inc()
	cctx, cancel := context.WithCancel(r.ctx)
	call, err := p.client.Generate(cctx)
	if err == nil {
		err = call.Send(&workerpb.GenerateRequest{Msg: &workerpb.GenerateRequest_Request{Request: wreq}})
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	type recv struct {
		msg *workerpb.GenerateResponse
		err error
	}
	ch := make(chan recv, 1)
	go func() {
		msg, err := call.Recv()
		ch <- recv{msg, err}
	}()
	var got recv
	select {
	case got = <-ch:
	case <-ctx.Done():
		cancel()
		<-ch
		return nil, nil, ctx.Err()
	}
	if got.err != nil {
		cancel()
		if e := workercodec.ErrorDetail(got.err); e != nil && !retryable(got.err) {
			return nil, nil, workercodec.DecodeError(e)
		}
		return nil, nil, got.err
	}
	l := &leg{addr: p.addr, choices: choices, call: call, cancel: cancel}
	r.mu.Lock()
	var stopped []int
	for j, c := range choices {
		r.legOf[c] = l
		if r.stopped[c] {
			stopped = append(stopped, j)
		}
	}
	r.mu.Unlock()
	for _, j := range stopped {
		l.stopChoice(j)
	}
	return l, got.msg, nil
}

// follow reads a leg to its end; when its stream breaks, its unfinished
// choices move to other workers, and so do choices the worker ended
// because it is shutting down (ERROR_CODE_CLOSED).
func (r *run) follow(l *leg, msg *workerpb.GenerateResponse) {
	defer r.m.r.release(l.addr)
	defer l.cancel()
	final := false
	var closed []int // choices the worker aborted with ERROR_CODE_CLOSED
	var err error
	for msg != nil {
		switch m := msg.Msg.(type) {
		case *workerpb.GenerateResponse_Output:
			o := m.Output
			if int(o.Choice) >= len(l.choices) {
				break
			}
			if ct := min(int(o.GetCachedTokens()), len(r.req.Prompt)); ct > 0 {
				r.mu.Lock()
				r.usage.CachedTokens = max(r.usage.CachedTokens, ct)
				r.mu.Unlock()
			}
			out := workercodec.DecodeOutput(o, l.choices[o.Choice])
			if out.Finish == scheduler.FinishAbort && o.GetError().GetCode() == workerpb.ErrorCode_ERROR_CODE_CLOSED {
				out.Finish, out.Err = scheduler.FinishNone, nil
				closed = append(closed, out.Choice)
			}
			if len(out.Tokens) > 0 || out.Finish != scheduler.FinishNone || len(out.PromptLogprobs) > 0 {
				r.deliver(out)
			}
		case *workerpb.GenerateResponse_Final:
			final = true
			r.mu.Lock()
			r.usage.CachedTokens = max(r.usage.CachedTokens, min(int(m.Final.GetUsage().GetCachedTokens()), len(r.req.Prompt)))
			r.mu.Unlock()
		}
		msg, err = l.call.Recv()
	}
	if r.ctx.Err() != nil {
		r.finishRest(l.choices, r.cancelled())
		return
	}
	var rest []int
	broke := !final || !errors.Is(err, io.EOF)
	r.mu.Lock()
	for _, c := range l.choices {
		if !r.done[c] && (broke || slices.Contains(closed, c)) {
			rest = append(rest, c)
		}
	}
	r.mu.Unlock()
	if !broke {
		// A worker that ended a choice without saying so: it ends here.
		r.finishRest(slices.DeleteFunc(slices.Clone(l.choices), func(c int) bool { return slices.Contains(rest, c) }), nil)
		if len(rest) == 0 {
			return
		}
		err = fmt.Errorf("worker %s is shutting down", l.addr)
	} else {
		r.m.r.markBroken(l.addr, err)
	}
	r.excludeWorker(l.addr)
	r.mu.Lock()
	over := r.migrations >= r.m.r.opts.MaxMigrations
	if len(rest) > 0 && !over {
		r.migrations++
	}
	r.mu.Unlock()
	if len(rest) == 0 {
		return
	}
	if over {
		r.finishRest(rest, fmt.Errorf("%w: worker %s failed mid-stream and the request already moved %d times (--max-migrations)", scheduler.ErrEngine, l.addr, max(r.m.r.opts.MaxMigrations, 0)))
		return
	}
	r.m.r.m.migrations.Inc()
	r.m.r.log.Warn("worker stream broke; migrating the request", "worker", l.addr, "request", r.req.ID, "choices", rest, "err", err)
	for _, c := range rest {
		r.mu.Lock()
		stopped := r.stopped[c]
		r.mu.Unlock()
		if stopped {
			r.deliver(scheduler.Output{Choice: c, Finish: scheduler.FinishStop})
			continue
		}
		go r.migrate(c)
	}
}

// migrate continues choice c on another worker (waiting for one when none
// is healthy), or ends it with the error that stopped it.
func (r *run) migrate(c int) {
	nl, first, err := r.open(r.ctx, []int{c}, false)
	if err != nil {
		if r.ctx.Err() != nil {
			err = r.cancelled()
		}
		r.finishRest([]int{c}, err)
		return
	}
	r.follow(nl, first)
}

// deliver pushes one output to the client's stream, keeping the choice's
// delivered tokens; outputs of a finished choice are dropped.
func (r *run) deliver(o scheduler.Output) {
	r.mu.Lock()
	if r.done[o.Choice] {
		r.mu.Unlock()
		return
	}
	if r.think != nil {
		c := r.think[o.Choice]
		before := c.Reasoning()
		for _, t := range o.Tokens {
			r.toks[o.Choice] = append(r.toks[o.Choice], t)
			c.Advance(r.toks[o.Choice])
		}
		r.usage.ReasoningTokens += c.Reasoning() - before
	} else {
		r.toks[o.Choice] = append(r.toks[o.Choice], o.Tokens...)
	}
	r.usage.CompletionTokens += len(o.Tokens)
	all := false
	if o.Finish != scheduler.FinishNone {
		r.done[o.Choice] = true
		all = !slices.Contains(r.done, false)
	}
	u := r.usage
	r.mu.Unlock()
	if all {
		r.m.track(r, false)
	}
	r.stream.Push([]scheduler.Output{o}, u)
}

// finishRest ends the choices that are not done: aborted with err, or
// (err nil) aborted silently (cancelled).
func (r *run) finishRest(choices []int, err error) {
	for _, c := range choices {
		r.deliver(scheduler.Output{Choice: c, Finish: scheduler.FinishAbort, Err: err})
	}
}
