// Package metrics owns the names of the Prometheus metrics llmserve
// exports. Engine metrics use vLLM's names (vllm:num_requests_running,
// vllm:kv_cache_usage_perc, vllm:time_to_first_token_seconds, ...) and its
// model_name label, so that the Gateway API Inference Extension, llm-d and
// existing vLLM dashboards work unchanged; what vLLM has no name for is
// llmserve_*.
//
// The package registers collectors on an injected prometheus.Registerer and
// implements scheduler.Observer. Gauges and cumulative counters that the
// scheduler already keeps (running, waiting, KV usage, prefix-cache
// queries and hits, preemptions) are read from its published snapshot at
// scrape time rather than mirrored. It must not import anything that does
// inference: it only observes.
package metrics
