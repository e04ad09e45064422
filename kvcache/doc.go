// Package kvcache is the paged KV manager: it decides which KV blocks each
// sequence holds, which full blocks form the prefix cache, and which cached
// blocks to evict, and it maps all of that onto llama.cpp's unified KV cache.
//
// # Blocks
//
// The KV capacity is cut into blocks of BlockSize (16) token positions. A
// block's metadata lives in a preallocated slice; the free queue is a doubly
// linked list through int32 indexes. A block is in exactly one state:
//
//   - in use: held by one or more running sequences (ref > 0);
//   - cached: idle, but it holds a full block of a known prefix, is in the
//     index and sits in the free queue, where an allocation may evict it;
//   - empty: idle with nothing worth keeping, also in the free queue.
//
// The index keys a full block by hash(parent hash, its 16 tokens), with the
// request's cache_salt mixed into the first block, so a hash names the whole
// prefix up to the block's end and salted requests never share blocks with
// others. SHA-256 is used so that a client cannot craft a collision that
// poisons another client's output.
//
// # Mapping onto llama.cpp
//
// llama.cpp's unified KV cache frees a cell when no sequence id refers to it,
// and llama_memory_seq_cp adds a sequence id to existing cells without copying
// data. The manager uses slot ids (llama.cpp sequence ids) in two roles:
//
//   - run slots [0, RunSlots): one per running sequence;
//   - holder slots [RunSlots, RunSlots+HolderSlots): they keep cached blocks
//     alive. A holder has at most one block per depth (position range
//     [16d, 16d+16)), so that removing that range from the holder releases
//     exactly that block.
//
// When a sequence completes a block whose content is not cached yet, Commit
// copies the block's cells to a holder with that depth free (the parent's
// holder if possible) and registers the hash. A new sequence whose prompt
// starts with cached blocks gets them by copies from their holders to its
// slot: zero tokens are recomputed, and the engine decodes only the rest.
// Freeing a sequence removes its slot from all its cells; cells a holder
// keeps survive. Evicting a cached block removes its range from its holder.
// All of this leaves the manager as MemOps that the engine applies before the
// next batch, in order.
//
// Because llama.cpp finds free cells anywhere (not necessarily contiguous),
// reserving whole blocks here is a conservative bound: cells in use never
// exceed BlockSize times the blocks in use or cached, so a batch the
// scheduler admits always finds room.
//
// # Eviction order, and why
//
// Allocation takes the head of the free queue. Blocks of a freed sequence
// that hold no cached content go to the head (they are reused first and cost
// nothing to lose); cached blocks go to the tail, in reverse order (the
// sequence's last block first), so the least recently used prefix is evicted
// first and, within a sequence, the tail of a prefix goes before its start,
// which is the part other requests are most likely to share. A cached block
// that a new sequence hits leaves the queue until it is idle again.
//
// Worked timeline (block size 4 for brevity, 6 blocks, 1 holder):
//
//	A admits "a b c d e f g" → blocks 0,1; A computes all 7 tokens;
//	  Commit: block 0 = [a b c d] is full → copy A's cells [0,4) to the
//	  holder, index h(abcd) → 0.
//	A finishes → Free: block 1 (partial, uncached) → head; block 0 (cached)
//	  → tail. Free queue: 1 2 3 4 5 0.
//	B admits "a b c d x y" → hit h(abcd) → claim block 0 (leaves the queue),
//	  copy holder [0,4) → B's slot; B computes only "x y" in block 1.
//	C needs 5 blocks while B runs: free queue 2 3 4 5 has 4 → C waits. If B
//	  had finished, block 0 would sit at the tail again and C would evict
//	  it last.
//
// # What the caller must guarantee
//
// One goroutine owns a Manager. The caller applies DrainOps to the engine
// before decoding the next batch, calls Commit after a step with the tokens
// computed so far, and calls Free exactly once per admitted sequence.
//
// What this package must not do: talk to llama.cpp, decide which sequence
// runs or is preempted (that is the scheduler), or block.
package kvcache
