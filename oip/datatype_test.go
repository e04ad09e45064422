package oip

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
)

func TestDatatypeTable(t *testing.T) {
	if len(Datatypes) != 13 || Datatypes[0] != BOOL || Datatypes[12] != BYTES {
		t.Fatalf("Datatypes = %v", Datatypes)
	}
	for _, d := range Datatypes {
		info, ok := Lookup(d)
		if !ok || !d.Valid() || info.Go == "" || info.NumPy == "" {
			t.Fatalf("%s: %+v %v", d, info, ok)
		}
		// Triton's names are TYPE_ and ours, but for BYTES.
		want := "TYPE_" + string(d)
		if d == BYTES {
			want = "TYPE_STRING"
		}
		if got := d.Triton().String(); got != want {
			t.Errorf("%s: Triton %s, want %s", d, got, want)
		}
	}
	for _, c := range []struct {
		d    Datatype
		size int
	}{{BOOL, 1}, {INT8, 1}, {FP16, 2}, {UINT16, 2}, {INT32, 4}, {FP32, 4}, {UINT64, 8}, {FP64, 8}, {BYTES, 0}} {
		if got := c.d.Size(); got != c.size {
			t.Errorf("%s.Size() = %d, want %d", c.d, got, c.size)
		}
	}
	fields := (&pb.InferTensorContents{}).ProtoReflect().Descriptor().Fields()
	for _, d := range Datatypes {
		info, _ := Lookup(d)
		if (info.Contents == "") != (d == FP16) || info.Contents != "" && fields.ByName(protoreflect.Name(info.Contents)) == nil {
			t.Errorf("%s: contents field %q is not InferTensorContents'", d, info.Contents)
		}
	}
	for _, bad := range []Datatype{"BF16", "fp32", ""} {
		if bad.Valid() || bad.Size() != 0 || bad.Triton() != tc.DataType_TYPE_INVALID {
			t.Errorf("%q is taken for a datatype", bad)
		}
	}
	if !INT8.IsSigned() || !UINT64.IsUnsigned() || !INT64.IsInt() || FP32.IsInt() || !FP16.IsFloat() || BOOL.IsInt() || BYTES.IsFloat() {
		t.Error("the kind predicates disagree with the table")
	}
}

// TestNumPyNamesMatchTheRuntime: the Python runtime's NumpyCodec maps
// datatypes to NumPy dtypes by the same names as the table.
func TestNumPyNamesMatchTheRuntime(t *testing.T) {
	src, err := os.ReadFile("../runtimes/python/mlserver/codecs/numpy.py")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(src), "_TO_NUMPY = {")
	if start < 0 {
		t.Fatal("numpy.py has no _TO_NUMPY table")
	}
	block := string(src[start:])
	block = block[:strings.Index(block, "}")]
	pairs := regexp.MustCompile(`"(\w+)": "(\w+)"`).FindAllStringSubmatch(block, -1)
	if len(pairs) != len(Datatypes)-1 { // every one but BYTES
		t.Fatalf("numpy.py maps %d datatypes, want %d", len(pairs), len(Datatypes)-1)
	}
	for _, p := range pairs {
		info, ok := Lookup(Datatype(p[1]))
		if !ok || info.NumPy != p[2] {
			t.Errorf("numpy.py maps %s to %s; the table says %+v", p[1], p[2], info)
		}
	}
}
