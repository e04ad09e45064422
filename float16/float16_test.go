package float16

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

func TestRoundTripsEveryHalf(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got := FromFloat32(ToFloat32(h))
		if isNaN16(h) {
			if !isNaN16(got) {
				t.Errorf("NaN %#04x -> %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Errorf("%#04x -> %g -> %#04x", h, ToFloat32(h), got)
		}
	}
}

// nearest is a slow reference: the nearest half to x by search over
// all finite non-negative halves, ties to the even one, overflow to
// infinity (at and above 65520, the midpoint between 65504 and 2^16).
func nearest(x float32, pos []float64) uint16 {
	var sign uint16
	a := float64(x)
	if math.Signbit(a) {
		sign, a = 0x8000, -a
	}
	if a >= 65520 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(pos, a) // first half >= a
	if i < len(pos) && pos[i] == a {
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	dl, dh := a-pos[lo], pos[hi]-a
	switch {
	case dl < dh:
		return sign | uint16(lo)
	case dh < dl:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

func TestRoundsToNearestEven(t *testing.T) {
	pos := make([]float64, 0x7c00) // the finite non-negative halves, ascending
	for i := range pos {
		pos[i] = float64(ToFloat32(uint16(i)))
	}
	check := func(x float32) {
		t.Helper()
		if got, want := FromFloat32(x), nearest(x, pos); got != want {
			t.Errorf("FromFloat32(%g = %#08x) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
	// Every midpoint between neighbours, and just off it on both sides.
	for i := 0; i+1 < len(pos); i++ {
		mid := float32((pos[i] + pos[i+1]) / 2) // exact in float32
		for _, x := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(x)
			check(-x)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		x := math.Float32frombits(rng.Uint32())
		if x != x {
			continue
		}
		check(x)
	}
	for _, c := range []struct {
		x    float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {0.1, 0x2e66}, {65504, 0x7bff}, {65519, 0x7bff}, {65520, 0x7c00},
		{1e-8, 0}, {6e-8, 1}, {5.960464477539063e-08, 1}, {1e-9, 0}, {0.5, 0x3800}, {1e6, 0x7c00}, {0, 0}, {float32(math.Inf(-1)), 0xfc00}, {float32(math.Copysign(0, -1)), 0x8000},
	} {
		if got := FromFloat32(c.x); got != c.want {
			t.Errorf("FromFloat32(%g) = %#04x, want %#04x", c.x, got, c.want)
		}
	}
	if h := FromFloat32(float32(math.NaN())); !isNaN16(h) {
		t.Errorf("NaN -> %#04x", h)
	}
}
