package kvcache

// EventKind says what happened to a cached block.
type EventKind uint8

const (
	// BlockStored: a full block entered the prefix cache.
	BlockStored EventKind = iota + 1
	// BlockRemoved: a cached block was evicted.
	BlockRemoved
)

// Event reports a change to the prefix cache, for a router that tracks
// which node caches which prefix (vLLM's KV events).
type Event struct {
	Kind EventKind
	Hash Hash
	// Parent is the hash of the previous block (zero for the first block);
	// set for BlockStored.
	Parent Hash
	// Depth is the block's index in its sequence.
	Depth int
}
