// Package models is the runtime layer: it loads models, sizes and starts
// each generative model's engine core, loads tensor models behind their
// batcher, and keeps the registry of served models by name.
//
// A Generative model owns, for its whole life: the llama.cpp model, the
// tokenizer and one core.EngineCore, which owns the scheduler, the KV
// manager and the llama.cpp context (built by a factory, so that the core
// can rebuild it after a failure). LoadGenerative checks a GenerativeConfig
// against the model (a bad setting is a *ConfigError naming it), sizes the
// KV memory (KV in host memory is paged by the binding: MaxNumSeqs streams
// of MaxModelLen positions are address space, and KVMemoryBytes caps the
// tokens running sequences hold, as the scheduler's KV token capacity; KV
// on a GPU is not: KVMemoryBytes caps MaxNumSeqs streams of MaxModelLen
// positions, lowering MaxNumSeqs to fit), logs what the caps hold, and
// returns once the engine core runs. Stop ends the requests still running; Close also frees the model.
//
// A TensorModel (tensormodel.go) is a classic tensor model: an .onnx file
// or a GGUF whose general.architecture is "llmserve.graph" (IsTensorFile;
// any other GGUF is an LLM), opened by the graph runtime (models/tensor,
// through OpenTensorExecutor) with TensorConfig.Threads split between its
// ParallelWorkers, behind a models/batching.Batcher (MLServer's
// max_batch_size, max_batch_time, parallel_workers). Its Infer takes
// inputs the API layer has checked against its Specs; Stop fails what is
// queued, Close also frees the graph. Its metrics are metrics.Tensor.
//
// A custom runtime model (models/runtime) is MLServer's extension point
// as child processes: a repository folder whose model-settings.json names
// an implementation that is a command line (not llmserve or llama.cpp),
// or a Python class path as MLServer writes it (run with runtimes/python,
// runtime.Command), is started with /bin/sh -c in its folder, parallel_workers times, each
// serving the Open Inference Protocol's gRPC service on a Unix socket of
// its own; llmserve supervises them (restart with backoff, output to the
// log with the model's name), batches requests in front of them
// (max_batch_size, max_batch_time; every V2 datatype) and bounds each
// request by request_timeout. Its V2 metadata is the settings' inputs,
// outputs and platform. A command that exits or never answers fails the
// load, and the index's reason quotes its exit status and last output.
//
// The Registry holds every kind under one namespace (Get and List for
// generative models, GetTensor and ListTensors for tensor ones,
// GetRuntime and ListRuntimes for custom runtimes) and answers readiness
// for the health routes: ready when every model is (a generative model's
// engine core, a tensor model until it is closed, a custom runtime while
// one of its processes answers), and not draining (shutdown). Remove takes a generative model out at run
// time (new lookups miss it at once); the repository removes either kind.
//
// A Repository (repository.go) is a model repository on disk in Triton's
// layout (DIR/<name>/<version>/*.gguf or *.onnx, the highest version
// served; a tensor file is a TensorModel, with the batching settings) with
// MLServer's model-settings.json (ReadSettings: MLServer's names plus the
// LLM settings, unknown keys an error naming them; an implementation
// command makes a custom runtime, which needs no model file), laid over a base
// GenerativeConfig, or with Triton's config.pbtxt (tritonconfig.go: text
// protobuf of Triton's ModelConfig, proto/tritonconfigpb; each field mapped
// onto a TensorConfig or a GenerativeConfig, a field llmserve cannot
// honour a load error naming it; a tensor model's input and output are
// checked against the model once it is open, and the completed
// configuration is what TritonConfig reports). One repository may mix the
// two kinds of folder. Load and Unload work by name at run time, one at a
// time per model (ErrBusy otherwise): Load reloads a loaded model, and a
// model that fails is a *LoadError whose message the index shows as the
// reason, the others untouched; Unload removes the model from the
// Registry, waits for its running requests to finish and for the requests
// that began before (Registry.Enter, which the API layer calls for every
// HTTP request and V2 gRPC call) to end, as any may still hold the model
// (up to DrainTimeout, then it cuts them; once the model is idle, at most
// 10 s more), closes it and unregisters its metrics. Index lists the
// folders with Triton's states. With a Repository the Registry's
// readiness is the repository's: strict (every model READY) or, by
// default, up.
//
// LoRA adapters (lora.go) are served as models of their own: an Adapter
// answers to its name with its base model's tokenizer and limits, and
// submits to the base's engine core with scheduler.Request.Adapter set.
// They load with the model (GenerativeConfig.LoRAs; lora_adapters in
// model-settings.json) or at run time (Registry.LoadAdapter, behind the
// API's --enable-lora-runtime-updates); either builds the model's contexts
// for adapters. A name is unique among models and adapters. An adapter
// file llama.cpp refuses is an *AdapterError naming it. Unloading stops
// new requests at once; the engine frees the adapter after the last
// sequence that uses it.
//
// The default model, stories260K, is embedded (models/stories260k) so that
// `llmserve serve` works with no arguments.
//
// What this package must not do: speak a wire protocol (api/ does), make
// scheduling decisions (scheduler/ does) or drive steps (core/ does).
package models
