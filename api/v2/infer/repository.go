package infer

import "context"

// Repository is the model repository extension's view of the server's
// model repository (nil when the server has none).
type Repository interface {
	// Index lists the repository's models; with readyOnly, only the
	// ready ones.
	Index(readyOnly bool) []IndexEntry
	// Load loads or reloads a model; errors are *Error (NotFound for a
	// name not in the repository, Invalid for a model that failed to
	// load, Unavailable while it is being loaded or unloaded).
	Load(ctx context.Context, name string) error
	// Unload drains and unloads a model, with Load's errors.
	Unload(ctx context.Context, name string) error
}

// IndexEntry is one model in the repository index (Triton's shape).
type IndexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// State is READY, UNAVAILABLE, LOADING or UNLOADING.
	State string `json:"state,omitempty"`
	// Reason says why a model is not ready (a load error, "unloaded").
	Reason string `json:"reason,omitempty"`
}
