package infer

import "testing"

// TestBufferPool: Get gives a buffer of its class's size, or of the size
// asked beyond the largest class; Put keeps only buffers of exactly one
// class's size, so that no Get returns a buffer shorter than asked.
func TestBufferPool(t *testing.T) {
	p := NewBufferPool(12, 24)
	for _, c := range []struct {
		n  int
		k  int
		ok bool
	}{{1, 12, true}, {4096, 12, true}, {4097, 13, true}, {800 << 10, 20, true}, {16 << 20, 24, true}, {16<<20 + 1, 25, false}} {
		if k, ok := p.Class(c.n); k != c.k || ok != c.ok {
			t.Errorf("Class(%d) = %d, %v; want %d, %v", c.n, k, ok, c.k, c.ok)
		}
		want := 1 << c.k
		if !c.ok {
			want = c.n
		}
		if b := p.Get(c.n); len(b.B) != want {
			t.Errorf("Get(%d): %d bytes, want %d", c.n, len(b.B), want)
		}
	}
	p.Put(&Buffer{B: make([]byte, 1024)}) // below the smallest class: dropped
	p.Put(&Buffer{B: make([]byte, 5000)}) // no class's size: dropped
	for range 100 {
		if b := p.Get(4096); len(b.B) != 4096 {
			t.Fatalf("Get(4096) after foreign Puts: %d bytes", len(b.B))
		}
	}
}
