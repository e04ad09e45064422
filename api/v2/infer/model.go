package infer

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Server metadata.
const (
	// ServerName is the name in server metadata.
	ServerName = "llmserve"
	// ModelVersion is the version a model is served as unless it says
	// otherwise (a Version method; the model repository's version folder).
	ModelVersion = "1"
	// Platform is the models' platform in model metadata.
	Platform = "llama.cpp"
)

// ServerVersion is the server version for server metadata: the module
// version the binary was built as, or "devel".
func ServerVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// Extensions are the protocol extensions the server implements, as server
// metadata lists them.
var Extensions = []string{"binary_tensor_data", "generate", "model_configuration"}

// Backend is what the V2 protocols need from the model registry.
type Backend interface {
	// Model returns the served model called name.
	Model(name string) (Model, bool)
	// Models lists the served models in a stable order.
	Models() []Model
	// Ready reports whether every model is ready and the server is not
	// draining.
	Ready() bool
}

// Model is one served model, of whatever kind: what lookup, readiness,
// versions and metadata need of every model. Each kind has an interface
// of its own beside it, which KindOf (kind.go) finds: LLM, Embedder (task
// "embed"), TensorModel, RuntimeModel. A model implements its kind's
// methods and no stubs of another's.
type Model interface {
	Name() string
	// Ready reports whether the model accepts requests.
	Ready() bool
}

// LLM is a served generative model (the same methods the OpenAI routes
// use; *models.Generative and the head's router model have them).
type LLM interface {
	Model
	// MaxModelLen is the most tokens (prompt plus output) one sequence
	// may hold.
	MaxModelLen() int
	// RequestTimeout is the deadline the server gives every request, or 0.
	RequestTimeout() time.Duration
	Tokenizer() *tokenizer.Tokenizer
	// Submit starts generation of the requests, all or none, with one
	// stream each.
	Submit(ctx context.Context, reqs []*scheduler.Request) ([]*core.Stream, error)
}

// VersionOf is the version m is served as: its Version method's answer,
// else ModelVersion.
func VersionOf(m Model) string {
	if v, ok := m.(interface{ Version() string }); ok && v.Version() != "" {
		return v.Version()
	}
	return ModelVersion
}

// Lookup finds a model by name and version ("" means the server's
// choice, which is VersionOf the model). Unknown names and versions are NotFound.
func Lookup(b Backend, name, version string) (Model, error) {
	m, ok := b.Model(name)
	if !ok {
		return nil, Errorf(NotFound, "model %q is not served here", truncate(name))
	}
	if v := VersionOf(m); version != "" && version != v {
		return nil, Errorf(NotFound, "model %q has no version %q; it is served as version %s", truncate(name), truncate(version), v)
	}
	return m, nil
}

// ModelWaiter is a Backend that may not know its model yet: a head
// (llmserve head) learns it from its first healthy worker. WaitModel
// returns the model once known (nil when it is not called name), an
// error (scheduler.ErrNoWorker when no worker answered in time), or
// ctx's error.
type ModelWaiter interface {
	WaitModel(ctx context.Context, name string) (Model, error)
}

// ReadyWaiter is a Model that may become ready soon (a head's model while
// no worker is healthy): WaitReady returns nil once it is, or why not
// (scheduler.ErrNoWorker, ctx's error).
type ReadyWaiter interface {
	WaitReady(ctx context.Context) error
}

// LookupReady is Lookup for inference: a model that is not ready is
// Unavailable. A ModelWaiter backend and a ReadyWaiter model are waited
// for (within ctx) instead.
func LookupReady(ctx context.Context, b Backend, name, version string) (Model, error) {
	if mw, ok := b.(ModelWaiter); ok {
		if _, known := b.Model(name); !known {
			m, err := mw.WaitModel(ctx, name)
			if err != nil {
				return nil, err
			}
			if m == nil {
				return nil, Errorf(NotFound, "model %q is not served here", truncate(name))
			}
		}
	}
	m, err := Lookup(b, name, version)
	if err != nil {
		return nil, err
	}
	if !m.Ready() {
		if rw, ok := m.(ReadyWaiter); ok {
			if err := rw.WaitReady(ctx); err != nil {
				return nil, err
			}
			return m, nil
		}
		return nil, Errorf(Unavailable, "model %q is not ready; retry shortly", m.Name())
	}
	return m, nil
}

// TensorMetadata describes one input or output of a model; -1 in Shape is
// a variable dimension.
type TensorMetadata struct {
	Name     string   `json:"name"`
	Datatype Datatype `json:"datatype"`
	Shape    []int64  `json:"shape"`
	// Optional inputs may be left out of a request.
	Optional bool `json:"-"`
}

// ModelMetadata is a model's V2 metadata.
type ModelMetadata struct {
	Name     string           `json:"name"`
	Versions []string         `json:"versions"`
	Platform string           `json:"platform"`
	Inputs   []TensorMetadata `json:"inputs"`
	Outputs  []TensorMetadata `json:"outputs"`
}
