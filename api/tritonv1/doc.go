// Package tritonv1 serves the TensorRT Inference Server's original API
// (Triton before the V2 protocol, release v1.2.0; its protos are in
// tritonpb) over HTTP and gRPC, on the same models and the same core
// (api/v2/infer) as every other protocol:
//
//	GET  /api/health/live                 200 while the process serves (MountHealth)
//	GET  /api/health/ready                200 when every model is ready, else 503
//	GET  /api/status[/{model}]            ServerStatus, text protobuf (?format=binary: binary)
//	POST /api/infer/{model}[/{version}]   inference: NV-InferRequest header, raw tensors
//	gRPC nvidia.inferenceserver.GRPCService: Health, Status, Infer, StreamInfer, Profile
//
// It owns only the v1 wire forms: the NV-InferRequest header and the raw
// body, InferResponseHeader, RequestStatus, ServerStatus and ModelConfig.
// It must not serve a model itself: every inference becomes an
// infer.Request that infer.Run serves, which picks the model's kind
// (LLM, embedding, tensor model, ...). It never calls RunTensor or another
// kind's entry point, so a new kind of model works here unchanged.
//
// # Models as v1 sees them
//
// A model's ModelConfig is its Triton configuration (infer.TritonConfig:
// its config.pbtxt, or one made from its V2 metadata) converted to v1's
// message, which has the same field numbers: name, platform (an empty one
// is the V2 one: "llama.cpp", "onnx", "ggml"), version policy, inputs and
// outputs with their data_type (TYPE_STRING for BYTES) and dims. A
// tensor model batches: max_batch_size is the configuration's (the rows
// one request may carry), and dims leave out the batch dimension; a tensor with no dimension
// besides the batch is dims [1] with an empty reshape, as v1 configurations
// write it (an input takes dims [1] or none). Other models (LLMs, embedding
// models) have max_batch_size 0: their dims are their V2 shapes and their
// requests have batch_size 1. An LLM takes text_input (TYPE_STRING, dims
// [-1], one prompt per element) and returns text_output; its sampling
// settings are its optional inputs (max_tokens TYPE_INT32 [1], temperature
// TYPE_FP32 [1], ... as in api/v2/infer's doc), since InferRequestHeader
// has no parameters; without them the server's defaults apply (V2's:
// max_tokens 16, temperature 1).
//
// # Inference
//
// The NV-InferRequest header is a text InferRequestHeader: batch_size (at
// least 1; 1 for a model that does not batch, at most max_batch_size
// otherwise), the inputs (name, dims without the batch dimension, needed
// when the model's have a -1, and batch_byte_size, optional) and the
// outputs (raw, or cls { count: k } for the k highest values of each batch
// entry of a numeric output, as ClassificationResult idx and value, labels
// empty). The body holds each input's data in the header's order, in the
// model's datatype, little-endian; a TYPE_STRING element is a 4-byte
// little-endian length and its bytes. The body must be exactly the inputs'
// data; batch_byte_size, when given, must be exactly an input's. No
// outputs asked for means the model's default outputs, raw. id is echoed;
// correlation_id and flags (sequence batching) are ignored.
//
// The answer has the NV-InferResponse header (a text InferResponseHeader:
// model name and version, batch size, each output's raw dims and
// batch_byte_size or its classes, in the request's order), and the body
// holds the raw outputs' data in that order followed by the same
// InferResponseHeader, as text or, with ?format=binary, in binary.
// gRPC's Infer takes the header as meta_data and one raw_input per input;
// its answer has meta_data and one raw_output per output, in its order,
// empty for a classification, as v1.2.0's GRPCInferResponseProvider
// allocates them and its client reads them (raw_output(i) for output i).
// model_version 0 or -1 (gRPC) and the path without a version (HTTP) mean
// the version the model is served as. StreamInfer serves the requests of
// a stream one after the other and answers them in order; a failed
// request's answer has its status and, in meta_data, only its id.
//
// # Status
//
// ServerStatus holds the server's name and version, its uptime, ready
// state (SERVER_READY, or SERVER_INITIALIZING while a model is not ready)
// and, per model, its config and one ModelVersionStatus: ready_state,
// infer_stats from Options.Infer (success and failed counts and times),
// which every tensor protocol records into, and for a tensor model queue
// and compute times and model_execution_count / model_inference_count
// (batches, rows) from the model itself (models.TensorModel.Stats); an
// LLM's counts are its successful requests. The recorder counts requests,
// not batch sizes, so infer_stats has one entry, under batch size 1, for
// all of them. With Options.Repository the status lists every model of
// the repository, as v1.2.0 does: one not served (failed, loading,
// unloaded) has its state under its version (-1 when unknown), and asked
// for by name, its reason is the RequestStatus's msg (v1's status has no
// field for it).
//
// # Text format
//
// Every text protobuf the API writes (NV-Status, NV-InferResponse, the
// status, the response trailer) comes from marshalText: one fixed,
// deterministic form that Python's text_format and C++ TextFormat parse,
// non-ASCII bytes as octal escapes. Go's prototext is only used to read.
//
// # Errors
//
// Every answer carries a RequestStatus (HTTP: the NV-Status header, in
// text, errors included; gRPC: request_status, with an OK call). outcomeOf
// maps infer's error kinds in one place: INVALID_ARG (HTTP 400) for a bad
// or missing header, a byte count that does not match, an unknown input or
// output, dims the model does not take; NOT_FOUND (404) for an unknown
// model or version; UNAVAILABLE (503, 504 past the deadline) for a model
// that is not ready, a full queue, a server shutting down; INTERNAL (500).
// The message names the header, input, output or dimension at fault.
// HTTP errors repeat it as the text body. Refuse gives what the router
// refuses under /api/ (401 without the API key, 404, 405, a panic's 500)
// the same form. Profile answers UNSUPPORTED.
package tritonv1
