// Package metrics owns the names of the Prometheus metrics llmserve
// exports. Engine metrics use vLLM's names (vllm:num_requests_running,
// vllm:kv_cache_usage_perc, vllm:time_to_first_token_seconds, ...) and its
// model_name label, so that the Gateway API Inference Extension, llm-d and
// existing vLLM dashboards work unchanged; what vLLM has no name for is
// llmserve_*.
//
// Tensor models (tensor.go) have no vLLM counterpart: their metrics are
// llmserve_tensor_requests_total{model,outcome},
// llmserve_tensor_batch_size (rows per run, adaptive batching),
// llmserve_tensor_request_duration_seconds and
// llmserve_tensor_queue_time_seconds, with llmserve_model_ready as for the
// LLMs. Tensor implements the batcher's observer.
//
// The package registers collectors on an injected prometheus.Registerer and
// implements core.Observer. Gauges and cumulative counters that the
// scheduler and KV manager already keep (running, waiting, KV usage,
// prefix-cache queries, hits, bytes and evictions, preemptions) are read
// from the engine core's published snapshot at scrape time rather than
// mirrored. The snapshot is published before a step's outputs reach their
// clients, so a scrape after a response never sees the request running. It must not import anything that does
// inference: it only observes.
package metrics
