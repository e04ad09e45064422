package llamacpp

// GraphOptions says how to execute a tensor graph.
type GraphOptions struct {
	// Threads is the number of CPU threads one Run computes with; 0 means
	// 1. More threads pay only for large graphs: ggml starts and joins
	// its workers on every Run, and its barriers spin, which for the
	// 784-256-128-10 MLP made a Run 20 to 50 times slower with 2 threads
	// than with 1 on a busy two-core machine. Concurrent Runs (parallel
	// workers) are the way to use more cores.
	Threads int
}

// GraphOutput is one output of a Run: F32 or I64 data, row-major, the
// batch first.
type GraphOutput struct {
	F32 []float32
	I64 []int64
}
