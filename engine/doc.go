// Package engine defines the boundary between the engine core and a model
// runtime: one Step in, one StepResult out, and the types that cross it.
//
// The scheduler decides; the engine executes. A Step says, in the order the
// engine applies them: which sequences are new (create their sampler),
// which KV to copy out of slots into host memory (Exports), which slots to
// empty (Clears), which empty slots to fill from host memory (Restores: a
// cached prefix), which tokens of which sequences to decode, and which
// sequences are gone. The engine hands back the tokens it sampled, the
// logprobs that were asked for, the exported KV, and the sequences it
// failed.
//
// # Failures stay local
//
// A sequence whose restore, decode or sampling fails is reported in
// StepResult.Failures and nothing else happens to it; the other sequences of
// the step are served as if it had not been there. Execute returns an error
// only when the executor itself is broken, and then the engine core
// replaces it.
//
// # Sampling parameters
//
// Sampling.Validate is the one place where sampling parameters are checked,
// against the ranges where the samplers are numerically defined (outside
// them llama.cpp's samplers overflow and abort the process). It returns a
// *RangeError naming the parameter in the engine's terms; protocol packages
// map it to their wire field. SafeLogitBound covers what validation cannot
// foresee: a model producing huge or non-finite logits fails the sequence
// with ErrSampling instead of reaching an assertion in C. Sampling.Grammar
// is not checked here: it is text in llama.cpp's GBNF that package grammar
// writes and checks, and the runtime parses again before the request is
// submitted; a sequence whose grammar allows no token fails with
// ErrSampling.
//
// Per-step constraints come with the Chunk, not the Sampling: Ban (tokens
// that must not be drawn: min_tokens, bad words) and Only (the only tokens
// that may be; one token forces it). The scheduler derives both from the
// tokens a sequence generated, so the engine keeps no state for them and
// a sequence recomputed after preemption gets the same ones. The reasoning
// budget (scheduler.Thinking) forces </think> through Only: a forced token
// is an ordinary step of that sequence, in the same batch as the others,
// accepted by its sampler chain (penalties, grammar) like a drawn one.
//
// # Speculative decoding
//
// A chunk that samples may carry Draft tokens (Chunk.Draft): the scheduler's
// guess at what follows. The engine computes them in the same step and
// samples after the chunk's last token and after each draft token with the
// sequence's own chain, in order, accepting drafts while the drawn token
// equals them; Sample.Accepted lists them and Sample.Token is the first
// token that differs (or the one after the whole draft). The rejected
// drafts' KV is removed. The chain sees exactly the tokens one step per
// token would show it, so a draft changes how many positions a step
// computes, never what is drawn. Ban and Only apply at every position of
// the chunk: the scheduler drafts only where they would not change.
//
// With a draft model (draft-model speculation) the scheduler cannot guess
// itself: it sets Chunk.DraftLimit, how many draft tokens the chunk may
// carry (their KV reserved), and an executor that owns a draft model
// proposes them, writes them into Chunk.Draft and verifies them exactly
// as above. The executor's draft is greedy on the draft model; the
// verification alone decides the output.
//
// # KV in host memory
//
// KV is the KV-cache content of a run of positions of one sequence, laid
// out as the engine's KVLayout says. The prefix cache keeps it per block;
// the same type is what a prefill node sends to a decode node.
//
// This package is pure Go and holds no state. engine/llamacpp implements
// Executor over llama.cpp and is the only package in the module that uses
// cgo; engine/enginetest is a fake of it for tests.
//
// What the engine must not do: decide anything. It does not pick sequences,
// assign slots, evict, detokenize or look at stop strings. It does what the
// Step says, on one goroutine.
package engine
