package v2

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestReadPooledAlignsBinaryData: whatever the JSON header's length, the
// binary data after it starts 8-byte aligned in the buffer the body is
// read into, and the body reads back whole, from a fresh or a reused
// buffer.
func TestReadPooledAlignsBinaryData(t *testing.T) {
	for round := range 2 {
		for at := range 17 {
			want := bytes.Repeat([]byte{byte(at + 1)}, 100+at)
			body, buf, err := readPooled(bytes.NewReader(want), int64(len(want)), 0, at)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, want) {
				t.Fatalf("round %d, at %d: read %d bytes, not the body", round, at, len(body))
			}
			if p := uintptr(unsafe.Pointer(&body[at])); p%8 != 0 {
				t.Fatalf("round %d, at %d: the binary data is at %#x, not 8-byte aligned", round, at, p)
			}
			if buf == nil || len(buf.B) != 1<<12 {
				t.Fatalf("round %d, at %d: a small body's buffer is not from the pool's first class", round, at)
			}
			bodyBuffers.Put(buf)
		}
	}
	// Unknown length, or beyond the limit: read as io.ReadAll does, not
	// pooled.
	for _, n := range []int64{-1, 2000} {
		body, buf, err := readPooled(bytes.NewReader(make([]byte, 1500)), n, 1000, 0)
		if err != nil || len(body) != 1500 || buf != nil {
			t.Fatalf("length %d: %d bytes, pooled %v, %v", n, len(body), buf != nil, err)
		}
	}
}
