package tensorgraph

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
	// Parts is the most runners a large Run is computed on at once (Go
	// schedules them on the cores GOMAXPROCS gives); 0 or 1: never cut. A
	// Run of at least 2×SplitRows rows is cut along the rows into pieces
	// of SplitRows (the last takes the rest), which the runners take in
	// turn, so that a runner whose core is busy with other work leaves
	// more pieces to the others; smaller batches, whose rows cost less
	// than a hand-off between threads, run whole. Every row's result is
	// the same either way (rows are independent, and bit-identical
	// whatever the batch size).
	Parts int
}

// SplitRows is the rows of a piece of a cut Run (GraphOptions.Parts).
const SplitRows = 32

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
