// Package llamacpp is llmserve's binding to llama.cpp and the only package in
// the module that uses cgo.
//
// llama.cpp and ggml are compiled by github.com/ollama/ollama's llama package
// (pinned in go.mod), which this package imports for the compiled library and
// for backend loading. The binding itself is our own, written against the real
// llama.h, because the engine core needs what ollama's Go API hides: one KV
// stream per sequence, llama_decode calls shaped for batch invariance, a
// persistent ggml thread pool, per-sequence sampler chains with logit bias,
// and sequence state export/import.
//
// # Objects and lifetimes
//
//   - Model: weights (memory-mapped), vocabulary and metadata. Safe for
//     concurrent use: tokenization may run on any goroutine.
//   - Context: the KV memory, the thread pools, the batch buffer and the
//     sampler chains. Not safe for concurrent use: exactly one goroutine (the
//     engine core's) calls it. It implements engine.Executor.
//
// Every C object has one owner and an idempotent Close. Nothing relies on
// finalizers. C return codes become Go errors; no C type escapes the package.
//
// # The KV layout
//
// A Context is created with kv_unified off: llama.cpp then keeps one KV
// stream per sequence id (a slot), each of SlotTokens cells. A slot holds
// its sequence's positions 0..n-1 in cell order, attention reads only the
// slot's own stream, and its cost grows with the sequence's length, not
// with what else is cached or running. decode.go shapes every llama_decode
// so that a sequence's numbers depend only on its own tokens (two rows or
// more per evaluation, padding in neighbouring streams); state.go moves a
// slot's KV to and from host memory (engine.KV) for the prefix cache.
// docs/design/decisions.md has the measurements behind the choice.
//
// # Draft tokens
//
// A chunk's draft tokens (engine.Chunk.Draft) are rows after its tokens in
// the same evaluations (decode.go): grouped with other chunks of the same
// length in consecutive slots, split into pieces like a prompt, with an
// output at the last token and every draft token. collect samples them in
// order with the sequence's chain (sampleAt) until a draw differs from the
// draft, and rollback removes the rejected rows from the slot
// (llama_memory_seq_rm from the first rejected position), leaving
// Pos+len(Tokens)+len(Accepted) positions. A later piece of a long chunk is
// not evaluated once a draft is rejected. A row's numbers depend only on its
// sequence's tokens, so the logits after an accepted draft token are bit
// for bit those of a step of that token alone (TestDraftsMatchStepByStep,
// F32 padded and Q8_0 unpadded). The pages the rejected rows touched stay
// committed and counted (held) until the slot is cleared; the next
// positions overwrite them.
//
// # Draft model
//
// With ContextParams.Draft the context owns a second context over a draft
// model of the same vocabulary (CheckDraftVocab), with the same slots, and
// fills the Draft of chunks that carry a DraftLimit before it decodes the
// batch (draft.go): it catches each drafting sequence's draft stream up to
// the chunk's last token from a record of the sequence's tokens (History,
// chunks, accepted drafts), then runs DraftLimit greedy positions, one
// llama_decode per position over all drafting sequences. Verification is
// the path above, unchanged. After it, the draft stream keeps the accepted
// tokens it computed; Clears, Restores (which leave the draft stream
// empty, recomputed from the record) and Resize are mirrored. The draft's
// own numbers need not be batch-invariant: they only decide what is
// proposed (TestDraftModelMatchesGreedy, TestDraftModelAcrossPreemption).
//
// # Virtual KV memory
//
// A slot's capacity is address space, not memory: kvmem.c backs the KV
// buffer of a context it creates with an anonymous mapping reserved
// without commit (it hooks ggml's CPU buffer type while
// llama_init_from_model runs, one context at a time) and records where
// ggml places each cache tensor; kvpages.go maps streams to pages. Pages
// are committed as positions are written and given back (MADV_DONTNEED)
// when a slot is cleared; KVMemory (engine.KVMemoryReporter) reports the
// committed and reserved bytes. KV on a GPU, or V stored transposed
// (flash attention off), is not paged, and KVMemory says so.
//
// # Growing
//
// Resize (engine.Resizer) builds a context with another number of streams,
// moves every occupied slot's KV into it through the same export and
// restore the prefix cache uses, and frees the old one; the sampler chains
// and thread pools carry over.
//
// # Grammars
//
// A sequence whose engine.Sampling has a Grammar gets a llama.cpp grammar
// sampler beside its chain (sampler.go, llmserve_sample in bridge.c). The
// chain draws first from the full distribution; when the grammar allows
// that token it is kept. Else, for greedy sampling, the grammar is matched
// against the 64 most likely tokens (after bias and penalties) and the
// first it allows is taken; failing that, or for random sampling, the
// forbidden tokens of the whole vocabulary are removed and the chain draws
// again. For greedy sampling every path gives exactly the argmax over the
// allowed tokens (the C argmax fast path is off with a grammar); for random
// sampling it is a rejection sample of the allowed distribution (top-k and
// top-p then see the allowed tokens only, as in llama.cpp's own server).
// Matching the whole vocabulary costs milliseconds on a 50k vocabulary
// and runs on the engine goroutine, so it delays the whole batch
// (docs/BENCHMARKS.md, "Structured output"); Stats counts how often it
// happens. The accepted
// token advances the grammar; a stop token is allowed only once the
// grammar is complete. When the grammar allows no token (complete, with the
// stop tokens banned by min_tokens) the sequence fails with
// engine.ErrSampling. A grammar llama.cpp cannot parse fails the sequence
// with ErrGrammar; Model.CheckGrammar lets the API refuse it first. Every
// grammar passes grammar.Check before llama.cpp parses it: llama.cpp's
// parser overflows its stack on some grammars it does not refuse, such as
// ("a"?)*.
//
// # LoRA adapters
//
// Model.LoadAdapter loads a LoRA adapter GGUF (llama_adapter_lora_init);
// the *Adapter is the engine.Adapter a sequence names in its NewSequence.
// llama.cpp applies adapters to a context, not a sequence, so a step is
// decoded as one batch per adapter group (the base model's first, each
// adapter's with it set alone and cleared after); each group goes through
// decode.go unchanged, so a sequence's numbers depend only on its tokens
// and its adapter, and each group adds an evaluation (Stats.AdapterSwitches;
// docs/BENCHMARKS.md, "LoRA adapters"). A context decodes adapters only
// when built with ContextParams.LoRA, which turns llama.cpp's graph reuse
// off: its reuse test compares the adapter list by address and would run
// the previous adapter's graph. An adapter closed while sequences hold it
// is freed when the last of them is removed (lora.go).
//
// # Images and audio
//
// Model.LoadProjector loads a multimodal projector GGUF through libmtmd
// (llama.cpp's multimodal library, compiled and linked by the ollama
// module; its headers are included as "mtmd/mtmd.h" through links the
// Makefile puts in the include folder, so CGO_CPPFLAGS does not change).
// A Projector tokenizes a prompt with media markers into text and media
// chunks and encodes a media chunk into rows of the model's embedding
// width (mtmd.go); that runs outside the step, on the caller's goroutine,
// one encode at a time. The engine decodes those rows as positions of the
// sequence (engine.MediaSpan): a llama_batch holds tokens or embeddings,
// not both, so a chunk with media is decoded alone, segment by segment
// (media.go), every piece still in its own stream and padded as decode.go
// pads, so its numbers depend only on its own tokens and embeddings.
// Projectors that need M-RoPE positions or non-causal attention over an
// image (Qwen2-VL, Gemma 3) are refused at load.
//
// # Threads
//
// Without a thread pool of its own, ggml creates and joins its worker
// threads on every evaluation. The Context attaches a persistent pool
// (ggml_threadpool_new) and pauses it at the end of every step, so that its
// workers sleep while the rest of the process delivers the step's output.
//
// # Tensor graphs
//
// Classic tensor models (ONNX graphs checked by engine/graph) run on ggml
// without llama.cpp's model machinery, in the subpackage tensorgraph: a
// room of its own, since it shares only the ggml backends (Init) and the
// build with this package.
//
// # Build
//
// The headers come from the ollama module in the Go module cache and reach
// cgo through CGO_CPPFLAGS, which the Makefile sets to one fixed value (see
// its header). Without cgo, a stub keeps the rest of the module building:
// Load and NewContext then return ErrNoCgo. The parameters, counters and
// errors (params.go) are the same in both builds.
package llamacpp
