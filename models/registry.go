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
	gen      kind[*Generative]    // guarded by mu
	tensors  kind[*TensorModel]   // guarded by mu
	runtimes kind[*runtime.Model] // guarded by mu
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
	return &Registry{}
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

// modelOf is a kind of model: *Generative, *TensorModel or *runtime.Model.
type modelOf interface {
	comparable
	served
}

// kind holds the served models of one kind (generative, tensor or custom
// runtime): by name, and in the order they were added. The Registry's mu
// guards it.
type kind[M modelOf] struct {
	named map[string]M
	order []M
}

func (k *kind[M]) get(name string) (M, bool) {
	m, ok := k.named[name]
	return m, ok
}

// list returns the models in the order they were added.
func (k *kind[M]) list() []M { return append([]M(nil), k.order...) }

func (k *kind[M]) add(m M) {
	if k.named == nil {
		k.named = make(map[string]M)
	}
	k.named[m.Name()] = m
	k.order = append(k.order, m)
}

// remove takes the model called name out and returns it.
func (k *kind[M]) remove(name string) (M, bool) {
	m, ok := k.named[name]
	if !ok {
		return m, false
	}
	delete(k.named, name)
	k.order = slices.DeleteFunc(k.order, func(x M) bool { return x == m })
	return m, true
}

// swap serves m in place of the model called name, at its place in the
// order; false when there is none.
func (k *kind[M]) swap(name string, m M) bool {
	old, ok := k.named[name]
	if !ok {
		return false
	}
	k.named[name] = m
	k.order[slices.Index(k.order, old)] = m
	return true
}

// find returns the model called name.
func (k *kind[M]) find(name string) (served, bool) {
	if m, ok := k.named[name]; ok {
		return m, true
	}
	return nil, false
}

// drop removes the model called name.
func (k *kind[M]) drop(name string) { k.remove(name) }

// appendTo appends the models, in order, to out.
func (k *kind[M]) appendTo(out []served) []served {
	for _, m := range k.order {
		out = append(out, m)
	}
	return out
}

// closeAll closes and forgets every model, and returns their errors.
func (k *kind[M]) closeAll() []error {
	errs := make([]error, 0, len(k.order))
	for _, m := range k.order {
		errs = append(errs, m.Close())
	}
	*k = kind[M]{}
	return errs
}

// anyKind is a kind of any model, as the Registry goes through them all.
type anyKind interface {
	find(name string) (served, bool)
	drop(name string)
	appendTo(out []served) []served
	closeAll() []error
}

// kinds lists the kinds in their listing order: generative, tensor, then
// custom runtime models.
func (r *Registry) kinds() [3]anyKind { return [3]anyKind{&r.gen, &r.tensors, &r.runtimes} }

// getIn returns the model of k called name, under r's read lock.
func getIn[M modelOf](r *Registry, k *kind[M], name string) (M, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return k.get(name)
}

// listIn returns k's models in the order they were added, under r's read
// lock.
func listIn[M modelOf](r *Registry, k *kind[M]) []M {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return k.list()
}

// takenLocked reports whether a model of either kind is called name.
func (r *Registry) takenLocked(name string) bool {
	if _, k := r.findLocked(name); k != nil {
		return true
	}
	_, a := r.adapterLocked(name)
	return a
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
	r.gen.add(g)
	return nil
}

// Get returns the generative model called name.
func (r *Registry) Get(name string) (*Generative, bool) { return getIn(r, &r.gen, name) }

// Remove takes the model called name out of the registry, so that new
// requests do not find it, and returns it; the caller drains and closes
// it.
func (r *Registry) Remove(name string) (*Generative, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen.remove(name)
}

// AddTensor registers the tensor model m under its name; names are
// unique across generative and tensor models.
func (r *Registry) AddTensor(m *TensorModel) error { return r.add(m) }

// GetTensor returns the tensor model called name.
func (r *Registry) GetTensor(name string) (*TensorModel, bool) { return getIn(r, &r.tensors, name) }

// ListTensors returns the tensor models in the order they were added.
func (r *Registry) ListTensors() []*TensorModel { return listIn(r, &r.tensors) }

// AddRuntime registers the custom runtime model m under its name; names
// are unique across every kind.
func (r *Registry) AddRuntime(m *runtime.Model) error { return r.add(m) }

// GetRuntime returns the custom runtime model called name.
func (r *Registry) GetRuntime(name string) (*runtime.Model, bool) { return getIn(r, &r.runtimes, name) }

// ListRuntimes returns the custom runtime models in the order they were
// added.
func (r *Registry) ListRuntimes() []*runtime.Model { return listIn(r, &r.runtimes) }

// lookup returns the model of any kind called name.
func (r *Registry) lookup(name string) (served, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, k := r.findLocked(name)
	return m, k != nil
}

// findLocked returns the model called name, of any kind, and its kind (nil
// when there is none).
func (r *Registry) findLocked(name string) (served, anyKind) {
	for _, k := range r.kinds() {
		if m, ok := k.find(name); ok {
			return m, k
		}
	}
	return nil, nil
}

// remove takes the model of either kind called name out, as Remove.
func (r *Registry) remove(name string) (served, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, k := r.findLocked(name)
	if k == nil {
		return nil, false
	}
	k.drop(name)
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
		r.gen.add(m)
	case *TensorModel:
		r.tensors.add(m)
	case *runtime.Model:
		r.runtimes.add(m)
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
	var swapped bool
	switch n := m.(type) {
	case *Generative:
		swapped = r.gen.swap(name, n)
	case *TensorModel:
		swapped = r.tensors.swap(name, n)
	case *runtime.Model:
		swapped = r.runtimes.swap(name, n)
	}
	if swapped {
		return nil
	}
	// Another kind: remove the old model and add the new one, still
	// under the lock.
	if _, k := r.findLocked(name); k != nil {
		k.drop(name)
	}
	return r.addLocked(m)
}

// all lists every model: generative, tensor, then custom runtime ones.
func (r *Registry) all() []served {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []served
	for _, k := range r.kinds() {
		out = k.appendTo(out)
	}
	return out
}

func (r *Registry) setReadiness(f func() bool) { r.readiness.Store(&f) }

// List returns the generative models in the order they were added.
func (r *Registry) List() []*Generative { return listIn(r, &r.gen) }

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
	for _, k := range r.kinds() {
		errs = append(errs, k.closeAll()...)
	}
	return errors.Join(errs...)
}

func baseName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}
