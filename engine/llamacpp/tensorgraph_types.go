package llamacpp

// GraphOptions says how to execute a tensor graph.
type GraphOptions struct {
	// Threads is the number of CPU threads one Run computes with; 0 means
	// 1. Each concurrent Run has its own persistent ggml thread pool,
	// paused between Runs. For the 784-256-128-10 MLP on a busy two-core
	// machine, 2 threads took a batch of 32 from 186 to 148 µs and gave
	// nothing at batch 1; concurrent Runs (parallel workers) are the
	// better way to use more cores, as extra threads of concurrent Runs
	// compete for the same cores.
	Threads int
}

// GraphOutput is one output of a Run: F32 or I64 data, row-major, the
// batch first.
type GraphOutput struct {
	F32 []float32
	I64 []int64
}

// GraphInput is one input of a Run: F32 or I64 data (as the graph input's
// element type), row-major, the batch first.
type GraphInput struct {
	F32 []float32
	I64 []int64
}
