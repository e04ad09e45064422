// Package models is the runtime layer: it loads models, sizes and starts
// each generative model's engine core, and keeps the registry of served
// models by name.
//
// A Generative model owns, for its whole life: the llama.cpp model, the
// tokenizer and one core.EngineCore, which owns the scheduler, the KV
// manager and the llama.cpp context (built by a factory, so that the core
// can rebuild it after a failure). LoadGenerative checks a GenerativeConfig
// against the model (a bad setting is a *ConfigError naming it), sizes the
// KV memory (MaxNumSeqs streams of MaxModelLen positions, lowered to fit
// KVMemoryBytes), logs what it allocated, and returns once the engine core
// runs. Stop ends the requests still running; Close also frees the model.
//
// The Registry answers readiness for the health routes: ready when every
// model's engine core is, and not draining (shutdown).
//
// The default model, stories260K, is embedded (models/stories260k) so that
// `llmserve serve` works with no arguments.
//
// What this package must not do: speak a wire protocol (api/ does), make
// scheduling decisions (scheduler/ does) or drive steps (core/ does).
package models
