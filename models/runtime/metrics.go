package runtime

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// metricsTimeout bounds one process's answer to a scrape.
const metricsTimeout = 2 * time.Second

// reservedPrefixes are metric names a runtime may not publish: they are
// llmserve's own, and a second family under one name would break every
// scrape.
var reservedPrefixes = []string{"vllm:", "llmserve_", "model_infer_", "batch_request_", "parallel_request_", "rest_server_", "grpc_server_", "go_", "process_", "promhttp_"}

// Collector returns the Prometheus collector of the model's own metrics:
// at every scrape it asks each ready process for its metrics
// (MetricsMethod) and exposes them with the labels model_name,
// model_version and worker added (a label of the same name the runtime
// set is replaced). A process that does not answer in time, or answers
// text that does not parse, is left out of that scrape (and logged).
// Names under llmserve's own prefixes are dropped. It is an unchecked
// collector (it describes nothing), which Prometheus cannot unregister:
// a server that loads and unloads models collects them through one
// collector of its own that calls this one's Collect for each loaded
// model (as models.Repository does).
func (m *Model) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Model }

// Describe describes nothing: the metrics are the runtime's, unknown in
// advance (an unchecked collector).
func (collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	for _, p := range m.ps {
		inc, _ := p.current()
		if inc == nil || !inc.alive() {
			continue
		}
		ctx, cancel := context.WithTimeout(m.ctx, metricsTimeout)
		var text wrapperspb.StringValue
		err := inc.conn.Invoke(ctx, MetricsMethod, &emptypb.Empty{}, &text)
		cancel()
		if err != nil {
			continue // no metrics service, or busy: nothing this scrape
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(text.GetValue()))
		if err != nil {
			m.cfg.Logger.Warn("runtime metrics do not parse; left out", "model", m.cfg.Name, "worker", p.idx, "err", err)
			continue
		}
		labels := map[string]string{"model_name": m.cfg.Name, "model_version": m.cfg.Version, "worker": strconv.Itoa(p.idx)}
		for name, f := range fams {
			if reservedName(name) {
				continue
			}
			for _, mt := range f.GetMetric() {
				if pm, ok := constMetric(name, f, mt, labels); ok {
					ch <- pm
				}
			}
		}
	}
}

func reservedName(name string) bool {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// mapOf maps each element of es to the key and value kv gives it: a
// histogram's buckets by upper bound, a summary's quantiles by rank.
func mapOf[E any, K comparable, V any](es []E, kv func(E) (K, V)) map[K]V {
	m := make(map[K]V, len(es))
	for _, e := range es {
		k, v := kv(e)
		m[k] = v
	}
	return m
}

// constMetric is one sample of a family with our labels laid over its own.
func constMetric(name string, f *dto.MetricFamily, mt *dto.Metric, add map[string]string) (prometheus.Metric, bool) {
	ls := map[string]string{}
	for _, lp := range mt.GetLabel() {
		ls[lp.GetName()] = lp.GetValue()
	}
	for k, v := range add {
		ls[k] = v
	}
	names := make([]string, 0, len(ls))
	values := make([]string, 0, len(ls))
	for k, v := range ls {
		names = append(names, k)
		values = append(values, v)
	}
	desc := prometheus.NewDesc(name, f.GetHelp(), names, nil)
	var (
		pm  prometheus.Metric
		err error
	)
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		pm, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, mt.GetCounter().GetValue(), values...)
	case dto.MetricType_GAUGE:
		pm, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, mt.GetGauge().GetValue(), values...)
	case dto.MetricType_UNTYPED:
		pm, err = prometheus.NewConstMetric(desc, prometheus.UntypedValue, mt.GetUntyped().GetValue(), values...)
	case dto.MetricType_HISTOGRAM:
		h := mt.GetHistogram()
		buckets := mapOf(h.GetBucket(), func(b *dto.Bucket) (float64, uint64) { return b.GetUpperBound(), b.GetCumulativeCount() })
		pm, err = prometheus.NewConstHistogram(desc, h.GetSampleCount(), h.GetSampleSum(), buckets, values...)
	case dto.MetricType_SUMMARY:
		s := mt.GetSummary()
		qs := mapOf(s.GetQuantile(), func(q *dto.Quantile) (float64, float64) { return q.GetQuantile(), q.GetValue() })
		pm, err = prometheus.NewConstSummary(desc, s.GetSampleCount(), s.GetSampleSum(), qs, values...)
	default:
		return nil, false
	}
	return pm, err == nil
}
