// Package batching is adaptive batching for tensor models, as MLServer has
// it: concurrent requests to one model are merged along the batch
// dimension (dim 0) into one Executor.Run and its outputs split back, row
// for row, to the requests they came from.
//
// One goroutine owns the queue. It takes requests in arrival order and
// grows the open batch until it holds MaxBatchSize rows or MaxBatchTime
// has passed since the batch's first request arrived; then the batch is
// ready and goes to the first free worker. While every worker is busy a
// ready batch keeps taking requests that fit (the wait costs nothing
// more). A request that does not fit the open batch (too many rows, or
// other non-batch dimensions) waits for the next one; a request with more
// rows than MaxBatchSize runs alone, as does every request when
// MaxBatchSize <= 1 (batching off). So the latency batching adds is at
// most MaxBatchTime, plus the wait for a worker that any request has.
//
// Workers (MLServer's parallel_workers) is how many batches run at once;
// Executor.Run is safe for concurrent use. Each response is bit-identical
// to the request's unbatched result: the Executor contract says row i of
// an output depends only on row i of the inputs.
//
// A request's context is honoured while it is queued: Infer returns
// ctx.Err() at once, and the batch it was in runs without it if it had not
// started. Close fails the requests still queued with ErrClosed and waits
// for the running batches.
//
// The caller checks the inputs against the model's Specs before Infer
// (names, order, datatypes, non-batch dimensions); this package only
// merges and splits. It is pure Go and imports no inference code but the
// contract in models/tensor.
package batching
