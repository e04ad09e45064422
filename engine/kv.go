package engine

import (
	"errors"
	"fmt"
)

// KVLayout says how the KV of N consecutive positions is laid out in a KV's
// bytes. The engine defines it; other packages only store, slice, join and
// count KV through it.
//
// The bytes are a series of sections (for llama.cpp: the K tensor of every
// layer, then the V tensor of every layer). A section is Groups groups, and
// each group holds one Unit-byte element per position, positions in order:
//
//	section s, group g, position p  at  offset(s) + (g*N + p)*Unit
//
// A K row per position is one group of row-sized units; a transposed V is
// one group per embedding dimension with element-sized units.
type KVLayout struct {
	Sections []KVSection
}

// KVSection is one section of a KVLayout.
type KVSection struct {
	Groups, Unit int
}

// BytesPerPosition is the size of one position's KV.
func (l *KVLayout) BytesPerPosition() int {
	n := 0
	for _, s := range l.Sections {
		n += s.Groups * s.Unit
	}
	return n
}

// Equal reports whether two layouts describe the same bytes.
func (l *KVLayout) Equal(o *KVLayout) bool {
	if l == o {
		return true
	}
	if l == nil || o == nil || len(l.Sections) != len(o.Sections) {
		return false
	}
	for i := range l.Sections {
		if l.Sections[i] != o.Sections[i] {
			return false
		}
	}
	return true
}

// KV is the KV-cache content of N consecutive positions of one sequence, in
// host memory. A KV is immutable once made: the prefix cache shares one
// among many sequences. Its Data may be memory off the Go heap (the prefix
// cache's, kvcache's doc.go) that is valid only for as long as whoever
// handed it over says, such as a step's restores until the step is done:
// copy what must outlive that.
type KV struct {
	Layout *KVLayout
	N      int
	Data   []byte
}

// ErrKVLayout is returned when KV pieces do not fit together.
var ErrKVLayout = errors.New("engine: KV layouts differ")

// Size is the number of bytes the KV holds.
func (kv *KV) Size() int { return len(kv.Data) }

// Slice returns a copy of positions [from, to).
func (kv *KV) Slice(from, to int) *KV {
	n := to - from
	return &KV{Layout: kv.Layout, N: n, Data: kv.AppendSlice(make([]byte, 0, max(n, 0)*kv.Layout.BytesPerPosition()), from, to)}
}

// AppendSlice appends the bytes of positions [from, to), in layout order,
// to dst: Slice's Data, into memory the caller chose.
func (kv *KV) AppendSlice(dst []byte, from, to int) []byte {
	if from < 0 || to > kv.N || from > to {
		panic(fmt.Sprintf("engine: KV slice [%d, %d) of %d positions", from, to, kv.N))
	}
	off := 0
	for _, s := range kv.Layout.Sections {
		for range s.Groups {
			dst = append(dst, kv.Data[off+from*s.Unit:off+to*s.Unit]...)
			off += kv.N * s.Unit
		}
	}
	return dst
}

// JoinKV returns the positions of the pieces, one after the other, as one
// layout-ordered byte slice of N positions, appended to dst.
func JoinKV(dst []byte, pieces []*KV) ([]byte, int, error) {
	if len(pieces) == 0 {
		return dst, 0, nil
	}
	l := pieces[0].Layout
	n := 0
	for _, p := range pieces {
		if !p.Layout.Equal(l) {
			return dst, 0, ErrKVLayout
		}
		if len(p.Data) != p.N*l.BytesPerPosition() {
			return dst, 0, fmt.Errorf("%w: %d bytes for %d positions", ErrKVLayout, len(p.Data), p.N)
		}
		n += p.N
	}
	offs := make([]int, len(pieces))
	for _, s := range l.Sections {
		for range s.Groups {
			for i, p := range pieces {
				w := p.N * s.Unit
				dst = append(dst, p.Data[offs[i]:offs[i]+w]...)
				offs[i] += w
			}
		}
	}
	return dst, n, nil
}
