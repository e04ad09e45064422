package v2grpc

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/api/v2/infer"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// The server's codec (ServerCodec) reads a large ModelInferRequest so
// that its raw_input_contents alias the received message instead of
// being copied out of it. grpc-go's proto codec gathers a message's
// HTTP/2 frames into one pooled buffer (cleared on every reuse), and
// protobuf-go then copies each bytes field into a new slice: it has no
// aliasing unmarshal for bytes fields (protoiface.UnmarshalAliasBuffer is
// only honoured by its lazy message decoding; consumeBytes and
// consumeBytesSlice always copy). For a 256-row CNN request, 800 kB of
// raw_input_contents, that copy, the pooled buffer's clearing and the
// garbage collection the copies caused were about a tenth of the server's
// CPU.
//
// Here the frames are copied once, into a buffer of messageBuffers placed
// so that the first raw_input_contents entry starts 8-byte aligned (an
// FP32 input then reaches the model as a view of it, infer.ConvertInputs);
// the raw entries are sub-slices of that buffer and every other field is
// unmarshalled by protobuf-go, as before. The buffer is recorded as held
// by the request (heldBuffers). The handler takes it (takeHeld) and gives
// it back (release) only when nothing can read it any more: the request
// was a tensor model's and succeeded (its Run has returned and keeps no
// input) and the response holds no slice of it. Every other outcome (an
// error, a canceled call whose batch may still run, an LLM or custom
// runtime, a handler that never ran because an interceptor refused the
// call) leaves the buffer to the garbage collector, as protobuf-go's
// copies were.

// aliasMin is the smallest message read by aliasing: below it protobuf's
// copy costs less than the bookkeeping.
const aliasMin = 32 << 10

// rawField is raw_input_contents' field number.
var rawField = (&pb.ModelInferRequest{}).ProtoReflect().Descriptor().Fields().ByName("raw_input_contents").Number()

// ServerCodec is the gRPC server option that installs the codec: protobuf
// for every message, with a large ModelInferRequest's raw_input_contents
// aliasing the received bytes. Without it the service works the same,
// with protobuf-go's copies.
func ServerCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{proto: encoding.GetCodecV2(grpcproto.Name)})
}

// codec is ServerCodec's encoding.CodecV2; proto is grpc-go's.
type codec struct{ proto encoding.CodecV2 }

func (codec) Name() string { return grpcproto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*pb.ModelInferRequest)
	n := data.Len()
	if !ok || n < aliasMin {
		return c.proto.Unmarshal(data, v)
	}
	pad := 0
	if len(data) > 0 {
		if off, ok := rawOffset(data[0].ReadOnlyData()); ok {
			pad = (8 - off%8) % 8
		}
	}
	buf := messageBuffers.Get(pad + n)
	b := buf.B[pad : pad+n : pad+n]
	data.CopyTo(b)
	aliased, err := unmarshalAliased(b, req)
	if err != nil || !aliased {
		messageBuffers.Put(buf)
		return err
	}
	rawBuffers.hold(req, buf)
	return nil
}

// rawOffset is where the first raw_input_contents entry's bytes start in
// a message whose first bytes are b; ok is false when they are not in b.
func rawOffset(b []byte) (off int, ok bool) {
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return 0, false
		}
		i += n
		if num == rawField && typ == protowire.BytesType {
			_, m := protowire.ConsumeVarint(b[i:])
			return i + m, m > 0
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i:])
		if m < 0 {
			return 0, false
		}
		i += m
	}
	return 0, false
}

// unmarshalAliased fills req from the wire bytes b as proto.Unmarshal
// does, except that the raw_input_contents entries are sub-slices of b
// (aliased true when there is one). The other fields go through
// protobuf-go, each run of them between raw entries merged into req (the
// wire format allows a message to come in pieces). Bytes that do not
// parse are handed whole to proto.Unmarshal, for its error.
func unmarshalAliased(b []byte, req *pb.ModelInferRequest) (aliased bool, err error) {
	proto.Reset(req)
	merge := proto.UnmarshalOptions{Merge: true}
	start := 0 // the first byte of the fields not yet unmarshalled
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return false, copyUnmarshal(b, req)
		}
		if num != rawField || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
			if m < 0 {
				return false, copyUnmarshal(b, req)
			}
			i += n + m
			continue
		}
		v, m := protowire.ConsumeBytes(b[i+n:])
		if m < 0 {
			return false, copyUnmarshal(b, req)
		}
		if start < i {
			if err := merge.Unmarshal(b[start:i], req); err != nil {
				return false, copyUnmarshal(b, req)
			}
		}
		req.RawInputContents = append(req.RawInputContents, v[:len(v):len(v)])
		i += n + m
		start = i
	}
	if start < len(b) {
		if err := merge.Unmarshal(b[start:], req); err != nil {
			return false, copyUnmarshal(b, req)
		}
	}
	return len(req.RawInputContents) > 0, nil
}

// copyUnmarshal is proto.Unmarshal (its error is the one grpc-go's
// codec gives).
func copyUnmarshal(b []byte, req *pb.ModelInferRequest) error {
	return proto.Unmarshal(b, req)
}

// heldBuffers records which buffer each request read by the codec
// aliases, until its handler takes it. The key is a weak pointer: a
// request whose handler never ran (an interceptor refused the call) is
// collected, and a cleanup then drops its entry, the buffer with it.
type heldBuffers struct {
	m sync.Map     // weak.Pointer[pb.ModelInferRequest] → *heldBuffer
	n atomic.Int64 // entries in m: with none, takeHeld makes no weak pointer
}

type heldBuffer struct {
	buf     *infer.Buffer
	cleanup runtime.Cleanup
}

var rawBuffers heldBuffers

// testHookDropped, when set, is called after the cleanup of a request
// whose buffer was never taken.
var testHookDropped atomic.Pointer[func()]

func (h *heldBuffers) hold(req *pb.ModelInferRequest, buf *infer.Buffer) {
	key := weak.Make(req)
	e := &heldBuffer{buf: buf}
	e.cleanup = runtime.AddCleanup(req, h.drop, key)
	h.n.Add(1)
	h.m.Store(key, e)
}

// drop forgets a collected request's buffer.
func (h *heldBuffers) drop(key weak.Pointer[pb.ModelInferRequest]) {
	if _, ok := h.m.LoadAndDelete(key); ok {
		h.n.Add(-1)
	}
	if f := testHookDropped.Load(); f != nil {
		(*f)()
	}
}

// takeHeld hands the caller the buffer that req's raw_input_contents
// alias, nil when they do not (a small message, or no ServerCodec). The
// caller gives it back with release once nothing reads it, or drops it.
func takeHeld(req *pb.ModelInferRequest) *infer.Buffer {
	if len(req.GetRawInputContents()) == 0 || rawBuffers.n.Load() == 0 {
		return nil
	}
	v, ok := rawBuffers.m.LoadAndDelete(weak.Make(req))
	if !ok {
		return nil
	}
	rawBuffers.n.Add(-1)
	e := v.(*heldBuffer)
	e.cleanup.Stop()
	return e.buf
}

// release gives buf back to messageBuffers unless resp holds a slice of
// it (a model that answers with its input as it came). The caller must
// know that nothing else reads buf: the request's model has returned and
// keeps no input.
func release(buf *infer.Buffer, resp *pb.ModelInferResponse) {
	if buf == nil {
		return
	}
	for _, b := range resp.GetRawOutputContents() {
		if overlaps(buf.B, b) {
			return
		}
	}
	for _, o := range resp.GetOutputs() {
		for _, b := range o.GetContents().GetBytesContents() {
			if overlaps(buf.B, b) {
				return
			}
		}
	}
	messageBuffers.Put(buf)
}

// overlaps says whether b lies (partly) in the memory of buf.
func overlaps(buf, b []byte) bool {
	if cap(buf) == 0 || cap(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p < lo+uintptr(cap(buf)) && lo < p+uintptr(cap(b))
}

// messageBuffers holds the messages read by aliasing: 32 KiB (aliasMin)
// to 64 MiB (larger messages get a buffer of their own).
var messageBuffers = infer.NewBufferPool(15, 26)
