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
// Graph inputs are F32 or I64 (token ids, attention masks); I64 values
// that depend on an input are only gathered with (Gather on a constant
// table, an embedding lookup), compared (Equal), reshaped, expanded and
// cast (to F32 or BOOL). Booleans (Equal's result, Cast to BOOL, Where's
// condition) are I64 0 and 1.
//
// Operators and attributes follow the ONNX operator set (opset 13 and
// later, with the older attribute forms of Softmax, ReduceMean/ReduceSum,
// Unsqueeze/Squeeze, Slice and Clip read too; Gelu is opset 20's). Check
// validates a graph and infers every value's shape; an operator the
// package does not know fails with an *Error whose Err is ErrUnsupported
// and whose message lists Ops.
//
// Constant folding: Check computes every node whose inputs are constants
// (exporters transpose weights and build Reshape targets in the graph)
// and replaces it with a constant. Shape of a batched value folds too:
// its batch entry is BatchDim, which Gather, Slice, Concat, Unsqueeze,
// Squeeze and Where move around like any value, Equal compares where the
// answer does not depend on the batch size (it is at least 1), a Reshape
// target reads as 0 (keep the batch) in its first entry and an Expand
// target as the batch; arithmetic on it, or a constant of batch-dependent
// shape (ConstantOfShape), fails the load. Shape, ConstantOfShape and
// Constant are only ever folded; the executor never sees them.
//
// On batched values, Gather takes constant indices along an axis past the
// batch (x[:, 0]) or, with batched INT64 indices, looks rows up in a
// constant table along axis 0; Slice keeps the whole batch and takes
// positive steps, 1 on the last axis; Where selects F32 values.
//
// The package is pure Go and imports nothing from models/ or api/.
package graph
