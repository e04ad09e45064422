package synth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/llmserve/llmserve/float16"
	"github.com/llmserve/llmserve/gguf"
)

// q8_0 is ggml's block_q8_0: 32 elements as an IEEE half-precision scale d
// followed by 32 int8 quants q, the value of element i being d*q[i].
const (
	q8BlockLen   = gguf.Q8BlockLen
	q8BlockBytes = gguf.Q8BlockBytes
)

// writeRow writes row to w encoded as typ (F32, F16 or Q8_0), reusing
// buf's memory; it returns buf for the next row.
func writeRow(w io.Writer, buf []byte, row []float32, typ gguf.TensorType) ([]byte, error) {
	switch typ {
	case gguf.F32:
		buf = appendF32(buf[:0], row)
	case gguf.F16:
		buf = appendF16(buf[:0], row)
	case gguf.Q8_0:
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
		b = binary.LittleEndian.AppendUint16(b, float16.FromFloat32(v))
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
		b = binary.LittleEndian.AppendUint16(b, float16.FromFloat32(d))
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
		d := float16.ToFloat32(binary.LittleEndian.Uint16(b))
		for _, q := range b[2:q8BlockBytes] {
			out = append(out, d*float32(int8(q)))
		}
		b = b[q8BlockBytes:]
	}
	return out
}
