package tritonv1

import (
	"context"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/api/v2/infer"
	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// fakeRepo is a repository index with the fake models and one that failed
// to load.
type fakeRepo struct{ entries []infer.IndexEntry }

func (r fakeRepo) Index(bool) []infer.IndexEntry      { return r.entries }
func (fakeRepo) Load(context.Context, string) error   { return nil }
func (fakeRepo) Unload(context.Context, string) error { return nil }

// TestStatusListsRepository: the status lists every model of the
// repository; one that is not served is MODEL_UNAVAILABLE under its
// version (-1 when unknown), and asked for by name its reason is the
// status's message. A name in neither is NOT_FOUND.
func TestStatusListsRepository(t *testing.T) {
	repo := fakeRepo{[]infer.IndexEntry{
		{Name: "broken", Version: "3", State: "UNAVAILABLE", Reason: "config.pbtxt: sequence_batching is not supported"},
		{Name: "garbled", State: "UNAVAILABLE", Reason: "config.pbtxt: syntax"},
		{Name: "mlp", Version: "1", State: "READY"},
	}}
	s := newService(newFakeBackend(), Options{Repository: repo})
	st, msg, err := s.status("")
	if err != nil || msg != "" {
		t.Fatal(err, msg)
	}
	if len(st.GetModelStatus()) != 4 || st.GetModelStatus()["mlp"].GetVersionStatus()[1].GetReadyState() != pb.ModelReadyState_MODEL_READY ||
		st.GetModelStatus()["broken"].GetVersionStatus()[3].GetReadyState() != pb.ModelReadyState_MODEL_UNAVAILABLE ||
		st.GetModelStatus()["garbled"].GetVersionStatus()[-1].GetReadyState() != pb.ModelReadyState_MODEL_UNAVAILABLE {
		t.Fatalf("status %v", st)
	}
	st, msg, err = s.status("broken")
	if err != nil || len(st.GetModelStatus()) != 1 || !strings.Contains(msg, "sequence_batching is not supported") {
		t.Fatalf("status of broken: %v %q %v", st, msg, err)
	}
	if _, _, err := s.status("nope"); infer.AsError(err).Code != infer.NotFound {
		t.Fatalf("status of nope: %v", err)
	}
}
