package v2

import (
	"bytes"
	"io"

	"github.com/llmserve/llmserve/api/v2/infer"
)

// Request bodies of tensor inference requests are read into buffers that
// are reused once the request is answered: a 256-row CNN request is 800
// kB of binary tensor data, which the model reads where it lies
// (infer.ConvertInputs), and allocating it per request (zeroed, then left
// to the garbage collector) was about a tenth of the server's CPU.
//
// A buffer goes back only when nothing can hold it any more: the request
// was a tensor model's and succeeded (the model's Run has returned; it
// keeps no input), so an error, a canceled request or another kind of
// model leaves its buffer to the garbage collector.

// bodyBuffers holds the bodies: 4 KiB to 16 MiB (bigger bodies are
// allocated).
var bodyBuffers = infer.NewBufferPool(12, 24)

// readPooled is readAll into a buffer from bodyBuffers. buf is nil when
// the body's length is unknown or over the limit (then it was read as
// readAll reads it); otherwise the caller gives it back with put once
// nothing holds the body.
func readPooled(r io.Reader, n, limit int64, at int) (body []byte, buf *infer.Buffer, err error) {
	if limit <= 0 {
		limit = 64 << 20
	}
	if n <= 0 || n > limit {
		body, err = io.ReadAll(r)
		return body, nil, err
	}
	pad := (8 - at%8) % 8
	need := pad + int(n) + bytes.MinRead // room to read EOF without growing
	buf = bodyBuffers.Get(need)
	// A buffer from the pool is aligned as Go allocated it (to 8 at
	// least), so body[at] is 8-byte aligned.
	b := bytes.NewBuffer(buf.B[pad:pad:need])
	_, err = b.ReadFrom(r)
	return b.Bytes(), buf, err
}
