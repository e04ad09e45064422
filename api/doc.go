// Package api assembles the HTTP surface: one chi router that mounts every
// protocol package (api/openai, api/catalog, api/anthropic, api/responses, api/v2,
// api/kservev1, api/tritonv1, api/dataplane),
// the health endpoints, /metrics, the chat page (api/webui), and the
// middleware every route shares: request ids, optional bearer-token auth,
// panic recovery, access logs and HTTP metrics (llmserve_http_* and
// MLServer's rest_server_*, whose path label is the route template with
// MLServer's parameter names, /v2/models/{model_name}/infer).
//
// It adapts the model registry (models) to what each protocol package
// declares it needs (V2Backend and V2Repository also serve the V2 gRPC
// service, and V2Backend Triton v1's GRPCService, that cmd/llmserve
// registers), so protocol packages never import
// models. It owns no
// model state and maps no protocol errors itself: each protocol package
// maps its own errors in one place.
//
// Routes mounted here:
//
//	GET /health             200 when every model is ready, else 503 (vLLM)
//	GET /v2/health/live     {"live": true} while the process serves (OIP)
//	GET /v2/health/ready    {"ready": true|false}, 200 or 503 (OIP)
//	GET /api/health/live    Triton's v1 probes: no body, 200, NV-Status
//	GET /api/health/ready   ... or 503 when not ready (see api/tritonv1)
//	GET /metrics            Prometheus text format (Options.MetricsPath; left out
//	                        with Options.NoMetricsRoute, when MetricsHandler
//	                        serves them on a port of their own)
//	GET /, GET /ui/...      the chat page, see api/webui (no API key needed)
//	/v1/...                 OpenAI API, see api/openai
//	GET /v1/models[/{m}]    the model list (OpenAI, Anthropic, Codex, KServe V1), see api/catalog
//	/v1/messages[...]       Anthropic's Messages, see api/anthropic
//	/v1/responses[...]      OpenAI's Responses and its store, see api/responses
//	/v2, /v2/models/...     Open Inference Protocol (V2) REST, see api/v2
//	/v2/repository/...      the model repository (Options.Repository), see api/v2
//	POST /v1/models/{m}:predict  KServe V1, see api/kservev1
//	GET /api/status[/{m}]   Triton's v1 status, see api/tritonv1
//	POST /api/infer/{m}[/{v}]  Triton's v1 inference (NV-InferRequest), see api/tritonv1
//	GET /v2/docs[...]       the OpenAPI document and Swagger UI, see api/dataplane (public)
//
// Readiness (/health, /v2/health/ready, /api/health/ready) is the
// registry's: with a model repository, as --strict-readiness says (see
// models.Repository).
//
// Options.OpenAI and Options.V2, when set, replace the registry's models
// on the inference routes and decide readiness: llmserve head serves its
// workers' model (head/router.Model) through them, with an empty
// registry that only tracks requests.
package api
