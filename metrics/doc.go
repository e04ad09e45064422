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
// # MLServer's metrics
//
// Beside them, MLServer's names, so that its dashboards work:
//
//   - Infer (infer.go): model_infer_request_success_total,
//     model_infer_request_failure_total and the Summary
//     model_infer_request_duration {model, version}, as MLServer's
//     dataplane exports them (its docs name them otherwise), one count
//     per V2 infer (REST and gRPC, a stream's requests one by one) and
//     KServe V1 predict, on every kind of model; the protocols record
//     into it (api/v2/infer.Observe). Triton v1's status statistics read
//     the same counts (Snapshot).
//   - Tensor's batch_request_queue and parallel_request_queue
//     {model_name, model_version}: histograms of the batcher's queue and
//     of the requests its parallel workers run, observed as each request
//     arrives (the batcher's Observer.Arrived).
//   - REST (server.go): rest_server_requests_total,
//     rest_server_request_duration_seconds {method, path, status_code,
//     app_name} and rest_server_requests_in_progress {method, app_name},
//     the names MLServer's REST server really exports (starlette_exporter
//     with the prefix rest_server); api's middleware records them, with
//     the route template as path (/v2/models/{model_name}/infer).
//   - NewGRPCServer: the gRPC server metrics of
//     github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus,
//     the names py-grpc-prometheus gives MLServer (grpc_server_started_total,
//     grpc_server_handled_total, grpc_server_msg_received_total,
//     grpc_server_msg_sent_total, grpc_server_handling_seconds); its
//     interceptors go on the public gRPC server (cmd/llmserve).
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
