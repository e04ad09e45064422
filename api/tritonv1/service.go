package tritonv1

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/metrics"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// Options configure the HTTP routes and the gRPC service. The zero value
// is usable.
type Options struct {
	// Logger receives failed requests (Error for INTERNAL, Debug
	// otherwise); nil discards.
	Logger *slog.Logger
	// Infer records every v1 inference (success or failure, with its
	// time) and is where the status's infer_stats come from; the other
	// protocols record into the same one, so the status counts their
	// requests too. nil records nothing and reports no statistics.
	Infer *metrics.Infer
	// Version is the server version in the status; "" means the module
	// version the binary was built as.
	Version string
	// Started is when the server started, for the status's uptime; zero
	// means when Mount or New ran.
	Started time.Time
	// MaxBodyBytes limits HTTP request bodies (413 beyond); zero means
	// DefaultMaxBodyBytes, negative no limit.
	MaxBodyBytes int64
	// Repository, when the server has a model repository, makes the
	// status list every model in it: one that is not served (it failed to
	// load, is loading, or was unloaded) has its version's ready_state
	// and, asked for by name, its reason in the status's message.
	Repository infer.Repository
}

// service is what HTTP and gRPC share: status and inference over the
// backend, the statistics and the error mapping.
type service struct {
	b       infer.Backend
	repo    infer.Repository
	log     *slog.Logger
	stats   *metrics.Infer
	version string
	started time.Time
	now     func() time.Time
	seed    func() uint32
}

func newService(b infer.Backend, opts Options) *service {
	s := &service{b: b, repo: opts.Repository, log: opts.Logger, stats: opts.Infer, version: opts.Version, started: opts.Started, now: time.Now, seed: mrand.Uint32}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.version == "" {
		s.version = infer.ServerVersion()
	}
	if s.started.IsZero() {
		s.started = s.now()
	}
	return s
}

// status is the server's status with every model's, or with model's alone
// (NOT_FOUND when it is neither served nor in the repository). A model of
// the repository that is not served is listed with its version's state
// (MODEL_UNAVAILABLE for one that failed to load or was unloaded); asked
// for by name, its reason comes back as msg, for the RequestStatus.
func (s *service) status(model string) (st *pb.ServerStatus, msg string, err error) {
	st = &pb.ServerStatus{
		Id: infer.ServerName, Version: s.version, ReadyState: pb.ServerReadyState_SERVER_READY,
		UptimeNs: uint64(max(s.now().Sub(s.started), 0)), ModelStatus: map[string]*pb.ModelStatus{},
	}
	if !s.b.Ready() {
		st.ReadyState = pb.ServerReadyState_SERVER_INITIALIZING
	}
	ms := s.b.Models()
	var idx []infer.IndexEntry
	if s.repo != nil {
		idx = s.repo.Index(false)
	}
	if model != "" {
		m, err := infer.Lookup(s.b, model, "")
		if err == nil {
			ms, idx = []infer.Model{m}, nil
		} else {
			i := slices.IndexFunc(idx, func(e infer.IndexEntry) bool { return e.Name == model })
			if i < 0 {
				return nil, "", err
			}
			ms, idx = nil, idx[i:i+1]
			msg = fmt.Sprintf("model %q is %s", model, strings.ToLower(idx[0].State))
			if idx[0].Reason != "" {
				msg += ": " + idx[0].Reason
			}
		}
	}
	for _, m := range ms {
		spec := specOf(m)
		vs := &pb.ModelVersionStatus{ReadyState: pb.ModelReadyState_MODEL_UNAVAILABLE}
		if m.Ready() {
			vs.ReadyState = pb.ModelReadyState_MODEL_READY
		}
		snap := s.stats.Snapshot(spec.Name, spec.Version)
		if t, ok := m.(tensorStatser); ok {
			// The tensor model counts its batches, their rows, and how
			// long its requests waited for their batch and ran in it.
			ts := t.Stats()
			vs.ModelExecutionCount, vs.ModelInferenceCount = ts.Executions, ts.Inferences
			snap.Queue = metrics.StatDuration{Count: ts.Queued, TotalTime: ts.QueueTime}
			snap.Compute = metrics.StatDuration{Count: ts.Answered, TotalTime: max(ts.AnswerTime-ts.QueueTime, 0)}
		} else if _, declared := infer.AsSignature(m); !declared {
			// A model that does not batch requests (an LLM batches
			// sequences continuously) runs each request once. A custom
			// runtime batches in its own process, uncounted here.
			vs.ModelExecutionCount, vs.ModelInferenceCount = snap.Success.Count, snap.Success.Count
		}
		if is := inferStats(snap); is != nil {
			// The recorder counts requests, not batch sizes: every
			// request's statistics are under batch size 1.
			vs.InferStats = map[uint32]*pb.InferRequestStats{1: is}
		}
		st.ModelStatus[spec.Name] = &pb.ModelStatus{
			Config:        spec.config(),
			VersionStatus: map[int64]*pb.ModelVersionStatus{spec.versionNumber(): vs},
		}
	}
	for _, e := range idx {
		if _, served := st.ModelStatus[e.Name]; served {
			continue
		}
		v, err := strconv.ParseInt(e.Version, 10, 64)
		if err != nil {
			v = -1 // the version could not be determined
		}
		st.ModelStatus[e.Name] = &pb.ModelStatus{
			Config:        &pb.ModelConfig{Name: e.Name},
			VersionStatus: map[int64]*pb.ModelVersionStatus{v: {ReadyState: readyStates[e.State]}},
		}
	}
	return st, msg, nil
}

// readyStates maps the repository's states onto v1's.
var readyStates = map[string]pb.ModelReadyState{
	"READY": pb.ModelReadyState_MODEL_READY, "UNAVAILABLE": pb.ModelReadyState_MODEL_UNAVAILABLE,
	"LOADING": pb.ModelReadyState_MODEL_LOADING, "UNLOADING": pb.ModelReadyState_MODEL_UNLOADING,
}

// tensorStatser is a tensor model that counts its batches
// (models.TensorModel).
type tensorStatser interface{ Stats() metrics.TensorStats }

// inferStats converts a snapshot; nil when no request was recorded.
func inferStats(snap metrics.InferSnapshot) *pb.InferRequestStats {
	if snap.Success.Count == 0 && snap.Failed.Count == 0 {
		return nil
	}
	d := func(sd metrics.StatDuration) *pb.StatDuration {
		if sd.Count == 0 {
			return nil
		}
		return &pb.StatDuration{Count: sd.Count, TotalTimeNs: uint64(max(sd.TotalTime, 0))}
	}
	return &pb.InferRequestStats{Success: d(snap.Success), Failed: d(snap.Failed), Compute: d(snap.Compute), Queue: d(snap.Queue)}
}

// infer serves one inference: it finds the model (version "" is the
// latest), decodes the request with decode, runs it through the core
// (infer.Run, by the model's kind) and encodes the answer. Every
// request to a served model is recorded, failed ones too.
func (s *service) infer(ctx context.Context, name, version string, decode func(*modelSpec) (*decoded, error)) (*pb.InferResponseHeader, [][]byte, error) {
	arrival := s.now()
	m, err := infer.LookupReady(ctx, s.b, name, version)
	if err != nil {
		return nil, nil, err
	}
	spec := specOf(m)
	h, raw, err := s.run(ctx, m, spec, arrival, decode)
	s.stats.Observe(metrics.InferObservation{Model: spec.Name, Version: spec.Version, Err: err, Duration: s.now().Sub(arrival)})
	return h, raw, err
}

func (s *service) run(ctx context.Context, m infer.Model, spec *modelSpec, arrival time.Time, decode func(*modelSpec) (*decoded, error)) (*pb.InferResponseHeader, [][]byte, error) {
	d, err := decode(spec)
	if err != nil {
		return nil, nil, err
	}
	resp, err := infer.Run(ctx, m, d.req, infer.GenOptions{Arrival: arrival, Seed: s.seed(), IDPrefix: "tritonv1-"})
	if err != nil {
		return nil, nil, err
	}
	return encodeResponse(spec, d, resp)
}

// logFailure logs a failed request: INTERNAL as an error, the rest at
// debug level.
func (s *service) logFailure(ctx context.Context, what string, err error) {
	level := slog.LevelDebug
	if outcomeOf(err).code == pb.RequestStatusCode_INTERNAL {
		level = slog.LevelError
	}
	s.log.Log(ctx, level, "triton v1 request failed", "request", what, "err", err)
}
