// Package graph is the intermediate representation of a tensor model: a
// list of operator nodes over named values, F32 (and INT64) constant
// initializers, and named graph inputs and outputs whose first dimension is
// the batch. Loaders (models/tensor: ONNX, GGUF) build a Graph; the
// executor (engine/llamacpp) compiles it to ggml; Eval computes it in pure
// Go, as the reference the executor is tested against.
//
// # Conventions
//
// Shapes are numpy order (row-major, last dimension fastest), as in ONNX.
// Dimension 0 of every graph input, of every output and of every value
// computed from an input is the batch: Batch (-1) in a Graph's shapes,
// the actual row count at run time. Constants have fixed shapes and no
// batch. Every operator works row by row: row i of every value depends
// only on row i of the inputs, which the executor relies on to merge
// requests into one batch.
//
// Operators and attributes follow the ONNX operator set (opset 13 and
// later; Softmax's older flatten-at-axis meaning is kept for opsets before
// 13). Check validates a graph and infers every value's shape; an
// operator the package does not know fails with an *Error whose Err is
// ErrUnsupported.
//
// The package is pure Go and imports nothing from models/ or api/.
package graph
