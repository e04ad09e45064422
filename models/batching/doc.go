// Package batching is adaptive batching for tensor models, as MLServer has
// it: concurrent requests to one model are merged along the batch
// dimension (dim 0) into one Executor.Run and its outputs split back, row
// for row, to the requests they came from.
//
// It schedules as Triton's dynamic batcher does. A request that finds
// nothing queued and a run slot free (Workers of them) runs at once on
// its caller's goroutine. Otherwise one goroutine owns the queue: it takes
// requests in arrival order into the open batch, and the open batch goes
// to a worker, with a run slot, as soon as it is ready: full
// (MaxBatchSize rows), followed by a request that does not fit it, its
// window (MaxBatchTime since its first request) over, or no other request
// on its way (none in Infer that the goroutine has not taken yet). So a
// request that finds the model idle runs at once, whatever the window;
// requests that arrive while every slot is taken queue and form the next
// batch, up to MaxBatchSize rows; and the window is an upper bound on the
// wait for requests already on their way, never a fixed cost (0, the
// default, as Triton's max_queue_delay_microseconds: no wait at all). A
// request that does not fit the open batch (too many rows, or other
// non-batch dimensions) waits for the next one; a request with more rows
// than MaxBatchSize runs alone, as does every request when MaxBatchSize
// <= 1 (batching off). The clock is Config.Clock (a fake in tests).
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
