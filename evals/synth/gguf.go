package synth

import "fmt"

// gguf*.go are a minimal GGUF codec: enough to read the metadata of a
// vocabulary file and to write a model. The format is llama.cpp's
// gguf.h: magic "GGUF", a uint32 version, uint64 tensor and key-value
// counts, the key-values, the tensor infos, padding to the alignment, then
// the tensor data, each tensor starting at a multiple of the alignment.
// Everything is little-endian. Only versions 2 and 3 are read (version 1
// used 32-bit lengths); version 3 is written.

// ggufMagic opens every GGUF file.
const ggufMagic = "GGUF"

// ggufVersion is the version written.
const ggufVersion = 3

// ggufAlignment is the default alignment of tensor data, used when the file
// has no general.alignment; we never write that key.
const ggufAlignment = 32

// Limits that keep a damaged file from making the reader allocate without
// bound. The largest real vocabularies (Gemma's 262k tokens) are far below.
const (
	maxKVs        = 1 << 16
	maxTensors    = 1 << 20
	maxArrayLen   = 1 << 26
	maxStringLen  = 1 << 30
	maxDims       = 4 // GGML_MAX_DIMS
	preallocLimit = 1 << 16
)

// valueType is a GGUF metadata value type (gguf_type).
type valueType uint32

const (
	typeUint8 valueType = iota
	typeInt8
	typeUint16
	typeInt16
	typeUint32
	typeInt32
	typeFloat32
	typeBool
	typeString
	typeArray
	typeUint64
	typeInt64
	typeFloat64
)

// kv is one metadata entry. value holds one of uint8, int8, uint16, int16,
// uint32, int32, uint64, int64, float32, float64, bool, string, or a slice
// of one of them (a GGUF array). llama.cpp checks value types strictly
// (reading a uint32 key stored as int32 is an error), so a value keeps the
// exact type it was read with. Nested arrays are not supported.
type kv struct {
	key   string
	value any
}

// tensorType is a ggml_type. Only the ones synth writes are named.
type tensorType uint32

const (
	tensorF32  tensorType = 0
	tensorF16  tensorType = 1
	tensorQ8_0 tensorType = 8
)

func (t tensorType) String() string {
	switch t {
	case tensorF32:
		return "F32"
	case tensorF16:
		return "F16"
	case tensorQ8_0:
		return "Q8_0"
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// blockSize is the number of elements in one block of t and typeSize the
// bytes of one block, as ggml's type traits say; 0, 0 for types synth does
// not know.
func (t tensorType) blockSize() (elems, bytes uint64) {
	switch t {
	case tensorF32:
		return 1, 4
	case tensorF16:
		return 1, 2
	case tensorQ8_0:
		return q8BlockLen, q8BlockBytes
	}
	return 0, 0
}

// tensorInfo describes one tensor: its name, its dimensions in ggml order
// (shape[0] is the length of a row, the contiguous one), its type and the
// offset of its data from the start of the data section.
type tensorInfo struct {
	name   string
	shape  []uint64
	typ    tensorType
	offset uint64
}

// elements is the number of elements of the tensor.
func (t tensorInfo) elements() uint64 {
	n := uint64(1)
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// size is the number of bytes of the tensor's data, or an error when the
// type is unknown or the row length is not a whole number of blocks.
func (t tensorInfo) size() (uint64, error) {
	be, bb := t.typ.blockSize()
	if be == 0 {
		return 0, fmt.Errorf("tensor %q: unsupported type %v", t.name, t.typ)
	}
	if len(t.shape) == 0 || t.shape[0]%be != 0 {
		return 0, fmt.Errorf("tensor %q: row length %v is not a multiple of %v's block of %d", t.name, t.shape, t.typ, be)
	}
	return t.elements() / be * bb, nil
}

// ggufFile is what readGGUF returns: the metadata and tensor infos of a
// file, not its tensor data.
type ggufFile struct {
	version uint32
	kvs     []kv
	tensors []tensorInfo
	// dataOffset is where tensor data starts, from the start of the file.
	dataOffset int64
}

// lookup returns the value of key and whether it is present.
func (f *ggufFile) lookup(key string) (any, bool) {
	for _, e := range f.kvs {
		if e.key == key {
			return e.value, true
		}
	}
	return nil, false
}
