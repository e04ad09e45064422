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
// # The CNN operators
//
// Conv (2-D, any group, with pads, auto_pad, strides, dilations and bias),
// BatchNormalization (inference), MaxPool (with dilations and
// ceil_mode), AveragePool (count_include_pad, as ONNX Runtime's MLAS
// divides: by the cells inside the image, or by the kernel's size) and
// GlobalAveragePool take [batch, channels, height, width] inputs, the
// batch first as everywhere (Clip, LeakyRelu and HardSigmoid, the
// elementwise activations CNN exports put between them, are core
// operators, NaN kept). The executor builds a large Conv as ggml_conv_2d does
// (im2col and mul_mat, in F32) and a grouped (depthwise) or small one (at
// most 4096 weights) with a direct C kernel (float sums in the reference's
// order; with finite weights on a zero-padded copy of each image, 8
// output channels by 8 pixels of a row in vectors), folds
// BatchNormalization to a scale and shift per channel, and pools with a
// C kernel of its own (ggml's pooling has neither unequal pads nor
// count_include_pad=0).
//
// # The ai.onnx.ml operators
//
// MLOps are the classic machine-learning operators of the ai.onnx.ml
// domain (opsets 1 to 3), as scikit-learn (skl2onnx), XGBoost and
// LightGBM (onnxmltools) export them: Scaler, Normalizer,
// LinearRegressor, LinearClassifier, ZipMap, TreeEnsembleRegressor and
// TreeEnsembleClassifier, each on a [batch, features] input. They follow
// ONNX Runtime's CPU kernels, quirks included (ml.go and trees.go say
// which), in float32 as it computes them. A classifier has two outputs,
// the INT64 label and the F32 scores; class labels must be integers
// (classlabels_int64s, classlabels_ints), since a graph has no string
// values. ZipMap's output, a sequence of maps in ONNX, is its input's
// [batch, classes] tensor under ZipMap's output name: the classes are
// the columns, in order.
//
// ParseTreeEnsemble and ParseLinear check a node and flatten it into the
// arrays both Eval and the executor compute from (the executor in C, row
// by row, several rows per thread; where every branch has one mode, 8 rows
// walk a tree at once without a branch on the data, to the same leaves).
//
// Operators defined in files of their own (opfiles.go: the CNN and
// ai.onnx.ml ones) may have several outputs; an output name left empty
// is not computed.
//
// The package is pure Go and imports nothing from models/ or api/.
package graph
