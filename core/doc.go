// Package core is the engine core: the one goroutine per model that owns
// its scheduler, its KV manager and its executor and drives them (vLLM's
// EngineCore, etcd raft's node.run).
//
//	for {
//	    take submissions and aborts from the inbox
//	    step := scheduler.Schedule()          // pure decision
//	    res  := executor.Execute(ctx, step)   // one engine step
//	    scheduler.Update(step, res)
//	    publish stats, then deliver outputs to the streams
//	}
//
// # Talking to it
//
// Submit checks requests against the scheduler's limits (Config.
// CheckRequest, pure), bounds the waiting queue (QueueFullError with a
// Retry-After from the recent completion rate) and posts them, all or none,
// to the inbox; it returns one Stream per request. A Stream never blocks the
// core: outputs pile up in it until the caller's Recv, so a slow client
// never stalls the batch. Cancel and StopChoice post aborts, which the core
// applies at the start of its next iteration: a client that goes away frees
// its slot within one step. The inbox keeps submissions and aborts in
// order, so an abort never overtakes its request.
//
// # Embeddings
//
// Embed posts a job of embedding inputs to the same inbox. The core adds
// queued inputs to its steps (engine.Step.Embeds) beside the scheduled
// batch, in order, as many as the executor's engine.EmbedCapacity and what
// the scheduler's token budget leaves allow (the queue's first input is
// always taken, so embeddings progress under any load), and hands each
// job its vectors when all its inputs are done. Inputs of a caller that
// went away are dropped when their turn comes. The scheduler never sees
// them: an embedding holds no KV between steps.
//
// # KV transfer and cache events (transfer.go)
//
// Prefill submits a request whose prompt KV the KV manager keeps after it
// finishes (kvcache's keep) under a new transfer id: a Lease, settled a
// step after the last output when the export comes back, freed by
// ReleaseLease or when it expires (LeasesExpired counts those; the core
// wakes for the earliest expiry). LeaseKV hands out a reference to the
// kept KV (host memory off the Go heap, immutable): any goroutine may
// stream it until it releases the reference, whatever the core does with
// the lease meanwhile. SubmitWithKV imports KV received from
// another node into the prefix cache on the core's goroutine right before
// the request is added, when its layout equals the executor's (KVLayout),
// so the request restores it instead of computing it. WatchKV streams the
// cache's events after each step, starting with a snapshot, and sends a
// new snapshot when events were lost (the manager's outbox overflowed, the
// reader fell behind, or the engine restarted with an empty cache). All of
// it goes through the inbox like Submit: the core's goroutine owns every
// piece of KV state.
//
// # Order of effects
//
// After each step the core publishes the scheduler's stats (Stats, read by
// the metrics at scrape time) before it delivers the step's outputs, so a
// client that got its last token and then scrapes /metrics never sees its
// request still running. The KV manager's event outbox is drained every
// step into the observer.
//
// # KV memory that follows the load
//
// An executor that implements engine.Resizer starts with KV.InitialSlots
// slots. When sequences wait for a slot (Scheduler.SlotsWanted), the core
// resizes it, before scheduling, to twice its slots or what the queue
// needs, up to KV.Slots; after IdleShrink without work it shrinks it back.
// A resize keeps every running sequence's KV bit for bit.
//
// # Pacing long prompts
//
// After each step that decoded, the core sizes the scheduler's long-prefill
// budget (scheduler.Scheduler.SetLongPrefillBudget) from moving averages of
// a decode-only step's time and of what a prompt token adds (over steps
// pooled until they computed 16 prompt tokens), so that long
// prompts add about one decode step to the steps they share with decoding
// streams: 16 tokens until measured, doubling at most after a step whose
// long prompts used all of it, never more than the threshold
// (scheduler.Config.LongPrefillTokens), which the scheduler enforces
// whatever the budget. StepInfo.Paced reports each step's limit and long
// tokens, RequestInfo.PromptChunks the steps each prompt took.
//
// # Time
//
// The core reads the time and waits for it only through Config.Clock
// (clock.Real when nil): step durations, the scheduler's deadlines, lease
// expiries, the restart window and the idle shrink. When it has nothing to
// do it sleeps until a post, the earliest deadline, lease expiry or shrink,
// whichever comes first; a test with a clock.Fake moves that time itself.
//
// # Failures
//
// A sequence the engine fails ends alone (its choice gets ErrEngine). An
// executor that fails as a whole (Execute returns an error) is replaced: the
// live requests end with ErrEngine, a new executor, KV manager and
// scheduler are built, Ready is false meanwhile, and the Observer hears
// EngineRestarted. More than MaxRestarts failures within RestartWindow end
// Run with the error. When Run's context ends (shutdown), every live request
// ends with scheduler.ErrClosed and Cut counts them.
//
// What this package must not do: decide what runs (the scheduler does),
// call llama.cpp (the executor does), or shape wire formats.
package core
