// Package infer is the protocol-independent core of the Open Inference
// Protocol (V2) that api/v2 (REST) and api/v2/grpc (gRPC) share: tensors,
// parameters, model lookup and metadata, the LLM's inputs and outputs,
// generation, and the error kinds. The protocols only decode their wire
// form into a Request (or a generate body into Parameters) and encode what
// comes back; nothing here knows HTTP or gRPC.
//
// # Tensors
//
// A Tensor holds its elements in one canonical form: Raw (little-endian,
// row-major, BOOL as one byte 0 or 1) for the fixed-size datatypes, Bytes
// (one slice per element) for BYTES. That is the binary tensor data
// extension's and gRPC raw_input_contents' form as it comes, so binary
// input costs no conversion. SetJSONData reads REST's "data" (flat, or
// nested exactly as the shape; every value checked against the datatype: no fractions
// for integers, no overflow, FP16 rounded to nearest even, magnitude at
// most 65504), JSONData writes it back flat. Check verifies the shape
// (non-negative dimensions, at most MaxElements) against the data.
// Parameters holds V2 parameters (string, bool, int64, uint64, float64).
// ConvertInputs hands a tensor model FP32 data without a copy where the
// host allows it (little-endian, the bytes 4-byte aligned): the model's
// []float32 shares the request's Raw, which must not change until the
// model has run; FromTensor gives outputs' memory as their Raw the same
// way. BufferPool holds the reusable buffers both transports read a
// tensor request's bytes into (the REST body, the gRPC message).
//
// # Models
//
// A served Model (a name and readiness) is of one of four kinds, each
// with an interface of its own that holds its kind's methods and no
// stubs of another's (kind.go). KindOf decides the kind, in this order:
//
//	KindRuntime    RuntimeModel (runtimemodel.go): a custom runtime
//	KindTensor     TensorModel (tensormodel.go): an ONNX or graph GGUF model
//	KindEmbedding  a model whose Task method says "embed" (embed.go)
//	KindLLM        LLM (model.go): a generative model
//
// Run serves an inference request by the kind (RunRuntime, RunTensor,
// RunEmbed, RunLLM); the protocols' streams and generate take an LLM
// from AsLLM, whose error says what the model is instead. Tensor models
// and custom runtimes share a Signature (AsSignature): their declared
// inputs and outputs, which their metadata, Triton configuration and
// KServe V1 instances follow. The protocols reach the models through
// these interfaces only: api (v2backend.go) adapts the registry's
// concrete models, and nothing here imports models/, so this package and
// its protocols build without cgo.
//
// RunTensor checks and converts a tensor model's inputs (ConvertInputs:
// every error Invalid and naming the input; FP32 inputs take FP16, FP64
// and integers exact in FP32, INT64 inputs any integer type) and returns
// the outputs asked for; its metadata is its graph's (platform "onnx" or
// "ggml", inputs and outputs from its Specs).
//
// A generative LLM has platform "llama.cpp" and is served as
// version "1" (ModelVersion) or as its Version method says (VersionOf; the
// model repository's version folder). An embedding model's infer takes
// text_input (BYTES [n]) and returns embedding (FP32 [n, dim], rows
// L2-normalized); AsLLM (generate) refuses it. EmbedTexts is shared with
// KServe V1's predict (api/kservev1), which embeds with any Embedder.
// Repository is the model repository extension's view of the server's
// repository. An LLM's V2 signature follows Triton's vLLM backend:
//
//	inputs:  text_input BYTES [-1]           one prompt per element (required)
//	         stream BOOL, sampling_parameters BYTES (a JSON object),
//	         exclude_input_in_output BOOL, max_tokens, min_tokens, top_k INT32,
//	         temperature, top_p, min_p, repetition_penalty, presence_penalty,
//	         frequency_penalty FP32, seed UINT64, ignore_eos BOOL,
//	         stop BYTES [-1], return_finish_reason, return_num_input_tokens,
//	         return_num_output_tokens, return_cumulative_logprob BOOL
//	                                         (all optional, shape [1] unless noted)
//	outputs: text_output BYTES [-1]          the generated text, one per prompt
//	         finish_reason BYTES, num_input_tokens INT32, num_output_tokens INT32,
//	         cumulative_logprob FP32         one per prompt
//
// A model with a reasoning parser (ReasoningParserOf) also takes
// thinking_token_budget INT32 and return_reasoning_content BOOL, and
// produces reasoning_content BYTES (its thinking; text_output is then the
// answer alone); its metadata lists them. Any LLM request may name them:
// the budget is Invalid for a model without a parser, its
// reasoning_content is empty. A model with a vision projector (MediaModel)
// also takes image BYTES [-1] (image.go): encoded images beside one prompt,
// each where the prompt holds media.Marker (all in front without it); the
// generate parameter image carries the same as base64 or data: URLs.
//
// Generation turns outputs into text through the output processor every
// protocol shares (frontend.Output): detokenization, stop strings and stop
// tokens, reasoning split from the answer, logprobs, the finish reason
// (named here: eos_token, length, stop_sequence) and the token counts.
//
// The optional inputs take any datatype of their kind (an integer input
// any integer type, a float input any numeric type). Without requested
// outputs only text_output is returned; the others when asked for by name
// or, as in Triton's vLLM backend, with their return_* flag.
// An unknown input or output name, a wrong datatype or a shape that does
// not match the data is Invalid.
//
// Generation settings come from, later winning: the request's parameters,
// the keys of the sampling_parameters JSON, and the optional input
// tensors. ParseParams reads them with vLLM's names; max_tokens defaults
// to 16 (vLLM's default, which Triton's vLLM backend uses) and temperature
// to 1. Ranges are the engine's: engine.Sampling.Validate is the one range
// check, and its *engine.RangeError is mapped to the parameter's name.
// Capacity (prompt plus max_tokens against the context, the waiting
// queue) is the scheduler's, mapped in AsError.
//
// # Content types
//
// MLServer's content types (contenttype.go): parameters.content_type on
// the request, an input or a requested output names the codec that
// decodes it. str: BYTES elements are UTF-8 text (checked); base64: BYTES
// elements are base64, decoded to their bytes before the model sees them;
// np: a plain tensor; pd (request only): every input a column of one
// table, all with the same rows, a tensor model's inputs matched by name
// and an LLM's text_input the prompts (its other columns one value on
// every row); datetime: ISO 8601 dates or date-times (checked; the forms
// Python's datetime.fromisoformat reads in the extended format). An
// input's own content type wins over the request's; a request-level str
// applies to the BYTES inputs without one. Unknown content types, and
// base64, datetime on a request or pd on an input, are Invalid with the
// known ones listed. They are checked once per request, by the decoder
// of the model's kind, which each request reaches once through Run or a
// stream; the protocols never apply them:
//
//   - DecodeLLM, RunEmbed and ConvertInputs check and decode in place
//     (applyContentTypes: base64 inputs become their bytes).
//   - RunRuntime uses CheckContentTypes(r, known...): the same checks,
//     changing nothing, for a model that gets the request as the client
//     sent it and decodes it with codecs of its own (a custom runtime);
//     known are content types that model's codecs add, passed unchecked
//     (a runtime's settings name them, or the runtime reports its
//     codecs').
//
// EncodeResponse puts content_type on every output as MLServer's encoders
// do (str for BYTES, np otherwise, or what the request asked for the
// output: base64 encodes a BYTES output), and pd on a response to a pd
// request; RunLLM, RunEmbed and RunTensor call it, and the streams call it
// per response.
//
// # Metrics
//
// Observe records one inference request in metrics.Infer (MLServer's
// model_infer_request_success and _failure): the protocols call it for
// V2 infer over REST and gRPC (each request of a stream) and KServe V1.
//
// # Generation
//
// Start tokenizes the prompts (with BOS, as /v1/completions) and submits
// them all or none; Run hands out one Delta per generated token, in order
// per prompt, with the text it added after incremental detokenization and
// stop strings; the last Delta has the finish reason in the generate
// extension's names: "length", "eos_token", "stop_sequence". Collect runs
// to the end. Close cancels what still runs, which frees the sequences
// within one engine step: callers defer it, so a client that goes away
// (its context ends) frees its sequence.
//
// # Errors
//
// Every error for a client is an *Error with a Code; AsError maps the
// scheduler's, the core's and the context's errors to one. A Code's HTTP
// status is Code.HTTPStatus, for both REST protocols (V2 and KServe V1:
// 400, 404, 503, 429, 504, 499, 500); gRPC maps a Code to its status code
// in api/v2/grpc (INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE,
// RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, CANCELLED, INTERNAL).
package infer
