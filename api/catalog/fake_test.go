package catalog

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeModel is a served model as the catalog sees it: a name, a context
// length and a load time. The rest of openai.Model (tokenizer, Submit) is
// nil: the catalog never calls it.
type fakeModel struct {
	openai.Model
	name   string
	maxLen int
}

func newFakeModel(testing.TB) *fakeModel { return &fakeModel{name: "test-model", maxLen: 64} }

func (m *fakeModel) Name() string     { return m.name }
func (m *fakeModel) Created() int64   { return 1700000000 }
func (m *fakeModel) MaxModelLen() int { return m.maxLen }

// fakeAdapter is a LoRA adapter of its parent.
type fakeAdapter struct {
	*fakeModel
	parent, root string
}

func (a *fakeAdapter) Parent() string { return a.parent }
func (a *fakeAdapter) Root() string   { return a.root }

// fakeReasoner has a reasoning parser (frontend.ReasoningModel).
type fakeReasoner struct{ *fakeModel }

func (fakeReasoner) ReasoningParser() string { return "deepseek_r1" }

// fakeBackend serves its models, and tensor models when tensors is set.
type fakeBackend struct {
	models  []openai.Model
	tensors map[string]bool
}

func (b *fakeBackend) Model(name string) (openai.Model, bool) {
	for _, m := range b.models {
		if m.Name() == name {
			return m, true
		}
	}
	return nil, false
}

func (b *fakeBackend) Models() []openai.Model { return b.models }

func (b *fakeBackend) TensorModel(name string) (ready, ok bool) {
	ready, ok = b.tensors[name]
	return ready, ok
}

// testHandler returns the catalog's routes over models.
func testHandler(models ...openai.Model) http.Handler {
	r := chi.NewRouter()
	Mount(r, &fakeBackend{models: models})
	return r
}

func do(t testing.TB, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}
