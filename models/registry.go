package models

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llmserve/llmserve/models/runtime"
)

// Registry holds the served models by name. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	byName   map[string]*Generative    // guarded by mu
	order    []*Generative             // guarded by mu
	tensors  map[string]*TensorModel   // guarded by mu
	tensorsO []*TensorModel            // guarded by mu, in the order added
	runtimes map[string]*runtime.Model // guarded by mu
	runtimeO []*runtime.Model          // guarded by mu, in the order added
	draining atomic.Bool
	// loraMu serializes LoRA adapter loads (lora.go).
	loraMu sync.Mutex
	// readiness, when set (by a Repository), decides Ready instead of
	// "at least one model and every model ready".
	readiness atomic.Pointer[func() bool]

	// The requests being handled, by the order they began (see Enter).
	reqMu  sync.Mutex
	reqSeq uint64              // guarded by reqMu
	active map[uint64]struct{} // guarded by reqMu
}

// Enter records that a request began; the API layer calls it for every
// HTTP request and gRPC call, serves the request with the context it
// returns and calls exit when the request has ended, its response written. Unloading a model waits for the
// requests that began before the model left the registry (any of them may
// still hold it) before it frees the model's memory.
func (r *Registry) Enter(ctx context.Context) (_ context.Context, exit func()) {
	r.reqMu.Lock()
	r.reqSeq++
	id := r.reqSeq
	if r.active == nil {
		r.active = map[uint64]struct{}{}
	}
	r.active[id] = struct{}{}
	r.reqMu.Unlock()
	return context.WithValue(ctx, requestKey{}, id), func() {
		r.reqMu.Lock()
		delete(r.active, id)
		r.reqMu.Unlock()
	}
}

type requestKey struct{}

// mark is the order of the latest request that began.
func (r *Registry) mark() uint64 {
	r.reqMu.Lock()
	defer r.reqMu.Unlock()
	return r.reqSeq
}

// endedBefore reports whether every request that began at or before mark
// has ended, but the one ctx belongs to (an unload waits for the others).
func (r *Registry) endedBefore(ctx context.Context, mark uint64) bool {
	self, _ := ctx.Value(requestKey{}).(uint64)
	r.reqMu.Lock()
	defer r.reqMu.Unlock()
	for id := range r.active {
		if id <= mark && id != self {
			return false
		}
	}
	return true
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: make(map[string]*Generative), tensors: make(map[string]*TensorModel), runtimes: make(map[string]*runtime.Model)}
}

// served is what the registry and the repository need of any model, a
// generative or a tensor one.
type served interface {
	Name() string
	Ready() bool
	Idle() bool
	Stop() int64
	Close() error
}

// takenLocked reports whether a model of either kind is called name.
func (r *Registry) takenLocked(name string) bool {
	_, g := r.byName[name]
	_, t := r.tensors[name]
	_, c := r.runtimes[name]
	_, a := r.adapterLocked(name)
	return g || t || c || a
}

// Add registers g under its name.
func (r *Registry) Add(g *Generative) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.takenLocked(g.Name()) {
		return fmt.Errorf("model %q is already served", g.Name())
	}
	for _, a := range g.Adapters() {
		if r.takenLocked(a.Name()) || a.Name() == g.Name() {
			return fmt.Errorf("LoRA adapter %q of model %q: the name is already served", a.Name(), g.Name())
		}
	}
	r.byName[g.Name()] = g
	r.order = append(r.order, g)
	return nil
}

// Get returns the generative model called name.
func (r *Registry) Get(name string) (*Generative, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.byName[name]
	return g, ok
}

// Remove takes the model called name out of the registry, so that new
// requests do not find it, and returns it; the caller drains and closes
// it.
func (r *Registry) Remove(name string) (*Generative, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.byName[name]
	if !ok {
		return nil, false
	}
	delete(r.byName, name)
	r.order = slices.DeleteFunc(r.order, func(x *Generative) bool { return x == g })
	return g, true
}

// AddTensor registers the tensor model m under its name; names are
// unique across generative and tensor models.
func (r *Registry) AddTensor(m *TensorModel) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.takenLocked(m.Name()) {
		return fmt.Errorf("model %q is already served", m.Name())
	}
	r.tensors[m.Name()] = m
	r.tensorsO = append(r.tensorsO, m)
	return nil
}

// GetTensor returns the tensor model called name.
func (r *Registry) GetTensor(name string) (*TensorModel, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.tensors[name]
	return m, ok
}

// ListTensors returns the tensor models in the order they were added.
func (r *Registry) ListTensors() []*TensorModel {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*TensorModel(nil), r.tensorsO...)
}

// AddRuntime registers the custom runtime model m under its name; names
// are unique across every kind.
func (r *Registry) AddRuntime(m *runtime.Model) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.takenLocked(m.Name()) {
		return fmt.Errorf("model %q is already served", m.Name())
	}
	r.runtimes[m.Name()] = m
	r.runtimeO = append(r.runtimeO, m)
	return nil
}

// GetRuntime returns the custom runtime model called name.
func (r *Registry) GetRuntime(name string) (*runtime.Model, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.runtimes[name]
	return m, ok
}

// ListRuntimes returns the custom runtime models in the order they were
// added.
func (r *Registry) ListRuntimes() []*runtime.Model {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*runtime.Model(nil), r.runtimeO...)
}

// lookup returns the model of any kind called name.
func (r *Registry) lookup(name string) (served, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if g, ok := r.byName[name]; ok {
		return g, true
	}
	if m, ok := r.tensors[name]; ok {
		return m, true
	}
	if m, ok := r.runtimes[name]; ok {
		return m, true
	}
	return nil, false
}

// remove takes the model of either kind called name out, as Remove.
func (r *Registry) remove(name string) (served, bool) {
	if g, ok := r.Remove(name); ok {
		return g, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.runtimes[name]; ok {
		delete(r.runtimes, name)
		r.runtimeO = slices.DeleteFunc(r.runtimeO, func(x *runtime.Model) bool { return x == m })
		return m, true
	}
	m, ok := r.tensors[name]
	if !ok {
		return nil, false
	}
	delete(r.tensors, name)
	r.tensorsO = slices.DeleteFunc(r.tensorsO, func(x *TensorModel) bool { return x == m })
	return m, true
}

// add registers a model of any kind under its name.
func (r *Registry) add(m served) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addLocked(m)
}

func (r *Registry) addLocked(m served) error {
	if r.takenLocked(m.Name()) {
		return fmt.Errorf("model %q is already served", m.Name())
	}
	switch m := m.(type) {
	case *Generative:
		r.byName[m.Name()] = m
		r.order = append(r.order, m)
	case *TensorModel:
		r.tensors[m.Name()] = m
		r.tensorsO = append(r.tensorsO, m)
	case *runtime.Model:
		r.runtimes[m.Name()] = m
		r.runtimeO = append(r.runtimeO, m)
	default:
		return fmt.Errorf("model %q: a %T cannot be served", m.Name(), m)
	}
	return nil
}

// replace serves m in place of the model called name, of any kind, in
// one step: no lookup finds neither. A model of the same kind keeps its
// place in the listing order.
func (r *Registry) replace(name string, m served) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	swapped := false
	switch n := m.(type) {
	case *Generative:
		if old, ok := r.byName[name]; ok {
			r.byName[name] = n
			r.order[slices.Index(r.order, old)] = n
			swapped = true
		}
	case *TensorModel:
		if old, ok := r.tensors[name]; ok {
			r.tensors[name] = n
			r.tensorsO[slices.Index(r.tensorsO, old)] = n
			swapped = true
		}
	case *runtime.Model:
		if old, ok := r.runtimes[name]; ok {
			r.runtimes[name] = n
			r.runtimeO[slices.Index(r.runtimeO, old)] = n
			swapped = true
		}
	}
	if swapped {
		return nil
	}
	// Another kind: remove the old model and add the new one, still
	// under the lock.
	if g, ok := r.byName[name]; ok {
		delete(r.byName, name)
		r.order = slices.DeleteFunc(r.order, func(x *Generative) bool { return x == g })
	}
	if t, ok := r.tensors[name]; ok {
		delete(r.tensors, name)
		r.tensorsO = slices.DeleteFunc(r.tensorsO, func(x *TensorModel) bool { return x == t })
	}
	if c, ok := r.runtimes[name]; ok {
		delete(r.runtimes, name)
		r.runtimeO = slices.DeleteFunc(r.runtimeO, func(x *runtime.Model) bool { return x == c })
	}
	return r.addLocked(m)
}

// all lists every model: generative, tensor, then custom runtime ones.
func (r *Registry) all() []served {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]served, 0, len(r.order)+len(r.tensorsO)+len(r.runtimeO))
	for _, g := range r.order {
		out = append(out, g)
	}
	for _, m := range r.tensorsO {
		out = append(out, m)
	}
	for _, m := range r.runtimeO {
		out = append(out, m)
	}
	return out
}

func (r *Registry) setReadiness(f func() bool) { r.readiness.Store(&f) }

// List returns the generative models in the order they were added.
func (r *Registry) List() []*Generative {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Generative(nil), r.order...)
}

// Drain marks the server as going away: Ready reports false from now on,
// so that load balancers stop sending requests, while the models keep
// serving the ones already running.
func (r *Registry) Drain() { r.draining.Store(true) }

// Stop stops every model's engine, ending the requests still running with
// scheduler.ErrClosed, and returns how many it ended. The models stay
// registered until Close.
func (r *Registry) Stop() int64 {
	r.Drain()
	var cut int64
	for _, m := range r.all() {
		cut += m.Stop()
	}
	return cut
}

// Ready reports whether the server is not draining and there is at least
// one model and every model is ready; with a Repository, what its
// readiness says instead.
func (r *Registry) Ready() bool {
	if r.draining.Load() {
		return false
	}
	if f := r.readiness.Load(); f != nil {
		return (*f)()
	}
	all := r.all()
	for _, m := range all {
		if !m.Ready() {
			return false
		}
	}
	return len(all) > 0
}

// Close closes every model.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, g := range r.order {
		errs = append(errs, g.Close())
	}
	for _, m := range r.tensorsO {
		errs = append(errs, m.Close())
	}
	for _, m := range r.runtimeO {
		errs = append(errs, m.Close())
	}
	r.runtimes = map[string]*runtime.Model{}
	r.runtimeO = nil
	r.byName = map[string]*Generative{}
	r.order = nil
	r.tensors = map[string]*TensorModel{}
	r.tensorsO = nil
	return errors.Join(errs...)
}

func baseName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}
