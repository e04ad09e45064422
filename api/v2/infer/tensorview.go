package infer

import (
	"encoding/binary"
	"unsafe"
)

// hostLittleEndian says whether the host stores numbers as the wire does
// (binary tensor data and raw contents are little-endian).
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// float32View returns FP32 wire bytes as a []float32 that shares their
// memory, without decoding or copying them: on a little-endian host the
// bytes already are the float32 values. ok is false when that cannot be
// done (a big-endian host, or raw not 4-byte aligned: a BYTES or INT8
// input before it in the body); the caller decodes a copy then.
func float32View(raw []byte) (view []float32, ok bool) {
	if !hostLittleEndian || len(raw)%4 != 0 {
		return nil, false
	}
	if len(raw) == 0 {
		return []float32{}, true
	}
	p := unsafe.Pointer(unsafe.SliceData(raw))
	if uintptr(p)%unsafe.Alignof(float32(0)) != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(raw)/4), true
}

// valueBytes is float32View's converse, for outputs: the values' memory
// as little-endian wire bytes (FP32 or INT64), shared, or ok false on a
// big-endian host.
func valueBytes[T float32 | int64](vals []T) (raw []byte, ok bool) {
	if !hostLittleEndian {
		return nil, false
	}
	if len(vals) == 0 {
		return []byte{}, true
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), int(unsafe.Sizeof(vals[0]))*len(vals)), true
}
