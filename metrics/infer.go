package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Infer counts the inference requests the tensor protocols serve (V2 REST
// and gRPC infer, KServe V1 predict, Triton's v1 infer), per model and
// version, whatever the model's kind. MLServer's metrics read it, named
// and labelled as its code (mlserver/handlers/dataplane.py, through
// prometheus_client) exports them: the counters
// model_infer_request_success_total and model_infer_request_failure_total
// and the Summary model_infer_request_duration (_sum and _count, in
// seconds, successes and failures both), labelled model and version. So
// do the statistics of Triton's v1 status (Snapshot), so that both always
// agree. It is safe for concurrent use; a nil *Infer records nothing.
type Infer struct {
	success  *prometheus.CounterVec
	failure  *prometheus.CounterVec
	duration *prometheus.SummaryVec

	mu    sync.Mutex
	stats map[inferKey]*InferSnapshot
}

type inferKey struct{ model, version string }

// StatDuration is a count and the time those requests took in all, as
// Triton's v1 StatDuration.
type StatDuration struct {
	Count     uint64
	TotalTime time.Duration
}

// InferSnapshot is one model version's statistics so far.
type InferSnapshot struct {
	// Success and Failed are the requests that answered and that failed,
	// with their time from arrival to answer.
	Success, Failed StatDuration
	// Queue and Compute split successful requests' time where the model
	// reports it (tensor models behind adaptive batching: time waiting for
	// the batch, time running it); zero where it does not.
	Queue, Compute StatDuration
	// LastInference is when the last request ended (zero: never).
	LastInference time.Time
}

// InferObservation is one request's outcome.
type InferObservation struct {
	Model, Version string
	// Err is nil when the request answered.
	Err error
	// Duration is from arrival to answer.
	Duration time.Duration
	// Queue and Compute, when known (see InferSnapshot).
	Queue, Compute time.Duration
}

// Label names of MLServer's request metrics (its dataplane's, not the
// model_name of vLLM's and of the other MLServer metrics).
const (
	LabelInferModel   = "model"
	LabelInferVersion = "version"
)

// NewInfer registers MLServer's request metrics on reg (nil: none).
func NewInfer(reg prometheus.Registerer) (*Infer, error) {
	labels := []string{LabelInferModel, LabelInferVersion}
	in := &Infer{
		// prometheus_client adds _total to a counter's name; the Go
		// client does not, so the names carry it.
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "model_infer_request_success_total", Help: "Model infer request success count (MLServer's metric): V2 infer, KServe V1 predict and Triton v1 infer.",
		}, labels),
		failure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "model_infer_request_failure_total", Help: "Model infer request failure count (MLServer's metric): V2 infer, KServe V1 predict and Triton v1 infer.",
		}, labels),
		duration: prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name: "model_infer_request_duration", Help: "Model infer request duration in seconds, successes and failures (MLServer's metric).",
		}, labels),
		stats: map[inferKey]*InferSnapshot{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{in.success, in.failure, in.duration} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}

// Observe records one request.
func (in *Infer) Observe(o InferObservation) {
	if in == nil {
		return
	}
	if o.Err == nil {
		in.success.WithLabelValues(o.Model, o.Version).Inc()
	} else {
		in.failure.WithLabelValues(o.Model, o.Version).Inc()
	}
	in.duration.WithLabelValues(o.Model, o.Version).Observe(o.Duration.Seconds())
	in.mu.Lock()
	defer in.mu.Unlock()
	k := inferKey{o.Model, o.Version}
	s := in.stats[k]
	if s == nil {
		s = &InferSnapshot{}
		in.stats[k] = s
	}
	add := func(d *StatDuration, t time.Duration) { d.Count++; d.TotalTime += t }
	if o.Err == nil {
		add(&s.Success, o.Duration)
		if o.Queue > 0 || o.Compute > 0 {
			add(&s.Queue, o.Queue)
			add(&s.Compute, o.Compute)
		}
	} else {
		add(&s.Failed, o.Duration)
	}
	s.LastInference = time.Now()
}

// Snapshot returns a model version's statistics so far.
func (in *Infer) Snapshot(model, version string) InferSnapshot {
	if in == nil {
		return InferSnapshot{}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if s := in.stats[inferKey{model, version}]; s != nil {
		return *s
	}
	return InferSnapshot{}
}

// Forget drops a model version's statistics and series (the version was
// unloaded, or a reload replaced it with another version).
func (in *Infer) Forget(model, version string) {
	if in == nil {
		return
	}
	l := prometheus.Labels{LabelInferModel: model, LabelInferVersion: version}
	in.success.DeletePartialMatch(l)
	in.failure.DeletePartialMatch(l)
	in.duration.DeletePartialMatch(l)
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.stats, inferKey{model, version})
}
