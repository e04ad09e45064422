package infer

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/llmserve/llmserve/oip"
)

// TestConvertFP32SharesAlignedBytes: FP32 wire bytes that lie 4-byte
// aligned reach the model as they are (the []float32 shares them); at
// any other offset they are decoded into a copy with the same values.
func TestConvertFP32SharesAlignedBytes(t *testing.T) {
	vals := []float32{1.5, -2, float32(math.Inf(1)), 3.25e-7, 0}
	buf := make([]byte, 8+4*len(vals))
	for off := range 4 {
		raw := buf[off : off+4*len(vals)]
		for i, v := range vals {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		in := &Tensor{Name: "x", Datatype: oip.FP32, Shape: []int64{1, int64(len(vals))}, Raw: raw}
		got, err := convert(in, oip.FP32)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if math.Float32bits(got.F32[i]) != math.Float32bits(v) {
				t.Fatalf("offset %d: element %d = %v, want %v", off, i, got.F32[i], v)
			}
		}
		aligned := uintptr(unsafe.Pointer(&raw[0]))%4 == 0
		shared := unsafe.Pointer(&got.F32[0]) == unsafe.Pointer(&raw[0])
		if hostLittleEndian && shared != aligned {
			t.Fatalf("offset %d (aligned %v): the values share the wire bytes: %v", off, aligned, shared)
		}
	}
}

// TestFromTensorOutputBytes: outputs in the V2 form hold the values'
// little-endian bytes, FP32 and INT64.
func TestFromTensorOutputBytes(t *testing.T) {
	f := FromTensor(oip.Tensor{Name: "p", DType: oip.FP32, Shape: []int64{1, 2}, F32: []float32{0.5, float32(math.NaN())}})
	if f.Datatype != oip.FP32 || len(f.Raw) != 8 || binary.LittleEndian.Uint32(f.Raw) != math.Float32bits(0.5) || !math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(f.Raw[4:])))) {
		t.Fatalf("FP32 output: %+v", f)
	}
	i := FromTensor(oip.Tensor{Name: "l", DType: oip.INT64, Shape: []int64{2}, I64: []int64{-3, 1 << 40}})
	if i.Datatype != oip.INT64 || len(i.Raw) != 16 || int64(binary.LittleEndian.Uint64(i.Raw)) != -3 || binary.LittleEndian.Uint64(i.Raw[8:]) != 1<<40 {
		t.Fatalf("INT64 output: %+v", i)
	}
	if e := FromTensor(oip.Tensor{Name: "e", DType: oip.FP32, Shape: []int64{0}, F32: []float32{}}); len(e.Raw) != 0 {
		t.Fatalf("empty output: %+v", e)
	}
}
