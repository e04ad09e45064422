package llamacpp

import (
	"math/rand/v2"
	"testing"
)

// layoutOf places tensors of the given row sizes one after the other from
// a page-aligned base, 32-byte aligned as ggml's allocator does.
func layoutOf(base uintptr, rows []int64, cells, streams int) []kvTensorLayout {
	var out []kvTensorLayout
	at := base
	for i, r := range rows {
		sb := r * int64(cells)
		out = append(out, kvTensorLayout{name: "cache_k_l" + string(rune('0'+i)), data: at, rowBytes: r, streamBytes: sb, cells: cells, streams: streams})
		at += uintptr(sb * int64(streams))
		at = (at + 31) &^ 31
	}
	return out
}

func TestKVPagesRelease(t *testing.T) {
	const page = 4096
	// Rows of 34 bytes (a q8_0 row of 32 elements) and 256 cells: streams
	// of 8704 bytes, 2.125 pages, so neighbours share pages.
	p, err := newKVPages(layoutOf(0x100000, []int64{34, 34}, 256, 3), 3, 256, page)
	if err != nil {
		t.Fatal(err)
	}
	s1 := p.ranges[p.of[1][0]]
	tests := []struct {
		name     string
		lens     []int
		wantLo   uintptr
		wantHigh uintptr
	}{
		{"neighbours empty: the shared pages go too", []int{0, 0, 0}, p.floor(s1.start), p.ceil(s1.end())},
		{"stream 2 holds a position: its first page stays", []int{0, 0, 1}, p.floor(s1.start), p.floor(s1.end())},
		{"stream 0 is full: its last page stays", []int{256, 0, 0}, p.ceil(s1.start), p.ceil(s1.end())},
		{"stream 0 holds little: its last page is free", []int{10, 0, 0}, p.floor(s1.start), p.ceil(s1.end())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.release(1, tt.lens)
			if len(got) == 0 || got[0][0] != tt.wantLo || got[0][1] != tt.wantHigh {
				t.Errorf("release of stream 1 in tensor 0 = %#x, want [%#x, %#x)", got, tt.wantLo, tt.wantHigh)
			}
		})
	}
	if got := p.committed([]int{0, 0, 0}); got != 0 {
		t.Errorf("committed with nothing held = %d", got)
	}
	// 200 positions of 34 bytes: 6800 bytes in each tensor's stream 0,
	// which is 2 pages from tensor 0's page-aligned start, and 3 pages
	// from tensor 1's (at 26112 bytes, 6.375 pages in).
	if got := p.committed([]int{200, 0, 0}); got != 5*page {
		t.Errorf("committed = %d, want %d", got, 5*page)
	}
	if got, want := p.reserved(), int64(2*3*256*34); got != want {
		t.Errorf("reserved = %d, want %d", got, want)
	}
}

// TestKVPagesReleaseProperty checks random layouts and fills: a release
// never touches another stream's live bytes, always covers every page that
// lies wholly inside the stream, and committed counts every live byte.
func TestKVPagesReleaseProperty(t *testing.T) {
	const page = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		streams := 2 + rng.IntN(6)
		cells := 256 * (1 + rng.IntN(4))
		var rows []int64
		for range 1 + rng.IntN(4) {
			rows = append(rows, []int64{16, 34, 18, 64, 128, 72, 384}[rng.IntN(7)])
		}
		p, err := newKVPages(layoutOf(0x200000, rows, cells, streams), streams, cells, page)
		if err != nil {
			t.Fatal(err)
		}
		lens := make([]int, streams)
		for i := range lens {
			if rng.IntN(3) > 0 {
				lens[i] = rng.IntN(cells + 1)
			}
		}
		s := rng.IntN(streams)
		rel := p.release(s, lens)
		for _, r := range rel {
			if r[0]%page != 0 || r[1]%page != 0 || r[1] <= r[0] {
				t.Fatalf("iter %d: range %#x not whole pages", iter, r)
			}
		}
		for i, rg := range p.ranges {
			live := p.liveEnd(i, lens)
			if rg.stream == s {
				// Every page wholly inside the stream is released.
				for pg := p.ceil(rg.start); pg+page <= rg.end(); pg += page {
					if !covered(rel, pg) {
						t.Fatalf("iter %d: page %#x of stream %d not released (%#x)", iter, pg, s, rel)
					}
				}
				continue
			}
			for _, r := range rel {
				if rg.start < r[1] && live > r[0] && live > rg.start {
					t.Fatalf("iter %d: release %#x of stream %d overlaps stream %d's live bytes [%#x, %#x)", iter, r, s, rg.stream, rg.start, live)
				}
			}
		}
		// committed covers every live byte, in whole pages.
		var need int64
		for i, rg := range p.ranges {
			if live := p.liveEnd(i, lens); live > rg.start {
				need += int64(live - rg.start)
			}
		}
		if got := p.committed(lens); got < need || got%page != 0 {
			t.Fatalf("iter %d: committed %d for %d live bytes", iter, got, need)
		}
	}
}

func covered(rel [][2]uintptr, pg uintptr) bool {
	for _, r := range rel {
		if pg >= r[0] && pg < r[1] {
			return true
		}
	}
	return false
}

func TestNewKVPagesRefusesOtherLayouts(t *testing.T) {
	good := layoutOf(0x100000, []int64{64}, 256, 2)
	for name, mutate := range map[string]func(*kvTensorLayout){
		"streams":    func(l *kvTensorLayout) { l.streams = 3 },
		"cells":      func(l *kvTensorLayout) { l.cells = 512 },
		"transposed": func(l *kvTensorLayout) { l.streamBytes = l.rowBytes * 100 },
	} {
		l := good[0]
		mutate(&l)
		if _, err := newKVPages([]kvTensorLayout{l}, 2, 256, 4096); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := newKVPages(nil, 2, 256, 4096); err == nil {
		t.Error("no tensors: accepted")
	}
}
