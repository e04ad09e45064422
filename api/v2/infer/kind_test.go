package infer

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/llmserve/llmserve/oip"
	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// fakeRuntime is a custom runtime that declares one input and answers
// nothing.
type fakeRuntime struct{}

func (fakeRuntime) Name() string     { return "rt" }
func (fakeRuntime) Ready() bool      { return true }
func (fakeRuntime) Platform() string { return "custom" }
func (fakeRuntime) Inputs() []oip.Spec {
	return []oip.Spec{{Name: "x", DType: oip.FP32, Shape: []int64{-1}}}
}
func (fakeRuntime) Outputs() []oip.Spec { return nil }
func (fakeRuntime) CallRuntime(context.Context, *pb.ModelInferRequest, metadata.MD) (*pb.ModelInferResponse, metadata.MD, error) {
	return &pb.ModelInferResponse{}, nil, nil
}

// embedTask is an LLM whose task is "embed".
type embedTask struct{ *fakeModel }

func (embedTask) Task() string { return "embed" }

// bare is a model of no kind.
type bare struct{}

func (bare) Name() string { return "bare" }
func (bare) Ready() bool  { return true }

// TestKindOf: each kind is found by its interface (a runtime before a
// tensor model, task embed before an LLM), and a generative call on
// another kind is refused as Invalid, saying what the model is.
func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		m      Model
		kind   Kind
		refuse string // AsLLM's error
	}{
		{&fakeModel{}, KindLLM, ""},
		{embedTask{&fakeModel{}}, KindEmbedding, `model "fake" is an embedding model (task embed): it does not generate`},
		{&fakeTensor{}, KindTensor, `model "mlp" is a tensor model, not an LLM: it does not generate`},
		{fakeRuntime{}, KindRuntime, `model "rt" is a tensor model, not an LLM: it does not generate`},
		{bare{}, KindNone, `model "bare" is of no kind`},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			if got := KindOf(tc.m); got != tc.kind {
				t.Fatalf("KindOf = %v, want %v", got, tc.kind)
			}
			_, err := AsLLM(tc.m, "generate")
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("AsLLM: %v", err)
			case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
				t.Fatalf("AsLLM: %v, want %q", err, tc.refuse)
			}
			_, declared := AsSignature(tc.m)
			if declared != (tc.kind == KindTensor || tc.kind == KindRuntime) {
				t.Fatalf("AsSignature: %v", declared)
			}
			if _, err := Run(context.Background(), tc.m, &Request{}, GenOptions{}); tc.kind == KindNone && AsError(err).Code != Internal {
				t.Fatalf("Run on a model of no kind: %v", err)
			}
		})
	}
	if md := Metadata(fakeRuntime{}); md.Platform != "custom" || len(md.Inputs) != 1 || md.Inputs[0].Name != "x" {
		t.Fatalf("runtime metadata %+v", md)
	}
}
