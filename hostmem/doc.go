// Package hostmem allocates byte buffers outside the Go heap, in anonymous
// memory mappings (mmap), for data that is large, long-lived and freed at
// known moments: the prefix cache's KV blocks. The Go collector neither
// scans nor counts them, so they do not grow its heap goal: a heap of
// 1 GiB of cached blocks does not become 2 GiB of resident memory under
// GOGC=100.
//
// # Using it
//
// An Arena hands out Bufs: Alloc(n) returns n writable bytes (zeroed the
// first time a slot is used; a reused slot holds what it held before), and
// Free returns them. Small sizes (up to MaxSlab) come from slabs: mappings
// of at least SlabBytes cut into equal slots of one size class (eight
// classes per doubling, so a slot wastes at most an eighth of its size), a
// free slot reused before a new slab is mapped, and a slab unmapped when
// its last slot is freed (one empty slab per class is kept as a spare, so
// that an alloc and free in turn do not map and unmap). Larger sizes get a
// mapping each, unmapped on Free. An Arena is safe for concurrent use.
//
// # What the caller must guarantee
//
// Free every Buf exactly once, and touch its bytes only between Alloc and
// Free: after Free the memory may hold another Buf's data or be unmapped.
// A Buf's bytes are not Go-heap memory: never keep the only reference to a
// Go pointer in them (the collector does not see it), and do not pass them
// where a caller may retain them past Free.
//
// Double frees and frees of foreign Bufs panic. Two debug modes catch a
// use after Free. With Options.Guard every Buf has its own mapping, and
// Free releases its pages and makes it inaccessible (PROT_NONE) without
// ever reusing the address: a read or write after Free faults at once (a
// crash, or a panic under debug.SetPanicOnFault) instead of returning stale
// bytes; tests of code that owns Bufs run with it. With Options.Poison,
// slabs work as usual but a freed slot is filled with the Poison byte, and
// Alloc panics if a slot it hands out again was written to after Free.
//
// What this package must not do: know what the bytes mean, or hand memory
// to the collector.
package hostmem
