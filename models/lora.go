package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// LoRA names a LoRA adapter GGUF to serve with a generative model
// (--lora NAME=PATH, lora_adapters in model-settings.json).
type LoRA struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// ParseLoRA parses NAME=PATH.
func ParseLoRA(s string) (LoRA, error) {
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return LoRA{}, fmt.Errorf("LoRA adapter %q: want NAME=PATH", s)
	}
	if err := checkAdapterName(name); err != nil {
		return LoRA{}, err
	}
	return LoRA{Name: name, Path: path}, nil
}

// checkAdapterName refuses names that cannot be a model id.
func checkAdapterName(name string) error {
	if name == "" || strings.ContainsAny(name, "\x00\n\r") || strings.TrimSpace(name) != name {
		return fmt.Errorf("LoRA adapter name %q: want a non-empty model id without control characters or surrounding spaces", name)
	}
	return nil
}

// Errors of adapter loading and unloading; the API layer maps them to its
// wire errors.
var (
	// ErrAdapterExists: an adapter or a model is already served under the
	// name.
	ErrAdapterExists = errors.New("models: name already served")
	// ErrAdapterNotFound: no adapter of that name is served.
	ErrAdapterNotFound = errors.New("models: no such LoRA adapter")
	// ErrNoLoRA: the model was not loaded for LoRA adapters.
	ErrNoLoRA = errors.New("models: LoRA adapters are not enabled for the model")
)

// AdapterError is an adapter file that cannot be loaded: missing, not a
// LoRA GGUF, or made for another model (llamacpp.ErrAdapter).
type AdapterError struct {
	Name, Path string
	Err        error
}

func (e *AdapterError) Error() string {
	return fmt.Sprintf("LoRA adapter %q (%s): %v", e.Name, e.Path, e.Err)
}

func (e *AdapterError) Unwrap() error { return e.Err }

// Adapter is a LoRA adapter served as a model of its own: requests that
// name it run on its base model's engine core with the adapter applied
// (scheduler.Request.Adapter). It has the base's tokenizer, limits and
// timeout.
type Adapter struct {
	base    *Generative
	handle  *llamacpp.Adapter
	created int64
}

// Name is the id clients put in "model".
func (a *Adapter) Name() string { return a.handle.AdapterName() }

// Parent is the base model's name (vLLM's parent in /v1/models).
func (a *Adapter) Parent() string { return a.base.Name() }

// Root is the adapter's file (vLLM's root).
func (a *Adapter) Root() string { return a.handle.Path() }

// Base is the model the adapter runs on.
func (a *Adapter) Base() *Generative { return a.base }

// Created is the Unix time the adapter was loaded.
func (a *Adapter) Created() int64 { return a.created }

// MaxModelLen is the base model's.
func (a *Adapter) MaxModelLen() int { return a.base.MaxModelLen() }

// RequestTimeout is the base model's.
func (a *Adapter) RequestTimeout() time.Duration { return a.base.RequestTimeout() }

// Tokenizer is the base model's.
func (a *Adapter) Tokenizer() *tokenizer.Tokenizer { return a.base.Tokenizer() }

// ReasoningParser is the base model's.
func (a *Adapter) ReasoningParser() string { return a.base.ReasoningParser() }

// CheckGrammar checks a grammar against the base model's vocabulary.
func (a *Adapter) CheckGrammar(gbnf string) error { return a.base.CheckGrammar(gbnf) }

// Ready reports whether the base model is ready.
func (a *Adapter) Ready() bool { return a.base.Ready() }

// Handle is the engine's adapter handle.
func (a *Adapter) Handle() *llamacpp.Adapter { return a.handle }

// Submit starts generation with the adapter; see core.EngineCore.Submit.
func (a *Adapter) Submit(ctx context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	for _, r := range reqs {
		r.Adapter = a.handle
	}
	return a.base.Submit(ctx, reqs)
}

// LoRAEnabled reports whether the model serves LoRA adapters (it was
// loaded with some, or with runtime loading allowed).
func (g *Generative) LoRAEnabled() bool { return g.lora }

// Adapter returns the model's adapter called name.
func (g *Generative) Adapter(name string) (*Adapter, bool) {
	g.adaptersMu.Lock()
	defer g.adaptersMu.Unlock()
	a, ok := g.adapters[name]
	return a, ok
}

// Adapters lists the model's adapters by name.
func (g *Generative) Adapters() []*Adapter {
	g.adaptersMu.Lock()
	defer g.adaptersMu.Unlock()
	out := make([]*Adapter, 0, len(g.adapters))
	for _, a := range g.adapters {
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *Adapter) int { return strings.Compare(x.Name(), y.Name()) })
	return out
}

// loadAdapter loads the adapter file and serves it as name. The caller
// checked that the name is free.
func (g *Generative) loadAdapter(l LoRA) (*Adapter, error) {
	if !g.lora {
		return nil, ErrNoLoRA
	}
	if err := checkAdapterName(l.Name); err != nil {
		return nil, &AdapterError{Name: l.Name, Path: l.Path, Err: err}
	}
	h, err := g.model.LoadAdapter(l.Name, l.Path, 1)
	if err != nil {
		return nil, &AdapterError{Name: l.Name, Path: l.Path, Err: err}
	}
	a := &Adapter{base: g, handle: h, created: time.Now().Unix()}
	g.adaptersMu.Lock()
	defer g.adaptersMu.Unlock()
	if _, dup := g.adapters[l.Name]; dup {
		if err := h.Close(); err != nil {
			g.log.Warn("LoRA adapter close", "adapter", l.Name, "err", err)
		}
		return nil, fmt.Errorf("%w: %q", ErrAdapterExists, l.Name)
	}
	g.adapters[l.Name] = a
	g.log.Info("LoRA adapter loaded", "adapter", l.Name, "path", l.Path, "alpha", h.Alpha())
	return a, nil
}

// unloadAdapter stops serving the adapter; requests running with it
// finish with it, and it is freed after them.
func (g *Generative) unloadAdapter(name string) bool {
	g.adaptersMu.Lock()
	a, ok := g.adapters[name]
	delete(g.adapters, name)
	g.adaptersMu.Unlock()
	if ok {
		if err := a.handle.Close(); err != nil {
			g.log.Warn("LoRA adapter close", "adapter", name, "err", err)
		}
		g.log.Info("LoRA adapter unloaded", "adapter", name)
	}
	return ok
}

// closeAdapters unloads every adapter (the model is closing).
func (g *Generative) closeAdapters() {
	for _, a := range g.Adapters() {
		g.unloadAdapter(a.Name())
	}
}

// GetAdapter returns the adapter called name, of any generative model.
func (r *Registry) GetAdapter(name string) (*Adapter, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.adapterLocked(name)
}

func (r *Registry) adapterLocked(name string) (*Adapter, bool) {
	for _, g := range r.gen.order {
		if a, ok := g.Adapter(name); ok {
			return a, true
		}
	}
	return nil, false
}

// LoadAdapter loads a LoRA adapter for the generative model called base
// ("" for the first one served) and serves it under l.Name, which no
// model or adapter may have. Errors: ErrAdapterExists, ErrNotServed,
// ErrNoLoRA, *AdapterError.
func (r *Registry) LoadAdapter(base string, l LoRA) (*Adapter, error) {
	r.loraMu.Lock() // one load at a time: the name check holds until it is served
	defer r.loraMu.Unlock()
	r.mu.RLock()
	taken := r.takenLocked(l.Name)
	var g *Generative
	if base == "" && len(r.gen.order) > 0 {
		g = r.gen.order[0]
	} else {
		g = r.gen.named[base]
	}
	r.mu.RUnlock()
	switch {
	case taken:
		return nil, fmt.Errorf("%w: %q", ErrAdapterExists, l.Name)
	case g == nil:
		return nil, fmt.Errorf("%w: %q", ErrNotServed, base)
	}
	return g.loadAdapter(l)
}

// UnloadAdapter stops serving the adapter called name (ErrAdapterNotFound
// when none is). Requests running with it finish first.
func (r *Registry) UnloadAdapter(name string) error {
	r.mu.RLock()
	a, ok := r.adapterLocked(name)
	r.mu.RUnlock()
	if !ok || !a.base.unloadAdapter(name) {
		return fmt.Errorf("%w: %q", ErrAdapterNotFound, name)
	}
	return nil
}
