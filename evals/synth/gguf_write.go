package synth

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// valueTypeOf returns the GGUF type of a kv value and, for arrays, of its
// elements.
func valueTypeOf(v any) (t, elem valueType, err error) {
	switch v.(type) {
	case uint8:
		return typeUint8, 0, nil
	case int8:
		return typeInt8, 0, nil
	case uint16:
		return typeUint16, 0, nil
	case int16:
		return typeInt16, 0, nil
	case uint32:
		return typeUint32, 0, nil
	case int32:
		return typeInt32, 0, nil
	case uint64:
		return typeUint64, 0, nil
	case int64:
		return typeInt64, 0, nil
	case float32:
		return typeFloat32, 0, nil
	case float64:
		return typeFloat64, 0, nil
	case bool:
		return typeBool, 0, nil
	case string:
		return typeString, 0, nil
	case []uint8:
		return typeArray, typeUint8, nil
	case []int8:
		return typeArray, typeInt8, nil
	case []uint16:
		return typeArray, typeUint16, nil
	case []int16:
		return typeArray, typeInt16, nil
	case []uint32:
		return typeArray, typeUint32, nil
	case []int32:
		return typeArray, typeInt32, nil
	case []uint64:
		return typeArray, typeUint64, nil
	case []int64:
		return typeArray, typeInt64, nil
	case []float32:
		return typeArray, typeFloat32, nil
	case []float64:
		return typeArray, typeFloat64, nil
	case []bool:
		return typeArray, typeBool, nil
	case []string:
		return typeArray, typeString, nil
	}
	return 0, 0, fmt.Errorf("unsupported value type %T", v)
}

// tensorData is a tensor to write: its info (the offset is computed by
// writeGGUF) and a function that writes exactly its size in bytes.
type tensorData struct {
	tensorInfo
	write func(w io.Writer) error
}

// writeGGUF writes a version 3 GGUF file with the key-values in order and
// the tensors in order, each tensor's data aligned to 32 bytes. It sets the
// tensors' offsets.
func writeGGUF(w io.Writer, kvs []kv, tensors []tensorData) error {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	le := binary.LittleEndian
	var scratch []byte
	put := func(b []byte) { scratch = append(scratch, b...) }
	putStr := func(s string) {
		scratch = le.AppendUint64(scratch, uint64(len(s)))
		scratch = append(scratch, s...)
	}
	put([]byte(ggufMagic))
	scratch = le.AppendUint32(scratch, ggufVersion)
	scratch = le.AppendUint64(scratch, uint64(len(tensors)))
	scratch = le.AppendUint64(scratch, uint64(len(kvs)))
	for _, e := range kvs {
		t, et, err := valueTypeOf(e.value)
		if err != nil {
			return fmt.Errorf("key %q: %w", e.key, err)
		}
		putStr(e.key)
		scratch = le.AppendUint32(scratch, uint32(t))
		if t == typeArray {
			scratch = le.AppendUint32(scratch, uint32(et))
		}
		scratch = appendValue(scratch, e.value)
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
		size, err := t.size()
		if err != nil {
			return err
		}
		sizes[i] = size
		t.offset = offset
		offset = uint64(alignUp(int64(offset+size), ggufAlignment))
		putStr(t.name)
		scratch = le.AppendUint32(scratch, uint32(len(t.shape)))
		for _, d := range t.shape {
			scratch = le.AppendUint64(scratch, d)
		}
		scratch = le.AppendUint32(scratch, uint32(t.typ))
		scratch = le.AppendUint64(scratch, t.offset)
	}
	if _, err := bw.Write(scratch); err != nil {
		return err
	}
	var zeros [ggufAlignment]byte
	pad := func() error {
		n := int64(bw.Buffered()) + cw.n
		_, err := bw.Write(zeros[:alignUp(n, ggufAlignment)-n])
		return err
	}
	for i, t := range tensors {
		if err := pad(); err != nil {
			return err
		}
		start := int64(bw.Buffered()) + cw.n
		if err := t.write(bw); err != nil {
			return fmt.Errorf("tensor %q: %w", t.name, err)
		}
		if got := int64(bw.Buffered()) + cw.n - start; uint64(got) != sizes[i] {
			return fmt.Errorf("tensor %q: wrote %d bytes, want %d", t.name, got, sizes[i])
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
	panic(fmt.Sprintf("synth: appendValue of %T", v))
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
