package kvcache

// EventKind says what happened to a cached block.
type EventKind uint8

const (
	// BlockStored: a block or a tail entered the prefix cache (events do
	// not tell them apart: both are entries a lookup can hit).
	BlockStored EventKind = iota + 1
	// BlockRemoved: a cached block was evicted.
	BlockRemoved
)

func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "stored"
	case BlockRemoved:
		return "removed"
	}
	return "unknown"
}

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

// eventRing is the bounded outbox: when it is full, the oldest event is
// overwritten and counted as dropped.
type eventRing struct {
	buf     []Event
	start   int // index of the oldest event
	n       int
	dropped uint64
}

func (r *eventRing) push(e Event) {
	if len(r.buf) == 0 {
		r.dropped++
		return
	}
	if r.n == len(r.buf) {
		r.buf[r.start] = e
		r.start = (r.start + 1) % len(r.buf)
		r.dropped++
		return
	}
	r.buf[(r.start+r.n)%len(r.buf)] = e
	r.n++
}

func (r *eventRing) drain() []Event {
	if r.n == 0 {
		return nil
	}
	out := make([]Event, r.n)
	for i := range out {
		out[i] = r.buf[(r.start+i)%len(r.buf)]
	}
	r.start, r.n = 0, 0
	return out
}
