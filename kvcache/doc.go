// Package kvcache is the KV manager: it gives each running sequence a slot
// of the engine's KV memory, and it keeps the prefix cache, blocks of KV
// (and the tails after them) in host memory keyed by the tokens they hold,
// from which a new sequence's prompt is restored instead of computed.
//
// # Slots
//
// The engine has up to Slots KV streams of SlotTokens positions each (of
// which ActiveSlots are allocated now: the engine core grows and shrinks
// them with the load and tells the manager with SetActiveSlots); a running
// sequence holds one, its positions 0..n-1 in order. Admit takes the lowest
// free slot, so that running sequences stay in a run of consecutive slots:
// llama.cpp evaluates consecutive streams together (engine/llamacpp's
// decode.go). Free releases the slot at once; the engine empties it at the
// next step (a Clear), before anything else uses it. With a token capacity
// a sequence also needs its tokens' blocks to be admitted (next section).
//
// # The token budget
//
// The engine commits KV memory for a position when a token is written
// there and releases a slot's memory when the slot is cleared, so the KV
// memory must fit the positions running sequences hold, not Slots ×
// SlotTokens. Config.CapacityTokens (the KV memory over its bytes per
// position, a multiple of BlockSize) bounds them, as vLLM's block pool
// does: a running sequence reserves whole blocks of BlockSize positions.
//
//   - Admit reserves blocks for all of Tokens (the prompt, plus the output
//     so far for a sequence that resumes after preemption; the positions a
//     restore fills are among them). When a slot is free but the free
//     blocks do not hold Tokens, it returns ok false and changes nothing.
//     FitsTokens asks the same of the blocks without admitting.
//   - A chunk that computes positions beyond the reservation (a decode at
//     position n needs n+1) must first Grow it. Grow false means every
//     block is reserved: the caller (the scheduler) frees some by
//     preempting a sequence, or does not run the chunk. A prefill never
//     needs it, since admission reserved every known token.
//   - Free returns the sequence's blocks at once, as it does its slot.
//
// So ReservedTokens never exceeds CapacityTokens, and every position a
// slot holds is reserved: the engine never writes more positions than the
// capacity. Rounding to blocks leaves less than a block per running
// sequence reserved and unwritten. Stats.Usage is ReservedTokens over
// CapacityTokens (vLLM's kv_cache_usage_perc counts used blocks the same
// way). The prefix cache is outside the budget: idle cached blocks live in
// host memory under CacheBytes, and a restore copies them into the
// sequence's own reservation. Slots still bound the running sequences, but
// an idle slot costs no KV memory. CapacityTokens 0 turns the budget off:
// only the slots bound admission, and Grow always succeeds.
//
// Worked example (block size 4, CapacityTokens 16, that is 4 blocks, 4
// slots; testdata/doc_budget.txt plays it):
//
//	a is admitted with 10 tokens: 3 blocks reserved (12 positions), 1 free.
//	b comes with 6 tokens, 2 blocks: Admit refuses it though 3 slots are
//	  free (and the scheduler keeps its queue in order: what comes after
//	  b waits too).
//	a decodes positions 10 and 11 in its third block; position 12 needs
//	  a fourth: Grow(a, 13) takes the last block. 16 of 16 reserved,
//	  Usage 1.
//	a finishes; Free returns its 4 blocks. b (2 blocks) and c, with 2
//	  tokens (1 block), are admitted; 1 block is free.
//	b decodes positions 6 and 7, c positions 2 and 3; then both need a
//	  block. The scheduler grows them best first: b, which ranks higher,
//	  takes the free block; c's Grow fails, and the scheduler preempts the
//	  lowest-ranked running sequence, here c itself (Free with offer: its
//	  KV goes to the prefix cache, its block back to the budget). It waits
//	  until b leaves room, and resumes from the cache.
//
// # The prefix cache
//
// A block is BlockSize (16) consecutive positions. Its key is hash(parent
// key, its tokens), with the request's cache_salt mixed into the first
// block, so a key names the whole prefix up to the block's end and salted
// requests never share blocks with others. SHA-256 is used so that a client
// cannot craft a collision that poisons another client's output.
//
// Blocks enter the cache by export: when a sequence's whole prompt is in its
// slot (Offer), and when it finishes or is preempted (Free with offer), the
// manager asks the engine to copy its full blocks that the cache lacks out
// of the slot, before the slot is cleared. Store files the result under the
// blocks' keys. A block is kept only under a cached parent, so that every
// cached block is reachable from the first block of its prompt.
//
// The positions after the last full block (fewer than a block) are exported
// with them as a tail: a leaf entry under that block (or, for a sequence
// shorter than a block, a root in its salt's namespace) keyed by
// hash(parent key, a marker, its tokens), kept only when its blocks are
// cached. An offer exports the tail the slot holds when it holds more than
// at the sequence's last tail and the cache lacks it, so one block may have
// several tails, such as a prompt's and, when the sequence finishes before
// filling that block, a longer one with the start of its answer. Tails let
// a prompt that was seen before (a retried request, the siblings of an
// n > 1 request) restore everything but its last token, and a chat whose
// next turn starts with the last turn's prompt and answer restore all that
// turn computed, not only whole blocks, as llama.cpp's server does with
// its slots' prompts.
//
// Admit looks up the longest cached prefix of a sequence's tokens that
// leaves the last token to compute (the step needs its logits): the run of
// cached blocks, then the first positions of the next cached block when it
// holds the last token, or else the longest cached tail the tokens go on
// with (at most BlockSize-1 lookups). A block or tail is found only by all
// of its tokens: tokens that diverge inside a cached tail, or stop before
// its end, take the blocks and at most a shorter cached tail. It asks the
// engine to restore them into the slot; the sequence then computes only
// the rest. A restore is a copy of exactly the bytes that were computed, so
// an answer is the same with or without a hit.
//
// Idle cached blocks and tails live in host memory: they cost memory, not
// time (no step reads them), up to CacheBytes; a tail costs its positions.
//
// # Host memory, and who may read it (memory.go)
//
// The KV of cached entries and kept transfers is copied into the manager's
// hostmem.Arena, off the Go heap: the collector neither scans it nor
// counts it toward its goal, so a full cache of CacheBytes costs about
// CacheBytes of resident memory, not twice that (GOGC=100 lets the heap
// grow to twice what is live). Such memory is freed at a known moment, so
// every reader is bounded by one:
//
//   - A cached entry's memory is freed when it is evicted (Store, Import),
//     unless a restore reads it: Admit pins the entries whose KV its
//     restore hands the engine, and they stay pinned until the StepOps
//     after the one that handed the restore out (the engine applied it in
//     between: one goroutine runs StepOps, the step, then the next
//     StepOps). An entry evicted while pinned leaves the index and the
//     budget at once; its memory goes at that StepOps. The engine must not
//     keep a restore's KV beyond its step.
//   - A kept transfer's KV is reference counted: the manager holds one
//     reference until Release (or Close), and Lease hands out one more
//     per caller, a KeptRef that any goroutine may read until its own
//     Release. The last reference frees the memory. Stream it, copy it,
//     never keep its Data.
//   - Close frees every entry (the caller has no step in flight) and drops
//     the manager's references; KeptRefs stay valid.
//
// Nothing else hands out KV from the arena: exports arrive in Go memory
// and are copied in, restores of part of an entry are Go copies. The
// package's tests run with hostmem's Guard arena, where freed memory is
// made inaccessible, so a read after free faults instead of passing.
//
// # Eviction order, and why
//
// Blocks and tails sit in one LRU list. Every lookup or store touches the
// entries of its chain from the deepest to the first, so an entry is always
// more recent than its descendants, and the least recently used entry is
// always one that no other cached entry depends on: eviction (from the
// head, while the cache is over its budget) takes leaves first and never
// orphans a chain; a tail goes before the block it follows. Among leaves,
// the least recently used goes first; the first blocks of a popular system
// prompt, touched by every request that shares it, go last.
//
// Worked timeline (block size 4 for brevity, a budget of 16 positions, that
// is 4 blocks; testdata/doc_timeline.txt plays it):
//
//	A runs "a b c d e f g h i"; its prompt is in: Offer → export blocks
//	  0,1 ("a b c d", "e f g h") and the tail "i"; Store: [abcd], [efgh]
//	  under it, the tail [i] under [efgh]. The chain is touched deepest
//	  first: LRU [i] [efgh] [abcd], 9 positions.
//	B arrives with "a b c d e f x y z": Admit hits [abcd]; block 1 "e f x y"
//	  is not cached ([efgh] holds "e f g h"), nor is a tail "e f x", "e f"
//	  or "e" under [abcd]. Restore 4 positions, compute "e f x y z". The
//	  touch leaves the LRU as it was: [abcd] is the most recent already.
//	B's prompt is in: export block 1 ("e f x y") and the tail "z": [efxy]
//	  under [abcd], [z] under [efxy]. Touch [z], [efxy], then [abcd]: LRU
//	  [i] [efgh] [z] [efxy] [abcd], 14 positions.
//	C stores "m n o p q r" under a new root, a block and the tail "q r":
//	  20 positions, over the budget by 4; evict [i], then [efgh] (leaves,
//	  oldest first). [abcd] stays: the chain under it is younger.
//	A finishes (its slot holds nothing the cache lacks: only a clear). D
//	  stores "s t u v w x y z", two blocks and no tail: 23 positions; evict
//	  [z], [efxy], then [abcd], now the oldest leaf.
//
// # Events
//
// Every block or tail stored or evicted is an Event in a bounded outbox
// (MaxEvents; when it is full the oldest is dropped and counted), for a
// router that tracks which node caches which prefix; a tail's Parent is
// the block it follows and its Depth that block's plus one (0 for a root
// tail). The engine core drains it every step.
//
// # KV transfer (transfer.go)
//
// For disaggregated prefill, a sequence admitted with Keep names a
// transfer: when it is freed with offer holding its KeepPositions prompt
// positions, they are exported (beside the cache's own export) and kept
// under that name, outside the cache's budget, until Release; TakeKept
// reports each keep that came back, Lease hands out a reference to read it
// (see Host memory above). On the receiving node,
// Import files KV from elsewhere into the prefix cache as the blocks and
// tail a local sequence with those tokens would have stored (with their
// BlockStored events), so the request restores it at admission like any
// cache hit. Snapshot lists every cached entry, parents first, for a router
// that starts watching the events. BlockHashes computes a prompt's block
// keys for a router in another process.
//
// # What the caller must guarantee
//
// One goroutine owns a Manager. The caller hands the engine StepOps before
// each batch (exports, then clears, then restores), and the engine is done
// with them before the next StepOps; the caller calls Grow before a chunk
// computes positions the sequence has not reserved, Commit after a step
// with the positions computed, Store with the step's exported KV, Free
// exactly once per admitted sequence, Release every KeptRef, and Close
// when it drops the manager.
//
// What this package must not do: talk to llama.cpp, decide which sequence
// runs or is preempted (that is the scheduler), or block.
package kvcache
