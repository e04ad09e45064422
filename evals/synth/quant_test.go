package synth

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llmserve/llmserve/float16"
)

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
	if got, want := binary.LittleEndian.Uint16(b), float16.FromFloat32(1.0/127); got != want {
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
		d16 := float64(float16.ToFloat32(float16.FromFloat32(amax / 127)))
		bound := d/2 + 127*math.Abs(d16-d) + 1e-7
		for i := blk; i < blk+q8BlockLen; i++ {
			if e := math.Abs(float64(x[i] - y[i])); e > bound {
				t.Fatalf("element %d: %g -> %g, error %g > %g", i, x[i], y[i], e, bound)
			}
		}
	}
}
