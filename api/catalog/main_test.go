package catalog

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/openai/openaitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAdapter is a LoRA adapter of its parent.
type fakeAdapter struct {
	*openaitest.Model
	parent, root string
}

func (a *fakeAdapter) Parent() string { return a.parent }
func (a *fakeAdapter) Root() string   { return a.root }

// tensorBackend serves its models, and the tensor models named in
// tensors (each with its readiness).
type tensorBackend struct {
	*openaitest.Backend[openai.Model]
	tensors map[string]bool
}

func (b *tensorBackend) TensorModel(name string) (ready, ok bool) {
	ready, ok = b.tensors[name]
	return ready, ok
}

// testHandler returns the catalog's routes over models.
func testHandler(models ...openai.Model) http.Handler {
	r := chi.NewRouter()
	Mount(r, &tensorBackend{Backend: openaitest.NewBackend(models...)})
	return r
}
