package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// valueTypeOf returns the GGUF type of a KV value and, for arrays, of its
// elements.
func valueTypeOf(v any) (t, elem ValueType, err error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, nil
	case int8:
		return TypeInt8, 0, nil
	case uint16:
		return TypeUint16, 0, nil
	case int16:
		return TypeInt16, 0, nil
	case uint32:
		return TypeUint32, 0, nil
	case int32:
		return TypeInt32, 0, nil
	case uint64:
		return TypeUint64, 0, nil
	case int64:
		return TypeInt64, 0, nil
	case float32:
		return TypeFloat32, 0, nil
	case float64:
		return TypeFloat64, 0, nil
	case bool:
		return TypeBool, 0, nil
	case string:
		return TypeString, 0, nil
	case []uint8:
		return TypeArray, TypeUint8, nil
	case []int8:
		return TypeArray, TypeInt8, nil
	case []uint16:
		return TypeArray, TypeUint16, nil
	case []int16:
		return TypeArray, TypeInt16, nil
	case []uint32:
		return TypeArray, TypeUint32, nil
	case []int32:
		return TypeArray, TypeInt32, nil
	case []uint64:
		return TypeArray, TypeUint64, nil
	case []int64:
		return TypeArray, TypeInt64, nil
	case []float32:
		return TypeArray, TypeFloat32, nil
	case []float64:
		return TypeArray, TypeFloat64, nil
	case []bool:
		return TypeArray, TypeBool, nil
	case []string:
		return TypeArray, TypeString, nil
	}
	return 0, 0, fmt.Errorf("unsupported value type %T", v)
}

// Tensor is a tensor to write: its info (Write computes the offset) and a
// function that writes exactly its Size in bytes.
type Tensor struct {
	TensorInfo
	Write func(w io.Writer) error
}

// WithData is a tensor whose data is already in memory: data must be
// exactly t's Size in bytes.
func (t TensorInfo) WithData(data []byte) Tensor {
	return Tensor{TensorInfo: t, Write: func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}}
}

// Encode is Write into memory.
func Encode(kvs []KV, tensors []Tensor) ([]byte, error) {
	var b bytes.Buffer
	if err := Write(&b, kvs, tensors); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes a version 3 GGUF file with the key-values in order and the
// tensors in order, each tensor's data aligned to Alignment bytes. It sets
// the tensors' offsets.
func Write(w io.Writer, kvs []KV, tensors []Tensor) error {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	le := binary.LittleEndian
	var scratch []byte
	put := func(b []byte) { scratch = append(scratch, b...) }
	putStr := func(s string) {
		scratch = le.AppendUint64(scratch, uint64(len(s)))
		scratch = append(scratch, s...)
	}
	put([]byte(Magic))
	scratch = le.AppendUint32(scratch, Version)
	scratch = le.AppendUint64(scratch, uint64(len(tensors)))
	scratch = le.AppendUint64(scratch, uint64(len(kvs)))
	for _, e := range kvs {
		t, et, err := valueTypeOf(e.Value)
		if err != nil {
			return fmt.Errorf("key %q: %w", e.Key, err)
		}
		putStr(e.Key)
		scratch = le.AppendUint32(scratch, uint32(t))
		if t == TypeArray {
			scratch = le.AppendUint32(scratch, uint32(et))
		}
		scratch = appendValue(scratch, e.Value)
		if len(scratch) > 1<<20 {
			if _, err := bw.Write(scratch); err != nil {
				return err
			}
			scratch = scratch[:0]
		}
	}
	var offset uint64
	sizes := make([]uint64, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		size, err := t.Size()
		if err != nil {
			return err
		}
		sizes[i] = size
		t.Offset = offset
		offset = uint64(AlignUp(int64(offset+size), Alignment))
		putStr(t.Name)
		scratch = le.AppendUint32(scratch, uint32(len(t.Shape)))
		for _, d := range t.Shape {
			scratch = le.AppendUint64(scratch, d)
		}
		scratch = le.AppendUint32(scratch, uint32(t.Type))
		scratch = le.AppendUint64(scratch, t.Offset)
	}
	if _, err := bw.Write(scratch); err != nil {
		return err
	}
	var zeros [Alignment]byte
	pad := func() error {
		n := int64(bw.Buffered()) + cw.n
		_, err := bw.Write(zeros[:AlignUp(n, Alignment)-n])
		return err
	}
	for i, t := range tensors {
		if err := pad(); err != nil {
			return err
		}
		start := int64(bw.Buffered()) + cw.n
		if err := t.Write(bw); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if got := int64(bw.Buffered()) + cw.n - start; uint64(got) != sizes[i] {
			return fmt.Errorf("tensor %q: wrote %d bytes, want %d", t.Name, got, sizes[i])
		}
	}
	return bw.Flush()
}

// appendValue appends the encoding of v (without its type) to b. v has a
// type valueTypeOf accepts.
func appendValue(b []byte, v any) []byte {
	le := binary.LittleEndian
	switch v := v.(type) {
	case uint8:
		return append(b, v)
	case int8:
		return append(b, byte(v))
	case uint16:
		return le.AppendUint16(b, v)
	case int16:
		return le.AppendUint16(b, uint16(v))
	case uint32:
		return le.AppendUint32(b, v)
	case int32:
		return le.AppendUint32(b, uint32(v))
	case uint64:
		return le.AppendUint64(b, v)
	case int64:
		return le.AppendUint64(b, uint64(v))
	case float32:
		return le.AppendUint32(b, math.Float32bits(v))
	case float64:
		return le.AppendUint64(b, math.Float64bits(v))
	case bool:
		if v {
			return append(b, 1)
		}
		return append(b, 0)
	case string:
		b = le.AppendUint64(b, uint64(len(v)))
		return append(b, v...)
	case []uint8:
		return appendSlice(b, v)
	case []int8:
		return appendSlice(b, v)
	case []uint16:
		return appendSlice(b, v)
	case []int16:
		return appendSlice(b, v)
	case []uint32:
		return appendSlice(b, v)
	case []int32:
		return appendSlice(b, v)
	case []uint64:
		return appendSlice(b, v)
	case []int64:
		return appendSlice(b, v)
	case []float32:
		return appendSlice(b, v)
	case []float64:
		return appendSlice(b, v)
	case []bool:
		return appendSlice(b, v)
	case []string:
		return appendSlice(b, v)
	}
	panic(fmt.Sprintf("gguf: appendValue of %T", v))
}

func appendSlice[T any](b []byte, s []T) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	for _, e := range s {
		b = appendValue(b, e)
	}
	return b
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
