// Package tests holds end-to-end tests: the real embedded model served by
// the real router on a loopback HTTP server, driven by HTTP, by the
// go-openai client, and through the chat page in headless Chromium
// (webui_test.go, which fails, not skips, without a chromium binary; `make
// test` installs it). The V2 tests (v2_*_test.go) drive the REST routes
// with raw HTTP, the gRPC service with grpc-go against the generated
// proto, and grpcurl through reflection (v2_grpcurl_test.go, which fails
// without the pinned grpcurl; `make test` installs it with `make
// grpcurl`). v2_repository_test.go serves a model repository (load,
// unload while a stream runs, reload, corrupt GGUFs, strict readiness over
// REST and gRPC); kservev1_test.go drives KServe V1, the V2 embed task and
// infer_stream. head_test.go runs `llmserve head` with `llmserve worker`
// processes on loopback (built once, as pd_test.go does): two workers, a
// prefill and a decode worker, a worker killed or shut down mid-stream,
// prefix-aware routing, a worker that dies and comes back, compared with
// one `serve` process; head_kill_test.go kills a worker while the other
// starts, and a prefill worker mid-transfer (every stream ends with serve's
// text or the no-worker error, never the shutdown one), and starts a
// worker after the head. tensor_test.go serves tensor models (an ONNX MLP with
// known weights written by the runtime's ONNX writer, the same graph as a
// GGUF, one with an unsupported operator) from a repository and checks
// every protocol against a pure-Go reference, adaptive batching (32
// concurrent requests in one run, each bit-identical to its run alone),
// bad inputs and the OpenAI routes' refusal. runtime_test.go serves custom
// runtimes (the example NumPy model, a real /usr/bin/python3 process on
// runtimes/python; it fails, not skips, without python3-grpcio, -numpy and
// -protobuf) from a repository beside an LLM: V2 REST JSON and binary, V2
// gRPC, KServe V1, headers both ways, 32 concurrent requests over REST and
// gRPC in one predict call, the runtime's own metrics, unload and reload,
// and runtimes that crash mid-request, hang past request_timeout, answer
// malformed tensors or never start. triton_repo_test.go serves a Triton
// user's repository (config.pbtxt: an ONNX model with dynamic_batching and
// instance_group, a GGUF LLM, a config llmserve refuses, beside a
// model-settings.json folder) over V2 and Triton v1, driven by a Python
// port of the official v1 client's calls (testdata/tritonv1_client.py on
// /usr/bin/python3; it fails, not skips, without python3-grpcio and
// -protobuf). mlserver_runtime_test.go serves
// runtimes written as MLServer's docs write them (runtimes/python/
// examples/mlserver_model, unchanged, "implementation": "models.SumModel";
// it also needs python3-pandas) over V2 REST infer and infer_stream, V2
// gRPC ModelInfer and ModelStreamInfer and KServe V1, with MLServer's
// payloads (null as NaN, a bare string, a runtime codec's content type)
// and its request metrics. scripted_test.go puts the engine double
// enginetest.Scripted under the real model (scripted(cfg, script)): the
// model answers what a test scripts, a tool call say, through the real
// API path, as the agent tests' tool loops need. generic_tools_test.go
// drives the generic tool format of templates without tool support on the
// embedded model with go-openai and, through tests/node/generic_tools.cjs,
// the official Anthropic and OpenAI node SDKs (Messages, Responses): token
// counts with tools, a call forced by tool_choice, and the auto mode's
// round trip with the model scripted. codex_test.go runs the real Codex
// CLI (`codex exec`, installed by `make agent-clis`, found through
// LLMSERVE_AGENT_CLIS; skipped, saying so, without it) against the
// Responses API through a three-turn tool loop on such a model,
// claude_code_test.go the real Claude Code (`claude -p`, the same way) over
// the Messages API, printing an answer and through a three-turn Read tool
// loop, and
// agents_shapes_test.go records the shapes of the requests an agent CLI
// sent in testdata/agents/<cli>/*.golden (-update rewrites them). They
// assert what a user sees (exact greedy tokens, usage, errors, metrics),
// not internals.
package tests
