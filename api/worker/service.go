package worker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

// Defaults.
const (
	// DefaultLease is how long a prefill's KV is kept when the caller does
	// not say; MaxLease the longest it may ask for.
	DefaultLease = 30 * time.Second
	MaxLease     = 10 * time.Minute
	// DefaultPullTimeout bounds a KV pull when the KVSource does not.
	DefaultPullTimeout = 10 * time.Second
	// DefaultChunk and MaxChunk bound PullKV's chunks.
	DefaultChunk = 1 << 20
	MaxChunk     = 4 << 20
	// vocabChunk is the size of Vocabulary's chunks.
	vocabChunk = 1 << 20
)

// Options configure a Server.
type Options struct {
	// Model returns the model the service serves (the worker's one model);
	// an error is answered UNAVAILABLE.
	Model func() (*models.Generative, error)
	// Role is the worker's role; ROLE_UNSPECIFIED means ROLE_BOTH.
	Role workerpb.Role
	// Version, Commit (llmserve's git commit) and LlamaCommit (the
	// llama.cpp commit linked) are reported by Info.
	Version, Commit, LlamaCommit string
	// APIKey, when set, is sent as a Bearer token on the pulls this worker
	// makes from its peers (the cluster's workers share their keys).
	APIKey string
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the KV transfer metrics; nil registers none.
	Registerer prometheus.Registerer
	// GRPCPort is the port of the gRPC server the service is registered
	// on that vLLM-style routers reach (serve's --grpc-port): the
	// remote_port of kv_transfer_params.
	GRPCPort int
	// Lease is how long a prefill's KV is kept when the request does not
	// say (0: DefaultLease).
	Lease time.Duration
}

// Server implements workerpb.WorkerServer over a model's engine core.
type Server struct {
	workerpb.UnimplementedWorkerServer
	opts Options
	log  *slog.Logger
	m    *metricSet

	// engineID names this process in kv_transfer_params.
	engineID string
	// closed ends the event watches (shutdown).
	closed    chan struct{}
	closeOnce sync.Once

	vocabOnce sync.Once
	vocab     []byte
	vocabSum  [32]byte
	vocabErr  error
}

// New returns a Server and registers its metrics.
func New(opts Options) (*Server, error) {
	if opts.Model == nil {
		return nil, errors.New("worker: no model")
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Role == workerpb.Role_ROLE_UNSPECIFIED {
		opts.Role = workerpb.Role_ROLE_BOTH
	}
	s := &Server{opts: opts, log: opts.Logger, closed: make(chan struct{}), engineID: newID("llmserve-")}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer, func() float64 {
		g, err := opts.Model()
		if err != nil {
			return 0
		}
		return float64(g.Core().LeasesExpired())
	})
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// Close ends the WatchKVEvents streams (UNAVAILABLE), so that a graceful
// stop of the gRPC server does not wait for them; other calls go on.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// Register adds the service to a gRPC server.
func (s *Server) Register(gs *grpc.Server) { workerpb.RegisterWorkerServer(gs, s) }

// ParseRole reads a --role value.
func ParseRole(v string) (workerpb.Role, error) {
	switch v {
	case "", "both":
		return workerpb.Role_ROLE_BOTH, nil
	case "prefill":
		return workerpb.Role_ROLE_PREFILL, nil
	case "decode":
		return workerpb.Role_ROLE_DECODE, nil
	}
	return 0, errors.New("the role must be both, prefill or decode")
}

func (s *Server) model() (*models.Generative, error) {
	g, err := s.opts.Model()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return g, nil
}

func (s *Server) vocabulary(g *models.Generative) ([]byte, [32]byte, error) {
	s.vocabOnce.Do(func() {
		// The worker's chat template, when it is not the model file's
		// (--chat-template), travels in the vocabulary.
		tmpl := ""
		if ct := g.Tokenizer().ChatTemplate(); ct != nil && !ct.IsFallback() && ct.Source() != g.Info().ChatTemplate {
			tmpl = ct.Source()
		}
		s.vocab, s.vocabErr = vocabGGUF(g.Path(), tmpl)
		s.vocabSum = sha256.Sum256(s.vocab)
	})
	return s.vocab, s.vocabSum, s.vocabErr
}

// Info describes the model and the worker.
func (s *Server) Info(ctx context.Context, _ *workerpb.InfoRequest) (*workerpb.InfoResponse, error) {
	g, err := s.model()
	if err != nil {
		return nil, err
	}
	cfg := g.Core().Config()
	tok := g.Tokenizer()
	resp := &workerpb.InfoResponse{
		ModelName: g.Name(), MaxModelLen: int32(g.MaxModelLen()), Role: s.opts.Role,
		EosTokens: tok.StopTokens(), VocabSize: int32(tok.Vocab().NumTokens()),
		PrefixCaching: cfg.KV.CacheBytes > 0, MaxRunning: int32(cfg.Scheduler.MaxNumSeqs), Version: s.opts.Version,
		Commit: s.opts.Commit, LlamaCommit: s.opts.LlamaCommit,
		Pooling: g.Pooling(), MaxEmbedTokens: int32(g.MaxEmbedTokens()), Task: g.Task(),
		ReasoningParser: g.ReasoningParser(),
		ReadsImages:     g.ReadsMedia(media.Image), ReadsAudio: g.ReadsMedia(media.Audio),
	}
	for _, d := range g.MatryoshkaDimensions() {
		resp.MatryoshkaDimensions = append(resp.MatryoshkaDimensions, int32(d))
	}
	if resp.PrefixCaching {
		resp.KvBlockSize = int32(cfg.KV.BlockSize)
	}
	if l := g.Core().KVLayout(); l != nil {
		resp.KvBytesPerPosition = int64(l.BytesPerPosition())
	}
	if b, sum, err := s.vocabulary(g); err == nil {
		resp.VocabularySize, resp.VocabularySha256 = int64(len(b)), sum[:]
	}
	return resp, nil
}

// Vocabulary streams the vocabulary-only GGUF.
func (s *Server) Vocabulary(_ *workerpb.VocabularyRequest, stream grpc.ServerStreamingServer[workerpb.VocabularyChunk]) error {
	g, err := s.model()
	if err != nil {
		return err
	}
	b, _, err := s.vocabulary(g)
	if err != nil {
		return status.Errorf(codes.Internal, "reading the model's vocabulary: %v", err)
	}
	for off := 0; off < len(b); off += vocabChunk {
		end := min(off+vocabChunk, len(b))
		if err := stream.Send(&workerpb.VocabularyChunk{Offset: int64(off), Data: b[off:end], Total: int64(len(b))}); err != nil {
			return err
		}
	}
	return nil
}

// request converts and checks a wire request against the model.
func (s *Server) request(g *models.Generative, in *workerpb.Request) (*scheduler.Request, error) {
	r, err := workercodec.DecodeRequest(in, g.Tokenizer().Vocab().NumTokens(), g.Info().NEmbd, time.Now())
	if err != nil {
		return nil, err
	}
	if r.Thinking != nil {
		// The head's frontend knew it too: a forced end waits for a whole
		// UTF-8 character here as it does in serve.
		r.Thinking.UTF8 = g.Tokenizer().UTF8Tails()
	}
	if r.Sampling.Grammar != "" {
		if err := g.CheckGrammar(r.Sampling.Grammar); err != nil {
			return nil, workercodec.Invalid("sampling.grammar", "the grammar is not valid GBNF: %v", err)
		}
	}
	if t := g.RequestTimeout(); t > 0 && (r.Deadline.IsZero() || r.Arrival.Add(t).Before(r.Deadline)) {
		r.Deadline = r.Arrival.Add(t)
	}
	if r.ID == "" {
		r.ID = newID("wrk-")
	}
	return r, nil
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Generate runs one request; see worker.proto.
func (s *Server) Generate(stream grpc.BidiStreamingServer[workerpb.GenerateRequest, workerpb.GenerateResponse]) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return workercodec.Invalid("request", "the first message must carry the request.")
		}
		return err
	}
	in := first.GetRequest()
	if in == nil {
		return workercodec.Invalid("request", "the first message must carry the request; controls come after it.")
	}
	g, err := s.model()
	if err != nil {
		return err
	}
	r, err := s.request(g, in)
	if err != nil {
		return err
	}
	var (
		st     *core.Stream
		report *workerpb.KVTransferReport
	)
	if src := in.KvSource; src != nil {
		if src.Address == "" || src.TransferId == "" {
			return workercodec.Invalid("kv_source", "kv_source needs an address and a transfer_id.")
		}
		st, report, err = s.submitWithTransfer(ctx, g, r, src)
	} else {
		var sts []*core.Stream
		if sts, err = g.Submit(ctx, []*scheduler.Request{r}); err == nil {
			st = sts[0]
		}
	}
	if err != nil {
		var ie *core.IndexError
		if errors.As(err, &ie) {
			err = ie.Err
		}
		return workercodec.SubmitStatus(err)
	}
	defer st.Cancel() // frees the KV when the client goes away; harmless after the end

	// Controls from the client: stop_choice; the end of the client's side
	// changes nothing, an error (cancel) ends the request.
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					st.Cancel()
				}
				return
			}
			if sc := msg.GetStopChoice(); sc != nil {
				st.StopChoice(int(sc.Choice))
			}
		}
	}()
	for {
		outs, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return stream.Send(&workerpb.GenerateResponse{Msg: &workerpb.GenerateResponse_Final{Final: &workerpb.Final{
				Usage: workercodec.EncodeUsage(st.Usage()), KvTransfer: report,
			}}})
		}
		if err != nil {
			return status.FromContextError(err).Err()
		}
		cached := int32(st.Usage().CachedTokens)
		for i := range outs {
			o := workercodec.EncodeOutput(&outs[i])
			o.CachedTokens = cached
			if err := stream.Send(&workerpb.GenerateResponse{Msg: &workerpb.GenerateResponse_Output{Output: o}}); err != nil {
				return err
			}
		}
	}
}

// Prefill runs a prompt and keeps its KV for a transfer; see worker.proto.
func (s *Server) Prefill(ctx context.Context, in *workerpb.PrefillRequest) (*workerpb.PrefillResponse, error) {
	if s.opts.Role == workerpb.Role_ROLE_DECODE {
		return nil, workercodec.Status(codes.FailedPrecondition, &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_ROLE, Message: "this worker's role is decode: it does not prefill for others."})
	}
	if in.GetRequest() == nil {
		return nil, workercodec.Invalid("request", "request is required.")
	}
	if in.Request.KvSource != nil {
		return nil, workercodec.Invalid("request.kv_source", "a prefill computes its prompt: kv_source must be unset.")
	}
	if in.Request.PromptLogprobs != nil {
		return nil, workercodec.Invalid("request.prompt_logprobs", "a prefill whose KV is transferred cannot return prompt logprobs.")
	}
	if in.Request.N > 1 {
		return nil, workercodec.Invalid("request.n", "a prefill has one choice, got n=%d.", in.Request.N)
	}
	lease := s.opts.Lease
	switch {
	case in.LeaseMs < 0 || time.Duration(in.LeaseMs)*time.Millisecond > MaxLease:
		return nil, workercodec.Invalid("lease_ms", "lease_ms must be in [0, %d], got %d.", MaxLease.Milliseconds(), in.LeaseMs)
	case in.LeaseMs > 0:
		lease = time.Duration(in.LeaseMs) * time.Millisecond
	}
	g, err := s.model()
	if err != nil {
		return nil, err
	}
	wire := proto.CloneOf(in.Request)
	wire.MaxTokens = max(wire.MaxTokens, 1)
	r, err := s.request(g, wire)
	if err != nil {
		return nil, workercodec.PrefixParam(err, "request.")
	}
	r.MaxTokens, r.MinTokens = 1, min(r.MinTokens, 1)
	st, l, err := g.Core().Prefill(ctx, r, lease)
	if err != nil {
		var ie *core.IndexError
		if errors.As(err, &ie) {
			err = ie.Err
		}
		return nil, workercodec.SubmitStatus(err)
	}
	resp := &workerpb.PrefillResponse{TransferId: l.Name(), LeaseMs: lease.Milliseconds()}
	var last scheduler.Output
	for {
		outs, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			st.Cancel()
			return nil, status.FromContextError(err).Err()
		}
		for _, o := range outs {
			if len(o.Tokens) > 0 {
				resp.FirstToken = o.Tokens[0]
				if len(o.Logprobs) > 0 {
					resp.FirstLogprobs = workercodec.EncodeLogprob(&o.Logprobs[0])
				}
			}
			if o.Finish != scheduler.FinishNone {
				last = o
			}
		}
	}
	if last.Finish == scheduler.FinishAbort {
		err := last.Err
		if err == nil {
			err = scheduler.ErrClosed
		}
		return nil, workercodec.SubmitStatus(err)
	}
	switch {
	case last.Finish == scheduler.FinishStop:
		resp.FinishReason = workerpb.FinishReason_FINISH_REASON_STOP
	case len(r.Prompt)+1 >= g.MaxModelLen():
		resp.FinishReason = workerpb.FinishReason_FINISH_REASON_LENGTH
	}
	kv, err := l.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(err).Err()
		}
		return nil, workercodec.Status(codes.Internal, &workerpb.Error{Code: workerpb.ErrorCode_ERROR_CODE_ENGINE, Message: "the prefill's KV could not be kept: " + err.Error()})
	}
	resp.Positions, resp.KvBytes = int32(kv.Positions), kv.Bytes
	resp.Usage = workercodec.EncodeUsage(st.Usage())
	if bs := g.Core().Config().KV.BlockSize; bs > 0 {
		for _, h := range kvcache.BlockHashes(r.Prompt, r.CacheSalt, bs) {
			resp.BlockHashes = append(resp.BlockHashes, h[:])
		}
	}
	return resp, nil
}

// ReleaseKV frees a transfer's KV.
func (s *Server) ReleaseKV(ctx context.Context, in *workerpb.ReleaseKVRequest) (*workerpb.ReleaseKVResponse, error) {
	if in.TransferId == "" {
		return nil, workercodec.Invalid("transfer_id", "transfer_id is required.")
	}
	g, err := s.model()
	if err != nil {
		return nil, err
	}
	ok, err := g.Core().ReleaseLease(ctx, in.TransferId)
	if err != nil {
		return nil, workercodec.SubmitStatus(err)
	}
	return &workerpb.ReleaseKVResponse{Released: ok}, nil
}

// Stats reports load and cache state.
func (s *Server) Stats(ctx context.Context, _ *workerpb.StatsRequest) (*workerpb.StatsResponse, error) {
	g, err := s.model()
	if err != nil {
		return nil, err
	}
	st := g.Core().Stats()
	return &workerpb.StatsResponse{
		Waiting: int32(max(st.Waiting, g.Core().Queued())), Running: int32(st.Running), KvUsage: st.KV.Usage(),
		PrefixCacheQueries: st.KV.QueryTokens, PrefixCacheHits: st.KV.HitTokens, Role: s.opts.Role,
		CachedBlocks: int64(st.KV.CachedBlocks), CachedBytes: st.KV.CachedBytes,
		Leases: int32(st.KV.Leases), LeaseBytes: st.KV.LeaseBytes, MaxRunning: int32(g.Core().Config().Scheduler.MaxNumSeqs),
	}, nil
}

// WatchKVEvents streams the prefix cache's events; see worker.proto.
func (s *Server) WatchKVEvents(_ *workerpb.WatchKVEventsRequest, stream grpc.ServerStreamingServer[workerpb.KVEvent]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	g, err := s.model()
	if err != nil {
		return err
	}
	w, err := g.Core().WatchKV(ctx)
	if err != nil {
		return workercodec.SubmitStatus(err)
	}
	defer w.Close()
	var seq uint64
	send := func(ev *workerpb.KVEvent) error {
		seq++
		ev.Sequence = seq
		return stream.Send(ev)
	}
	for {
		batches, err := w.Recv(ctx)
		if err != nil {
			if stream.Context().Err() != nil {
				return status.FromContextError(stream.Context().Err()).Err()
			}
			if ctx.Err() != nil {
				return status.Error(codes.Unavailable, "the worker is shutting down")
			}
			return workercodec.SubmitStatus(err)
		}
		for _, b := range batches {
			if b.Snapshot && seq > 0 {
				if err := send(&workerpb.KVEvent{Kind: workerpb.KVEventKind_KV_EVENT_KIND_CLEARED}); err != nil {
					return err
				}
			}
			for _, e := range b.Events {
				ev := &workerpb.KVEvent{Hash: e.Hash[:], Depth: int32(e.Depth)}
				switch e.Kind {
				case kvcache.BlockStored:
					ev.Kind = workerpb.KVEventKind_KV_EVENT_KIND_STORED
					if e.Parent != (kvcache.Hash{}) {
						ev.Parent = e.Parent[:]
					}
				case kvcache.BlockRemoved:
					ev.Kind = workerpb.KVEventKind_KV_EVENT_KIND_REMOVED
				default:
					continue
				}
				if err := send(ev); err != nil {
					return err
				}
			}
			if b.Snapshot {
				if err := send(&workerpb.KVEvent{Kind: workerpb.KVEventKind_KV_EVENT_KIND_SNAPSHOT_END}); err != nil {
					return err
				}
			}
		}
	}
}

// Embed pools a batch of token-id inputs; see worker.proto.
func (s *Server) Embed(ctx context.Context, in *workerpb.EmbedRequest) (*workerpb.EmbedResponse, error) {
	g, err := s.model()
	if err != nil {
		return nil, err
	}
	if g.Pooling() == "none" {
		return nil, workercodec.Invalid("", "the model %s has no pooling (the worker was started with --pooling none): it does not embed", g.Name())
	}
	inputs, err := workercodec.DecodeEmbedInputs(in.GetInputs(), g.Tokenizer().Vocab().NumTokens(), g.MaxEmbedTokens())
	if err != nil {
		return nil, err
	}
	vecs, err := g.Embed(ctx, inputs)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, workercodec.SubmitStatus(err)
	}
	resp := &workerpb.EmbedResponse{Embeddings: make([]*workerpb.Embedding, len(vecs))}
	for i, v := range vecs {
		resp.Embeddings[i] = &workerpb.Embedding{Values: v}
		resp.PromptTokens += int32(len(inputs[i]))
	}
	return resp, nil
}
