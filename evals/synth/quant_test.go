package synth

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

func TestF16RoundTripsEveryHalf(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got := f32ToF16(f16ToF32(h))
		if isNaN16(h) {
			if !isNaN16(got) {
				t.Errorf("NaN %#04x -> %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Errorf("%#04x -> %g -> %#04x", h, f16ToF32(h), got)
		}
	}
}

// nearestF16 is a slow reference: the nearest half to x by search over
// all finite non-negative halves, ties to the even one, overflow to
// infinity (at and above 65520, the midpoint between 65504 and 2^16).
func nearestF16(x float32, pos []float64) uint16 {
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

func TestF16RoundsToNearestEven(t *testing.T) {
	pos := make([]float64, 0x7c00) // the finite non-negative halves, ascending
	for i := range pos {
		pos[i] = float64(f16ToF32(uint16(i)))
	}
	check := func(x float32) {
		t.Helper()
		if got, want := f32ToF16(x), nearestF16(x, pos); got != want {
			t.Errorf("f32ToF16(%g = %#08x) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
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
		{1e-8, 0}, {6e-8, 1}, {float32(math.Inf(-1)), 0xfc00}, {float32(math.Copysign(0, -1)), 0x8000},
	} {
		if got := f32ToF16(c.x); got != c.want {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", c.x, got, c.want)
		}
	}
	if h := f32ToF16(float32(math.NaN())); !isNaN16(h) {
		t.Errorf("NaN -> %#04x", h)
	}
}

func TestQ8_0Layout(t *testing.T) {
	x := make([]float32, 2*q8BlockLen)
	for i := range q8BlockLen {
		x[i] = float32(i-16) / 16 // max |x| = 1 at i = 0
	}
	// The second block is all zeros: scale 0, quants 0.
	b := appendQ8_0(nil, x)
	if len(b) != 2*q8BlockBytes {
		t.Fatalf("%d bytes, want %d", len(b), 2*q8BlockBytes)
	}
	if got, want := binary.LittleEndian.Uint16(b), f32ToF16(1.0/127); got != want {
		t.Errorf("scale %#04x, want %#04x", got, want)
	}
	for i, q := range b[2:q8BlockBytes] {
		want := int8(math.Round(float64(x[i] * 127)))
		if int8(q) != want {
			t.Errorf("q[%d] = %d, want %d", i, int8(q), want)
		}
	}
	if int8(b[2]) != -127 || int8(b[2+16]) != 0 || int8(b[2+8]) != -64 { // -0.5*127 = -63.5 rounds away from zero
		t.Errorf("quants %v", b[2:q8BlockBytes])
	}
	for i, v := range b[q8BlockBytes:] {
		if v != 0 {
			t.Fatalf("zero block byte %d = %d", i, v)
		}
	}
}

func TestQ8_0Error(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 64*q8BlockLen)
	for i := range x {
		x[i] = (2*rng.Float32() - 1) * float32(1+i/q8BlockLen) / 50
	}
	y := dequantQ8_0(appendQ8_0(nil, x))
	if len(y) != len(x) {
		t.Fatalf("%d values back, want %d", len(y), len(x))
	}
	for blk := 0; blk < len(x); blk += q8BlockLen {
		var amax float32
		for _, v := range x[blk : blk+q8BlockLen] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := float64(amax / 127)
		d16 := float64(f16ToF32(f32ToF16(amax / 127)))
		bound := d/2 + 127*math.Abs(d16-d) + 1e-7
		for i := blk; i < blk+q8BlockLen; i++ {
			if e := math.Abs(float64(x[i] - y[i])); e > bound {
				t.Fatalf("element %d: %g -> %g, error %g > %g", i, x[i], y[i], e, bound)
			}
		}
	}
}
