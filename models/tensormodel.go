package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models/batching"
	"github.com/llmserve/llmserve/models/tensor"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
)

// Tensor model platforms, as V2 model metadata names them.
const (
	PlatformONNX = "onnx" // an ONNX file
	PlatformGGML = "ggml" // a graph GGUF (general.architecture = GraphArchitecture)
)

// GraphArchitecture is general.architecture of a GGUF that holds a tensor
// graph rather than an LLM.
const GraphArchitecture = "llmserve.graph"

// DefaultMaxRequestRows is the most rows (batch size) one tensor request
// may carry unless TensorConfig says otherwise.
const DefaultMaxRequestRows = 4096

// TensorConfig says how to load and serve one tensor model.
type TensorConfig struct {
	// Name is the id clients use; default: the file's base name.
	Name string
	// Path is the .onnx file or graph GGUF.
	Path string
	// Version is the version V2 serves the model as; "" means "1".
	Version string
	// MaxBatchSize is MLServer's max_batch_size: the most rows adaptive
	// batching merges into one run; <= 1 turns batching off.
	MaxBatchSize int
	// MaxBatchTime is MLServer's max_batch_time (Triton's
	// max_queue_delay_microseconds): the longest a batch waits for
	// requests on their way while a worker is free; a request that finds
	// the model idle runs at once (see models/batching).
	MaxBatchTime time.Duration
	// ParallelWorkers is MLServer's parallel_workers: how many batches run
	// at once (default 1).
	ParallelWorkers int
	// Threads is the CPU threads the model computes with in all, split
	// between the workers (each run gets Threads/ParallelWorkers, at
	// least 1); 0 means one per worker. One thread per run is the
	// runtime's advice for small models (ggml's workers cost more than
	// they save on an MLP's matrices; measured in docs/BENCHMARKS.md):
	// parallel workers use more cores better.
	Threads int
	// MaxRequestRows bounds one request's batch size (0:
	// DefaultMaxRequestRows); more is a client error.
	MaxRequestRows int
	// Triton is the model's Triton configuration when it was loaded from
	// a config.pbtxt (TritonConfig reports it), else nil.
	Triton *tc.ModelConfig
}

// OpenTensorExecutor opens a tensor model file with threads CPU threads
// per run. It is the graph runtime's tensor.Open; tests may replace it.
var OpenTensorExecutor = func(path string, threads int) (tensor.Executor, error) {
	return tensor.Open(path, tensor.Options{Threads: threads})
}

// TensorModel is a served tensor model: an Executor behind adaptive
// batching. It is safe for concurrent use.
type TensorModel struct {
	name, version, platform string
	created                 int64
	cfg                     TensorConfig
	exec                    tensor.Executor
	batch                   *batching.Batcher
	metrics                 *metrics.Tensor
	stats                   tensorStats
	closed                  atomic.Bool
	closeOnce               sync.Once
	closeErr                error
}

// LoadTensor opens the model file and starts its batcher; reg (nil: none)
// receives its metrics.
func LoadTensor(cfg TensorConfig, log *slog.Logger, reg prometheus.Registerer) (*TensorModel, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := cfg.Name
	if name == "" {
		name = baseName(cfg.Path)
	}
	platform, err := tensorPlatform(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	if cfg.MaxBatchSize < 0 {
		return nil, fmt.Errorf("load model %q: %w", name, &ConfigError{"MaxBatchSize", fmt.Sprintf("%d is negative", cfg.MaxBatchSize)})
	}
	if cfg.MaxBatchTime < 0 {
		return nil, fmt.Errorf("load model %q: %w", name, &ConfigError{"MaxBatchTime", fmt.Sprintf("%v is negative", cfg.MaxBatchTime)})
	}
	if cfg.ParallelWorkers < 0 {
		return nil, fmt.Errorf("load model %q: %w", name, &ConfigError{"ParallelWorkers", fmt.Sprintf("%d is negative", cfg.ParallelWorkers)})
	}
	cfg.ParallelWorkers = max(cfg.ParallelWorkers, 1)
	if cfg.Threads <= 0 {
		cfg.Threads = cfg.ParallelWorkers
	}
	if cfg.MaxRequestRows <= 0 {
		cfg.MaxRequestRows = DefaultMaxRequestRows
	}
	threads := max(1, cfg.Threads/cfg.ParallelWorkers)
	start := time.Now()
	exec, err := OpenTensorExecutor(cfg.Path, threads)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	version := cfg.Version
	if version == "" {
		version = "1"
	}
	m := &TensorModel{name: name, version: version, platform: platform, created: time.Now().Unix(), cfg: cfg, exec: exec}
	m.metrics, err = metrics.NewTensor(reg, name, version, m.Ready)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("load model %q: metrics: %w", name, err), exec.Close())
	}
	m.batch = batching.New(exec, batching.Config{
		MaxBatchSize: cfg.MaxBatchSize, MaxBatchTime: cfg.MaxBatchTime, Workers: cfg.ParallelWorkers, Observer: countingObserver{m.metrics, &m.stats},
	})
	log.Info("tensor model loaded", "model", name, "path", cfg.Path, "platform", platform,
		"inputs", specsString(exec.Inputs()), "outputs", specsString(exec.Outputs()),
		"max_batch_size", cfg.MaxBatchSize, "max_batch_time", cfg.MaxBatchTime, "parallel_workers", cfg.ParallelWorkers,
		"threads_per_run", threads, "took", time.Since(start).Round(time.Millisecond))
	return m, nil
}

func specsString(ss []tensor.Spec) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s %s %v", s.Name, s.DType, s.Shape)
	}
	return strings.Join(parts, ", ")
}

// tensorPlatform says whether path is an ONNX file or a graph GGUF.
func tensorPlatform(path string) (string, error) {
	if strings.EqualFold(filepath.Ext(path), ".onnx") {
		return PlatformONNX, nil
	}
	arch, err := ggufArchitecture(path)
	if err != nil {
		return "", err
	}
	if arch != GraphArchitecture {
		return "", fmt.Errorf("%s is an LLM GGUF (general.architecture %q), not a tensor graph (%q)", filepath.Base(path), arch, GraphArchitecture)
	}
	return PlatformGGML, nil
}

// IsTensorFile reports whether path is a tensor model: a .onnx file or a
// GGUF whose general.architecture is GraphArchitecture.
func IsTensorFile(path string) bool {
	if strings.EqualFold(filepath.Ext(path), ".onnx") {
		return true
	}
	arch, err := ggufArchitecture(path)
	return err == nil && arch == GraphArchitecture
}

// Name is the id clients use.
func (m *TensorModel) Name() string { return m.name }

// Version is the version the V2 protocol serves the model as.
func (m *TensorModel) Version() string { return m.version }

// Platform is "onnx" or "ggml", for V2 model metadata.
func (m *TensorModel) Platform() string { return m.platform }

// Created is the Unix time the model was loaded.
func (m *TensorModel) Created() int64 { return m.created }

// Inputs describes the model's inputs, in order.
func (m *TensorModel) Inputs() []tensor.Spec { return m.exec.Inputs() }

// Outputs describes the model's outputs, in order.
func (m *TensorModel) Outputs() []tensor.Spec { return m.exec.Outputs() }

// MaxRequestRows is the most rows one request may carry.
func (m *TensorModel) MaxRequestRows() int { return m.cfg.MaxRequestRows }

// MaxBatchSize is the adaptive batch size (<= 1: batching off).
func (m *TensorModel) MaxBatchSize() int { return m.cfg.MaxBatchSize }

// TritonConfig is the model's Triton configuration (its config.pbtxt,
// completed with the model's tensors), nil when it was not loaded from
// one. The caller must not modify it.
func (m *TensorModel) TritonConfig() *tc.ModelConfig { return m.cfg.Triton }

// Ready reports whether the model accepts requests: until it is closed.
func (m *TensorModel) Ready() bool { return !m.closed.Load() }

// Idle reports whether no request is queued or running.
func (m *TensorModel) Idle() bool { return m.batch.Idle() }

// InvalidInput records a request refused before it ran (its inputs did not
// fit the model); the API layer checks inputs and calls it.
func (m *TensorModel) InvalidInput() { m.metrics.Request(metrics.OutcomeInvalid, 0) }

// Infer runs one request. The inputs must be checked against Inputs
// already (one per input, in order, the Spec's datatype and fixed
// dimensions, the same batch size of 1 to MaxRequestRows); see
// tensor.Executor.Run for the outputs.
func (m *TensorModel) Infer(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	start := time.Now()
	out, err := m.batch.Infer(ctx, in)
	outcome := metrics.OutcomeSuccess
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		outcome = metrics.OutcomeCanceled
	default:
		outcome = metrics.OutcomeError
	}
	took := time.Since(start)
	m.metrics.Request(outcome, took)
	if err == nil {
		m.stats.answered.Add(1)
		m.stats.answeredNs.Add(uint64(took))
	}
	if errors.Is(err, batching.ErrClosed) {
		err = fmt.Errorf("model %q: %w", m.name, ErrClosed)
	}
	return out, err
}

// TensorStats are a tensor model's counts since it loaded
// (metrics.TensorStats, so that Triton v1's status reads them without
// linking this package).
type TensorStats = metrics.TensorStats

// tensorStats counts TensorStats; every field is updated atomically.
type tensorStats struct {
	executions, inferences, queued, queuedNs, answered, answeredNs atomic.Uint64
}

// countingObserver passes the batcher's events to the metrics and counts
// them for Stats.
type countingObserver struct {
	*metrics.Tensor
	s *tensorStats
}

func (o countingObserver) Batch(rows int) {
	o.s.executions.Add(1)
	o.s.inferences.Add(uint64(rows))
	o.Tensor.Batch(rows)
}

func (o countingObserver) Queued(d time.Duration) {
	o.s.queued.Add(1)
	o.s.queuedNs.Add(uint64(max(d, 0)))
	o.Tensor.Queued(d)
}

// Stats are the model's counts since it loaded.
func (m *TensorModel) Stats() TensorStats {
	return TensorStats{
		Executions: m.stats.executions.Load(), Inferences: m.stats.inferences.Load(),
		Queued: m.stats.queued.Load(), QueueTime: time.Duration(m.stats.queuedNs.Load()),
		Answered: m.stats.answered.Load(), AnswerTime: time.Duration(m.stats.answeredNs.Load()),
	}
}

// ErrClosed is returned for a request to a tensor model that has been
// unloaded or stopped.
var ErrClosed = errors.New("models: the model is closed")

// Stop refuses new requests and fails the queued ones; running batches
// finish. It returns 0 (requests are not counted here).
func (m *TensorModel) Stop() int64 {
	m.closed.Store(true)
	m.batch.Close()
	return 0
}

// Close stops the model and frees it.
func (m *TensorModel) Close() error {
	m.closeOnce.Do(func() {
		m.Stop()
		m.closeErr = m.exec.Close()
	})
	return m.closeErr
}

// ggufArchitecture reads general.architecture from a GGUF file's
// metadata, without loading the model: a graph GGUF and an LLM GGUF share
// the format and differ there.
func ggufArchitecture(path string) (string, error) {
	arch, ok, err := llamacpp.GGUFString(path, "general.architecture")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s has no general.architecture", filepath.Base(path))
	}
	return arch, nil
}
