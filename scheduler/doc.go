// Package scheduler decides, every step, which sequences run and how many
// tokens each computes. It is the pure core that the engine core (package
// core) drives.
//
// Scheduler is a synchronous state machine in the style of vLLM's v1
// scheduler and etcd raft's RawNode: no goroutines, no locks, no I/O, no
// clock reads. Each sequence (one choice of one request) keeps numComputed
// (tokens in its KV slot) catching up with its known tokens (prompt and
// output). A chunked prefill, a prefix-cache hit and a resume after
// preemption are only different starting values of numComputed.
//
// Schedule builds one engine.Step:
//
//  1. when a waiting sequence outranks a running one (a lower priority
//     value) and every slot is taken, the lowest-ranked, latest running
//     sequence is preempted: its KV goes to the prefix cache, its
//     slot is freed, and it waits again, to resume from the cache and by
//     recompute;
//  2. running sequences that decode get their token, then running prompts
//     get their next chunks, within MaxNumBatchedTokens;
//  3. waiting sequences are admitted in (priority, arrival) order while the
//     budget, MaxNumSeqs and the KV slots allow; the head of the queue
//     blocks the rest (no starvation of long prompts).
//
// A KV slot holds MaxModelLen positions, so a running sequence never runs
// out of KV; if the engine still reports ErrKVFull for one, it waits again
// and resumes later. Choices 1..n-1 of a request wait until choice 0's
// prompt is in the prefix cache, then restore it instead of computing it n
// times. Update applies the engine's result: sequences the engine failed
// end alone with ErrEngine; computed tokens are committed; sampled tokens
// are checked against stop tokens, min_tokens, max_tokens and the context.
// Finished and aborted sequences free their slot at once.
//
// Config.CheckRequest and Config.CheckBatch are the one place where a
// request's capacity is checked (n against MaxNumSeqs, prompt and
// max_tokens against MaxModelLen, a batch against MaxWaiting); they return a
// *RequestError naming the Request field, which protocol packages map to
// their wire names.
//
// What this package must not do: call the engine, know about hashes or
// llama.cpp's memory (kvcache hands back opaque results), run goroutines,
// or shape output text (detokenization and stop strings belong to the
// protocol layer).
package scheduler
