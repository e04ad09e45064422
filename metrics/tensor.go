package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Tensor records one served tensor model's metrics. Its Batch and Queued
// methods are the batcher's observer (models/batching.Observer).
type Tensor struct {
	requests      *prometheus.CounterVec
	duration      prometheus.Observer
	queueTime     prometheus.Observer
	batchSize     prometheus.Observer
	batchQueue    prometheus.Observer
	parallelQueue prometheus.Observer
}

// TensorStats are a tensor model's counts since it loaded, as Triton
// reports a model version's statistics (models.TensorModel's Stats).
type TensorStats struct {
	// Executions is the batches run (Triton's model_execution_count) and
	// Inferences the rows they held (model_inference_count).
	Executions, Inferences uint64
	// Queued is the requests whose batch started and QueueTime their time
	// from Infer to that start (Triton's queue duration); Answered is the
	// requests answered and AnswerTime their time in Infer, so that
	// AnswerTime - QueueTime is the time their batches computed.
	Queued, Answered      uint64
	QueueTime, AnswerTime time.Duration
}

// batchBuckets are rows per Run.
var batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// tensorLatencyBuckets reach lower than latencyBuckets: a small MLP
// answers in microseconds.
var tensorLatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Request outcomes, the outcome label of llmserve_tensor_requests_total.
const (
	OutcomeSuccess  = "success"
	OutcomeInvalid  = "invalid"  // the inputs did not fit the model
	OutcomeCanceled = "canceled" // the client went away or its deadline passed
	OutcomeError    = "error"    // the run failed
)

// NewTensor registers the metrics of tensor model, served as version, on
// reg (a nil reg: none) with ready its readiness, read at scrape time.
func NewTensor(reg prometheus.Registerer, model, version string, ready func() bool) (*Tensor, error) {
	labels := prometheus.Labels{"model": model}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	// MLServer's queue histograms, with its labels and the Prometheus
	// client's default buckets, as MLServer's metrics.log has them.
	mlsLabels := prometheus.Labels{"model_name": model, "model_version": version}
	batchQueue := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "batch_request_queue", Help: "Requests waiting in the adaptive batching queue, observed as each request arrives (MLServer's name).", ConstLabels: mlsLabels,
	})
	parallelQueue := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "parallel_request_queue", Help: "Requests in batches the parallel workers run, observed as each request arrives (MLServer's name).", ConstLabels: mlsLabels,
	})
	duration := hist("llmserve_tensor_request_duration_seconds", "Histogram of tensor inference request durations in seconds, from the inputs checked to the outputs ready (queue time included).", tensorLatencyBuckets)
	queue := hist("llmserve_tensor_queue_time_seconds", "Histogram of the time a tensor inference request waited for its batch to start, in seconds.", tensorLatencyBuckets)
	batch := hist("llmserve_tensor_batch_size", "Histogram of the rows one tensor model run computed (requests merged by adaptive batching).", batchBuckets)
	t := &Tensor{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmserve_tensor_requests_total", Help: "Tensor inference requests by outcome (success, invalid, canceled, error).", ConstLabels: labels,
		}, []string{"outcome"}),
		duration: duration, queueTime: queue, batchSize: batch,
		batchQueue: batchQueue, parallelQueue: parallelQueue,
	}
	if reg == nil {
		return t, nil
	}
	collectors := []prometheus.Collector{
		t.requests, duration, queue, batch, batchQueue, parallelQueue,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llmserve_model_ready", Help: "1 when the model serves requests, 0 while its engine restarts or after it stopped.", ConstLabels: prometheus.Labels{"model_name": model}}, func() float64 {
			if ready() {
				return 1
			}
			return 0
		}),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Request records one request's outcome and duration.
func (t *Tensor) Request(outcome string, d time.Duration) {
	t.requests.WithLabelValues(outcome).Inc()
	t.duration.Observe(d.Seconds())
}

// Batch records the rows of one run.
func (t *Tensor) Batch(rows int) { t.batchSize.Observe(float64(rows)) }

// Queued records how long a request waited for its batch to start.
func (t *Tensor) Queued(d time.Duration) { t.queueTime.Observe(d.Seconds()) }

// Arrived records the batcher's queues as a request arrives: queued
// requests wait for their batch (batch_request_queue), running ones are in
// batches the parallel workers run (parallel_request_queue).
func (t *Tensor) Arrived(queued, running int) {
	t.batchQueue.Observe(float64(queued))
	t.parallelQueue.Observe(float64(running))
}
