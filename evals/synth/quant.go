package synth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// q8_0 is ggml's block_q8_0: 32 elements as an IEEE half-precision scale d
// followed by 32 int8 quants q, the value of element i being d*q[i].
const (
	q8BlockLen   = 32
	q8BlockBytes = 2 + q8BlockLen
)

// f32ToF16 converts f to IEEE 754 half precision, rounding to nearest with
// ties to even, as ggml's GGML_FP32_TO_FP16 (F16C's vcvtps2ph) does.
// Overflow gives infinity; NaN stays NaN (quiet).
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A half subnormal, m * 2^-24, or zero. Values below 2^-25 (and
		// all float32 subnormals) round to zero.
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		q := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++ // may carry into the smallest normal, 0x0400: still right
		}
		return sign | uint16(q)
	}
	q := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && q&1 == 1 {
		q++ // may carry into the exponent, up to infinity: still right
	}
	return sign | uint16(q)
}

// f16ToF32 converts an IEEE 754 half to float32 (exactly).
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant * 2^-24, exact in float32.
	v := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// writeRow writes row to w encoded as typ (F32, F16 or Q8_0), reusing
// buf's memory; it returns buf for the next row.
func writeRow(w io.Writer, buf []byte, row []float32, typ tensorType) ([]byte, error) {
	switch typ {
	case tensorF32:
		buf = appendF32(buf[:0], row)
	case tensorF16:
		buf = appendF16(buf[:0], row)
	case tensorQ8_0:
		buf = appendQ8_0(buf[:0], row)
	default:
		return buf, fmt.Errorf("cannot write type %v", typ)
	}
	_, err := w.Write(buf)
	return buf, err
}

// appendF32 appends x as little-endian float32s.
func appendF32(b []byte, x []float32) []byte {
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// appendF16 appends x as little-endian halves.
func appendF16(b []byte, x []float32) []byte {
	for _, v := range x {
		b = binary.LittleEndian.AppendUint16(b, f32ToF16(v))
	}
	return b
}

// appendQ8_0 appends x, whose length is a multiple of 32, as q8_0 blocks,
// computed as ggml's quantize_row_q8_0_ref does: d = max|x|/127, q =
// round(x/d) (halves away from zero), d stored as a half.
func appendQ8_0(b []byte, x []float32) []byte {
	for len(x) >= q8BlockLen {
		blk := x[:q8BlockLen]
		x = x[q8BlockLen:]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		b = binary.LittleEndian.AppendUint16(b, f32ToF16(d))
		for _, v := range blk {
			b = append(b, byte(int8(math.Round(float64(v*id)))))
		}
	}
	return b
}

// dequantQ8_0 decodes q8_0 blocks (for tests and checks).
func dequantQ8_0(b []byte) []float32 {
	out := make([]float32, 0, len(b)/q8BlockBytes*q8BlockLen)
	for len(b) >= q8BlockBytes {
		d := f16ToF32(binary.LittleEndian.Uint16(b))
		for _, q := range b[2:q8BlockBytes] {
			out = append(out, d*float32(int8(q)))
		}
		b = b[q8BlockBytes:]
	}
	return out
}
