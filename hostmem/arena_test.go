package hostmem

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustAlloc(t testing.TB, a *Arena, n int) Buf {
	t.Helper()
	b, err := a.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	if b.Len() != n || len(b.Bytes()) != n || cap(b.Bytes()) != n {
		t.Fatalf("Alloc(%d): len %d cap %d", n, len(b.Bytes()), cap(b.Bytes()))
	}
	return b
}

func TestAllocFreeReuse(t *testing.T) {
	a := New(Options{})
	b := mustAlloc(t, a, 10240)
	for i := range b.Bytes() {
		if b.Bytes()[i] != 0 {
			t.Fatal("a new slot is not zeroed")
		}
		b.Bytes()[i] = byte(i)
	}
	c := mustAlloc(t, a, 10240)
	if b.addr() == c.addr() {
		t.Fatal("two live Bufs share memory")
	}
	addr := b.addr()
	a.Free(b)
	d := mustAlloc(t, a, 10000) // the same class: the freed slot
	if d.addr() != addr {
		t.Fatalf("the freed slot was not reused: %x, freed %x", d.addr(), addr)
	}
	if st := a.Stats(); st.Bufs != 2 || st.Bytes != 20240 || st.Maps != 1 || st.Mapped != SlabBytes {
		t.Fatalf("stats %+v", st)
	}
	a.Free(c)
	a.Free(d)
	if st := a.Stats(); st.Bufs != 0 || st.Bytes != 0 || st.Mapped != SlabBytes {
		t.Fatalf("after freeing all, the slab stays as the spare: %+v", st)
	}
	a.Trim()
	if st := a.Stats(); st.Mapped != 0 || st.Unmaps != 1 {
		t.Fatalf("after Trim: %+v", st)
	}
}

func TestSlabsComeAndGo(t *testing.T) {
	a := New(Options{})
	const size = 10240
	per := SlabBytes / classSize(size)
	var bufs []Buf
	for range 3 * per {
		bufs = append(bufs, mustAlloc(t, a, size))
	}
	if st := a.Stats(); st.Maps != 3 {
		t.Fatalf("%d slots of %d per slab took %d maps", len(bufs), per, st.Maps)
	}
	seen := map[uintptr]bool{}
	for _, b := range bufs {
		if seen[b.addr()] {
			t.Fatal("a slot was handed out twice")
		}
		seen[b.addr()] = true
	}
	rand.Shuffle(len(bufs), func(i, j int) { bufs[i], bufs[j] = bufs[j], bufs[i] })
	for _, b := range bufs {
		a.Free(b)
	}
	// Two emptied slabs were unmapped, one is the spare.
	if st := a.Stats(); st.Unmaps != 2 || st.Mapped != SlabBytes {
		t.Fatalf("stats %+v", st)
	}
}

func TestZeroSize(t *testing.T) {
	a := New(Options{Guard: true})
	b := mustAlloc(t, a, 0)
	if b.Bytes() != nil {
		t.Fatal("Alloc(0) returned memory")
	}
	a.Free(b)
	a.Free(Buf{})
	if st := a.Stats(); st != (Stats{}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestLargeGetsItsOwnMapping(t *testing.T) {
	a := New(Options{})
	b := mustAlloc(t, a, 64<<20+3)
	b.Bytes()[len(b.Bytes())-1] = 1
	if st := a.Stats(); st.Maps != 1 || st.Mapped < 64<<20+3 {
		t.Fatalf("stats %+v", st)
	}
	a.Free(b)
	if st := a.Stats(); st.Mapped != 0 || st.Unmaps != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestHugeFails(t *testing.T) {
	a := New(Options{})
	if _, err := a.Alloc(1 << 50); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("Alloc(1 PiB): %v", err)
	}
	if st := a.Stats(); st != (Stats{}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Alloc(-1) did not panic")
		}
	}()
	_, _ = New(Options{}).Alloc(-1)
}

func TestDoubleFreePanics(t *testing.T) {
	for _, opt := range []Options{{}, {Guard: true}, {Poison: true}} {
		for _, n := range []int{100, MaxSlab + 1} {
			a := New(opt)
			b := mustAlloc(t, a, n)
			keep := mustAlloc(t, a, n) // the slab stays
			a.Free(b)
			func() {
				defer func() {
					if recover() == nil {
						t.Fatalf("%+v: a double free of %d bytes did not panic", opt, n)
					}
				}()
				a.Free(b)
			}()
			a.Free(keep)
		}
	}
}

func TestForeignFreePanics(t *testing.T) {
	a, other := New(Options{}), New(Options{})
	b := mustAlloc(t, other, 100)
	defer func() {
		if recover() == nil {
			t.Fatal("freeing another Arena's Buf did not panic")
		}
		other.Free(b)
	}()
	a.Free(b)
}

func TestClassSize(t *testing.T) {
	prev := 0
	for n := 1; n <= MaxSlab; n++ {
		c := classSize(n)
		if c < n || c < prev || c%64 != 0 || (n > 512 && float64(c) > float64(n)*1.125+64) {
			t.Fatalf("classSize(%d) = %d (previous %d)", n, c, prev)
		}
		prev = c
	}
	if classSize(10240) != 10240 {
		t.Fatalf("a 10 KiB block wastes %d bytes", classSize(10240)-10240)
	}
}

// A read after Free faults in a Guard arena.
func TestGuardReadAfterFreeFaults(t *testing.T) {
	a := New(Options{Guard: true})
	b := mustAlloc(t, a, 10240)
	b.Bytes()[5] = 7
	stale := b.Bytes()
	a.Free(b)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var got byte
	func() {
		defer func() {
			r := recover()
			if r == nil {
				t.Fatalf("a read after Free returned %d instead of faulting", got)
			}
			if err, ok := r.(runtime.Error); !ok || err == nil {
				t.Fatalf("recovered %v, not a fault", r)
			}
		}()
		got = stale[5]
	}()
	// The address is never handed out again.
	c := mustAlloc(t, a, 10240)
	if c.addr() == b.addr() {
		t.Fatal("a Guard arena reused a freed address")
	}
	a.Free(c)
}

// A write after Free is caught when the slot is handed out again, and a
// read after Free sees poison.
func TestPoisonCatchesWriteAfterFree(t *testing.T) {
	a := New(Options{Poison: true})
	b := mustAlloc(t, a, 1000)
	copy(b.Bytes(), bytes.Repeat([]byte{1}, 1000))
	stale := b.Bytes()
	a.Free(b)
	if !bytes.Equal(stale, bytes.Repeat([]byte{Poison}, 1000)) {
		t.Fatal("freed memory is not poisoned")
	}
	// Clean reuse passes the check.
	c := mustAlloc(t, a, 1000)
	a.Free(c)
	stale[999] = 2
	defer func() {
		if recover() == nil {
			t.Fatal("a write after Free was not caught")
		}
	}()
	_, _ = a.Alloc(1000)
}

func TestConcurrentFree(t *testing.T) {
	a := New(Options{Poison: true})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var held []Buf
			for i := range 2000 {
				b, err := a.Alloc(1 + (g*997+i*31)%20000)
				if err != nil {
					t.Error(err)
					return
				}
				b.Bytes()[0] = byte(g)
				held = append(held, b)
				if len(held) > 50 {
					a.Free(held[0])
					held = held[1:]
				}
			}
			for _, b := range held {
				if b.Bytes()[0] != byte(g) {
					t.Error("a Buf was overwritten by another goroutine")
				}
				a.Free(b)
			}
		})
	}
	wg.Wait()
	if st := a.Stats(); st.Bufs != 0 || st.Bytes != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// BenchmarkBlock measures what a prefix-cache block costs to allocate and
// free: stories260K's 10 KiB and a 135M model's 360 KiB (both from slabs),
// against the Go heap.
func BenchmarkBlock(b *testing.B) {
	for _, size := range []int{10 << 10, 360 << 10} {
		b.Run(byteSize(size)+"/hostmem", func(b *testing.B) {
			a := New(Options{})
			b.SetBytes(int64(size))
			for b.Loop() {
				buf, _ := a.Alloc(size)
				buf.Bytes()[0] = 1
				a.Free(buf)
			}
		})
		// A cache that churns: alloc a block, free the oldest of 1024.
		b.Run(byteSize(size)+"/hostmem-churn", func(b *testing.B) {
			a := New(Options{})
			ring := make([]Buf, 1024)
			i := 0
			b.SetBytes(int64(size))
			for b.Loop() {
				a.Free(ring[i])
				ring[i], _ = a.Alloc(size)
				ring[i].Bytes()[0] = 1
				i = (i + 1) % len(ring)
			}
			for _, r := range ring {
				a.Free(r)
			}
		})
		b.Run(byteSize(size)+"/go-heap", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				buf := make([]byte, size)
				buf[0] = 1
				sink = buf
			}
		})
	}
}

var sink []byte

func byteSize(n int) string { return strconv.Itoa(n>>10) + "KiB" }
