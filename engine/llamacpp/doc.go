// Package llamacpp is llmserve's binding to llama.cpp and the only package in
// the module that uses cgo.
//
// llama.cpp and ggml are compiled by github.com/ollama/ollama's llama package
// (pinned in go.mod), which this package imports for the compiled library and
// for backend loading. The binding itself is our own, written against the real
// llama.h, because the scheduler needs what ollama's Go API hides: a unified
// KV cache shared by up to 256 sequences, one llama_decode over a batch that
// mixes sequences and positions, per-sequence sampler chains with logit bias,
// memory sequence operations and sequence state export/import.
//
// # Objects and lifetimes
//
//   - Model: weights (memory-mapped), vocabulary and metadata. Safe for
//     concurrent use: tokenization may run on any goroutine.
//   - Context: the KV memory, the batch buffer and the sampler chains. Not safe
//     for concurrent use: exactly one goroutine (the scheduler loop) calls it.
//     It implements engine.Executor.
//
// Every C object has one owner and an idempotent Close. Nothing relies on
// finalizers. C return codes become Go errors (engine.ErrKVFull,
// engine.ErrInvalidBatch); no C type escapes the package.
//
// # Build
//
// The headers come from the ollama module in the Go module cache and reach
// cgo through CGO_CPPFLAGS, which the Makefile sets to one fixed value (see
// its header). Without cgo, a stub keeps the rest of the module building:
// Load and NewContext then return ErrNoCgo.
package llamacpp
