package llamacpp

import (
	"cmp"
	"fmt"
	"slices"
)

// kvRange is one KV stream of one cache tensor: cells rows of rowBytes
// from start. Cell i of the stream is at start + i*rowBytes; a stream that
// holds n positions has written [start, start + n*rowBytes).
type kvRange struct {
	start    uintptr
	rowBytes int64
	cells    int
	stream   int
}

func (r kvRange) end() uintptr { return r.start + uintptr(r.rowBytes)*uintptr(r.cells) }

// kvPages maps KV streams to the pages of the buffer that holds them, so
// that the pages of an emptied stream can be given back and the pages in
// use counted. Pages shared by two streams (where a stream's bytes do not
// start or end on a page boundary) are given back only when the other
// stream has nothing in them. It is pure arithmetic over addresses: the
// binding does the madvise (kvmem.go).
type kvPages struct {
	page    int64
	streams int
	// ranges are sorted by start: every tensor's streams, in order.
	ranges []kvRange
	// of[s] lists the indexes in ranges of stream s's pieces.
	of [][]int
}

// kvTensorLayout is what ggml reports of one cache tensor: its data
// address, row stride (nb[1]), stream stride (nb[2]), cells per stream
// (ne[1]) and streams (ne[2]).
type kvTensorLayout struct {
	name                    string
	data                    uintptr
	rowBytes, streamBytes   int64
	cells, streams          int
	bufferBase, bufferBytes int64
}

// newKVPages checks that every tensor is a per-stream cache of cells
// positions in streams streams, laid out as llama.cpp lays it out
// (stream s at data + s*streamBytes, cell i at + i*rowBytes, rows
// contiguous within a stream), and returns the map.
func newKVPages(tensors []kvTensorLayout, streams, cells int, page int64) (*kvPages, error) {
	if len(tensors) == 0 {
		return nil, fmt.Errorf("no KV tensors")
	}
	if page <= 0 || page&(page-1) != 0 {
		return nil, fmt.Errorf("page size %d", page)
	}
	p := &kvPages{page: page, streams: streams, of: make([][]int, streams)}
	for _, t := range tensors {
		switch {
		case t.streams != streams:
			return nil, fmt.Errorf("tensor %s has %d streams, want %d", t.name, t.streams, streams)
		case t.cells != cells:
			return nil, fmt.Errorf("tensor %s has %d cells per stream, want %d", t.name, t.cells, cells)
		case t.rowBytes <= 0 || t.streamBytes != t.rowBytes*int64(cells):
			return nil, fmt.Errorf("tensor %s: rows of %d bytes, streams of %d bytes: not contiguous", t.name, t.rowBytes, t.streamBytes)
		}
		for s := range streams {
			p.ranges = append(p.ranges, kvRange{start: t.data + uintptr(int64(s)*t.streamBytes), rowBytes: t.rowBytes, cells: cells, stream: s})
		}
	}
	slices.SortFunc(p.ranges, func(a, b kvRange) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(p.ranges); i++ {
		if p.ranges[i].start < p.ranges[i-1].end() {
			return nil, fmt.Errorf("KV tensors overlap at %#x", p.ranges[i].start)
		}
	}
	for i, r := range p.ranges {
		p.of[r.stream] = append(p.of[r.stream], i)
	}
	return p, nil
}

func (p *kvPages) floor(x uintptr) uintptr { return x &^ uintptr(p.page-1) }
func (p *kvPages) ceil(x uintptr) uintptr  { return p.floor(x + uintptr(p.page-1)) }

// liveEnd is the end of the bytes range i has written when its stream
// holds n positions (start when it holds none).
func (p *kvPages) liveEnd(i int, lens []int) uintptr {
	r := p.ranges[i]
	n := 0
	if r.stream < len(lens) {
		n = min(max(lens[r.stream], 0), r.cells)
	}
	return r.start + uintptr(r.rowBytes)*uintptr(n)
}

// release returns the address ranges [lo, hi) to give back when stream s
// empties, given how many positions every other stream holds (lens[s] is
// ignored). Whole pages inside the stream's pieces are always released;
// a page it shares with a neighbour only when the neighbour has written
// nothing in it.
func (p *kvPages) release(s int, lens []int) [][2]uintptr {
	if s < 0 || s >= p.streams {
		return nil
	}
	var out [][2]uintptr
	for _, i := range p.of[s] {
		r := p.ranges[i]
		lo, hi := p.ceil(r.start), p.floor(r.end())
		if first := p.floor(r.start); first != r.start && p.freeBefore(i, first, lens) {
			lo = first
		}
		if last := p.ceil(r.end()); last != r.end() && p.freeAfter(i, last, lens) {
			hi = last
		}
		if hi > lo {
			if n := len(out); n > 0 && out[n-1][1] == lo {
				out[n-1][1] = hi
			} else {
				out = append(out, [2]uintptr{lo, hi})
			}
		}
	}
	return out
}

// freeBefore reports whether no range before i has live bytes at or after
// from (the first page range i shares with them).
func (p *kvPages) freeBefore(i int, from uintptr, lens []int) bool {
	for j := i - 1; j >= 0 && p.ranges[j].end() > from; j-- {
		if p.liveEnd(j, lens) > max(from, p.ranges[j].start) {
			return false
		}
	}
	return true
}

// freeAfter reports whether no range after i has live bytes before to
// (the end of the last page range i shares with them).
func (p *kvPages) freeAfter(i int, to uintptr, lens []int) bool {
	for j := i + 1; j < len(p.ranges) && p.ranges[j].start < to; j++ {
		if p.liveEnd(j, lens) > p.ranges[j].start {
			return false
		}
	}
	return true
}

// committed is the bytes of the pages that hold the first lens[s]
// positions of every stream s: what those positions take in resident
// memory (a page two streams share counts once).
func (p *kvPages) committed(lens []int) int64 {
	var total int64
	var last uintptr // end of the last page counted
	for i := range p.ranges {
		end := p.liveEnd(i, lens)
		start := p.ranges[i].start
		if end == start {
			continue
		}
		lo, hi := p.floor(start), p.ceil(end)
		lo = max(lo, last)
		if hi > lo {
			total += int64(hi - lo)
			last = hi
		}
	}
	return total
}

// reserved is the address space the KV tensors take.
func (p *kvPages) reserved() int64 {
	var total int64
	for _, r := range p.ranges {
		total += r.rowBytes * int64(r.cells)
	}
	return total
}
