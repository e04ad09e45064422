package infer

import (
	"math/bits"
	"sync"
)

// BufferPool holds reusable byte buffers by size class: class k holds
// buffers of exactly 1<<k bytes, for k from its smallest class to its
// largest; a larger request gets a buffer of its own, never kept. Both
// V2 transports read a tensor request's bytes into one (the REST body,
// the gRPC message) so that the model reads its tensors where they lie
// (ConvertInputs) and the buffer serves the next request once the model
// has answered. A buffer handed out again is not cleared: its user
// overwrites what it reads. Safe for concurrent use.
type BufferPool struct {
	min, max int
	classes  []sync.Pool
}

// Buffer is a buffer of a BufferPool; B is all of it (a power of two
// bytes when pooled). Go aligns an allocation this large to 8 bytes at
// least, so B[0] is 8-byte aligned.
type Buffer struct{ B []byte }

// NewBufferPool returns a pool of classes minClass to maxClass (buffers
// of 1<<minClass to 1<<maxClass bytes).
func NewBufferPool(minClass, maxClass int) *BufferPool {
	return &BufferPool{min: minClass, max: maxClass, classes: make([]sync.Pool, maxClass-minClass+1)}
}

// Class is the size class of a buffer of at least n bytes, false when n
// is beyond the largest.
func (p *BufferPool) Class(n int) (int, bool) {
	k := max(bits.Len(uint(n-1)), p.min)
	return k, k <= p.max
}

// Get returns a buffer of at least n bytes.
func (p *BufferPool) Get(n int) *Buffer {
	k, ok := p.Class(n)
	if !ok {
		return &Buffer{B: make([]byte, n)}
	}
	if v, _ := p.classes[k-p.min].Get().(*Buffer); v != nil {
		return v
	}
	return &Buffer{B: make([]byte, 1<<k)}
}

// Put gives b back (a buffer that is not exactly one class's size is
// dropped); the caller must hold no slice of it.
func (p *BufferPool) Put(b *Buffer) {
	if b == nil || len(b.B) == 0 {
		return
	}
	if k, ok := p.Class(len(b.B)); ok && len(b.B) == 1<<k {
		p.classes[k-p.min].Put(b)
	}
}
