package oip

import tc "github.com/llmserve/llmserve/proto/tritonconfigpb"

// Datatype is a tensor element type, as the protocol spells it ("FP32").
type Datatype string

// The protocol's datatypes. BF16 is not in the protocol's table and is
// not one.
const (
	BOOL   Datatype = "BOOL"
	UINT8  Datatype = "UINT8"
	UINT16 Datatype = "UINT16"
	UINT32 Datatype = "UINT32"
	UINT64 Datatype = "UINT64"
	INT8   Datatype = "INT8"
	INT16  Datatype = "INT16"
	INT32  Datatype = "INT32"
	INT64  Datatype = "INT64"
	FP16   Datatype = "FP16"
	FP32   Datatype = "FP32"
	FP64   Datatype = "FP64"
	BYTES  Datatype = "BYTES"
)

// Info is one row of the datatype table.
type Info struct {
	Datatype Datatype
	// Size is one element's size in bytes (little-endian, BOOL one byte 0
	// or 1); 0 for BYTES, whose elements each have their own length.
	Size int
	// Go is the Go type that holds one element: FP16's is its IEEE 754
	// half-precision bits, BYTES' a byte slice per element.
	Go string
	// NumPy is NumPy's dtype name, as MLServer's NumpyCodec maps it;
	// BYTES is "object" (one bytes element per tensor element).
	NumPy string
	// Triton is the type Triton's model configuration (config.pbtxt)
	// gives it; BYTES is TYPE_STRING.
	Triton tc.DataType
	// Contents is the field of the gRPC protocol's InferTensorContents
	// that carries its elements in typed form; "" for FP16, which only
	// raw contents carry.
	Contents string
}

// table is THE datatype table, in the protocol's order.
var table = []Info{
	{BOOL, 1, "bool", "bool", tc.DataType_TYPE_BOOL, "bool_contents"},
	{UINT8, 1, "uint8", "uint8", tc.DataType_TYPE_UINT8, "uint_contents"},
	{UINT16, 2, "uint16", "uint16", tc.DataType_TYPE_UINT16, "uint_contents"},
	{UINT32, 4, "uint32", "uint32", tc.DataType_TYPE_UINT32, "uint_contents"},
	{UINT64, 8, "uint64", "uint64", tc.DataType_TYPE_UINT64, "uint64_contents"},
	{INT8, 1, "int8", "int8", tc.DataType_TYPE_INT8, "int_contents"},
	{INT16, 2, "int16", "int16", tc.DataType_TYPE_INT16, "int_contents"},
	{INT32, 4, "int32", "int32", tc.DataType_TYPE_INT32, "int_contents"},
	{INT64, 8, "int64", "int64", tc.DataType_TYPE_INT64, "int64_contents"},
	{FP16, 2, "uint16", "float16", tc.DataType_TYPE_FP16, ""},
	{FP32, 4, "float32", "float32", tc.DataType_TYPE_FP32, "fp32_contents"},
	{FP64, 8, "float64", "float64", tc.DataType_TYPE_FP64, "fp64_contents"},
	{BYTES, 0, "[]byte", "object", tc.DataType_TYPE_STRING, "bytes_contents"},
}

// Datatypes lists every datatype, in the protocol's order.
var Datatypes = func() []Datatype {
	out := make([]Datatype, len(table))
	for i, r := range table {
		out[i] = r.Datatype
	}
	return out
}()

// byName indexes table.
var byName = func() map[Datatype]Info {
	m := make(map[Datatype]Info, len(table))
	for _, r := range table {
		m[r.Datatype] = r
	}
	return m
}()

// Lookup is d's row of the table, and false when d is not a datatype.
func Lookup(d Datatype) (Info, bool) {
	r, ok := byName[d]
	return r, ok
}

// Size is the size of one element in bytes; 0 for BYTES (variable) and
// for a name that is not a datatype.
func (d Datatype) Size() int {
	r, _ := Lookup(d)
	return r.Size
}

// Valid reports whether d is one of Datatypes.
func (d Datatype) Valid() bool {
	_, ok := Lookup(d)
	return ok
}

// Triton is d as Triton's model configuration names it (TYPE_STRING for
// BYTES; TYPE_INVALID for a name that is not a datatype).
func (d Datatype) Triton() tc.DataType {
	r, _ := Lookup(d)
	return r.Triton
}

// IsInt reports whether d is a signed or unsigned integer type.
func (d Datatype) IsInt() bool { return d.IsSigned() || d.IsUnsigned() }

// IsSigned reports whether d is INT8..INT64.
func (d Datatype) IsSigned() bool { return d == INT8 || d == INT16 || d == INT32 || d == INT64 }

// IsUnsigned reports whether d is UINT8..UINT64.
func (d Datatype) IsUnsigned() bool {
	return d == UINT8 || d == UINT16 || d == UINT32 || d == UINT64
}

// IsFloat reports whether d is FP16, FP32 or FP64.
func (d Datatype) IsFloat() bool { return d == FP16 || d == FP32 || d == FP64 }
