// Package v2grpc serves the Open Inference Protocol (KServe V2) over gRPC:
// Triton's inference.GRPCInferenceService (inferencepb, generated from
// Triton's grpc_service.proto, a wire-compatible superset of the OIP
// proto), on the same models and the same core (api/v2/infer) as the REST
// routes in api/v2.
//
//	ServerLive, ServerReady, ServerMetadata
//	ModelReady, ModelMetadata           NOT_FOUND for an unknown model or a version it is not served as
//	ModelConfig                         Triton's ModelConfig (infer.TritonConfig): the model's
//	                                    config.pbtxt, or one made from its metadata
//	ModelInfer                          one inference to the end
//	ModelStreamInfer                    many requests on one bidirectional stream
//	RepositoryIndex                     the model repository's models with state and reason
//	                                    (without Options.Repository: the served models)
//	RepositoryModelLoad, ...Unload      with Options.Repository: load (INVALID_ARGUMENT
//	                                    with the load error) and drain-then-unload
//
// The other RPCs of Triton's service (model statistics, shared
// memory, tracing, logging), and load and unload without a repository,
// answer UNIMPLEMENTED. Register adds the service and server reflection, so
// grpcurl and other tools work without the proto files.
//
// # Tensors
//
// Inputs come either in their typed contents field (bool_contents for
// BOOL, int_contents for INT8-INT32, int64_contents, uint_contents for
// UINT8-UINT32, uint64_contents, fp32_contents, fp64_contents,
// bytes_contents) or, for every input at once, in raw_input_contents (the
// binary tensor form: little-endian, BYTES elements with a 4-byte length
// prefix; FP16 only this way). Data in the wrong field, a value that does
// not fit its type, or a shape that does not match the data is
// INVALID_ARGUMENT naming the input. The answer uses the same form as the
// request: raw_output_contents for raw inputs, typed contents otherwise.
// The LLM's inputs, outputs and parameters are infer's (see its doc);
// sampling settings go in the request's parameters or as input tensors. A
// tensor model's inputs are its graph's (infer.RunTensor checks and
// converts them).
//
// Content types (parameters.content_type as a string_param on the
// request, an input or a requested output) are api/v2/infer's, the same
// as over REST; every output of an answer carries its content_type.
// Options.Infer counts ModelInfer calls and each request of a stream
// (MLServer's model_infer_request_*).
//
// # Large raw requests
//
// ServerCodec is the server option serve installs (grpc.ForceServerCodecV2:
// protobuf, as grpc-go's own codec, for every message). A ModelInferRequest
// of 32 KiB or more is copied once out of its HTTP/2 frames into a reused
// buffer, placed so that the first raw_input_contents entry is 8-byte
// aligned, and its raw_input_contents are views of that buffer instead of
// protobuf-go's copies (which it makes of every bytes field, whatever the
// unmarshal options): an FP32 input then reaches the model where it lies.
// The handler gives the buffer back once a tensor model has answered the
// request (its Run keeps no input) and the response holds no slice of it;
// any other outcome leaves it to the garbage collector, and so does a call
// whose handler never ran (the request's entry goes with the request). A
// server without the option serves the same answers with protobuf-go's
// copies (codec.go).
//
// # ModelStreamInfer
//
// Each request on a stream runs in its own goroutine; responses go out as
// they are produced and carry the request's id. An LLM request streams by
// default (parameter or input "stream" false asks for one response): one
// response per generated token with that token's text in text_output, the
// last with the parameter triton_final_response true (Triton's decoupled
// final-response marker). A streamed request takes one prompt. A request
// to a tensor model gets one response, marked final; one to a custom
// runtime each response its predict_stream yields (infer.RunRuntimeStream),
// the last marked final (each sent once the next is known). A request
// that fails (unknown model, bad input, an error while generating) gets
// one response with error_message set and its id, also marked final; the
// stream stays open for the others. The call returns once the client
// closed its side and every request was answered. Cancelling a call
// (ModelInfer or ModelStreamInfer) cancels its requests, which frees their
// sequences within one engine step.
//
// # Status codes
//
// statusOf maps infer's error kinds, in one place: INVALID_ARGUMENT (bad
// input), NOT_FOUND (unknown model or version), UNAVAILABLE (not ready,
// shutting down), RESOURCE_EXHAUSTED (the waiting queue is full),
// DEADLINE_EXCEEDED, CANCELLED and INTERNAL.
package v2grpc
