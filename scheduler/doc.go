// Package scheduler decides, every step, which sequences run and how many
// tokens each computes, and runs the loop that executes those steps.
//
// # The pure core
//
// Scheduler is a synchronous state machine in the style of vLLM's v1
// scheduler and etcd raft's RawNode: no goroutines, no locks, no I/O, no
// clock reads. Each sequence (one choice of one request) keeps numComputed
// (tokens in the KV memory) catching up with its known tokens (prompt and
// output). A chunked prefill, a prefix-cache hit and a resume after
// preemption are only different starting values of numComputed.
//
// Schedule builds one engine.Step:
//
//  1. running sequences first, in admission order: one decode token each, or
//     the next chunk of a prompt, within MaxNumBatchedTokens;
//  2. then waiting sequences in (priority, arrival) order, while the token
//     budget, MaxNumSeqs and the KV memory allow; the head of the queue
//     blocks the rest (no starvation of long prompts);
//  3. when a running sequence cannot get KV memory, the lowest-priority,
//     latest running sequence is preempted: its KV is freed and it goes back
//     to the waiting queue, to be recomputed (mostly from the prefix cache)
//     when memory frees up. No step admits new work after a preemption.
//
// Choices 1..n-1 of a request wait until choice 0 has its prompt in the KV
// memory, then take it from the prefix cache instead of computing it n
// times. Update applies the engine's result: computed tokens are committed
// to the KV manager (full blocks enter the prefix cache), sampled tokens
// are checked against stop tokens, min_tokens, max_tokens and the model's
// context length. Finished, aborted and expired sequences free their KV at
// once; the memory operations reach the engine in the next step.
//
// # The shell
//
// Loop is the one goroutine that owns a Scheduler and an engine.Executor. It
// takes submissions and aborts from an ordered inbox between steps (so a
// client that disconnects frees its KV within one step), runs
// schedule → execute → update, and delivers outputs to each request's
// Stream without blocking: a slow client never stalls the batch. Submit
// bounds the waiting queue (MaxWaiting requests) and answers
// QueueFullError with a Retry-After estimated from the recent completion
// rate.
//
// What this package must not do: call llama.cpp (engine/), know about
// blocks, hashes or slots (kvcache/ hands back opaque results), or shape
// output text (detokenization and stop strings belong to the protocol
// layer, outside the loop).
package scheduler
