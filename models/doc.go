// Package models is the runtime layer: it loads models, wires each
// generative model's engine, KV manager and scheduler loop together, and
// keeps the registry of served models by name.
//
// A Generative model owns, for its whole life: the llama.cpp model and
// context (engine/llamacpp), the KV manager (kvcache), the scheduler and
// the one goroutine that runs its loop. Load sizes all of them from a
// GenerativeConfig; Close stops the loop and frees the C objects in order.
//
// The default model, stories260K, is embedded (models/stories260k) so that
// `llmserve serve` works with no arguments.
//
// What this package must not do: speak a wire protocol (api/ does), or
// make scheduling decisions (scheduler/ does).
package models
