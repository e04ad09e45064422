// Package tensorgraph runs classic tensor models on ggml's CPU backend:
// the engine/graph graphs of ONNX models (MLPs, linear models, tree
// ensembles, CNNs), with the kernels ggml lacks written here in C (the
// cgo preambles of build.go, conv.go, conv_wide.go, ml.go, ops.go; cnn.h
// holds the CNN kernels' parameters, cnn_rows.h the convolution row
// kernels, which conv.go and conv_wide.go include at their two widths).
//
// The binary is built for x86-64-v3 (AVX2). Where the processor also runs
// AVX-512F, the convolutions' row kernels take 16-lane vectors
// (conv_wide.go, compiled for that target alone and chosen at run time
// by __builtin_cpu_supports): each output is the same float sum in the
// same order either way, so the bits do not depend on the machine's
// vector width (TestGraphCNNWideKernels).
//
// It shares the ggml build and backends with engine/llamacpp (llamacpp.Init
// loads them once) and nothing else; it knows no protocol and no model
// format (models/tensor loads ONNX files into engine/graph and calls it).
//
// # How a graph runs
//
// GraphModel executes an engine/graph graph (a classic
// tensor model: MLPs, linear models) with ggml's CPU backend, without
// llama.cpp's model machinery. LoadGraph copies the constants once into a
// ggml context, in the forms the operators want (MatMul and Gemm weights
// transposed to ggml_mul_mat's [N][K] rows, Gemm's bias scaled by beta);
// they are only read after. Each concurrent Run takes a runner from a
// pool: a ggml graph per batch size, built in a no_alloc context and
// allocated by ggml_gallocr, inputs copied in, ggml_graph_compute with
// the runner's work buffer (and, with more than one thread, the runner's
// persistent thread pool, paused between Runs), outputs copied out. Runs
// share nothing they write. A Run of at least 2×SplitRows rows is cut
// into pieces of SplitRows rows, which up to GraphOptions.Parts runners
// compute at once, each taking the next piece when done, and joined in
// order (rows are independent, so the result is the same).
// Operators map to ggml ones (ggml_gelu_erf for Gelu; the tanh
// form is built from ggml_tanh and arithmetic because ggml_gelu reads an
// FP16 table); an axis other than the last is moved to ggml's dimension 0
// with a permute. Close waits for running Runs.
//
// Rows are bit-identical whatever the batch size: ggml's mul_mat uses
// llamafile's sgemm for two rows or more and vec_dot for one, which sum
// in different orders, so a product of a single row is computed as two
// (the second zeros) and its first row kept (builder.mulMat); the rest of
// a one-row batch's graph computes one row. From two rows on, the
// per-element arithmetic depends only on the weights' shape (sgemm's tile
// sizes change with the batch, its FMA chain per element does not).
//
// # What it must not do
//
// It holds no request state between Runs and makes no batching decision
// (models/batching forms the batches); it never changes a row's result
// with the batch it runs in.
package tensorgraph
