package v2grpc

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/llmserve/llmserve/api/v2/infer"
	"github.com/llmserve/llmserve/core"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// letters is a vocabulary of one token per lower-case letter and EOS (26).
type letters struct{}

func (letters) Tokenize(text string, _, _ bool) ([]int32, error) {
	var out []int32
	for _, r := range text {
		if r >= 'a' && r <= 'z' {
			out = append(out, r-'a')
		}
	}
	return out, nil
}

func (letters) Piece(tok int32, _ bool) []byte {
	if tok == 26 {
		return nil
	}
	return []byte{byte('a' + tok)}
}
func (letters) NumTokens() int           { return 27 }
func (letters) BOS() int32               { return -1 }
func (letters) EOS() int32               { return 26 }
func (letters) IsEOG(tok int32) bool     { return tok == 26 }
func (letters) IsControl(tok int32) bool { return tok == 26 }

type scripted struct {
	tok   *tokenizer.Tokenizer
	outs  []scheduler.Output
	ready bool
}

func (m *scripted) Name() string                    { return "m" }
func (m *scripted) Ready() bool                     { return m.ready }
func (m *scripted) MaxModelLen() int                { return 64 }
func (m *scripted) RequestTimeout() time.Duration   { return 0 }
func (m *scripted) Tokenizer() *tokenizer.Tokenizer { return m.tok }
func (m *scripted) Submit(_ context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	s := core.NewStream(reqs[0].ID, 1, func(int, bool) {})
	for _, o := range m.outs {
		s.Push([]scheduler.Output{o}, scheduler.Usage{})
	}
	return []*core.Stream{s}, nil
}

type oneModel struct{ m *scripted }

func (b oneModel) Model(name string) (infer.Model, bool) { return b.m, name == "m" }
func (b oneModel) Models() []infer.Model                 { return []infer.Model{b.m} }
func (b oneModel) Ready() bool                           { return b.m.ready }

func client(t *testing.T, m *scripted) pb.GRPCInferenceServiceClient {
	tok, err := tokenizer.New(letters{}, "")
	if err != nil {
		t.Fatal(err)
	}
	m.tok = tok
	ln := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	Register(gs, oneModel{m}, Options{})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewGRPCInferenceServiceClient(conn)
}

func request(id string) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "m", Id: id, Inputs: []*pb.ModelInferRequest_InferInputTensor{{
		Name: "text_input", Datatype: "BYTES", Shape: []int64{1}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("hi")}},
	}}}
}

// TestStreamErrorMidway: an engine failure after some tokens is an
// in-band error, marked final, after the tokens' responses.
func TestStreamErrorMidway(t *testing.T) {
	c := client(t, &scripted{ready: true, outs: []scheduler.Output{
		{Tokens: []int32{0}}, {Finish: scheduler.FinishAbort, Err: scheduler.ErrEngine},
	}})
	st, err := c.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(request("q")); err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	var got []*pb.ModelStreamInferResponse
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 2 || got[0].GetErrorMessage() != "" || string(got[0].GetInferResponse().GetOutputs()[0].GetContents().GetBytesContents()[0]) != "a" ||
		got[1].GetErrorMessage() == "" || got[1].GetInferResponse().GetId() != "q" ||
		!got[1].GetInferResponse().GetParameters()[finalParam].GetBoolParam() {
		t.Fatalf("%v", got)
	}
	if _, err := c.ModelInfer(context.Background(), request("u")); status.Code(err) != codes.Internal {
		t.Fatalf("ModelInfer: %v", err)
	}
}

func TestNotReady(t *testing.T) {
	c := client(t, &scripted{})
	if _, err := c.ModelInfer(context.Background(), request("u")); status.Code(err) != codes.Unavailable {
		t.Fatalf("ModelInfer: %v", err)
	}
	if r, err := c.ModelReady(context.Background(), &pb.ModelReadyRequest{Name: "m"}); err != nil || r.GetReady() {
		t.Fatalf("ModelReady: %v %v", r, err)
	}
	if r, err := c.ServerReady(context.Background(), &pb.ServerReadyRequest{}); err != nil || r.GetReady() {
		t.Fatalf("ServerReady: %v %v", r, err)
	}
	if r, err := c.RepositoryIndex(context.Background(), &pb.RepositoryIndexRequest{}); err != nil || r.GetModels()[0].GetState() != "UNAVAILABLE" {
		t.Fatalf("RepositoryIndex: %v %v", r, err)
	}
	if r, err := c.ModelConfig(context.Background(), &pb.ModelConfigRequest{Name: "m"}); err != nil || r.GetConfig().GetName() != "m" || r.GetConfig().GetInput()[0].GetName() != "text_input" {
		t.Fatalf("ModelConfig: %v %v", r, err)
	}
}
