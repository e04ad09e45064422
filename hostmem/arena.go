package hostmem

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// SlabBytes is the least size of a slab's mapping.
	SlabBytes = 1 << 20
	// MaxSlab is the largest size served from slabs; larger Bufs get a
	// mapping each.
	MaxSlab = 4 << 20
	// minSlots is the least number of slots in a slab.
	minSlots = 8
	// Poison is the byte a Poison arena fills freed slots with.
	Poison = 0xdb
)

// ErrNoMemory is returned when the kernel refuses a mapping.
var ErrNoMemory = errors.New("hostmem: out of memory")

// Options configure an Arena.
type Options struct {
	// Guard gives every Buf its own mapping and, on Free, poisons it and
	// makes it inaccessible forever (the address is never reused), so a
	// use after Free faults. For tests: freed memory stays reserved.
	Guard bool
	// Poison fills a freed slab slot with the Poison byte and checks, when
	// the slot is handed out again, that nothing wrote to it meanwhile
	// (Alloc panics if something did): a read after Free sees poison, a
	// write after Free is caught. Ignored with Guard.
	Poison bool
}

// Buf is memory from an Arena. The zero Buf is empty (Alloc(0)).
type Buf struct {
	b []byte
	s *slab
	i int32
}

// Bytes returns the Buf's memory: len and cap are the size asked for.
func (b Buf) Bytes() []byte { return b.b }

// Len is the size asked for.
func (b Buf) Len() int { return len(b.b) }

// Stats describe an Arena's memory.
type Stats struct {
	// Bufs and Bytes count the live Bufs and the bytes asked for.
	Bufs  int
	Bytes int64
	// Mapped is the memory mapped now (slabs, spares and single
	// mappings; with Guard, freed mappings too).
	Mapped int64
	// Maps and Unmaps count mmap and munmap calls.
	Maps, Unmaps uint64
}

// Arena allocates Bufs. See the package documentation.
type Arena struct {
	guard, poison bool
	page          int

	mu      sync.Mutex
	classes map[int]*class // by slot size; guarded by mu
	stats   Stats          // guarded by mu
}

// class is one slot size's slabs.
type class struct {
	size int
	// avail are the slabs with a free slot; a slab's pos is its index.
	avail []*slab
	// spare is an empty slab kept mapped, or nil.
	spare *slab
}

// slab is one mapping: slots of one size, or one Buf (single).
type slab struct {
	a     *Arena
	mem   []byte
	c     *class // nil for a single mapping
	size  int
	free  []int32 // free slot indexes
	used  []bool
	nUsed int
	// wasUsed marks slots freed at least once (Poison: they hold poison).
	wasUsed []bool
	pos     int // index in c.avail, or -1
	single  bool
}

// New returns an empty Arena.
func New(opt Options) *Arena {
	return &Arena{guard: opt.Guard, poison: opt.Poison && !opt.Guard, page: os.Getpagesize(), classes: make(map[int]*class)}
}

// Alloc returns n bytes, or ErrNoMemory. Alloc(0) returns the empty Buf.
func (a *Arena) Alloc(n int) (Buf, error) {
	switch {
	case n < 0:
		panic(fmt.Sprintf("hostmem: alloc of %d bytes", n))
	case n == 0:
		return Buf{}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.guard || n > MaxSlab {
		s, err := a.mapSingle(n)
		if err != nil {
			return Buf{}, err
		}
		a.stats.Bufs++
		a.stats.Bytes += int64(n)
		return Buf{b: s.mem[:n:n], s: s}, nil
	}
	size := classSize(n)
	c := a.classes[size]
	if c == nil {
		c = &class{size: size}
		a.classes[size] = c
	}
	if len(c.avail) == 0 {
		s := c.spare
		c.spare = nil
		if s == nil {
			var err error
			if s, err = a.mapSlab(c); err != nil {
				return Buf{}, err
			}
		}
		s.pos = len(c.avail)
		c.avail = append(c.avail, s)
	}
	s := c.avail[len(c.avail)-1]
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.used[i] = true
	s.nUsed++
	if len(s.free) == 0 {
		c.remove(s)
	}
	a.stats.Bufs++
	a.stats.Bytes += int64(n)
	off := int(i) * size
	if a.poison && s.poisoned(i) {
		for _, v := range s.mem[off : off+size] {
			if v != Poison {
				panic("hostmem: a freed slot was written to after Free")
			}
		}
	}
	return Buf{b: s.mem[off : off+n : off+n], s: s, i: i}, nil
}

// Free returns a Buf's memory. Freeing the empty Buf does nothing; a Buf
// freed twice, or not from this Arena, panics.
func (a *Arena) Free(b Buf) {
	if b.s == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := b.s
	if s.a != a || int(b.i) >= len(s.used) || !s.used[b.i] {
		panic("hostmem: Free of a Buf that is not live in this Arena")
	}
	s.used[b.i] = false
	s.nUsed--
	a.stats.Bufs--
	a.stats.Bytes -= int64(len(b.b))
	if s.single {
		if a.guard {
			a.retire(s)
		} else {
			a.unmap(s)
		}
		return
	}
	c := s.c
	if a.poison {
		off := int(b.i) * s.size
		for i := range s.mem[off : off+s.size] {
			s.mem[off+i] = Poison
		}
		s.setPoisoned(b.i)
	}
	s.free = append(s.free, b.i)
	if len(s.free) == 1 {
		s.pos = len(c.avail)
		c.avail = append(c.avail, s)
	}
	if s.nUsed == 0 {
		c.remove(s)
		if c.spare == nil {
			c.spare = s
		} else {
			a.unmap(s)
		}
	}
}

// Stats returns the Arena's counters.
func (a *Arena) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// Trim unmaps the spare slabs.
func (a *Arena) Trim() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.classes {
		if c.spare != nil {
			a.unmap(c.spare)
			c.spare = nil
		}
	}
}

func (c *class) remove(s *slab) {
	if s.pos < 0 {
		return
	}
	last := c.avail[len(c.avail)-1]
	c.avail[s.pos] = last
	last.pos = s.pos
	c.avail = c.avail[:len(c.avail)-1]
	s.pos = -1
}

// classSize rounds n up to its slot size: a multiple of 64 up to 512,
// then eight sizes per doubling.
func classSize(n int) int {
	if n <= 512 {
		return (n + 63) &^ 63
	}
	step := 1 << (bits.Len(uint(n-1)) - 4) // an eighth of the power of two below
	return (n + step - 1) &^ (step - 1)
}

func (a *Arena) roundPage(n int) int { return (n + a.page - 1) &^ (a.page - 1) }

func (a *Arena) mmap(n int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap of %d bytes: %w", ErrNoMemory, n, err)
	}
	a.stats.Maps++
	a.stats.Mapped += int64(n)
	return mem, nil
}

func (a *Arena) mapSingle(n int) (*slab, error) {
	mem, err := a.mmap(a.roundPage(n))
	if err != nil {
		return nil, err
	}
	return &slab{a: a, mem: mem, size: n, used: []bool{true}, nUsed: 1, pos: -1, single: true}, nil
}

func (a *Arena) mapSlab(c *class) (*slab, error) {
	bytes := a.roundPage(max(SlabBytes, minSlots*c.size))
	mem, err := a.mmap(bytes)
	if err != nil {
		return nil, err
	}
	n := bytes / c.size
	s := &slab{a: a, mem: mem, c: c, size: c.size, free: make([]int32, n), used: make([]bool, n), pos: -1}
	for i := range s.free {
		s.free[i] = int32(n - 1 - i) // slot 0 first
	}
	return s, nil
}

func (a *Arena) unmap(s *slab) {
	if err := unix.Munmap(s.mem); err != nil {
		panic(fmt.Sprintf("hostmem: munmap: %v", err))
	}
	a.stats.Unmaps++
	a.stats.Mapped -= int64(len(s.mem))
	s.mem = nil
}

// retire releases a Guard mapping's pages and makes it inaccessible; it
// stays mapped so that its address is never handed out again.
func (a *Arena) retire(s *slab) {
	if err := unix.Madvise(s.mem, unix.MADV_DONTNEED); err != nil {
		panic(fmt.Sprintf("hostmem: madvise: %v", err))
	}
	if err := unix.Mprotect(s.mem, unix.PROT_NONE); err != nil {
		panic(fmt.Sprintf("hostmem: mprotect: %v", err))
	}
}

// addr is the address of a Buf's first byte, for tests.
func (b Buf) addr() uintptr {
	if len(b.b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b.b[0]))
}

func (s *slab) poisoned(i int32) bool { return s.wasUsed != nil && s.wasUsed[i] }

func (s *slab) setPoisoned(i int32) {
	if s.wasUsed == nil {
		s.wasUsed = make([]bool, len(s.used))
	}
	s.wasUsed[i] = true
}
