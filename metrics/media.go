package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewMediaCache registers vLLM's multimodal cache counters for a model
// with a projector: vllm:mm_cache_queries (media items looked up) and
// vllm:mm_cache_hits (items whose encoding was reused); stats is read at
// scrape time.
func NewMediaCache(reg prometheus.Registerer, model string, stats func() (queries, hits uint64)) error {
	labels := prometheus.Labels{"model_name": model}
	queries := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "vllm:mm_cache_queries", Help: "Media items looked up in the multimodal cache.", ConstLabels: labels,
	}, func() float64 { q, _ := stats(); return float64(q) })
	hits := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "vllm:mm_cache_hits", Help: "Media items whose encoding the multimodal cache held.", ConstLabels: labels,
	}, func() float64 { _, h := stats(); return float64(h) })
	if err := reg.Register(queries); err != nil {
		return err
	}
	return reg.Register(hits)
}
