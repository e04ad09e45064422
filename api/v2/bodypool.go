package v2

import (
	"bytes"
	"io"
	"math/bits"
	"sync"
)

// Request bodies of tensor inference requests are read into buffers that
// are reused once the request is answered: a 256-row CNN request is 800
// kB of binary tensor data, which the model reads where it lies
// (infer.ConvertInputs), and allocating it per request (zeroed, then left
// to the garbage collector) was about a tenth of the server's CPU.
//
// A buffer goes back only when nothing can hold it any more: the request
// was a tensor model's and succeeded (the model's Run has returned; it
// keeps no input), so an error, a canceled request or another kind of
// model leaves its buffer to the garbage collector.

const (
	minBodyClass = 12 // 4 KiB, the smallest pooled buffer
	maxBodyClass = 24 // 16 MiB, the largest: bigger bodies are allocated
)

// bodyPool holds reusable body buffers by size class: class k holds
// buffers of exactly 1<<k bytes.
type bodyPool struct {
	classes [maxBodyClass - minBodyClass + 1]sync.Pool
}

var bodyBuffers bodyPool

// bodyBuffer is a buffer from bodyPool; b is nil when the body was too
// large (or of unknown length) to be pooled.
type bodyBuffer struct{ b []byte }

// class is the size class of a buffer of at least n bytes, and false when
// n is beyond the largest.
func bodyClass(n int) (int, bool) {
	k := max(bits.Len(uint(n-1)), minBodyClass)
	return k, k <= maxBodyClass
}

func (p *bodyPool) get(n int) *bodyBuffer {
	k, ok := bodyClass(n)
	if !ok {
		return &bodyBuffer{b: make([]byte, n)}
	}
	if v, _ := p.classes[k-minBodyClass].Get().(*bodyBuffer); v != nil {
		return v
	}
	return &bodyBuffer{b: make([]byte, 1<<k)}
}

// put gives a buffer back; the caller must hold no slice of it.
func (p *bodyPool) put(v *bodyBuffer) {
	if v == nil || len(v.b) == 0 || len(v.b)&(len(v.b)-1) != 0 {
		return
	}
	if k, ok := bodyClass(len(v.b)); ok {
		p.classes[k-minBodyClass].Put(v)
	}
}

// readPooled is readAll into a buffer from bodyBuffers. buf is nil when
// the body's length is unknown or over the limit (then it was read as
// readAll reads it); otherwise the caller gives it back with put once
// nothing holds the body.
func readPooled(r io.Reader, n, limit int64, at int) (body []byte, buf *bodyBuffer, err error) {
	if limit <= 0 {
		limit = 64 << 20
	}
	if n <= 0 || n > limit {
		body, err = io.ReadAll(r)
		return body, nil, err
	}
	pad := (8 - at%8) % 8
	need := pad + int(n) + bytes.MinRead // room to read EOF without growing
	buf = bodyBuffers.get(need)
	// A buffer from the pool is aligned as Go allocated it (to 8 at
	// least), so body[at] is 8-byte aligned.
	b := bytes.NewBuffer(buf.b[pad:pad:need])
	_, err = b.ReadFrom(r)
	return b.Bytes(), buf, err
}
