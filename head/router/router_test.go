package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

func TestBest(t *testing.T) {
	tests := []struct {
		name   string
		cands  []candidate
		blocks int
		weight float64
		rr     uint64
		want   int
	}{
		{"longest cached prefix wins at equal load", []candidate{{cached: 1}, {cached: 5}}, 8, 1, 0, 1},
		{"load outweighs a short prefix", []candidate{{cached: 2, load: 9}, {cached: 0, load: 0}}, 8, 1, 0, 1},
		{"a long prefix outweighs load", []candidate{{cached: 8, load: 3}, {cached: 0, load: 0}}, 8, 1, 0, 0},
		{"the weight scales the prefix", []candidate{{cached: 2, load: 3}, {cached: 0, load: 0}}, 8, 2, 0, 0},
		{"equal cost: lower load", []candidate{{cached: 0, load: 2}, {cached: 2, load: 4}}, 8, 1, 0, 0},
		{"equal requests: lower KV usage", []candidate{{load: 1, kvUsage: 0.9}, {load: 1, kvUsage: 0.2}}, 8, 1, 0, 1},
		{"full tie: round robin 0", []candidate{{}, {}, {}}, 4, 1, 0, 0},
		{"full tie: round robin 1", []candidate{{}, {}, {}}, 4, 1, 1, 1},
		{"full tie: round robin wraps", []candidate{{}, {}, {}}, 4, 1, 5, 2},
		{"one candidate", []candidate{{load: 100}}, 4, 1, 7, 0},
		{"none", nil, 4, 1, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := best(tt.cands, tt.blocks, tt.weight, tt.rr); got != tt.want {
				t.Fatalf("best = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestApplyEvent(t *testing.T) {
	h1, h2 := kvcache.Hash{1}, kvcache.Hash{2}
	ev := func(k workerpb.KVEventKind, h kvcache.Hash) *workerpb.KVEvent {
		return &workerpb.KVEvent{Kind: k, Hash: h[:]}
	}
	tests := []struct {
		name   string
		events []*workerpb.KVEvent
		want   []kvcache.Hash
	}{
		{"stored", []*workerpb.KVEvent{ev(workerpb.KVEventKind_KV_EVENT_KIND_STORED, h1), ev(workerpb.KVEventKind_KV_EVENT_KIND_STORED, h2)}, []kvcache.Hash{h1, h2}},
		{"removed", []*workerpb.KVEvent{ev(workerpb.KVEventKind_KV_EVENT_KIND_STORED, h1), ev(workerpb.KVEventKind_KV_EVENT_KIND_REMOVED, h1)}, nil},
		{"cleared", []*workerpb.KVEvent{ev(workerpb.KVEventKind_KV_EVENT_KIND_STORED, h1), {Kind: workerpb.KVEventKind_KV_EVENT_KIND_CLEARED}, ev(workerpb.KVEventKind_KV_EVENT_KIND_STORED, h2)}, []kvcache.Hash{h2}},
		{"snapshot end changes nothing", []*workerpb.KVEvent{ev(workerpb.KVEventKind_KV_EVENT_KIND_STORED, h1), {Kind: workerpb.KVEventKind_KV_EVENT_KIND_SNAPSHOT_END}}, []kvcache.Hash{h1}},
		{"a short hash is ignored", []*workerpb.KVEvent{{Kind: workerpb.KVEventKind_KV_EVENT_KIND_STORED, Hash: []byte{1, 2}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks := map[kvcache.Hash]struct{}{}
			for _, e := range tt.events {
				applyEvent(blocks, e)
			}
			if len(blocks) != len(tt.want) {
				t.Fatalf("%d blocks, want %d", len(blocks), len(tt.want))
			}
			for _, h := range tt.want {
				if _, ok := blocks[h]; !ok {
					t.Fatalf("block %x missing", h[:2])
				}
			}
		})
	}
}

func TestLWSWorkers(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    []string
		ok, err bool
	}{
		{"not in LWS", nil, nil, false, false},
		{"group of 3", map[string]string{"LWS_LEADER_ADDRESS": "llm-0.llm.ns.svc.cluster.local", "LWS_GROUP_SIZE": "3"},
			[]string{"llm-0-1.llm.ns.svc.cluster.local:8090", "llm-0-2.llm.ns.svc.cluster.local:8090"}, true, false},
		{"bare leader name", map[string]string{"LWS_LEADER_ADDRESS": "llm-1", "LWS_GROUP_SIZE": "2"}, []string{"llm-1-1:8090"}, true, false},
		{"group of 1 has no worker", map[string]string{"LWS_LEADER_ADDRESS": "llm-0.x", "LWS_GROUP_SIZE": "1"}, nil, true, true},
		{"size not a number", map[string]string{"LWS_LEADER_ADDRESS": "llm-0.x", "LWS_GROUP_SIZE": "two"}, nil, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := LWSWorkers(func(k string) string { return tt.env[k] }, 8090)
			if ok != tt.ok || (err != nil) != tt.err || !slices.Equal(got, tt.want) {
				t.Fatalf("LWSWorkers = %v, %v, %v; want %v, %v, error %v", got, ok, err, tt.want, tt.ok, tt.err)
			}
		})
	}
}

func TestParseWorkers(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"a:1,b:2", []string{"a:1", "b:2"}, ""},
		{" a:1 , ,[::1]:3", []string{"a:1", "[::1]:3"}, ""},
		{"a", nil, `"a" is not host:port`},
		{"", nil, "no address"},
	}
	for _, tt := range tests {
		got, err := ParseWorkers(tt.in)
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) || !slices.Equal(got, tt.want) {
			t.Errorf("ParseWorkers(%q) = %v, %v; want %v, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// fakeWorker is a worker service in memory. Generate answers with
// script(request) and then the script's error (nil: a Final and EOF).
type fakeWorker struct {
	workerpb.WorkerClient
	role workerpb.Role
	down atomic.Bool
	// prefillFails makes Prefill fail while the checks pass.
	prefillFails atomic.Bool
	events       chan *workerpb.KVEvent
	script       func(req *workerpb.Request) ([]*workerpb.GenerateResponse, error)
	// gate, when set, holds the script's final error until it is closed.
	gate chan struct{}
	// load is the waiting requests Stats reports.
	load atomic.Int32
	// embed answers Embed (nil: UNIMPLEMENTED); embeds counts the calls.
	embed  func(*workerpb.EmbedRequest) (*workerpb.EmbedResponse, error)
	embeds atomic.Int32

	mu       sync.Mutex
	reqs     []*workerpb.Request
	prefills []*workerpb.Request
	// llama and model, when set, are the llama.cpp commit and model name
	// Info reports. guarded by mu
	llama, model string
	// parser is the reasoning parser Info reports. guarded by mu
	parser string
	// images and audio are what Info says the projector reads. guarded by mu
	images, audio bool
	// prepare answers PrepareMedia (nil: UNIMPLEMENTED); prepares counts
	// the calls.
	prepare  func(*workerpb.PrepareMediaRequest) (*workerpb.PrepareMediaResponse, error)
	prepares atomic.Int32
}

func newFake(role workerpb.Role) *fakeWorker {
	return &fakeWorker{role: role, events: make(chan *workerpb.KVEvent, 64)}
}

func (f *fakeWorker) Close() error { return nil }

var errDown = status.Error(codes.Unavailable, "connection refused")

// activity is closed and replaced whenever a fake's Info, Stats or event
// stream is called. A monitor or an event follower calls its worker again
// only after it handled the previous answer, so a test waiting for the
// router to act on an answer looks again then (await).
var activity = struct {
	mu sync.Mutex
	ch chan struct{}
}{ch: make(chan struct{})}

func touch() {
	activity.mu.Lock()
	defer activity.mu.Unlock()
	close(activity.ch)
	activity.ch = make(chan struct{})
}

// await waits until cond holds, looking again whenever a worker's health
// or the worker set changes (Router.changed) or a fake is called; it fails
// the test after a minute.
func await(t *testing.T, r *Router, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(time.Minute)
	defer limit.Stop()
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		activity.mu.Lock()
		called := activity.ch
		activity.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-called:
		case <-limit.C:
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

func (f *fakeWorker) Info(context.Context, *workerpb.InfoRequest, ...grpc.CallOption) (*workerpb.InfoResponse, error) {
	touch()
	if f.down.Load() {
		return nil, errDown
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	model := cmp.Or(f.model, "m")
	return &workerpb.InfoResponse{ModelName: model, MaxModelLen: 100, Role: f.role, KvBlockSize: 4, PrefixCaching: true, LlamaCommit: f.llama, Version: "v1", ReasoningParser: f.parser,
		ReadsImages: f.images, ReadsAudio: f.audio}, nil
}

func (f *fakeWorker) Stats(context.Context, *workerpb.StatsRequest, ...grpc.CallOption) (*workerpb.StatsResponse, error) {
	touch()
	if f.down.Load() {
		return nil, errDown
	}
	return &workerpb.StatsResponse{Role: f.role, Waiting: f.load.Load()}, nil
}

func (f *fakeWorker) Embed(_ context.Context, req *workerpb.EmbedRequest, _ ...grpc.CallOption) (*workerpb.EmbedResponse, error) {
	f.embeds.Add(1)
	if f.down.Load() {
		return nil, errDown
	}
	if f.embed == nil {
		return nil, status.Error(codes.Unimplemented, "no Embed")
	}
	return f.embed(req)
}

func (f *fakeWorker) WatchKVEvents(ctx context.Context, _ *workerpb.WatchKVEventsRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[workerpb.KVEvent], error) {
	return &fakeEvents{ctx: ctx, ch: f.events}, nil
}

func (f *fakeWorker) Generate(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[workerpb.GenerateRequest, workerpb.GenerateResponse], error) {
	if f.down.Load() {
		return nil, errDown
	}
	return &fakeGen{ctx: ctx, f: f}, nil
}

func (f *fakeWorker) requests() []*workerpb.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

type fakeEvents struct {
	grpc.ClientStream
	ctx context.Context //nolint:containedctx // the call's
	ch  chan *workerpb.KVEvent
}

func (s *fakeEvents) Recv() (*workerpb.KVEvent, error) {
	touch()
	select {
	case ev := <-s.ch:
		return ev, nil
	case <-s.ctx.Done():
		return nil, status.FromContextError(s.ctx.Err()).Err()
	}
}

type fakeGen struct {
	grpc.ClientStream
	ctx  context.Context //nolint:containedctx // the call's
	f    *fakeWorker
	msgs []*workerpb.GenerateResponse
	err  error
	sent bool
}

func (g *fakeGen) Send(m *workerpb.GenerateRequest) error {
	if req := m.GetRequest(); req != nil && !g.sent {
		g.sent = true
		g.f.mu.Lock()
		g.f.reqs = append(g.f.reqs, req)
		g.f.mu.Unlock()
		g.msgs, g.err = g.f.script(req)
		if g.err == nil {
			g.msgs = append(g.msgs, &workerpb.GenerateResponse{Msg: &workerpb.GenerateResponse_Final{Final: &workerpb.Final{}}})
			g.err = io.EOF
		}
	}
	return nil
}

func (g *fakeGen) Recv() (*workerpb.GenerateResponse, error) {
	if err := g.ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if len(g.msgs) == 0 {
		if g.f.gate != nil {
			select {
			case <-g.f.gate:
			case <-g.ctx.Done():
				return nil, status.FromContextError(g.ctx.Err()).Err()
			}
		}
		return nil, g.err
	}
	m := g.msgs[0]
	g.msgs = g.msgs[1:]
	return m, nil
}

func (g *fakeGen) CloseSend() error { return nil }

func out(choice int32, finish workerpb.FinishReason, toks ...int32) *workerpb.GenerateResponse {
	return &workerpb.GenerateResponse{Msg: &workerpb.GenerateResponse_Output{Output: &workerpb.Output{Choice: choice, Tokens: toks, FinishReason: finish}}}
}

// newTestRouter returns a router over the fakes (by address) with every
// fake healthy.
func newTestRouter(t *testing.T, opts Options, fakes map[string]*fakeWorker) (*Router, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Dial = func(addr string) (Client, error) {
		if f, ok := fakes[addr]; ok {
			return f, nil
		}
		return nil, errors.New("no such fake")
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = time.Millisecond
	}
	opts.Registerer = reg
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	var addrs []string
	for a := range fakes {
		addrs = append(addrs, a)
	}
	r.SetWorkers(addrs)
	waitHealthy(t, r, len(addrs))
	return r, reg
}

func waitHealthy(t *testing.T, r *Router, n int) {
	t.Helper()
	await(t, r, fmt.Sprintf("%d healthy workers", n), func() bool {
		h := 0
		for _, w := range r.Workers() {
			if w.Healthy {
				h++
			}
		}
		return h == n
	})
}

// TestWatchDNS: the worker set follows the name's addresses; a failed
// lookup keeps it.
func TestWatchDNS(t *testing.T) {
	fakes := map[string]*fakeWorker{}
	for _, a := range []string{"10.0.0.1:8090", "10.0.0.2:8090", "[fd00::3]:8090"} {
		fakes[a] = newFake(workerpb.Role_ROLE_BOTH)
	}
	r, _ := newTestRouter(t, Options{}, nil)
	r.opts.Dial = func(addr string) (Client, error) { return fakes[addr], nil }
	var answer atomic.Pointer[[]string]
	set := func(ips ...string) { answer.Store(&ips) }
	set("10.0.0.2", "10.0.0.1")
	var lookups atomic.Int64 // counted as they start
	resolve := func(_ context.Context, host string) ([]string, error) {
		lookups.Add(1)
		touch()
		if host != "llm-workers.ns.svc" {
			return nil, errors.New("unknown host")
		}
		if ips := *answer.Load(); ips != nil {
			return ips, nil
		}
		return nil, errors.New("SERVFAIL")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.WatchDNS(ctx, "llm-workers", time.Millisecond, resolve); err == nil {
		t.Fatal("a name without a port was taken")
	}
	if err := r.WatchDNS(ctx, "llm-workers.ns.svc:8090", time.Millisecond, resolve); err != nil {
		t.Fatal(err)
	}
	addrs := func() []string {
		var out []string
		for _, w := range r.Workers() {
			out = append(out, w.Addr)
		}
		return out
	}
	waitFor := func(want ...string) {
		t.Helper()
		await(t, r, fmt.Sprint("workers ", want), func() bool { return slices.Equal(addrs(), want) })
	}
	waitFor("10.0.0.1:8090", "10.0.0.2:8090")
	set("fd00::3", "10.0.0.2")
	waitFor("10.0.0.2:8090", "[fd00::3]:8090")
	set() // a failed lookup: the set stays
	// Lookup n+1 started after set (n counts those started before it) and
	// failed; it ended before lookup n+2 started.
	n := lookups.Load()
	await(t, r, "two more lookups", func() bool { return lookups.Load() >= n+2 })
	if got := addrs(); !slices.Equal(got, []string{"10.0.0.2:8090", "[fd00::3]:8090"}) {
		t.Fatalf("after a failed lookup the workers are %v; want them kept", got)
	}
}

// TestHealth: a worker failing its checks turns unhealthy, is not
// picked, and comes back when it answers again; SetWorkers removes it.
func TestHealth(t *testing.T) {
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	r, reg := newTestRouter(t, Options{FailThreshold: 2}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	a.down.Store(true)
	waitHealthy(t, r, 1)
	if g := testutil.ToFloat64(r.m.workers.WithLabelValues("unhealthy")); g != 1 {
		t.Fatalf("unhealthy gauge %v", g)
	}
	for range 4 {
		p, ok := r.choose(poolDecode, []int32{1, 2, 3, 4, 5}, "", nil)
		if !ok || p.addr != "b:1" {
			t.Fatalf("picked %q, %v; want b:1", p.addr, ok)
		}
		r.release(p.addr)
	}
	a.down.Store(false)
	waitHealthy(t, r, 2)
	r.SetWorkers([]string{"b:1"})
	if ws := r.Workers(); len(ws) != 1 || ws[0].Addr != "b:1" {
		t.Fatalf("workers %v", ws)
	}
	if n, err := testutil.GatherAndCount(reg, "llmserve_router_workers"); err != nil || n != 3 {
		t.Fatalf("gauges: %d, %v", n, err)
	}
}

// TestChoosePrefix: the worker whose events cover a prompt's blocks gets
// it; an unrelated prompt goes round robin.
func TestChoosePrefix(t *testing.T) {
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	hs := kvcache.BlockHashes(prompt, "salt", 4)
	for i, h := range hs {
		var parent []byte
		if i > 0 {
			parent = hs[i-1][:]
		}
		b.events <- &workerpb.KVEvent{Sequence: uint64(i + 1), Kind: workerpb.KVEventKind_KV_EVENT_KIND_STORED, Hash: h[:], Parent: parent, Depth: int32(i)}
	}
	await(t, r, "b's blocks", func() bool { return r.Workers()[1].Blocks == len(hs) })
	for range 3 {
		p, _ := r.choose(poolDecode, prompt, "salt", nil)
		if p.addr != "b:1" || p.cached != 12 {
			t.Fatalf("picked %s with %d cached tokens; want b:1 with 12", p.addr, p.cached)
		}
		r.release(p.addr)
	}
	// Another salt is another namespace: nothing cached.
	seen := map[string]bool{}
	for range 4 {
		p, _ := r.choose(poolDecode, prompt, "other", nil)
		seen[p.addr] = true
		r.release(p.addr)
	}
	if len(seen) != 2 {
		t.Fatalf("unrelated prompts went to %v, want both", seen)
	}
	p, ok := r.choose(poolDecode, prompt, "salt", []string{"b:1"})
	if !ok || p.addr != "a:1" {
		t.Fatalf("with b excluded picked %q", p.addr)
	}
}

// TestChoosePools: decode picks never take a prefill worker while another
// serves, prefill picks only take prefill workers.
func TestChoosePools(t *testing.T) {
	p, d := newFake(workerpb.Role_ROLE_PREFILL), newFake(workerpb.Role_ROLE_DECODE)
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"p:1": p, "d:1": d})
	for range 3 {
		if w, _ := r.choose(poolDecode, []int32{1}, "", nil); w.addr != "d:1" {
			t.Fatalf("decode pick %s", w.addr)
		}
		if w, _ := r.choose(poolPrefill, []int32{1}, "", nil); w.addr != "p:1" {
			t.Fatalf("prefill pick %s", w.addr)
		}
	}
	if _, ok := r.choose(poolPrefill, []int32{1}, "", []string{"p:1"}); ok {
		t.Fatal("a decode worker was picked for a prefill")
	}
	// With the decode worker down, the prefill worker serves whole requests.
	if w, ok := r.choose(poolDecode, []int32{1}, "", []string{"d:1"}); !ok || w.addr != "p:1" {
		t.Fatalf("fallback pick %q, %v", w.addr, ok)
	}
}

// collect drains a stream: the tokens per choice, finish reasons, errors.
func collect(t *testing.T, s *core.Stream, n int) ([][]int32, []scheduler.FinishReason, []error) {
	t.Helper()
	toks, fins, errs := make([][]int32, n), make([]scheduler.FinishReason, n), make([]error, n)
	for {
		outs, err := s.Recv(context.Background())
		if errors.Is(err, io.EOF) {
			return toks, fins, errs
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			toks[o.Choice] = append(toks[o.Choice], o.Tokens...)
			if o.Finish != scheduler.FinishNone {
				fins[o.Choice], errs[o.Choice] = o.Finish, o.Err
			}
		}
	}
}

// TestMigration: a Generate stream that breaks mid-way continues on the
// other worker with the prompt plus the tokens delivered and max_tokens
// and min_tokens reduced; each of n choices moves on its own, with its
// seed; the client sees every token once.
func TestMigration(t *testing.T) {
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	a.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, 0, 10, 11), out(1, 0, 20), out(0, 0, 12)}, errDown
	}
	b.script = func(req *workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		n := req.MaxTokens
		toks := make([]int32, n)
		for i := range toks {
			toks[i] = 100 + int32(len(req.Prompt)) + int32(i)
		}
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, toks...)}, nil
	}
	a.gate = make(chan struct{})
	fakes := map[string]*fakeWorker{"a:1": a, "b:1": b}
	r, _ := newTestRouter(t, Options{}, fakes)
	// Route the first leg to a: b is excluded until a breaks.
	b.down.Store(true)
	waitHealthy(t, r, 1)
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	req := &scheduler.Request{ID: "r", Prompt: []int32{1, 2}, N: 2, MaxTokens: 5, MinTokens: 4, Arrival: time.Now(), PromptLogprobs: -1}
	req.Sampling.Seed, req.Sampling.TopP, req.Sampling.RepetitionPenalty = 7, 1, 1
	streams, err := m.Submit(context.Background(), []*scheduler.Request{req})
	if err != nil {
		t.Fatal(err)
	}
	b.down.Store(false)
	waitHealthy(t, r, 2)
	a.down.Store(true) // dead: its checks fail too, it is not picked again
	close(a.gate)      // now a's stream breaks
	toks, fins, errs := collect(t, streams[0], 2)
	want := [][]int32{{10, 11, 12, 105, 106}, {20, 103, 104, 105, 106}}
	for c := range 2 {
		if !slices.Equal(toks[c], want[c]) || fins[c] != scheduler.FinishLength || errs[c] != nil {
			t.Errorf("choice %d: %v %s %v; want %v length", c, toks[c], fins[c], errs[c], want[c])
		}
	}
	got := b.requests()
	slices.SortFunc(got, func(x, y *workerpb.Request) int { return len(x.Prompt) - len(y.Prompt) })
	if len(got) != 2 {
		t.Fatalf("b got %d requests", len(got))
	}
	for i, w := range []struct {
		prompt   []int32
		max, min int32
		seed     uint32
	}{{[]int32{1, 2, 20}, 4, 3, 8}, {[]int32{1, 2, 10, 11, 12}, 2, 1, 7}} {
		g := got[i]
		if !slices.Equal(g.Prompt, w.prompt) || g.MaxTokens != w.max || g.MinTokens != w.min || g.N != 1 || g.Sampling.Seed != w.seed {
			t.Errorf("migrated request %d: prompt %v max %d min %d n %d seed %d; want %+v", i, g.Prompt, g.MaxTokens, g.MinTokens, g.N, g.Sampling.Seed, w)
		}
	}
	if u := streams[0].Usage(); u.PromptTokens != 2 || u.CompletionTokens != 10 {
		t.Errorf("usage %+v", u)
	}
	if n := testutil.ToFloat64(r.m.migrations); n != 1 {
		t.Errorf("migrations %v, want 1", n)
	}
}

// TestMigrationLimit: past --max-migrations the choice ends with an
// error; with no worker left, too.
func TestMigrationLimit(t *testing.T) {
	tests := []struct {
		name          string
		maxMigrations int
		wantToks      []int32
	}{
		{"no migration allowed", -1, []int32{10}},
		// Each broken worker is healthy again at its next check, so the
		// request goes back to it until the limit ends it.
		{"every worker broke", 3, []int32{10, 10, 10, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
			for _, f := range []*fakeWorker{a, b} {
				f.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
					return []*workerpb.GenerateResponse{out(0, 0, 10)}, errDown
				}
			}
			r, _ := newTestRouter(t, Options{MaxMigrations: tt.maxMigrations}, map[string]*fakeWorker{"a:1": a, "b:1": b})
			m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
			req := &scheduler.Request{ID: "r", Prompt: []int32{1}, N: 1, MaxTokens: 5, Arrival: time.Now(), PromptLogprobs: -1}
			streams, err := m.Submit(context.Background(), []*scheduler.Request{req})
			if err != nil {
				t.Fatal(err)
			}
			toks, fins, errs := collect(t, streams[0], 1)
			if !slices.Equal(toks[0], tt.wantToks) || fins[0] != scheduler.FinishAbort || errs[0] == nil {
				t.Fatalf("got %v %s %v; want %v and an abort with an error", toks[0], fins[0], errs[0], tt.wantToks)
			}
		})
	}
}

// TestSubmitErrors: a worker's refusal is the scheduler error the API
// layer maps, and no other worker is tried for it; an unavailable worker
// is skipped.
func TestSubmitErrors(t *testing.T) {
	refuse := func(code workerpb.ErrorCode, gc codes.Code) func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
			st, _ := status.New(gc, "no").WithDetails(&workerpb.Error{Code: code, Message: "no", Param: "max_tokens"})
			return nil, st.Err()
		}
	}
	tests := []struct {
		name string
		code workerpb.ErrorCode
		gc   codes.Code
		want error
	}{
		{"queue full", workerpb.ErrorCode_ERROR_CODE_QUEUE_FULL, codes.ResourceExhausted, scheduler.ErrQueueFull},
		{"too long", workerpb.ErrorCode_ERROR_CODE_TOO_LONG, codes.InvalidArgument, scheduler.ErrTooLong},
		{"invalid", workerpb.ErrorCode_ERROR_CODE_INVALID, codes.InvalidArgument, scheduler.ErrInvalid},
		// A worker shutting down is tried again while it answers its
		// checks, until the wait for a worker is over.
		{"closed everywhere", workerpb.ErrorCode_ERROR_CODE_CLOSED, codes.Unavailable, scheduler.ErrNoWorker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newFake(workerpb.Role_ROLE_BOTH)
			a.script = refuse(tt.code, tt.gc)
			r, _ := newTestRouter(t, Options{NoWorkerWait: 50 * time.Millisecond}, map[string]*fakeWorker{"a:1": a})
			m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
			_, err := m.Submit(context.Background(), []*scheduler.Request{{ID: "r", Prompt: []int32{1}, N: 1, MaxTokens: 5, PromptLogprobs: -1}})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
}

// TestCancel: Cancel ends the worker call and the choice.
func TestCancel(t *testing.T) {
	a := newFake(workerpb.Role_ROLE_BOTH)
	a.gate = make(chan struct{}) // never opened: the call ends by Cancel only
	a.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, 0, 1)}, errDown
	}
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a})
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	streams, err := m.Submit(context.Background(), []*scheduler.Request{{ID: "r", Prompt: []int32{1}, N: 1, MaxTokens: 5, PromptLogprobs: -1}})
	if err != nil {
		t.Fatal(err)
	}
	streams[0].Cancel()
	toks, fins, errs := collect(t, streams[0], 1)
	if !slices.Equal(toks[0], []int32{1}) || fins[0] != scheduler.FinishAbort || errs[0] != nil {
		t.Fatalf("got %v %s %v; want [1], a silent abort", toks[0], fins[0], errs[0])
	}
	if n := testutil.ToFloat64(r.m.migrations); n != 0 {
		t.Fatalf("a cancelled request migrated")
	}
}

func (f *fakeWorker) Prefill(_ context.Context, in *workerpb.PrefillRequest, _ ...grpc.CallOption) (*workerpb.PrefillResponse, error) {
	f.mu.Lock()
	f.prefills = append(f.prefills, in.Request)
	f.mu.Unlock()
	if f.down.Load() || f.prefillFails.Load() || f.role == workerpb.Role_ROLE_DECODE {
		return nil, errDown
	}
	return &workerpb.PrefillResponse{TransferId: "t1", FirstToken: 50, Positions: int32(len(in.Request.Prompt))}, nil
}

func (f *fakeWorker) ReleaseKV(context.Context, *workerpb.ReleaseKVRequest, ...grpc.CallOption) (*workerpb.ReleaseKVResponse, error) {
	return &workerpb.ReleaseKVResponse{Released: true}, nil
}

// TestPrefillDecode: the decode worker is chosen first; a remote prefill
// runs only when the prompt's uncached part reaches the threshold, its
// first token goes to the client and the decode worker continues from it
// with kv_source; a failed prefill leaves the whole request to the decode
// worker.
func TestPrefillDecode(t *testing.T) {
	tests := []struct {
		name        string
		threshold   int
		prompt      []int32
		prefillDown bool
		wantPrefill bool
	}{
		{"long prompt: remote prefill", 4, []int32{1, 2, 3, 4, 5, 6}, false, true},
		{"short prompt: decode alone", 8, []int32{1, 2, 3, 4, 5, 6}, false, false},
		{"P/D disabled", -1, []int32{1, 2, 3, 4, 5, 6}, false, false},
		{"prefill worker fails: decode alone", 4, []int32{1, 2, 3, 4, 5, 6}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, d := newFake(workerpb.Role_ROLE_PREFILL), newFake(workerpb.Role_ROLE_DECODE)
			d.script = func(req *workerpb.Request) ([]*workerpb.GenerateResponse, error) {
				toks := make([]int32, req.MaxTokens)
				for i := range toks {
					toks[i] = 60 + int32(i)
				}
				return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, toks...)}, nil
			}
			r, _ := newTestRouter(t, Options{PDMinPrefillTokens: tt.threshold}, map[string]*fakeWorker{"p:1": p, "d:1": d})
			p.prefillFails.Store(tt.prefillDown)
			m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
			req := &scheduler.Request{ID: "r", Prompt: tt.prompt, N: 1, MaxTokens: 4, Arrival: time.Now(), PromptLogprobs: -1}
			streams, err := m.Submit(context.Background(), []*scheduler.Request{req})
			if err != nil {
				t.Fatal(err)
			}
			toks, fins, _ := collect(t, streams[0], 1)
			got := d.requests()
			if len(got) != 1 {
				t.Fatalf("decode worker got %d requests", len(got))
			}
			g := got[0]
			if tt.wantPrefill {
				want := []int32{50, 60, 61, 62}
				if !slices.Equal(toks[0], want) || fins[0] != scheduler.FinishLength {
					t.Fatalf("tokens %v %s, want %v", toks[0], fins[0], want)
				}
				if !slices.Equal(g.Prompt, append(slices.Clone(tt.prompt), 50)) || g.MaxTokens != 3 ||
					g.KvSource.GetAddress() != "p:1" || g.KvSource.GetTransferId() != "t1" {
					t.Fatalf("decode request: prompt %v max %d kv_source %v", g.Prompt, g.MaxTokens, g.KvSource)
				}
				return
			}
			if !slices.Equal(toks[0], []int32{60, 61, 62, 63}) || !slices.Equal(g.Prompt, tt.prompt) || g.KvSource != nil {
				t.Fatalf("tokens %v; decode request prompt %v kv_source %v", toks[0], g.Prompt, g.KvSource)
			}
			p.mu.Lock()
			n := len(p.prefills)
			p.mu.Unlock()
			if tt.prefillDown != (n == 1) {
				t.Fatalf("%d prefill calls", n)
			}
		})
	}
}

// TestStop: Stop ends the running requests with scheduler.ErrClosed
// (what a client sees of a shutdown) and refuses new ones.
func TestStop(t *testing.T) {
	a := newFake(workerpb.Role_ROLE_BOTH)
	a.gate = make(chan struct{}) // the call runs until Stop
	a.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, 0, 1)}, errDown
	}
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a})
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	req := func() []*scheduler.Request {
		return []*scheduler.Request{{ID: "r", Prompt: []int32{1}, N: 1, MaxTokens: 5, PromptLogprobs: -1}}
	}
	streams, err := m.Submit(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Stop(); n != 1 {
		t.Fatalf("Stop ended %d requests, want 1", n)
	}
	_, fins, errs := collect(t, streams[0], 1)
	if fins[0] != scheduler.FinishAbort || !errors.Is(errs[0], scheduler.ErrClosed) {
		t.Fatalf("finish %s %v; want abort with ErrClosed", fins[0], errs[0])
	}
	if _, err := m.Submit(context.Background(), req()); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("Submit after Stop: %v", err)
	}
}

// TestMigrateFromDrainingWorker: a choice a worker ended because it is
// shutting down (ERROR_CODE_CLOSED) goes on on another worker; a choice it
// finished stays finished.
func TestMigrateFromDrainingWorker(t *testing.T) {
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	a.gate = make(chan struct{})
	a.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		closed := out(1, workerpb.FinishReason_FINISH_REASON_ABORT, 21)
		closed.GetOutput().Error = &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_CLOSED, Message: "shutting down"}
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_STOP, 10, 2), out(1, 0, 20), closed}, nil
	}
	b.script = func(req *workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, make([]int32, req.MaxTokens)...)}, nil
	}
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	b.down.Store(true)
	waitHealthy(t, r, 1)
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100})
	streams, err := m.Submit(context.Background(), []*scheduler.Request{{ID: "r", Prompt: []int32{1}, N: 2, MaxTokens: 4, PromptLogprobs: -1}})
	if err != nil {
		t.Fatal(err)
	}
	b.down.Store(false)
	waitHealthy(t, r, 2)
	close(a.gate)
	toks, fins, errs := collect(t, streams[0], 2)
	if !slices.Equal(toks[0], []int32{10, 2}) || fins[0] != scheduler.FinishStop {
		t.Errorf("choice 0: %v %s", toks[0], fins[0])
	}
	if !slices.Equal(toks[1], []int32{20, 21, 0, 0}) || fins[1] != scheduler.FinishLength || errs[1] != nil {
		t.Errorf("choice 1: %v %s %v; want [20 21 0 0] length", toks[1], fins[1], errs[1])
	}
	if got := b.requests(); len(got) != 1 || !slices.Equal(got[0].Prompt, []int32{1, 20, 21}) || got[0].MaxTokens != 2 {
		t.Errorf("b got %v", got)
	}
}

// TestEmbed: Embed goes to the least loaded worker of any role; a worker
// that dies before answering is replaced once by another; a refusal is
// the mapped scheduler error and is not retried.
func TestEmbed(t *testing.T) {
	answer := func(v float32) func(*workerpb.EmbedRequest) (*workerpb.EmbedResponse, error) {
		return func(req *workerpb.EmbedRequest) (*workerpb.EmbedResponse, error) {
			resp := &workerpb.EmbedResponse{}
			for _, in := range req.Inputs {
				resp.Embeddings = append(resp.Embeddings, &workerpb.Embedding{Values: []float32{v, float32(len(in.Tokens))}})
			}
			return resp, nil
		}
	}
	dies := func(*workerpb.EmbedRequest) (*workerpb.EmbedResponse, error) { return nil, errDown }
	refuses := func(*workerpb.EmbedRequest) (*workerpb.EmbedResponse, error) {
		return nil, errWithDetail(codes.InvalidArgument, &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_INVALID, Message: "bad", Param: "inputs[0]"})
	}
	tests := []struct {
		name         string
		first, other func(*workerpb.EmbedRequest) (*workerpb.EmbedResponse, error)
		want         float32 // the first value of each vector; 0: an error
		wantErr      error
		calls        [2]int32
	}{
		{"the least loaded worker answers", answer(1), answer(2), 1, nil, [2]int32{1, 0}},
		{"a dead worker: once more elsewhere", dies, answer(2), 2, nil, [2]int32{1, 1}},
		{"both dead: no third try", dies, dies, 0, scheduler.ErrNoWorker, [2]int32{1, 1}},
		{"a refusal is not retried", refuses, answer(2), 0, scheduler.ErrInvalid, [2]int32{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The first worker is a prefill worker: embeddings use every role.
			a, b := newFake(workerpb.Role_ROLE_PREFILL), newFake(workerpb.Role_ROLE_BOTH)
			a.embed, b.embed = tt.first, tt.other
			b.load.Store(5)
			r, _ := newTestRouter(t, Options{FailThreshold: 1000}, map[string]*fakeWorker{"a:1": a, "b:1": b})
			// Wait until the router saw b's load: a is the pick (two
			// picks in a row, so that round robin among equals cannot
			// pass for it).
			await(t, r, "b's load", func() bool {
				p, _ := r.choose(poolAny, nil, "", nil)
				r.release(p.addr)
				p2, _ := r.choose(poolAny, nil, "", nil)
				r.release(p2.addr)
				return p.addr == "a:1" && p2.addr == "a:1"
			})
			m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100, Pooling: "mean"})
			got, err := m.Embed(context.Background(), [][]int32{{1, 2, 3}, {4}})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
			} else if err != nil || len(got) != 2 || got[0][0] != tt.want || got[0][1] != 3 || got[1][1] != 1 {
				t.Fatalf("Embed = %v, %v; want vectors from the worker answering %v", got, err, tt.want)
			}
			if c := [2]int32{a.embeds.Load(), b.embeds.Load()}; c != tt.calls {
				t.Errorf("Embed calls (a, b) = %v, want %v", c, tt.calls)
			}
		})
	}
	m := NewModel(nil, ModelOptions{Name: "m", MaxModelLen: 64})
	if m.Pooling() != "none" || m.MaxEmbedTokens() != 64 {
		t.Errorf("a model without pooling: %q, max %d", m.Pooling(), m.MaxEmbedTokens())
	}
}

// errWithDetail is a status with a typed worker error.
func errWithDetail(c codes.Code, e *workerpb.Error) error {
	st, _ := status.New(c, e.Message).WithDetails(e)
	return st.Err()
}

// TestMigrationThinking: the thinking budget crosses to the worker, and a
// migrated choice's continuation carries the tokens already generated
// (Thinking.Generated) so the new worker's budget spans the whole choice;
// the head counts the reasoning tokens over the tokens delivered, whichever
// worker generated them.
func TestMigrationThinking(t *testing.T) {
	const S, E, A = 50, 51, 52
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	a.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, 0, 10, 11)}, errDown
	}
	// b thinks one token more, then the forced end (budget 3 over the
	// whole choice), then answers.
	b.script = func(*workerpb.Request) ([]*workerpb.GenerateResponse, error) {
		return []*workerpb.GenerateResponse{out(0, workerpb.FinishReason_FINISH_REASON_LENGTH, 12, E, A, 13)}, nil
	}
	a.gate = make(chan struct{})
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	b.down.Store(true)
	waitHealthy(t, r, 1)
	m := NewModel(r, ModelOptions{Name: "m", MaxModelLen: 100, ReasoningParser: "qwen3"})
	if m.ReasoningParser() != "qwen3" {
		t.Fatalf("ReasoningParser %q", m.ReasoningParser())
	}
	th := &scheduler.Thinking{Start: []int32{S}, End: []int32{E}, After: []int32{A}, StartInside: true, Budget: 3}
	req := &scheduler.Request{ID: "r", Prompt: []int32{1, 2, S}, N: 1, MaxTokens: 6, Arrival: time.Now(), PromptLogprobs: -1, Thinking: th}
	req.Sampling.TopP, req.Sampling.RepetitionPenalty = 1, 1
	streams, err := m.Submit(context.Background(), []*scheduler.Request{req})
	if err != nil {
		t.Fatal(err)
	}
	b.down.Store(false)
	waitHealthy(t, r, 2)
	a.down.Store(true)
	close(a.gate)
	toks, fins, errs := collect(t, streams[0], 1)
	if want := []int32{10, 11, 12, E, A, 13}; !slices.Equal(toks[0], want) || fins[0] != scheduler.FinishLength || errs[0] != nil {
		t.Fatalf("got %v %s %v; want %v", toks[0], fins[0], errs[0], want)
	}
	first, cont := a.requests(), b.requests()
	if len(first) != 1 || len(cont) != 1 {
		t.Fatalf("a got %d requests, b %d", len(first), len(cont))
	}
	wantTh := &workerpb.Thinking{Start: []int32{S}, End: []int32{E}, After: []int32{A}, StartInside: true, Budget: 3}
	if g := first[0].Thinking; !proto.Equal(g, wantTh) {
		t.Errorf("first leg's thinking %v, want %v", g, wantTh)
	}
	wantTh.Generated = 2
	if g := cont[0].Thinking; !proto.Equal(g, wantTh) || !slices.Equal(cont[0].Prompt, []int32{1, 2, S, 10, 11}) {
		t.Errorf("continuation: prompt %v thinking %v, want thinking %v", cont[0].Prompt, g, wantTh)
	}
	if u := streams[0].Usage(); u.CompletionTokens != 6 || u.ReasoningTokens != 3 {
		t.Errorf("usage %+v, want 6 completion tokens, 3 reasoning", u)
	}
}

// TestChooseRouteKey: requests with the same routing key go to the worker
// the key first went to, whatever the round robin says, until it is
// excluded; then the key follows the new pick.
func TestChooseRouteKey(t *testing.T) {
	a, b := newFake(workerpb.Role_ROLE_BOTH), newFake(workerpb.Role_ROLE_BOTH)
	r, _ := newTestRouter(t, Options{}, map[string]*fakeWorker{"a:1": a, "b:1": b})
	first, ok := r.chooseWhere(poolDecode, []int32{1}, "", "key", nil, nil)
	if !ok {
		t.Fatal("no pick")
	}
	r.release(first.addr)
	for i := range 4 {
		p, _ := r.chooseWhere(poolDecode, []int32{int32(i)}, "", "key", nil, nil)
		if p.addr != first.addr {
			t.Fatalf("turn %d of the key went to %s, its first to %s", i, p.addr, first.addr)
		}
		r.release(p.addr)
	}
	other, _ := r.chooseWhere(poolDecode, []int32{1}, "", "key", []string{first.addr}, nil)
	if other.addr == first.addr || other.addr == "" {
		t.Fatalf("with %s excluded the key went to %q", first.addr, other.addr)
	}
	r.release(other.addr)
	if p, _ := r.chooseWhere(poolDecode, []int32{1}, "", "key", nil, nil); p.addr != other.addr {
		t.Fatalf("the key went back to %s; want it to follow the new pick %s", p.addr, other.addr)
	}
}

// TestRouteKeysBound: the router forgets the least recently used key
// beyond maxRouteKeys.
func TestRouteKeysBound(t *testing.T) {
	var k routeKeys
	for i := range maxRouteKeys {
		k.put(fmt.Sprint(i), "a:1")
	}
	k.get("0") // used again: no longer the oldest
	k.put("one more", "a:1")
	if _, ok := k.get("0"); !ok {
		t.Fatal("a recently used key was forgotten")
	}
	if _, ok := k.get("1"); ok {
		t.Fatal("the least recently used key was kept")
	}
	if n := k.order.Len(); n != maxRouteKeys {
		t.Fatalf("%d keys kept, want %d", n, maxRouteKeys)
	}
}
