// Package runtime runs custom runtimes: MLServer's extension point (a
// model class with load, predict and unload) as child processes that
// serve the Open Inference Protocol's gRPC service, fronted by llmserve.
//
// # The process contract
//
// Start runs Config.Command with /bin/sh -c in the model's folder,
// Config.Workers times (MLServer's parallel_workers), each in a process
// group of its own (on Linux it is killed if llmserve dies). Each process
// finds in its environment:
//
//	LLMSERVE_RUNTIME_SOCKET   the Unix socket to serve on (one per process)
//	LLMSERVE_MODEL_NAME       the model's name
//	LLMSERVE_MODEL_VERSION    its version
//	LLMSERVE_MODEL_SETTINGS   the path of its model-settings.json
//	LLMSERVE_RUNTIME_WORKER   its index among the workers, from 0
//	LLMSERVE_PARENT_PID       llmserve's process id: exit when it is gone
//
// and must serve inference.GRPCInferenceService (the Open Inference
// Protocol's proto) on the socket: ServerReady, ModelReady (for the
// model's name; Unimplemented counts as ready) and ModelInfer; and may
// serve ModelStreamInfer (KServe's and Triton's form, for InferStream).
// It may also serve llmserve.runtime.v1.RuntimeMetrics/Metrics
// (MetricsMethod, runtimes/proto/llmserve_runtime.proto) with its own
// metrics in Prometheus' text format, and
// llmserve.runtime.v1.RuntimeInfo/ContentTypes (ContentTypesMethod) with
// the content types its own codecs decode, which ContentTypes adds to the
// settings' (asked once each process is ready). Any language works;
// runtimes/python is the Python package that does all of this for a
// class, and gives MLServer's runtimes their imports (package mlserver).
// An implementation written as MLServer writes it, a Python class path,
// is run by Command as PythonCommand with the class.
//
// # Lifecycle
//
// Start returns once every process answered ServerReady and ModelReady
// (polled every 50 ms, up to StartTimeout); if one exits first or the time
// passes, Start stops them all and the error says why: the exit status
// and the last 20 lines the process wrote. Every line a process writes on
// stdout or stderr goes to the log with the model's name and the worker.
// A process that dies later is restarted after a backoff (100 ms,
// doubling up to 10 s, reset once it ran healthy for 30 s); until it
// answers again it takes no requests, and Ready is false while no process
// is ready. Close sends SIGTERM to each process group, SIGKILL after
// StopGrace, and removes the sockets.
//
// # Requests and adaptive batching
//
// Infer takes a ModelInferRequest (inputs in raw_input_contents, or typed
// contents, which it converts) and gRPC metadata, and returns the answer
// (outputs always in raw_output_contents) and the headers the runtime sent
// back (initial and trailing metadata). Metadata and headers go through
// Headers: lowercased, transport keys (content-type, grpc-*, ...) and
// Authorization dropped, values gRPC cannot carry dropped.
//
// With MaxBatchSize > 1, concurrent requests are merged as MLServer's
// adaptive batcher does: their inputs concatenated along the first
// dimension into one ModelInfer call of at most MaxBatchSize rows, sent
// when full or MaxBatchTime after its first request, and every output of
// the answer cut back into each request's rows (an output whose first
// dimension is not the batch's rows is an error). Only requests that
// agree on everything but their rows are merged: the same input names,
// datatypes, dimensions after the first and parameters, the same request
// parameters and the same requested outputs; a request that differs, or
// has more rows than a batch, or inputs without a common first dimension,
// runs alone. Each kind of request has its own open batch, so requests
// of another kind in between do not cut a batch short. The merged call carries the first request's id and the
// union of the requests' headers (a later request's value wins, as
// MLServer merges parameters), and the headers the runtime returns go
// back to every request of the batch. This batcher is ours rather than
// models/batching's: that one batches models/tensor values (FP32 and
// INT64 only) for the graph runtime, while a runtime takes every V2
// datatype, BYTES included, as the client sent it, so merging here is
// byte concatenation on the wire form.
//
// The batches go to one executor per process, which takes a batch only
// while its process is ready. Config.RequestTimeout bounds each request
// from Infer to its answer, queueing included. The call to the runtime
// ends when every request of its batch has gone (timed out or
// cancelled), so a hung runtime holds its process only that long.
//
// # Streams
//
// InferStream sends one request to a ready process's ModelStreamInfer
// (in Python, the model's predict_stream), closes its side and hands each
// response to the caller as it arrives, the runtime's headers with the
// first; a runtime that answers Unimplemented gets the request through
// Infer instead. Streams bypass the batcher and take the processes in
// turn; request_timeout bounds the whole stream.
//
// # Errors
//
// Every error for a client is an *Error naming the model; its Kind says
// what happened: ErrUnavailable (the process died, or stopped answering,
// while serving the request; HTTP 503), ErrTimeout (request_timeout;
// 504), ErrBadAnswer (a malformed answer: outputs that do not match
// their datatype and shape, or a batch answer of the wrong rows; or an
// error the runtime raised; 500), ErrInvalid (the runtime answered
// INVALID_ARGUMENT; 400), ErrClosed (unloaded or stopping; 503). Nothing
// a runtime does reaches beyond its own requests.
//
// # Metrics
//
// Collector exposes the runtime's own metrics on llmserve's registry,
// asked for at every scrape, with model_name, model_version and worker
// labels added; names under llmserve's prefixes (vllm:, llmserve_,
// model_infer_, ...) are dropped so that a runtime cannot break a scrape.
//
// This package imports no cgo and knows no HTTP: the API layer
// (api/v2/infer's runtime model) converts the protocols' requests.
package runtime
