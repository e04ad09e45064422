package llamacpp

// GraphOptions says how to execute a tensor graph.
type GraphOptions struct {
	// Threads is the number of CPU threads one Run computes with; 0 means
	// min(4, GOMAXPROCS).
	Threads int
}

// GraphOutput is one output of a Run: F32 or I64 data, row-major, the
// batch first.
type GraphOutput struct {
	F32 []float32
	I64 []int64
}
