package infer

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/llmserve/llmserve/float16"
	"github.com/llmserve/llmserve/oip"
)

// Datatype is a V2 tensor element type, as the wire spells it: oip's,
// whose table gives each one's size and names; its values are oip's
// constants (oip.FP32, oip.BYTES, ...). BF16 is not in the protocol's
// table and is refused.
type Datatype = oip.Datatype

// ParseDatatype checks a datatype name from the wire.
func ParseDatatype(s string) (Datatype, error) {
	d := Datatype(s)
	if !d.Valid() {
		return "", fmt.Errorf("datatype %q is not a V2 datatype (want one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES)", truncate(s))
	}
	return d, nil
}

// MaxElements bounds the elements of one tensor, so that a shape cannot
// make the server allocate more than a request body could ever fill.
const MaxElements = 1 << 30

// Tensor is one named tensor in the form both protocols convert to and
// from. Exactly one of Raw and Bytes holds the elements: Raw for a
// fixed-size datatype (little-endian, row-major, no padding; BOOL as one
// byte 0 or 1), Bytes for BYTES (one slice per element).
type Tensor struct {
	Name       string
	Datatype   Datatype
	Shape      []int64
	Parameters Parameters
	Raw        []byte
	Bytes      [][]byte
}

// NumElements is the product of the shape's dimensions. A negative
// dimension, or a product beyond MaxElements, is an error.
func NumElements(shape []int64) (int, error) {
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape[%d] = %d is negative; every dimension must be 0 or more", i, d)
		}
		if d > MaxElements || (d > 0 && n > MaxElements/d) {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, MaxElements)
		}
		n *= d
	}
	return int(n), nil
}

// Len is the number of elements the tensor holds (not its shape's).
func (t *Tensor) Len() int {
	if t.Datatype == oip.BYTES {
		return len(t.Bytes)
	}
	if s := t.Datatype.Size(); s > 0 {
		return len(t.Raw) / s
	}
	return 0
}

// Check verifies that the data matches the datatype and the shape.
func (t *Tensor) Check() error {
	if !t.Datatype.Valid() {
		_, err := ParseDatatype(string(t.Datatype))
		return err
	}
	n, err := NumElements(t.Shape)
	if err != nil {
		return err
	}
	if t.Datatype == oip.BYTES {
		if len(t.Bytes) != n {
			return fmt.Errorf("shape %v has %d elements but the data has %d", t.Shape, n, len(t.Bytes))
		}
		return nil
	}
	size := t.Datatype.Size()
	if len(t.Raw) != n*size {
		if len(t.Raw)%size == 0 {
			return fmt.Errorf("shape %v has %d elements but the data has %d", t.Shape, n, len(t.Raw)/size)
		}
		return fmt.Errorf("shape %v of %s needs %d bytes but the data has %d", t.Shape, t.Datatype, n*size, len(t.Raw))
	}
	if t.Datatype == oip.BOOL {
		for i, b := range t.Raw {
			if b > 1 {
				return fmt.Errorf("element %d of a BOOL tensor is the byte %d; want 0 or 1", i, b)
			}
		}
	}
	return nil
}

// Int returns element i of an integer or BOOL tensor as an int64, and
// false for any other datatype. UINT64 values above MaxInt64 are clamped.
func (t *Tensor) Int(i int) (int64, bool) {
	r := t.Raw
	switch t.Datatype {
	case oip.BOOL, oip.UINT8:
		return int64(r[i]), true
	case oip.INT8:
		return int64(int8(r[i])), true
	case oip.UINT16:
		return int64(binary.LittleEndian.Uint16(r[2*i:])), true
	case oip.INT16:
		return int64(int16(binary.LittleEndian.Uint16(r[2*i:]))), true
	case oip.UINT32:
		return int64(binary.LittleEndian.Uint32(r[4*i:])), true
	case oip.INT32:
		return int64(int32(binary.LittleEndian.Uint32(r[4*i:]))), true
	case oip.UINT64:
		u := binary.LittleEndian.Uint64(r[8*i:])
		if u > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(u), true
	case oip.INT64:
		return int64(binary.LittleEndian.Uint64(r[8*i:])), true
	}
	return 0, false
}

// Float returns element i of a numeric tensor as a float64, and false for
// BYTES and BOOL.
func (t *Tensor) Float(i int) (float64, bool) {
	r := t.Raw
	switch t.Datatype {
	case oip.FP16:
		return float64(float16.ToFloat32(binary.LittleEndian.Uint16(r[2*i:]))), true
	case oip.FP32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(r[4*i:]))), true
	case oip.FP64:
		return math.Float64frombits(binary.LittleEndian.Uint64(r[8*i:])), true
	case oip.UINT64:
		return float64(binary.LittleEndian.Uint64(r[8*i:])), true
	case oip.BOOL, oip.BYTES:
		return 0, false
	}
	v, ok := t.Int(i)
	return float64(v), ok
}

// Uint returns element i of an unsigned tensor.
func (t *Tensor) uint(i int) uint64 {
	r := t.Raw
	switch t.Datatype {
	case oip.UINT8:
		return uint64(r[i])
	case oip.UINT16:
		return uint64(binary.LittleEndian.Uint16(r[2*i:]))
	case oip.UINT32:
		return uint64(binary.LittleEndian.Uint32(r[4*i:]))
	}
	return binary.LittleEndian.Uint64(r[8*i:])
}

// NewBytesTensor returns a BYTES tensor of the given shape.
func NewBytesTensor(name string, shape []int64, vals [][]byte) *Tensor {
	return &Tensor{Name: name, Datatype: oip.BYTES, Shape: shape, Bytes: vals}
}

// NewInt32Tensor returns an INT32 tensor of the given shape.
func NewInt32Tensor(name string, shape []int64, vals []int32) *Tensor {
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
	}
	return &Tensor{Name: name, Datatype: oip.INT32, Shape: shape, Raw: raw}
}

// NewFP32Tensor returns an FP32 tensor of the given shape.
func NewFP32Tensor(name string, shape []int64, vals []float32) *Tensor {
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return &Tensor{Name: name, Datatype: oip.FP32, Shape: shape, Raw: raw}
}

// EncodeBytes is the binary form of BYTES elements: each one as a 4-byte
// little-endian length followed by its bytes (the binary tensor data
// extension's and gRPC raw contents' encoding).
func EncodeBytes(vals [][]byte) []byte {
	n := 0
	for _, v := range vals {
		n += 4 + len(v)
	}
	out := make([]byte, 0, n)
	for _, v := range vals {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	return out
}

// DecodeBytes splits the binary form of BYTES elements. The elements
// alias raw.
func DecodeBytes(raw []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(raw); {
		if len(raw)-off < 4 {
			return nil, fmt.Errorf("BYTES data is cut inside the length of element %d (%d bytes left, a length takes 4)", len(out), len(raw)-off)
		}
		n := binary.LittleEndian.Uint32(raw[off:])
		off += 4
		if uint64(n) > uint64(len(raw)-off) {
			return nil, fmt.Errorf("BYTES element %d says it has %d bytes but only %d are left", len(out), n, len(raw)-off)
		}
		out = append(out, raw[off:off+int(n):off+int(n)])
		off += int(n)
	}
	return out, nil
}

// Binary is the tensor's data in the binary form (Raw, or EncodeBytes of
// Bytes).
func (t *Tensor) Binary() []byte {
	if t.Datatype == oip.BYTES {
		return EncodeBytes(t.Bytes)
	}
	return t.Raw
}

// SetBinary sets the tensor's data from the binary form.
func (t *Tensor) SetBinary(raw []byte) error {
	if t.Datatype == oip.BYTES {
		b, err := DecodeBytes(raw)
		if err != nil {
			return err
		}
		t.Bytes, t.Raw = b, nil
		return nil
	}
	t.Raw, t.Bytes = raw, nil
	return nil
}

// AppendElement appends one element's bits v to dst as raw contents hold
// it: little-endian in size bytes (1, 2, 4 or 8; the datatype's Size).
func AppendElement(dst []byte, v uint64, size int) []byte {
	switch size {
	case 1:
		return append(dst, byte(v))
	case 2:
		return binary.LittleEndian.AppendUint16(dst, uint16(v))
	case 4:
		return binary.LittleEndian.AppendUint32(dst, uint32(v))
	}
	return binary.LittleEndian.AppendUint64(dst, v)
}

// truncate shortens client text quoted in an error message.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
