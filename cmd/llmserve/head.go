package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/tritonv1"
	v2grpc "github.com/llmserve/llmserve/api/v2/grpc"
	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/head/router"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// headFlags are what `llmserve head` adds to serve's flags.
type headFlags struct {
	workers       string
	workersDNS    string
	dnsInterval   time.Duration
	workerPort    int
	maxMigrations int
	pdMinPrefill  int
	checkInterval time.Duration
	rpcTimeout    time.Duration
	noWorkerWait  time.Duration
}

func newHeadCommand() *cobra.Command {
	hf := &headFlags{}
	cmd := serveFamily(&cobra.Command{
		Use:   "head",
		Short: "Serve the public API over workers (llmserve worker), routing each request to one",
		Long: `Serve the public routes of serve (OpenAI API, V2 REST and gRPC, health,
metrics) with no model weights: every request goes to a worker (llmserve
worker) over its internal service, chosen by the prefix its KV cache holds
balanced against its load; with prefill and decode pools the prompt is
prefilled on a prefill worker and its KV pulled by the decode worker. A
worker that dies mid-stream is replaced: the request moves to another
worker with the tokens already sent (docs/ROUTING.md).

Workers come from --workers, --workers-dns or, with neither, a
LeaderWorkerSet's LWS_LEADER_ADDRESS and LWS_GROUP_SIZE (port --worker-port).
--model, when given, is loaded vocabulary-only for tokenizing; otherwise the
vocabulary comes from a worker. Flags of serve about loading and running a
model are accepted and ignored. Every flag can also be set with
LLMSERVE_<FLAG>.`,
	}, func(ctx context.Context, f *serveFlags) error { return head(ctx, f, hf) })
	fl := cmd.Flags()
	fl.StringVar(&hf.workers, "workers", "", "workers' internal service addresses, host:port,...")
	fl.StringVar(&hf.workersDNS, "workers-dns", "", "name:port whose every A/AAAA record is a worker (a Kubernetes headless service), re-resolved every --workers-dns-interval")
	fl.DurationVar(&hf.dnsInterval, "workers-dns-interval", 10*time.Second, "how often --workers-dns is resolved again")
	fl.IntVar(&hf.workerPort, "worker-port", 8090, "the workers' internal service port (with LeaderWorkerSet discovery)")
	fl.IntVar(&hf.maxMigrations, "max-migrations", 3, "most times one request moves to another worker after its worker failed mid-stream (0: never)")
	fl.IntVar(&hf.pdMinPrefill, "pd-min-prefill-tokens", 256, "with prefill workers: prefill remotely only when at least this many prompt tokens are not cached on the decode worker (0: never)")
	fl.DurationVar(&hf.checkInterval, "worker-check-interval", time.Second, "how often each worker's health and load are polled")
	fl.DurationVar(&hf.noWorkerWait, "no-worker-wait", 10*time.Second, "how long a request, or a request whose worker died, waits for a healthy worker before it fails with 503 \"no healthy worker\" (bounded by the request's own deadline; 0: fail at once)")
	fl.DurationVar(&hf.rpcTimeout, "worker-timeout", 5*time.Second, "timeout of the head's unary calls to workers (health, load)")
	return cmd
}

// headModel holds the remote model once the vocabulary is known.
type headModel struct {
	m        atomic.Pointer[router.Model]
	draining atomic.Bool
	// loaded is closed when m is set.
	loaded chan struct{}
	// wait bounds a request's wait for the model (--no-worker-wait), on
	// clock.
	wait  time.Duration
	clock clock.Clock
}

// waitModel waits until the model is known (a worker answered and the
// vocabulary is loaded), within --no-worker-wait and ctx.
func (h *headModel) waitModel(ctx context.Context) (*router.Model, error) {
	if m := h.m.Load(); m != nil {
		return m, nil
	}
	t := h.clock.NewTimer(max(h.wait, 0))
	defer t.Stop()
	select {
	case <-h.loaded:
		return h.m.Load(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C():
		return nil, fmt.Errorf("%w: no worker answered within --no-worker-wait (%s)", scheduler.ErrNoWorker, h.wait)
	}
}

// headBackend is the head's one model as a protocol's backend serves it:
// api/openai's (M openai.Model) or api/v2/infer's (M infer.Model) Backend and
// ModelWaiter.
type headBackend[M any] struct {
	h *headModel
	// as gives the model as M (*router.Model is both; the compiler checks it
	// where as is written).
	as func(*router.Model) M
}

func (b headBackend[M]) Model(name string) (M, bool) {
	if m := b.h.m.Load(); m != nil && m.Name() == name {
		return b.as(m), true
	}
	var none M
	return none, false
}

func (b headBackend[M]) Models() []M {
	if m := b.h.m.Load(); m != nil {
		return []M{b.as(m)}
	}
	return nil
}

// WaitModel waits for the model within --no-worker-wait and ctx (see
// waitModel); another name than the model's finds none.
func (b headBackend[M]) WaitModel(ctx context.Context, name string) (M, error) {
	m, err := b.h.waitModel(ctx)
	if err != nil || m.Name() != name {
		var none M
		return none, err
	}
	return b.as(m), nil
}

type headOpenAI = headBackend[openai.Model]

func (h *headModel) openAI() headOpenAI {
	return headOpenAI{h, func(m *router.Model) openai.Model { return m }}
}

// headV2 adds readiness, which V2 asks of a backend.
type headV2 struct{ headBackend[infer.Model] }

func (h *headModel) v2() headV2 {
	return headV2{headBackend[infer.Model]{h, func(m *router.Model) infer.Model { return m }}}
}

func (b headV2) Ready() bool {
	m := b.h.m.Load()
	return m != nil && !b.h.draining.Load() && m.Ready()
}

// workerDialer dials workers; with key, every call carries it as a
// Bearer token (workers started with the same --api-key require it).
func workerDialer(key string) router.Dialer {
	return func(addr string) (router.Client, error) { return dialWorker(addr, key) }
}

func dialWorker(addr, key string) (router.Client, error) {
	// Reconnect soon after a worker comes back (grpc's default backoff
	// grows to two minutes); the router also resets the backoff before
	// it probes a worker that is down.
	bo := backoff.DefaultConfig
	bo.BaseDelay, bo.MaxDelay = 100*time.Millisecond, time.Second
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(workerMaxMessage)), // PrepareMedia's rows
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second})}
	if key != "" {
		md := metadata.Pairs("authorization", "Bearer "+key)
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return invoker(metadata.NewOutgoingContext(ctx, md), method, req, reply, cc, o...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.NewOutgoingContext(ctx, md), desc, cc, method, o...)
			}))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	return workerClient{workerpb.NewWorkerClient(cc), cc}, nil
}

type workerClient struct {
	workerpb.WorkerClient
	cc *grpc.ClientConn
}

func (c workerClient) Close() error { return c.cc.Close() }

// ResetConnectBackoff makes a connection in its reconnect backoff try
// again now (the router calls it before probing a worker that is down).
func (c workerClient) ResetConnectBackoff() { c.cc.ResetConnectBackoff() }

func head(ctx context.Context, f *serveFlags, hf *headFlags) error {
	set, err := f.validate()
	if err != nil {
		return err
	}
	if err := firstFailed(
		flagCheck{len(f.models) > 1, errors.New("--model: the head takes at most one model (its vocabulary)")},
		flagCheck{hf.workers != "" && hf.workersDNS != "", errors.New("--workers and --workers-dns: give one of them")},
		flagCheck{hf.maxMigrations < 0, fmt.Errorf("--max-migrations: %d is negative", hf.maxMigrations)},
		flagCheck{hf.pdMinPrefill < 0, fmt.Errorf("--pd-min-prefill-tokens: %d is negative", hf.pdMinPrefill)},
		flagCheck{hf.noWorkerWait < 0, fmt.Errorf("--no-worker-wait: %s is negative", hf.noWorkerWait)},
		flagCheck{hf.workerPort < 1 || hf.workerPort > 65535, fmt.Errorf("--worker-port: %d is not a TCP port", hf.workerPort)},
	); err != nil {
		return err
	}
	var static []string
	switch {
	case hf.workers != "":
		if static, err = router.ParseWorkers(hf.workers); err != nil {
			return err
		}
	case hf.workersDNS == "":
		addrs, ok, err := router.LWSWorkers(os.Getenv, hf.workerPort)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("no workers: give --workers host:port,..., --workers-dns name:port, or run in a LeaderWorkerSet (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE)")
		}
		static = addrs
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	llamacpp.SetLogger(log, set.llamaLog)
	log.Info("llmserve head", "version", versionString(), "commit", vcsRevision())

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The shell owns the clock: the router's probes and waits and the
	// head's own waits run on it.
	clk := clock.Real
	ropts := router.Options{
		Dial: workerDialer(firstKey(set.apiKeys)), CheckInterval: hf.checkInterval, RPCTimeout: hf.rpcTimeout,
		PDMinPrefillTokens: hf.pdMinPrefill, MaxMigrations: hf.maxMigrations, Logger: log, Registerer: reg,
		NoWorkerWait: hf.noWorkerWait, Clock: clk,
	}
	if hf.noWorkerWait == 0 {
		ropts.NoWorkerWait = -1
	}
	if hf.pdMinPrefill == 0 {
		ropts.PDMinPrefillTokens = -1
	}
	if hf.maxMigrations == 0 {
		ropts.MaxMigrations = -1
	}
	rt, err := router.New(ropts)
	if err != nil {
		return err
	}
	defer rt.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if hf.workersDNS != "" {
		if err := rt.WatchDNS(ctx, hf.workersDNS, hf.dnsInterval, nil); err != nil {
			return err
		}
	} else {
		rt.SetWorkers(static)
	}

	hm := &headModel{loaded: make(chan struct{}), wait: hf.noWorkerWait, clock: clk}
	registry := models.NewRegistry() // no models: it tracks requests for the shutdown
	inferStats, err := metrics.NewInfer(reg)
	if err != nil {
		return err
	}
	respStore, closeStore, err := openResponseStore(f, log)
	if err != nil {
		return err
	}
	defer closeStore()
	opts := apiOptions(f, set, registry, respStore, inferStats, reg, log)
	opts.OpenAI, opts.V2 = hm.openAI(), hm.v2()
	pub, err := openPublic(f, opts)
	if err != nil {
		return err
	}
	defer pub.close()
	if pub.grpc != nil {
		v2grpc.Register(pub.grpc, hm.v2(), v2grpc.Options{Logger: log, Infer: inferStats})
		tritonv1.Register(pub.grpc, hm.v2(), tritonv1.Options{Logger: log, Infer: inferStats})
	}
	errc := make(chan error, 3)
	pub.serve(errc, log)
	// The model appears once a worker answered (and the vocabulary is
	// loaded): until then the head is not ready.
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	go func() {
		var m *router.Model
		var err error
		for {
			m, err = loadHeadModel(loadCtx, rt, f, set, log)
			if err == nil || loadCtx.Err() != nil {
				break
			}
			if len(f.models) == 1 {
				errc <- err // the head's own --model: retrying will not help
				return
			}
			log.Warn("loading the vocabulary from a worker failed; retrying", "err", err)
			t := clk.NewTimer(time.Second)
			select {
			case <-loadCtx.Done():
			case <-t.C():
			}
			t.Stop()
		}
		if err != nil {
			return
		}
		hm.m.Store(m)
		close(hm.loaded)
		log.Info("head ready to route", "model", m.Name(), "max_model_len", m.MaxModelLen())
	}()
	if err := awaitStop(ctx, log, errc, f.shutdownTimeout); err != nil {
		return err
	}
	return shutdown(log, pub.srv, pub.inflight, []*grpc.Server{pub.grpc}, hm, f.shutdownTimeout)
}

// Drain turns the head's readiness off (shutdown's stopper).
func (h *headModel) Drain() { h.draining.Store(true) }

// Stop ends the requests still running on workers (shutdown's stopper).
func (h *headModel) Stop() int64 {
	h.Drain()
	if m := h.m.Load(); m != nil {
		return m.Stop()
	}
	return 0
}

func firstKey(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// loadHeadModel waits for a healthy worker, then builds the tokenizer from
// --model (vocabulary only) or from the worker's Vocabulary.
// The head's model reads images and audio through its workers' projectors.
var _ openai.MediaModel = (*router.Model)(nil)

func loadHeadModel(ctx context.Context, rt *router.Router, f *serveFlags, set *settings, log *slog.Logger) (*router.Model, error) {
	info, client, err := rt.Info(ctx)
	if err != nil {
		return nil, err
	}
	path := ""
	if len(f.models) == 1 {
		path = f.models[0]
		if _, p, ok := strings.Cut(path, "="); ok {
			path = p
		}
	} else {
		dir, err := os.MkdirTemp("", "llmserve-head-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		path = filepath.Join(dir, "vocab.gguf")
		if err := fetchVocabulary(ctx, client, path); err != nil {
			return nil, fmt.Errorf("vocabulary from a worker: %w", err)
		}
	}
	vm, err := llamacpp.Load(path, llamacpp.ModelParams{VocabOnly: true})
	if err != nil {
		return nil, fmt.Errorf("load the vocabulary: %w", err)
	}
	// The template the worker renders with travels in its vocabulary (its
	// --chat-template, else the model file's); a vocabulary-only model's
	// Info has none, its metadata does.
	tmpl := set.tmpl
	if tmpl == "" {
		tmpl = vm.Meta("tokenizer.chat_template")
	}
	tok, err := tokenizer.New(vm, tmpl)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	name := f.modelName
	if name == "" {
		name = info.ModelName
	}
	log.Info("vocabulary loaded", "from", path, "tokens", vm.NumTokens())
	var mrl []int
	for _, d := range info.MatryoshkaDimensions {
		mrl = append(mrl, int(d))
	}
	return router.NewModel(rt, router.ModelOptions{
		Name: name, MaxModelLen: int(info.MaxModelLen), RequestTimeout: f.requestTimeout, Tokenizer: tok,
		Pooling: info.Pooling, MatryoshkaDimensions: mrl, MaxEmbedTokens: int(info.MaxEmbedTokens), Task: info.Task,
		RerankTokens: models.VocabRerankTokens(vm), ReasoningParser: info.ReasoningParser,
	}), nil
}

// fetchVocabulary writes a worker's vocabulary-only GGUF to path.
func fetchVocabulary(ctx context.Context, c workerpb.WorkerClient, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := c.Vocabulary(ctx, &workerpb.VocabularyRequest{})
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	var n int64
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = out.Close()
			return err
		}
		if ch.Offset != n {
			_ = out.Close()
			return fmt.Errorf("chunk at offset %d, want %d", ch.Offset, n)
		}
		if _, err := out.Write(ch.Data); err != nil {
			_ = out.Close()
			return err
		}
		n += int64(len(ch.Data))
	}
	return out.Close()
}
