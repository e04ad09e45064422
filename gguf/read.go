package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// source is where a decoder takes its bytes from: a file in memory or a
// stream.
type source interface {
	// take returns the next n bytes, valid until the next call, or
	// ErrTruncated when fewer are left.
	take(n uint64) ([]byte, error)
	// left is an upper bound of the bytes left (math.MaxUint64 when
	// unknown).
	left() uint64
	// pos is the number of bytes taken so far.
	pos() int64
}

// memory is a file held in memory; every length is checked against the
// bytes left.
type memory struct {
	b   []byte
	off uint64
}

func (m *memory) take(n uint64) ([]byte, error) {
	if n > m.left() {
		return nil, ErrTruncated
	}
	p := m.b[m.off : m.off+n]
	m.off += n
	return p, nil
}

func (m *memory) left() uint64 { return uint64(len(m.b)) - m.off }
func (m *memory) pos() int64   { return int64(m.off) }

// stream reads through a buffer and grows long strings with the data
// actually present, not with the declared length.
type stream struct {
	r   *bufio.Reader
	n   int64
	buf [20]byte // the longest fixed field: the header after the magic
}

func (s *stream) take(n uint64) ([]byte, error) {
	if n > preallocLimit {
		var b bytes.Buffer
		m, err := io.CopyN(&b, s.r, int64(n))
		s.n += m
		if err != nil {
			return nil, truncated(err)
		}
		return b.Bytes(), nil
	}
	p := s.buf[:]
	if n > uint64(len(p)) {
		p = make([]byte, n)
	}
	m, err := io.ReadFull(s.r, p[:n])
	s.n += int64(m)
	return p[:n], truncated(err)
}

// truncated maps the end of the stream to ErrTruncated.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrTruncated
	}
	return err
}

func (s *stream) left() uint64 { return math.MaxUint64 }
func (s *stream) pos() int64   { return s.n }

// decoder reads little-endian GGUF fields from a source.
type decoder struct{ src source }

func (d *decoder) u32() (uint32, error) {
	p, err := d.src.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64() (uint64, error) {
	p, err := d.src.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > maxStringLen {
		return "", fmt.Errorf("string of %d bytes is too long", n)
	}
	p, err := d.src.take(n)
	return string(p), err
}

// scalar reads one value of type t, which is not TypeArray.
func (d *decoder) scalar(t ValueType) (any, error) {
	if t >= ValueType(len(scalars)) || scalars[t] == nil {
		return nil, fmt.Errorf("unknown value type %d", t)
	}
	return scalars[t](d)
}

// scalars reads one value of each type but TypeArray, by ValueType: the
// size and encoding of each.
var scalars = [...]func(d *decoder) (any, error){
	TypeUint8:   fixed(1, func(p []byte) uint8 { return p[0] }),
	TypeInt8:    fixed(1, func(p []byte) int8 { return int8(p[0]) }),
	TypeUint16:  fixed(2, binary.LittleEndian.Uint16),
	TypeInt16:   fixed(2, func(p []byte) int16 { return int16(binary.LittleEndian.Uint16(p)) }),
	TypeUint32:  fixed(4, binary.LittleEndian.Uint32),
	TypeInt32:   fixed(4, func(p []byte) int32 { return int32(binary.LittleEndian.Uint32(p)) }),
	TypeFloat32: fixed(4, func(p []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(p)) }),
	TypeBool:    (*decoder).bool,
	TypeString:  func(d *decoder) (any, error) { return d.str() },
	TypeUint64:  fixed(8, binary.LittleEndian.Uint64),
	TypeInt64:   fixed(8, func(p []byte) int64 { return int64(binary.LittleEndian.Uint64(p)) }),
	TypeFloat64: fixed(8, func(p []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(p)) }),
}

// fixed reads a value of size bytes with conv.
func fixed[T any](size uint64, conv func(p []byte) T) func(d *decoder) (any, error) {
	return func(d *decoder) (any, error) {
		p, err := d.src.take(size)
		if err != nil {
			return nil, err
		}
		return conv(p), nil
	}
}

// bool reads a bool: one byte, 0 or 1.
func (d *decoder) bool() (any, error) {
	p, err := d.src.take(1)
	if err != nil {
		return nil, err
	}
	if p[0] > 1 {
		return nil, fmt.Errorf("bool value %d", p[0])
	}
	return p[0] == 1, nil
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

func (d *decoder) array() (any, error) {
	// The element type (uint32) and the length (uint64).
	h, err := d.src.take(12)
	if err != nil {
		return nil, err
	}
	t, n := binary.LittleEndian.Uint32(h), binary.LittleEndian.Uint64(h[4:])
	et := ValueType(t)
	switch {
	case et == TypeArray:
		return nil, errors.New("nested arrays are not supported")
	case et > TypeFloat64:
		return nil, fmt.Errorf("unknown array element type %d", t)
	case n > maxArrayLen:
		return nil, fmt.Errorf("array of %d elements is too long", n)
	case n > d.src.left(): // every element takes at least a byte
		return nil, ErrTruncated
	}
	return readArrays[et](n, func() (any, error) { return d.scalar(et) })
}

// readArrays reads an array of each element type but TypeArray.
var readArrays = [...]func(n uint64, read func() (any, error)) (any, error){
	TypeUint8:   readArray[uint8],
	TypeInt8:    readArray[int8],
	TypeUint16:  readArray[uint16],
	TypeInt16:   readArray[int16],
	TypeUint32:  readArray[uint32],
	TypeInt32:   readArray[int32],
	TypeFloat32: readArray[float32],
	TypeBool:    readArray[bool],
	TypeString:  readArray[string],
	TypeUint64:  readArray[uint64],
	TypeInt64:   readArray[int64],
	TypeFloat64: readArray[float64],
}

// Read reads the header, metadata and tensor infos of a GGUF file from r.
// It reads nothing past the tensor infos (r may be a file of any size).
func Read(r io.Reader) (*File, error) {
	return decode(&stream{r: bufio.NewReaderSize(r, 64<<10)})
}

// Decode reads the header, metadata and tensor infos of the GGUF file data,
// checking every length against the bytes left: data may come from a
// client. Use File.TensorData for the tensors' data.
func Decode(data []byte) (*File, error) {
	return decode(&memory{b: data})
}

func decode(src source) (*File, error) {
	d := &decoder{src: src}
	if p, err := src.take(4); err != nil || string(p) != Magic {
		return nil, ErrNotGGUF
	}
	// The version (uint32), the tensor and key-value counts (uint64).
	h, err := src.take(20)
	if err != nil {
		return nil, err
	}
	f := &File{Version: binary.LittleEndian.Uint32(h)}
	nTensors, nKV := binary.LittleEndian.Uint64(h[4:]), binary.LittleEndian.Uint64(h[12:])
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("unsupported GGUF version %d", f.Version)
	}
	if nTensors > maxTensors || nKV > maxKVs {
		return nil, fmt.Errorf("implausible GGUF counts: %d tensors, %d key-values", nTensors, nKV)
	}
	if f.KVs, err = entries(d, nKV, "key", d.kv); err != nil {
		return nil, err
	}
	if f.Tensors, err = entries(d, nTensors, "tensor", d.tensorInfo); err != nil {
		return nil, err
	}
	align := int64(Alignment)
	if v, ok := f.Lookup("general.alignment"); ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment %v is not a power of two uint32", v)
		}
		align = int64(a)
	}
	f.DataOffset = AlignUp(src.pos(), align)
	return f, nil
}

// entries reads n named entries (key-values or tensor infos): each a GGUF
// string, its name, then what read reads. Errors say which entry.
func entries[T any](d *decoder, n uint64, what string, read func(name string) (T, error)) ([]T, error) {
	var s []T
	for i := range n {
		name, err := d.str()
		if err != nil {
			return nil, fmt.Errorf("GGUF %s %d: %w", what, i, err)
		}
		v, err := read(name)
		if err != nil {
			return nil, fmt.Errorf("GGUF %s %q: %w", what, name, err)
		}
		s = append(s, v)
	}
	return s, nil
}

// kv reads the type and value of the key-value named key.
func (d *decoder) kv(key string) (KV, error) {
	t, err := d.u32()
	if err != nil {
		return KV{}, err
	}
	var v any
	if ValueType(t) == TypeArray {
		v, err = d.array()
	} else {
		v, err = d.scalar(ValueType(t))
	}
	return KV{Key: key, Value: v}, err
}

// tensorInfo reads the dimensions, type and offset of the tensor named
// name.
func (d *decoder) tensorInfo(name string) (TensorInfo, error) {
	ti := TensorInfo{Name: name}
	nd, err := d.u32()
	if err != nil {
		return ti, err
	}
	if nd == 0 || nd > maxDims {
		return ti, fmt.Errorf("%d dimensions", nd)
	}
	ti.Shape = make([]uint64, nd)
	n := uint64(1)
	for i := range ti.Shape {
		if ti.Shape[i], err = d.u64(); err != nil {
			return ti, err
		}
		if dim := ti.Shape[i]; dim > 0 && n > (1<<63-1)/dim {
			return ti, fmt.Errorf("dimensions %v hold more than 2^63 elements", ti.Shape[:i+1])
		}
		n *= ti.Shape[i]
	}
	t, err := d.u32()
	if err != nil {
		return ti, err
	}
	ti.Type = TensorType(t)
	ti.Offset, err = d.u64()
	return ti, err
}
