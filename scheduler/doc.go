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
//  1. with a KV token capacity (Config.KVCapacityTokens, below), every
//     running sequence that decodes reserves the position its token takes;
//  2. when a waiting sequence outranks a running one (a lower priority
//     value) and every slot is taken or its tokens do not fit the free KV
//     tokens, the lowest-ranked, latest running sequence is preempted: its
//     KV goes to the prefix cache, its slot and KV tokens are freed, and
//     it waits again, to resume from the cache and by recompute;
//  3. running sequences that decode get their token, then running prompts
//     get their next chunks, within MaxNumBatchedTokens; beside decodes,
//     long prompts (over Config.LongPrefillTokens) share a limit of at
//     most that many tokens, which the engine core lowers from measured
//     step times (pacing.go; Pacing reports each step's);
//  4. waiting sequences are admitted in (priority, arrival) order while the
//     budget, MaxNumSeqs, the KV slots and the KV tokens allow; the head of
//     the queue blocks the rest (no starvation of long prompts).
//
// # KV tokens
//
// The KV memory follows the tokens in use (kvcache's "The token budget"):
// a slot is a cheap stream of up to MaxModelLen positions, and the KV
// manager's CapacityTokens bound the positions all running sequences
// reserve, in blocks. Admission reserves all of a sequence's known tokens
// (a prefill chunk never needs more); each decode first grows the
// reservation to its position. When a decode cannot grow, running
// sequences are taken best first (priority, then arrival) and the one that
// cannot grow preempts the lowest-ranked running sequence, which has no
// chunk in the step yet, and tries again; when it is the lowest-ranked
// itself, it is the one preempted. Preemption is by recompute, as above,
// and counted in Stats.Preemptions. A waiting head that outranks running
// sequences preempts for tokens only when preempting every running
// sequence it outranks would make its tokens fit.
//
// This cannot deadlock: the best-ranked running sequence always gets its
// chunk (it grows by preempting others), every running sequence gets one
// in each step (MaxNumBatchedTokens is at least MaxNumSeqs) and holds all
// it needs for its prefill, and with nothing running the whole capacity
// is free for the head of the queue. One sequence may hold at most
// Config.MaxSeqLen tokens, MaxModelLen or the capacity when smaller: it
// ends with FinishLength there, alone or not, so that its answer depends
// only on its own tokens; a prompt must be shorter (CheckRequest).
//
// A running sequence computes only positions it reserved, so it never runs
// out of KV; if the engine still reports ErrKVFull for one, it waits again
// and resumes later. Choices 1..n-1 of a request wait until choice 0's
// prompt is in the prefix cache, then restore it instead of computing it n
// times. Update applies the engine's result: sequences the engine failed
// end alone with ErrEngine; computed tokens are committed; sampled tokens
// are checked against stop tokens, min_tokens, max_tokens and the context,
// and advance the choice's thinking state (Request.Thinking, thinking.go):
// the tokens inside a thinking section are counted, and once Budget of them
// were generated the next chunks force the end marker through
// engine.Chunk.Only.
// Finished and aborted sequences free their slot at once.
//
// # LoRA adapters
//
// A request may name a LoRA adapter (Request.Adapter), which its
// sequences carry to the engine (engine.NewSequence.Adapter). The prefix
// cache keys its blocks by the adapter and the tokens (Request.CacheKey),
// so only requests of one adapter share them. Config.MaxLoRAs caps the
// distinct adapters of the running sequences: a waiting sequence of
// another adapter is skipped, and once one is, later sequences of
// adapters are skipped too (even of running ones), so that the running
// adapters drain and the skipped one starts first; base-model sequences
// take no adapter and are admitted as usual. Stats lists the running and
// waiting adapters.
//
// # Speculative decoding
//
// With Config.Speculative.Method "ngram" (speculative.go), each decode chunk
// gets draft tokens (engine.Chunk.Draft) by prompt lookup: the tokens that
// followed the latest earlier occurrence of the sequence's last n tokens,
// the longest n in [PromptLookupMin, PromptLookupMax], at most NumTokens and
// the sequence's adaptive draft length; none in a step of more decodes
// than DisableByBatchSize, when set. Drafts come after every decode's
// token and before prompts in the step's budget, and reserve their KV
// tokens (shortened when they do not fit, never preempting). They never
// reach past max_tokens or MaxSeqLen, and there are none with bad words, a
// forced token, a thinking budget still running, or across min_tokens,
// where the scheduler's per-token Ban or Only would differ between the
// draft's positions. Update applies the accepted tokens one by one, as if
// each had come in a step of its own (stop tokens, limits, the thinking
// count), committing each to the KV manager: a rejected draft is never
// committed, so it never reaches the prefix cache. Stats.Spec counts drafts
// and accepted tokens (vLLM's spec_decode counters).
//
// With Method "draft" (a draft model, Speculative.Model) the scheduler
// decides everything above but the tokens: it sets the chunk's
// engine.Chunk.DraftLimit to the draft length it would give an n-gram
// draft, reserves that many KV tokens (shortened when they do not fit)
// and takes them from the step's budget; the executor, which owns the
// draft model, proposes up to that many tokens and writes them into the
// chunk's Draft, where Update finds them: the counters and the adaptive
// length work from them as for n-gram drafts. Positions reserved but not
// proposed are left like rejected ones.
//
// Config.CheckRequest and Config.CheckBatch are the one place where a
// request's capacity is checked (n against MaxNumSeqs, prompt and
// max_tokens against MaxModelLen, the prompt against KVCapacityTokens, a
// batch against MaxWaiting); they return a *RequestError naming the
// Request field, which protocol packages map to their wire names. A prompt
// that fits the context but not the KV memory is ErrTooLong with KVTokens
// set: raising --kv-cache-memory, not shortening max_tokens, is the fix.
// max_tokens may reach past the capacity: the sequence then ends with
// FinishLength at MaxSeqLen.
//
// What this package must not do: call the engine, know about hashes or
// llama.cpp's memory (kvcache hands back opaque results), run goroutines,
// or shape output text (detokenization and stop strings belong to the
// protocol layer).
package scheduler
