// Package engine defines the boundary between the scheduler and a model
// runtime: one Step in, one StepResult out.
//
// The scheduler decides; the engine executes. A Step says which sequences are
// new (create their sampler), which KV memory operations to apply (share a
// cached prefix, drop a finished sequence), which tokens of which sequences to
// decode in one batch, and which sequences are gone. The engine hands back only
// the tokens it sampled and the logprobs that were asked for.
//
// This package is pure Go and holds no state. engine/llamacpp implements
// Executor over llama.cpp and is the only package in the module that uses cgo.
//
// What the engine must not do: decide anything. It does not pick sequences,
// count blocks, evict, detokenize or look at stop strings. It does exactly
// what the Step says, on one goroutine, and fails loudly when the Step is
// inconsistent with its memory.
package engine
