package synth

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// errNotGGUF is returned by readGGUF for input that does not start with the
// GGUF magic.
var errNotGGUF = errors.New("not a GGUF file")

// ggufReader reads little-endian GGUF fields and counts the bytes read.
type ggufReader struct {
	r   *bufio.Reader
	n   int64
	buf [8]byte
}

func (g *ggufReader) full(p []byte) error {
	n, err := io.ReadFull(g.r, p)
	g.n += int64(n)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (g *ggufReader) u8() (uint8, error) {
	err := g.full(g.buf[:1])
	return g.buf[0], err
}

func (g *ggufReader) u16() (uint16, error) {
	err := g.full(g.buf[:2])
	return binary.LittleEndian.Uint16(g.buf[:2]), err
}

func (g *ggufReader) u32() (uint32, error) {
	err := g.full(g.buf[:4])
	return binary.LittleEndian.Uint32(g.buf[:4]), err
}

func (g *ggufReader) u64() (uint64, error) {
	err := g.full(g.buf[:8])
	return binary.LittleEndian.Uint64(g.buf[:8]), err
}

func (g *ggufReader) str() (string, error) {
	n, err := g.u64()
	if err != nil {
		return "", err
	}
	if n > maxStringLen {
		return "", fmt.Errorf("string of %d bytes is too long", n)
	}
	if n <= preallocLimit {
		b := make([]byte, n)
		err := g.full(b)
		return string(b), err
	}
	// Grow with the data actually present, not with the declared length.
	var sb bytes.Buffer
	m, err := io.CopyN(&sb, g.r, int64(n))
	g.n += m
	if err != nil {
		return "", io.ErrUnexpectedEOF
	}
	return sb.String(), nil
}

// scalar reads one value of type t, which is not typeArray.
func (g *ggufReader) scalar(t valueType) (any, error) {
	switch t {
	case typeUint8:
		return g.u8()
	case typeInt8:
		v, err := g.u8()
		return int8(v), err
	case typeUint16:
		return g.u16()
	case typeInt16:
		v, err := g.u16()
		return int16(v), err
	case typeUint32:
		return g.u32()
	case typeInt32:
		v, err := g.u32()
		return int32(v), err
	case typeUint64:
		return g.u64()
	case typeInt64:
		v, err := g.u64()
		return int64(v), err
	case typeFloat32:
		v, err := g.u32()
		return math.Float32frombits(v), err
	case typeFloat64:
		v, err := g.u64()
		return math.Float64frombits(v), err
	case typeBool:
		v, err := g.u8()
		if err == nil && v > 1 {
			err = fmt.Errorf("bool value %d", v)
		}
		return v == 1, err
	case typeString:
		return g.str()
	}
	return nil, fmt.Errorf("unknown value type %d", t)
}

// readArray reads n elements of type T with read.
func readArray[T any](n uint64, read func() (any, error)) (any, error) {
	s := make([]T, 0, min(n, preallocLimit))
	for range n {
		v, err := read()
		if err != nil {
			return nil, err
		}
		s = append(s, v.(T))
	}
	return s, nil
}

func (g *ggufReader) array() (any, error) {
	t, err := g.u32()
	if err != nil {
		return nil, err
	}
	n, err := g.u64()
	if err != nil {
		return nil, err
	}
	if n > maxArrayLen {
		return nil, fmt.Errorf("array of %d elements is too long", n)
	}
	et := valueType(t)
	read := func() (any, error) { return g.scalar(et) }
	switch et {
	case typeUint8:
		return readArray[uint8](n, read)
	case typeInt8:
		return readArray[int8](n, read)
	case typeUint16:
		return readArray[uint16](n, read)
	case typeInt16:
		return readArray[int16](n, read)
	case typeUint32:
		return readArray[uint32](n, read)
	case typeInt32:
		return readArray[int32](n, read)
	case typeUint64:
		return readArray[uint64](n, read)
	case typeInt64:
		return readArray[int64](n, read)
	case typeFloat32:
		return readArray[float32](n, read)
	case typeFloat64:
		return readArray[float64](n, read)
	case typeBool:
		return readArray[bool](n, read)
	case typeString:
		return readArray[string](n, read)
	case typeArray:
		return nil, errors.New("nested arrays are not supported")
	}
	return nil, fmt.Errorf("unknown array element type %d", t)
}

// readGGUF reads the header, metadata and tensor infos of a GGUF file. It
// reads nothing past the tensor infos.
func readGGUF(r io.Reader) (*ggufFile, error) {
	g := &ggufReader{r: bufio.NewReaderSize(r, 64<<10)}
	var magic [4]byte
	if err := g.full(magic[:]); err != nil || string(magic[:]) != ggufMagic {
		return nil, errNotGGUF
	}
	f := &ggufFile{}
	var err error
	if f.version, err = g.u32(); err != nil {
		return nil, err
	}
	if f.version != 2 && f.version != 3 {
		return nil, fmt.Errorf("unsupported GGUF version %d", f.version)
	}
	nTensors, err := g.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := g.u64()
	if err != nil {
		return nil, err
	}
	if nTensors > maxTensors || nKV > maxKVs {
		return nil, fmt.Errorf("implausible counts: %d tensors, %d key-values", nTensors, nKV)
	}
	for i := range nKV {
		key, err := g.str()
		if err != nil {
			return nil, fmt.Errorf("key-value %d: %w", i, err)
		}
		t, err := g.u32()
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		var v any
		if valueType(t) == typeArray {
			v, err = g.array()
		} else {
			v, err = g.scalar(valueType(t))
		}
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		f.kvs = append(f.kvs, kv{key, v})
	}
	for i := range nTensors {
		var ti tensorInfo
		if ti.name, err = g.str(); err != nil {
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		nd, err := g.u32()
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", ti.name, err)
		}
		if nd == 0 || nd > maxDims {
			return nil, fmt.Errorf("tensor %q: %d dimensions", ti.name, nd)
		}
		ti.shape = make([]uint64, nd)
		for d := range ti.shape {
			if ti.shape[d], err = g.u64(); err != nil {
				return nil, fmt.Errorf("tensor %q: %w", ti.name, err)
			}
		}
		t, err := g.u32()
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", ti.name, err)
		}
		ti.typ = tensorType(t)
		if ti.offset, err = g.u64(); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", ti.name, err)
		}
		f.tensors = append(f.tensors, ti)
	}
	align := int64(ggufAlignment)
	if v, ok := f.lookup("general.alignment"); ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment %v is not a power of two uint32", v)
		}
		align = int64(a)
	}
	f.dataOffset = alignUp(g.n, align)
	return f, nil
}

func alignUp(n, align int64) int64 {
	return (n + align - 1) / align * align
}
