// Package v2 serves the Open Inference Protocol (KServe V2) over REST,
// with Triton's binary tensor data, generate and model configuration
// extensions:
//
//	GET  /v2                                          server metadata
//	GET  /v2/models/{m}[/versions/{v}]                model metadata
//	GET  /v2/models/{m}[/versions/{v}]/ready          model readiness
//	GET  /v2/models/{m}[/versions/{v}]/config         Triton's model configuration (JSON ModelConfig)
//	POST /v2/models/{m}[/versions/{v}]/infer          inference (tensors)
//	POST /v2/models/{m}[/versions/{v}]/generate       Triton's generate
//	POST /v2/models/{m}[/versions/{v}]/generate_stream  the same as SSE
//	POST /v2/models/{m}[/versions/{v}]/infer_stream     MLServer's streamed infer
//
// MountRepository adds Triton's model repository extension
// (/v2/repository/index, /v2/repository/models/{m}/load and /unload) over
// an infer.Repository. The health probes (/v2/health/live,
// /v2/health/ready) stay with the router in api. A model is served as
// version "1", or as its model repository version (infer.VersionOf);
// another version, like an unknown model, is a 404. The protocol-independent work (tensors,
// the LLM's inputs and outputs, generation, error kinds) is api/v2/infer's,
// shared with the gRPC service in api/v2/grpc; this package only decodes
// and encodes the REST wire form.
//
// # infer
//
// The body is the V2 inference request as JSON. With the binary tensor
// data extension, the header Inference-Header-Content-Length gives the
// length of the JSON part and binary tensor data follows it: an input
// with parameter binary_data_size takes that many bytes, in input order;
// they must add up to the rest of the body exactly (a short or long body
// is a 400 that says so). BYTES elements are a 4-byte little-endian length
// and the bytes. An output with "binary_data": true, or every output when
// the request has "binary_data_output": true (an output's own setting
// wins), is returned the same way: the response is the JSON header with
// binary_data_size on those outputs, then their bytes, with
// Inference-Header-Content-Length set. A header length of 0 is the raw
// binary request: the whole body is text_input (one element, with or
// without the length prefix) and every output is binary. The request "id"
// is echoed. The body is read into one buffer of its Content-Length,
// placed so that the binary data starts 8-byte aligned (FP32 inputs then
// reach a tensor model without a copy); a tensor model's request takes the
// buffer from a pool and gives it back once answered (bodypool.go).
//
// Inputs, outputs and the request may carry MLServer's content types
// (parameters.content_type: str, base64, np, pd, datetime), which
// api/v2/infer applies (the decoder of the model's kind) for REST and
// gRPC alike; every
// output of the answer carries its content_type. Options.Infer counts
// infer and infer_stream requests (MLServer's model_infer_request_*).
//
// # generate and generate_stream
//
// The body is Triton's {"id", "text_input", "parameters"}; other top-level
// fields are parameters too (a key in "parameters" wins). The answer is
// {"id", "model_name", "model_version", "text_output"}, plus the OIP
// generate extension's "details" ({"finish_reason", "logprobs": [{"id",
// "text", "logprob", "special"}]}) when the parameter details (or chat's
// logprobs) is true; top_logprobs n adds each token's n most likely
// alternatives ("top_logprobs": [{"id", "text", "logprob"}]). A model with
// a reasoning parser takes thinking_token_budget and answers its thinking
// as "reasoning_content" apart from text_output, as chat does.
// generate_stream answers text/event-stream: one "data: {...}" event per
// generated token holding that token's text (with details, its
// {"token"} and, on the last event, its "finish_reason"), and no [DONE].
// An error before the first event is a JSON error with its status; after
// it, a "data: {"error": "..."}" event ends the stream. A client that goes
// away frees its sequence within one engine step.
//
// # infer_stream
//
// MLServer's: a JSON inference request (no binary data) on a generative
// model, answered as SSE with one inference response per generated token
// (text_output [1] with the token's text; parameters "index", and
// "finish_reason" on a prompt's last event); errors as generate_stream's.
// On a custom runtime it is the runtime's predict_stream
// (infer.RunRuntimeStream): one event per response it yields, JSON data.
// A tensor model is served by infer alone: generate, generate_stream and
// infer_stream refuse it with a 400.
//
// # Models through interfaces, and no cgo
//
// The V2 family (this package, api/v2/infer, api/v2/grpc, and beside
// them api/kservev1 and api/tritonv1) reaches the models only through
// the interfaces api/v2/infer declares, one per kind of model (infer.LLM,
// infer.Embedder, infer.TensorModel, infer.RuntimeModel; infer.KindOf
// tells them apart, infer.Run dispatches by it), and names tensors and
// datatypes with package oip. None of them imports models/: the router in
// package api (v2backend.go) and cmd/llmserve wire the registry's
// concrete models to those interfaces. So none of them links llama.cpp:
// they build with CGO_ENABLED=0 (CGO_ENABLED=0 go build ./api/v2/...),
// and go list -deps shows no engine/llamacpp under them. Why it matters:
//
//   - Each kind has its own methods, not stubs of the LLM's: a tensor
//     model has no tokenizer to return and no sequence to submit, and a
//     stub that refuses at run time is a check the compiler could do.
//   - The protocol code is tested with the race detector (make
//     test-pure), which the packages that link llama.cpp cannot be: it
//     would instrument llama.cpp too. The Makefile decides by the test
//     binary's dependencies (go list -test), so a package that stops
//     reaching engine/llamacpp gets -race without a list to keep.
//   - A protocol change rebuilds and tests in seconds, without cgo or
//     the C toolchain.
//
// # Errors
//
// Every error is {"error": "<message>"}; status maps infer's error kinds
// through infer's Code.HTTPStatus to 400 (bad input), 404 (unknown model
// or version), 503 (not ready, shutting down), 429 (queue full, with
// Retry-After), 504 (deadline) and 500, and a body over
// Options.MaxBodyBytes to 413, in one place.
package v2
