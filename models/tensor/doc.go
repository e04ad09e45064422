// Package tensor is the runtime for tensor models: classic models
// (classifiers, regressors, MLPs exported from scikit-learn or PyTorch)
// whose inputs and outputs are named, typed tensors with a leading batch
// dimension, served beside the LLMs through the same registry and routes.
//
// It owns the contract every tensor model meets (Spec, Tensor, Executor)
// and, in the files beside this one, loading model graphs (ONNX, GGUF)
// into an Executor that runs them through ggml, and serving them with
// adaptive batching and parallel workers.
//
// What it must not do: speak a wire protocol (api/ converts V2 and KServe
// V1 tensors to and from Tensor) or call cgo itself (engine/llamacpp is
// the one cgo package and executes the graphs).
package tensor
