package gguf

import (
	"errors"
	"fmt"
)

// Magic opens every GGUF file.
const Magic = "GGUF"

// Version is the version Write writes.
const Version = 3

// Alignment is the default alignment of tensor data, used when a file has no
// general.alignment key. Write always uses it and never writes that key.
const Alignment = 32

// Sentinel errors of Read and Decode.
var (
	// ErrNotGGUF: the input does not start with the GGUF magic.
	ErrNotGGUF = errors.New("not a GGUF file")
	// ErrTruncated: the input ends before the header (or, for
	// File.TensorData, a tensor's data) does.
	ErrTruncated = errors.New("GGUF file is truncated")
)

// Limits that keep a damaged file from making a reader allocate or loop
// without bound. The largest real vocabularies (Gemma's 262k tokens) are far
// below.
const (
	maxKVs        = 1 << 20
	maxTensors    = 1 << 20
	maxArrayLen   = 1 << 26
	maxStringLen  = 1 << 30
	maxDims       = 4 // GGML_MAX_DIMS
	preallocLimit = 1 << 16
)

// ValueType is a GGUF metadata value type (gguf_type).
type ValueType uint32

// The metadata value types, numbered as gguf.h numbers them.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

// KV is one metadata entry. Value holds one of uint8, int8, uint16, int16,
// uint32, int32, uint64, int64, float32, float64, bool, string, or a slice
// of one of them (a GGUF array). A value read keeps the exact type it was
// stored with; Write takes exactly these types. Nested arrays are not
// supported.
type KV struct {
	Key   string
	Value any
}

// TensorType is a ggml_type. The types whose sizes this package knows are
// named; others are read and written by number, but have no Size.
type TensorType uint32

// The ggml types of known size, numbered as ggml.h numbers them.
const (
	F32  TensorType = 0
	F16  TensorType = 1
	Q8_0 TensorType = 8
	I8   TensorType = 24
	I16  TensorType = 25
	I32  TensorType = 26
	I64  TensorType = 27
	F64  TensorType = 28
)

// Q8_0 blocks: 32 int8 quants and one float16 scale.
const (
	Q8BlockLen   = 32
	Q8BlockBytes = 2 + Q8BlockLen
)

func (t TensorType) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case Q8_0:
		return "Q8_0"
	case I8:
		return "I8"
	case I16:
		return "I16"
	case I32:
		return "I32"
	case I64:
		return "I64"
	case F64:
		return "F64"
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// BlockSize is the number of elements in one block of t and the bytes of
// one block, as ggml's type traits say; 0, 0 for types this package does
// not know.
func (t TensorType) BlockSize() (elems, bytes uint64) {
	switch t {
	case F32, I32:
		return 1, 4
	case F16, I16:
		return 1, 2
	case I8:
		return 1, 1
	case I64, F64:
		return 1, 8
	case Q8_0:
		return Q8BlockLen, Q8BlockBytes
	}
	return 0, 0
}

// TensorInfo describes one tensor: its name, its dimensions in ggml order
// (Shape[0] is the length of a row, the contiguous one), its type and the
// offset of its data from the start of the data section.
type TensorInfo struct {
	Name   string
	Shape  []uint64
	Type   TensorType
	Offset uint64
}

// Elements is the number of elements of the tensor. Read and Decode reject
// tensors whose count does not fit in an int64.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size is the number of bytes of the tensor's data, or an error when the
// type is unknown or the row length is not a whole number of blocks.
func (t TensorInfo) Size() (uint64, error) {
	be, bb := t.Type.BlockSize()
	if be == 0 {
		return 0, fmt.Errorf("tensor %q: unsupported type %v", t.Name, t.Type)
	}
	if len(t.Shape) == 0 || t.Shape[0]%be != 0 {
		return 0, fmt.Errorf("tensor %q: row length %v is not a multiple of %v's block of %d", t.Name, t.Shape, t.Type, be)
	}
	n := t.Elements() / be
	if n > (1<<63-1)/bb {
		return 0, fmt.Errorf("tensor %q: %d elements of %v is too large", t.Name, t.Elements(), t.Type)
	}
	return n * bb, nil
}

// File is what Read and Decode return: the metadata and tensor infos of a
// file, not its tensor data.
type File struct {
	Version uint32
	KVs     []KV
	Tensors []TensorInfo
	// DataOffset is where tensor data starts, from the start of the file.
	DataOffset int64
}

// Lookup returns the value of key and whether it is present. A key stored
// twice (which llama.cpp refuses) gives its first value.
func (f *File) Lookup(key string) (any, bool) {
	for _, e := range f.KVs {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// TensorData returns the bytes of t's data within data, the whole file f
// was read from; an error wrapping ErrTruncated when they lie past its end,
// or Size's error.
func (f *File) TensorData(data []byte, t TensorInfo) ([]byte, error) {
	size, err := t.Size()
	if err != nil {
		return nil, err
	}
	n := uint64(len(data))
	start := uint64(f.DataOffset)
	if start > n || t.Offset > n-start || size > n-start-t.Offset {
		return nil, fmt.Errorf("tensor %q: data past the end of the file: %w", t.Name, ErrTruncated)
	}
	start += t.Offset
	return data[start : start+size], nil
}

// AlignUp rounds n up to a multiple of align, a power of two.
func AlignUp(n, align int64) int64 {
	return (n + align - 1) / align * align
}
