// Package tensor is the runtime for tensor models: classic models
// (classifiers, regressors, MLPs exported from scikit-learn or PyTorch)
// whose inputs and outputs are named, typed tensors with a leading batch
// dimension, served beside the LLMs through the same registry and routes.
//
// It owns the contract every tensor model meets (Executor, over the Spec
// and Tensor of package oip, which the protocols share without cgo)
// and, in the files beside this one, loading model graphs (ONNX, GGUF)
// into an Executor that runs them through ggml, and serving them with
// adaptive batching and parallel workers.
//
// # Loading and executing
//
// Open (or Load, on bytes) reads a model file, chosen by content: a file
// starting with "GGUF" is a GGUF graph (layout below), anything else is
// read as an ONNX ModelProto. Both become an engine/graph Graph, which
// graph.Check validates (operators, attributes with ONNX defaults,
// shapes) and folds the nodes that compute from constants (Reshape
// targets from Shape, transposed weights) into constants; engine/llamacpp
// then executes it with ggml's CPU backend. INT64 inputs (token ids,
// attention masks) run as int32 there: a value outside int32, or a token
// id out of range of the embedding table the input indexes, fails the
// request (an id computed by other operators looks up a row of NaN). A
// model the runtime cannot execute fails with a *ModelError, which
// matches ErrInvalidModel (and ErrUnsupported for an operator outside
// graph.Ops and graph.MLOps; the message names the operator and the
// node); an I/O error does not.
//
// Nodes of the default domain must be in graph.Ops; those of ai.onnx.ml
// (opsets 1 to 3: scikit-learn's, XGBoost's and LightGBM's exports) in
// graph.MLOps. A ZipMap output, which ONNX types as a sequence of maps,
// is served as the [batch, classes] FP32 tensor of its input, under the
// ZipMap output's name (V2 and KServe V1 carry tensors only); the
// classes are its columns, in the order of the ZipMap's labels.
//
// ONNX is parsed with google.golang.org/protobuf into the generated types
// of onnxpb (our own subset of onnx.proto, with ONNX's field numbers): of
// the Go modules with generated ModelProto types, onnx-gomlx keeps them in
// an internal package and the module proxy serves neither onnx-go, gonnx
// nor onnx/onnx's Go binding; the protobuf runtime is already a
// dependency. Initializers are read from raw_data
// (little-endian) or float_data/int64_data, and Constant nodes (as
// PyTorch exports Reshape's shape) become constants too. The first
// dimension of every input and output is the batch, whatever the file
// declares there.
//
// Execution is ggml through the project's own binding (engine/llamacpp),
// not ollama's ml package: ml is built around its model architectures'
// KV caches and backend scheduler, while a tensor graph needs a handful of
// plain ggml operators (and C kernels of its own where ggml has none or
// computes otherwise than ONNX Runtime: pooling, grouped convolutions,
// activations that keep NaN, the ai.onnx.ml operators), the
// batch-invariance padding below, and
// concurrent Runs over one set of read-only weights, which a few hundred
// lines of our binding do directly.
//
// Batch invariance: Executor.Run promises bit-identical rows whatever the
// batch size. ggml's CPU mul_mat takes llamafile's sgemm for two rows or
// more and vec_dot for one, which sum in different orders, so a product
// of a single row is computed padded to two rows (the rest of a one-row
// batch computes one row); from two rows on the arithmetic of every
// element is fixed by the weights' shapes (TestBatchInvariance).
//
// # The GGUF layout of a graph
//
// A GGUF file (version 3, little-endian, tensor data aligned to 32 bytes,
// the container written and read by package gguf) holds the same graph as
// an ONNX file:
//
//	general.architecture            string   "llmserve.graph"
//	llmserve.graph.opset            int64    ONNX default-domain opset (0: latest)
//	llmserve.graph.inputs           [string] input names, in order
//	llmserve.graph.input.<name>.shape  [int64] numpy order, -1 for the batch first
//	llmserve.graph.input.<name>.dtype  string "F32" (the default, when absent) or "I64"
//	llmserve.graph.outputs          [string] output names, in order
//	llmserve.graph.output.<name>.dtype string "F32" or "I64" (optional)
//	llmserve.graph.output.<name>.shape [int64] (optional; checked against the inferred one)
//	llmserve.graph.node_count       uint32
//	llmserve.graph.node.<i>.name    string   nodes in topological order, i from 0
//	llmserve.graph.node.<i>.op      string   ONNX operator type (graph.Ops or graph.MLOps)
//	llmserve.graph.node.<i>.inputs  [string] value names; "" for an omitted optional input
//	llmserve.graph.node.<i>.outputs [string]
//	llmserve.graph.node.<i>.attr.<attr>  int64, float32, string, [int64], [float32] or [string]:
//	                                 an ONNX INT, FLOAT, STRING, INTS, FLOATS or STRINGS attribute
//	llmserve.graph.scalars          [string] constants of rank 0 (stored as [1])
//
// Every constant (initializer) is a tensor named as the value it defines:
// ggml type F32 (0) or I64 (27), dimensions in ggml order (the numpy shape
// reversed). Attributes absent from the file take their ONNX defaults, as
// in ONNX files; int32 values and arrays are read as int64. Open reads the
// whole file into memory and gguf.Decode checks every length against what
// is left, so a damaged or hostile file fails with an error (FuzzDecode
// here and in gguf).
//
// MLP writes simple multilayer perceptrons as ONNX (and GGUF) for tests,
// examples and `llmserve synth mlp`; Forward is its pure-Go reference.
//
// What it must not do: speak a wire protocol (api/ converts V2 and KServe
// V1 tensors to and from Tensor) or call cgo itself (engine/llamacpp is
// the one cgo package and executes the graphs).
package tensor
