package v2grpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/oip"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// frames cuts b into buffers of 16 KiB, as HTTP/2 data frames bring a
// message.
func frames(b []byte) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		s = append(s, mem.SliceBuffer(slices.Clone(b[:n])))
		b = b[n:]
	}
	return s
}

// rawRequest is a request of rows rows of width FP32 values, every value
// derived from seed, in raw_input_contents; id moves the raw data's
// offset in the message.
func rawRequest(id string, seed, rows, width int) (*pb.ModelInferRequest, []float32) {
	x := make([]float32, rows*width)
	var b []byte
	for i := range x {
		x[i] = float32(seed) + float32(i)/float32(len(x))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x[i]))
	}
	return &pb.ModelInferRequest{
		ModelName: "echo", Id: id,
		Parameters:       map[string]*pb.InferParameter{"p": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "v"}}},
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{int64(rows), int64(width)}}},
		Outputs:          []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}},
		RawInputContents: [][]byte{b},
	}, x
}

// TestCodecAliasesRawContents: a large request read by the codec equals
// protobuf-go's reading of it, its raw_input_contents lie in the held
// buffer (no copy), the first 8-byte aligned whatever the fields before
// it; a small one, and any other message, is protobuf-go's.
func TestCodecAliasesRawContents(t *testing.T) {
	c := codec{proto: encoding.GetCodecV2(grpcproto.Name)}
	for idLen := range 9 {
		want, _ := rawRequest(string(make([]byte, idLen)), idLen, 64, 200) // 51 kB
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := &pb.ModelInferRequest{}
		if err := c.Unmarshal(frames(b), got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("id length %d: read as %v", idLen, got)
		}
		buf := takeHeld(got)
		if buf == nil {
			t.Fatalf("id length %d: no buffer held", idLen)
		}
		raw := got.GetRawInputContents()[0]
		if !overlaps(buf.B, raw) || uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%8 != 0 || cap(raw) != len(raw) {
			t.Fatalf("id length %d: raw contents not an aligned, capped view of the buffer", idLen)
		}
		if takeHeld(got) != nil {
			t.Fatal("a buffer was taken twice")
		}
	}
	small, _ := rawRequest("s", 1, 1, 10)
	b, _ := proto.Marshal(small)
	got := &pb.ModelInferRequest{}
	if err := c.Unmarshal(frames(b), got); err != nil || !proto.Equal(got, small) || takeHeld(got) != nil {
		t.Fatalf("small request: %v %v", got, err)
	}
	other := &pb.ModelInferResponse{RawOutputContents: [][]byte{make([]byte, 100<<10)}}
	b, _ = proto.Marshal(other)
	gotResp := &pb.ModelInferResponse{}
	if err := c.Unmarshal(frames(b), gotResp); err != nil || !proto.Equal(gotResp, other) {
		t.Fatalf("response: %v", err)
	}
}

// TestRawFP32ReachesModelInPlace: a large FP32 request read by the codec
// reaches the model (infer.ConvertInputs) as a view of the held buffer,
// whatever the id before it: no copy between the frames' one and the
// model.
func TestRawFP32ReachesModelInPlace(t *testing.T) {
	c := codec{proto: encoding.GetCodecV2(grpcproto.Name)}
	for idLen := range 9 {
		req, x := rawRequest(string(make([]byte, idLen)), idLen, 64, 200)
		b, _ := proto.Marshal(req)
		got := &pb.ModelInferRequest{}
		if err := c.Unmarshal(frames(b), got); err != nil {
			t.Fatal(err)
		}
		buf := takeHeld(got)
		r, _, err := decodeRequest(got)
		if err != nil {
			t.Fatal(err)
		}
		in, err := infer.ConvertInputs(firstModel{}, r)
		if err != nil {
			t.Fatal(err)
		}
		f := in[0].F32
		if !slices.Equal(f, x) {
			t.Fatalf("id length %d: the model got other values", idLen)
		}
		if !overlaps(buf.B, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))) {
			t.Fatalf("id length %d: the model got a copy", idLen)
		}
		messageBuffers.Put(buf)
	}
}

// TestUnmarshalAliasedPieces: raw entries between other fields, fields
// repeated, unknown fields and a bad message read as proto.Unmarshal
// reads them.
func TestUnmarshalAliasedPieces(t *testing.T) {
	var b []byte
	raw := func(s string) {
		b = protowire.AppendTag(b, rawField, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	str := func(num protowire.Number, s string) {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	raw("first")
	str(1, "model")
	raw("")
	str(3, "id1")
	b = protowire.AppendTag(b, 99, protowire.VarintType) // unknown
	b = protowire.AppendVarint(b, 7)
	in, _ := proto.Marshal(&pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "a"}}})
	b = append(b, in...)
	raw("third")
	str(3, "id2") // the last one wins
	in, _ = proto.Marshal(&pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "b"}}})
	b = append(b, in...)
	checkAliased(t, b, true)
	// A raw entry with the wrong wire type is an unknown field to
	// protobuf-go; truncated and malformed messages are its errors.
	bad := protowire.AppendTag(nil, rawField, protowire.VarintType)
	bad = protowire.AppendVarint(bad, 1)
	checkAliased(t, bad, false)
	checkAliased(t, b[:len(b)-1], false)
	checkAliased(t, []byte{0xff}, false)
	checkAliased(t, append(protowire.AppendTag(nil, rawField, protowire.BytesType), 10, 'a'), false)
}

// checkAliased reads b with unmarshalAliased and proto.Unmarshal and
// fails unless both give the same message or both fail.
func checkAliased(t *testing.T, b []byte, wantAliased bool) {
	t.Helper()
	want := &pb.ModelInferRequest{}
	wantErr := proto.Unmarshal(b, want)
	got := &pb.ModelInferRequest{Id: "stale"}
	aliased, err := unmarshalAliased(b, got)
	if (err != nil) != (wantErr != nil) || aliased != wantAliased {
		t.Fatalf("%x: error %v aliased %v, protobuf-go's error %v", b, err, aliased, wantErr)
	}
	if err == nil && !proto.Equal(got, want) {
		t.Fatalf("%x: read as %v, protobuf-go reads %v", b, got, want)
	}
	for _, r := range got.GetRawInputContents() {
		if aliased && len(r) > 0 && !overlaps(b, r) {
			t.Fatalf("%x: raw entry %q is a copy", b, r)
		}
	}
}

// FuzzUnmarshalAliased: any bytes read as protobuf-go reads them.
func FuzzUnmarshalAliased(f *testing.F) {
	req, _ := rawRequest("id", 1, 2, 3)
	b, _ := proto.Marshal(req)
	f.Add(b)
	f.Add(append(slices.Clone(b), b...))
	f.Add([]byte{0x3a, 0x02, 'h'})
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &pb.ModelInferRequest{}
		wantErr := proto.Unmarshal(b, want)
		got := &pb.ModelInferRequest{}
		_, err := unmarshalAliased(b, got)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, protobuf-go's %v", err, wantErr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("read as %v, protobuf-go reads %v", got, want)
		}
	})
}

// TestHeldBufferOfAbandonedRequest: a request read by the codec whose
// handler never takes its buffer (an interceptor refused the call) does
// not keep it: once the request is collected its entry goes.
func TestHeldBufferOfAbandonedRequest(t *testing.T) {
	c := codec{proto: encoding.GetCodecV2(grpcproto.Name)}
	req, _ := rawRequest("gone", 1, 64, 200)
	b, _ := proto.Marshal(req)
	dropped := make(chan struct{})
	var once sync.Once
	hook := func() { once.Do(func() { close(dropped) }) }
	testHookDropped.Store(&hook)
	defer testHookDropped.Store(nil)
	// The request read, then unreachable once the call returns.
	if err := c.Unmarshal(frames(b), &pb.ModelInferRequest{}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	select {
	case <-dropped:
	case <-time.After(30 * time.Second): // a failsafe: the cleanup follows the GC above
		t.Fatal("the request's buffer was not dropped once it was collected")
	}
	n := 0
	rawBuffers.m.Range(func(_, _ any) bool { n++; return true })
	if n != 0 || rawBuffers.n.Load() != 0 {
		t.Fatalf("%d buffers still held (counted: %d)", n, rawBuffers.n.Load())
	}
}

func TestOverlaps(t *testing.T) {
	b := make([]byte, 100)
	buf := b[:50:50]
	for _, c := range []struct {
		s    []byte
		want bool
	}{
		{b[10:20], true}, {b[49:50], true}, {b[:1], true}, {b[40:60], true},
		{b[50:], false}, {b[:0:0], false}, {nil, false}, {make([]byte, 50), false},
	} {
		if got := overlaps(buf, c.s); got != c.want {
			t.Errorf("overlaps(b[:50], slice at %p len %d) = %v", unsafe.SliceData(c.s), len(c.s), got)
		}
	}
}

// echoModel is a tensor model that answers a copy of its input once
// parties requests are inside Infer together (so that a buffer given back
// early would be read by a later request's data); entered gets a value
// as each request comes in.
type echoModel struct {
	parties int
	entered chan struct{}
	mu      sync.Mutex
	waiting []chan struct{} // guarded by mu
}

func (*echoModel) Name() string        { return "echo" }
func (*echoModel) Ready() bool         { return true }
func (*echoModel) Platform() string    { return "onnx" }
func (*echoModel) MaxRequestRows() int { return 1 << 20 }
func (*echoModel) Inputs() []oip.Spec {
	return []oip.Spec{{Name: "x", DType: oip.FP32, Shape: []int64{-1, -1}}}
}
func (*echoModel) Outputs() []oip.Spec {
	return []oip.Spec{{Name: "y", DType: oip.FP32, Shape: []int64{-1, -1}}}
}
func (m *echoModel) Infer(ctx context.Context, in []oip.Tensor) ([]oip.Tensor, error) {
	m.mu.Lock()
	ch := make(chan struct{})
	m.waiting = append(m.waiting, ch)
	if len(m.waiting) == m.parties {
		for _, c := range m.waiting {
			close(c)
		}
		m.waiting = nil
	}
	m.mu.Unlock()
	m.entered <- struct{}{}
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []oip.Tensor{{Name: "y", DType: oip.FP32, Shape: slices.Clone(in[0].Shape), F32: slices.Clone(in[0].F32)}}, nil
}

type echoBackend struct{ m *echoModel }

func (b echoBackend) Model(name string) (infer.Model, bool) { return b.m, name == "echo" }
func (b echoBackend) Models() []infer.Model                 { return []infer.Model{b.m} }
func (echoBackend) Ready() bool                             { return true }

// TestRawBuffersNotReusedEarly: large raw requests, read into reused
// buffers by ServerCodec, sent one after the other as the previous one
// is inside the model, all answered once the last is in: every answer is
// its own input, over rounds in which the buffers go back and are taken
// again, for ModelInfer and ModelStreamInfer. A buffer given back before
// the model ran would be taken by the next request and the earlier
// request would answer its data.
func TestRawBuffersNotReusedEarly(t *testing.T) {
	const parties = 4
	model := &echoModel{parties: parties, entered: make(chan struct{}, parties)}
	c := serveBackend(t, echoBackend{model}, ServerCodec())
	check := func(what string, resp *pb.ModelInferResponse, want []float32) error {
		raw := resp.GetRawOutputContents()
		if len(raw) != 1 || len(raw[0]) != 4*len(want) {
			return fmt.Errorf("%s: %d outputs", what, len(raw))
		}
		for i, v := range want {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[0][4*i:])); got != v {
				return fmt.Errorf("%s: element %d is %v, want %v: another request's data", what, i, got, v)
			}
		}
		return nil
	}
	for round := range 6 {
		stream := round%2 == 1
		errs := make([]error, parties)
		var wg sync.WaitGroup
		for i := range parties {
			if i > 0 {
				<-model.entered // the previous request is inside the model
			}
			wg.Go(func() {
				seed := round*parties + i
				req, x := rawRequest(string(make([]byte, seed%8)), seed, 96+8*i, 100) // 38 to 48 kB
				what := fmt.Sprintf("round %d request %d", round, i)
				if !stream {
					resp, err := c.ModelInfer(t.Context(), req)
					if err == nil {
						err = check(what, resp, x)
					}
					errs[i] = err
					return
				}
				st, err := c.ModelStreamInfer(t.Context())
				if err == nil {
					err = st.Send(req)
				}
				var resp *pb.ModelStreamInferResponse
				if err == nil {
					resp, err = st.Recv()
				}
				if err == nil && resp.GetErrorMessage() != "" {
					err = fmt.Errorf("%s", resp.GetErrorMessage())
				}
				if err == nil {
					err = check(what+" (stream)", resp.GetInferResponse(), x)
				}
				if err == nil {
					err = st.CloseSend()
				}
				if err == nil {
					if _, err = st.Recv(); errors.Is(err, io.EOF) {
						err = nil // the call ended after the answer
					}
				}
				errs[i] = err
			})
		}
		<-model.entered
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// firstModel is a tensor model that answers each row's first value: a
// model that costs next to nothing, for benchmarks of the transport.
type firstModel struct{}

func (firstModel) Name() string        { return "first" }
func (firstModel) Ready() bool         { return true }
func (firstModel) Platform() string    { return "onnx" }
func (firstModel) MaxRequestRows() int { return 1 << 20 }
func (firstModel) Inputs() []oip.Spec {
	return []oip.Spec{{Name: "x", DType: oip.FP32, Shape: []int64{-1, -1}}}
}
func (firstModel) Outputs() []oip.Spec {
	return []oip.Spec{{Name: "y", DType: oip.FP32, Shape: []int64{-1, 1}}}
}
func (firstModel) Infer(_ context.Context, in []oip.Tensor) ([]oip.Tensor, error) {
	rows := int(in[0].Shape[0])
	width := len(in[0].F32) / rows
	out := make([]float32, rows)
	for i := range out {
		out[i] = in[0].F32[i*width]
	}
	return []oip.Tensor{{Name: "y", DType: oip.FP32, Shape: []int64{int64(rows), 1}, F32: out}}, nil
}

type firstBackend struct{}

func (firstBackend) Model(name string) (infer.Model, bool) { return firstModel{}, name == "first" }
func (firstBackend) Models() []infer.Model                 { return []infer.Model{firstModel{}} }
func (firstBackend) Ready() bool                           { return true }

// BenchmarkModelInferRaw: ModelInfer of 256 rows of 784 FP32 values
// (800 kB of raw_input_contents: the corpus CNN's [256,1,28,28] request)
// to a model that answers each row's first value, over loopback TCP, with grpc-go's proto
// codec and with ServerCodec. Client and server share the process: time
// and allocations are both sides' (the client's part is the same in
// both).
func BenchmarkModelInferRaw(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []grpc.ServerOption
	}{{"proto", nil}, {"ServerCodec", []grpc.ServerOption{ServerCodec()}}} {
		b.Run(c.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			gs := grpc.NewServer(c.opts...)
			Register(gs, firstBackend{}, Options{})
			go gs.Serve(ln)
			defer gs.Stop()
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			client := pb.NewGRPCInferenceServiceClient(conn)
			req, _ := rawRequest("bench", 1, 256, 784)
			req.ModelName = "first"
			b.SetBytes(int64(len(req.GetRawInputContents()[0])))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.ModelInfer(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
