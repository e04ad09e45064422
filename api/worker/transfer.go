package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/head/workercodec"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// metricSet are the KV transfer metrics (CONTRACT: llmserve_kv_*).
type metricSet struct {
	bytes      *prometheus.CounterVec
	failures   prometheus.Counter
	recomputed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, leasesExpired func() float64) (*metricSet, error) {
	m := &metricSet{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmserve_kv_transfer_bytes_total", Help: "KV bytes moved between nodes for disaggregated prefill, by direction (sent, received).",
		}, []string{"direction"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmserve_kv_transfer_failures_total", Help: "KV pulls that failed (peer gone, bad checksum, timeout, lease ended, mismatch).",
		}),
		recomputed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmserve_kv_transfer_recomputed_total", Help: "Requests whose remote prefill could not be used and whose prompt was computed here instead.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	expired := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "llmserve_kv_leases_expired_total", Help: "Prefill KV kept for a transfer and freed because nobody pulled or released it in time.",
	}, leasesExpired)
	for _, c := range []prometheus.Collector{m.bytes, m.failures, m.recomputed, expired} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("worker: metrics: %w", err)
		}
	}
	return m, nil
}

// PullKV streams a transfer's KV in checksummed chunks, then the trailer,
// and releases the lease.
func (s *Server) PullKV(in *workerpb.PullKVRequest, stream grpc.ServerStreamingServer[workerpb.PullKVResponse]) error {
	if in.TransferId == "" {
		return workercodec.Invalid("transfer_id", "transfer_id is required.")
	}
	chunk := int(in.ChunkBytes)
	switch {
	case chunk < 0 || chunk > MaxChunk:
		return workercodec.Invalid("chunk_bytes", "chunk_bytes must be in [0, %d], got %d.", MaxChunk, chunk)
	case chunk == 0:
		chunk = DefaultChunk
	}
	g, err := s.model()
	if err != nil {
		return err
	}
	ctx := stream.Context()
	ref, tokens, salt, err := g.Core().LeaseKV(ctx, in.TransferId)
	if err != nil {
		return workercodec.SubmitStatus(err)
	}
	// The KV is host memory off the Go heap, valid until this release. A
	// message may be read after Send returns (grpc-go lets stats handlers
	// use it lazily), so each chunk is a Go-heap copy.
	defer ref.Release()
	kv := ref.KV()
	var all uint32
	for off := 0; off < len(kv.Data); off += chunk {
		data := bytes.Clone(kv.Data[off:min(off+chunk, len(kv.Data))])
		all = crc32.Update(all, castagnoli, data)
		if err := stream.Send(&workerpb.PullKVResponse{Msg: &workerpb.PullKVResponse_Chunk{Chunk: &workerpb.KVChunk{
			Offset: int64(off), Data: data, Crc32C: crc32.Checksum(data, castagnoli),
		}}}); err != nil {
			return err
		}
		s.m.bytes.WithLabelValues("sent").Add(float64(len(data)))
	}
	layout := &workerpb.KVLayout{}
	for _, sec := range kv.Layout.Sections {
		layout.Sections = append(layout.Sections, &workerpb.KVSection{Groups: int32(sec.Groups), Unit: int32(sec.Unit)})
	}
	if err := stream.Send(&workerpb.PullKVResponse{Msg: &workerpb.PullKVResponse_Trailer{Trailer: &workerpb.KVTrailer{
		TotalBytes: int64(len(kv.Data)), Positions: int32(kv.N), Layout: layout, Tokens: tokens[:kv.N], CacheSalt: salt, Crc32C: all,
	}}}); err != nil {
		return err
	}
	if _, err := g.Core().ReleaseLease(context.WithoutCancel(ctx), in.TransferId); err != nil {
		s.log.Warn("releasing a pulled KV transfer", "transfer", in.TransferId, "err", err)
	}
	return nil
}

// Pulled is KV pulled from a peer.
type Pulled struct {
	KV     *engine.KV
	Tokens []int32
	Salt   string
}

// PullOptions configure Pull.
type PullOptions struct {
	// APIKey is sent as a Bearer token.
	APIKey string
	// MaxBytes bounds what is accepted (0: 16 GiB).
	MaxBytes int64
	// Layout, when set, is the receiver's KV layout; KV in another layout
	// is refused.
	Layout *engine.KVLayout
	// Received is called with the size of every chunk that arrived.
	Received func(n int)
}

// Pull fetches a transfer's KV from the Worker service at addr and checks
// it: every chunk's CRC-32C, the whole's, the size against the positions
// and the layout. It releases the peer's lease by reading to the end.
func Pull(ctx context.Context, addr, transferID string, opt PullOptions) (*Pulled, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxChunk+(1<<16))))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	if opt.APIKey != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+opt.APIKey)
	}
	maxBytes := opt.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 16 << 30
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := workerpb.NewWorkerClient(conn).PullKV(ctx, &workerpb.PullKVRequest{TransferId: transferID})
	if err != nil {
		return nil, err
	}
	var (
		data []byte
		all  uint32
	)
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended without a trailer")
			}
			return nil, err
		}
		if c := msg.GetChunk(); c != nil {
			if c.Offset != int64(len(data)) {
				return nil, fmt.Errorf("chunk at offset %d, expected %d", c.Offset, len(data))
			}
			if crc32.Checksum(c.Data, castagnoli) != c.Crc32C {
				return nil, fmt.Errorf("chunk at offset %d: checksum mismatch", c.Offset)
			}
			if int64(len(data)+len(c.Data)) > maxBytes {
				return nil, fmt.Errorf("more than %d bytes of KV", maxBytes)
			}
			data = append(data, c.Data...)
			all = crc32.Update(all, castagnoli, c.Data)
			if opt.Received != nil {
				opt.Received(len(c.Data))
			}
			continue
		}
		t := msg.GetTrailer()
		if t == nil {
			return nil, errors.New("an empty message")
		}
		layout := &engine.KVLayout{}
		for _, sec := range t.GetLayout().GetSections() {
			if sec.Groups < 1 || sec.Unit < 1 {
				return nil, fmt.Errorf("a KV layout section of %d groups of %d bytes", sec.Groups, sec.Unit)
			}
			layout.Sections = append(layout.Sections, engine.KVSection{Groups: int(sec.Groups), Unit: int(sec.Unit)})
		}
		switch {
		case t.TotalBytes != int64(len(data)) || t.Crc32C != all:
			return nil, fmt.Errorf("received %d bytes (crc %08x); the trailer says %d (crc %08x)", len(data), all, t.TotalBytes, t.Crc32C)
		case t.Positions < 1 || int(t.Positions) != len(t.Tokens):
			return nil, fmt.Errorf("the trailer covers %d positions but lists %d tokens", t.Positions, len(t.Tokens))
		case layout.BytesPerPosition() < 1 || int64(layout.BytesPerPosition())*int64(t.Positions) != t.TotalBytes:
			return nil, fmt.Errorf("%d bytes do not hold %d positions of %d bytes", t.TotalBytes, t.Positions, layout.BytesPerPosition())
		case opt.Layout != nil && !opt.Layout.Equal(layout):
			return nil, errors.New("the peer's KV layout differs from this engine's (another model, KV type or build)")
		}
		return &Pulled{KV: &engine.KV{Layout: layout, N: int(t.Positions), Data: data}, Tokens: t.Tokens, Salt: t.CacheSalt}, nil
	}
}

// submitWithTransfer pulls a request's prompt KV from its kv_source and
// submits the request with it; on any failure it submits the request
// alone, so it computes its prompt here, and says so in the report.
func (s *Server) submitWithTransfer(ctx context.Context, g *models.Generative, r *scheduler.Request, src *workerpb.KVSource) (*core.Stream, *workerpb.KVTransferReport, error) {
	timeout := DefaultPullTimeout
	if src.TimeoutMs > 0 {
		timeout = time.Duration(src.TimeoutMs) * time.Millisecond
	}
	st, rep, err := SubmitWithTransfer(ctx, g, r, src.Address, src.TransferId, TransferOptions{
		Timeout: timeout, APIKey: s.opts.APIKey, Metrics: s.m, Logger: s.log,
	})
	return st, rep, err
}

// TransferOptions configure SubmitWithTransfer.
type TransferOptions struct {
	Timeout time.Duration
	APIKey  string
	Metrics *metricSet
	Logger  interface {
		Warn(msg string, args ...any)
	}
}

// SubmitWithTransfer is the decode side of a KV transfer: it pulls the
// prompt's KV of transferID from the Worker service at addr (bounded by
// opt.Timeout), checks it covers a prefix of r.Prompt in r's cache salt
// and this engine's layout, and submits r with it
// (core.EngineCore.SubmitWithKV). On any failure (peer gone, bad
// checksum, timeout, lease ended, mismatch) it submits r alone, so the
// prompt is computed here (vLLM's kv_load_failure_policy "recompute"),
// counts it, and says so in the report. Only errors of the submission
// itself are returned.
func SubmitWithTransfer(ctx context.Context, g *models.Generative, r *scheduler.Request, addr, transferID string, opt TransferOptions) (*core.Stream, *workerpb.KVTransferReport, error) {
	rep := &workerpb.KVTransferReport{}
	fail := func(err error) {
		rep.Recomputed, rep.Error = true, err.Error()
		if opt.Metrics != nil {
			opt.Metrics.recomputed.Inc()
		}
		if opt.Logger != nil {
			opt.Logger.Warn("KV transfer failed; computing the prompt here", "request", r.ID, "from", addr, "transfer", transferID, "err", err)
		}
	}
	var kv *engine.KV
	if r.PromptLogprobs >= 0 {
		fail(errors.New("prompt logprobs need every prompt position computed"))
	} else {
		pctx, cancel := context.WithTimeout(ctx, opt.Timeout)
		p, err := Pull(pctx, addr, transferID, PullOptions{
			APIKey: opt.APIKey, Layout: g.Core().KVLayout(),
			MaxBytes: maxKVBytes(g),
			Received: func(n int) {
				if opt.Metrics != nil {
					opt.Metrics.bytes.WithLabelValues("received").Add(float64(n))
				}
			},
		})
		cancel()
		switch {
		case err != nil:
		case p.Salt != r.CacheSalt:
			err = errors.New("the prefill's cache_salt differs from the request's")
		case len(p.Tokens) > len(r.Prompt) || !slices.Equal(p.Tokens, r.Prompt[:len(p.Tokens)]):
			err = errors.New("the transferred KV is not of a prefix of the request's prompt")
		}
		if err != nil {
			if opt.Metrics != nil {
				opt.Metrics.failures.Inc()
			}
			if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
				err = fmt.Errorf("%s: %s", st.Code(), st.Message())
			}
			fail(err)
		} else {
			kv = p.KV
			rep.BytesReceived, rep.Positions = int64(kv.Size()), int32(kv.N)
		}
	}
	if kv == nil {
		sts, err := g.Submit(ctx, []*scheduler.Request{r})
		if err != nil {
			return nil, rep, err
		}
		return sts[0], rep, nil
	}
	st, imported, err := g.Core().SubmitWithKV(ctx, r, kv)
	if err != nil {
		return nil, rep, err
	}
	if n := <-imported; n == 0 {
		fail(errors.New("the KV could not be imported (prefix caching is off, or the layout differs)"))
	}
	return st, rep, nil
}

// maxKVBytes is the most KV one sequence of g can hold, when known.
func maxKVBytes(g *models.Generative) int64 {
	if l := g.Core().KVLayout(); l != nil {
		return int64(l.BytesPerPosition()) * int64(g.MaxModelLen())
	}
	return 0
}
