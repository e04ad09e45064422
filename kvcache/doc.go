// Package kvcache is the KV manager: it gives each running sequence a slot
// of the engine's KV memory, and it keeps the prefix cache, full blocks of
// KV in host memory keyed by the tokens they hold, from which a new
// sequence's prompt is restored instead of computed.
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
// next step (a Clear), before anything else uses it.
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
// Admit looks up the longest cached run of blocks a sequence's tokens start
// with (never the whole sequence: the last token is always computed, so the
// step has logits) and asks the engine to restore them into the slot; the
// sequence then computes only the rest. A restore is a copy of exactly the
// bytes that were computed, so an answer is the same with or without a hit.
//
// Idle cached blocks live in host memory: they cost memory, not time (no
// step reads them), up to CacheBytes.
//
// # Eviction order, and why
//
// Blocks sit in one LRU list. Every lookup or store touches the blocks of
// its chain from the deepest to the first, so a block is always more
// recent than its descendants, and the least recently used block is always
// one that no other cached block depends on: eviction (from the head, while
// the cache is over its budget) takes leaves first and never orphans a
// chain. Among leaves, the least recently used goes first; the first blocks
// of a popular system prompt, touched by every request that shares it, go
// last.
//
// Worked timeline (block size 4 for brevity, budget 4 blocks):
//
//	A runs "a b c d e f g h i"; its prompt is in: Offer → export blocks
//	  0,1 ("a b c d", "e f g h"); Store: h0 ← [abcd], h1 ← [efgh] (h1's
//	  parent h0). LRU: h1 h0.
//	B arrives with "a b c d e f x y z": Admit hits h0, h1? No: h1 holds
//	  "e f g h". Hit h0 only → restore 4 positions, compute "e f x y z".
//	  LRU after the touch: h1 h0.
//	B's prompt is in: export block 1 ("e f x y") → h2, parent h0.
//	  Touch h2 then h0: LRU h1 h2 h0.
//	C stores three new blocks under a new root: the cache is over budget by
//	  two; evict h1, then h2 (leaves, oldest first). h0 stays while a
//	  chain under it is younger; once it is the oldest leaf, it goes too.
//
// # Events
//
// Every block stored or evicted is an Event in a bounded outbox (MaxEvents;
// when it is full the oldest is dropped and counted), for a router that
// tracks which node caches which prefix. The engine core drains it every
// step.
//
// # What the caller must guarantee
//
// One goroutine owns a Manager. The caller hands the engine StepOps before
// each batch (exports, then clears, then restores), calls Commit after a
// step with the positions computed, Store with the step's exported KV, and
// Free exactly once per admitted sequence.
//
// What this package must not do: talk to llama.cpp, decide which sequence
// runs or is preempted (that is the scheduler), or block.
package kvcache
