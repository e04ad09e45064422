package engine

import "context"

// SeqID names one generated sequence (one choice of one request) for its
// whole life, across preemptions. The scheduler assigns it; the engine keys
// per-sequence state (the sampler chain) by it.
type SeqID uint64

// Slot is a sequence's place in the engine's KV memory (llama.cpp's
// llama_seq_id; one KV stream per slot). The KV manager assigns slots; a
// sequence may get a different slot after it is preempted. A slot holds the
// positions 0, 1, ... of one sequence, in order.
type Slot int32

// Step is everything the engine must do in one iteration. The engine applies
// the fields in the order they are declared.
type Step struct {
	// Added are sequences the engine has not seen before. The engine must
	// create their sampler chain before decoding Batch.
	Added []NewSequence

	// Exports copy KV out of slots (into host memory) before anything below
	// changes them: blocks of finished, preempted or fully prefilled
	// sequences that the prefix cache keeps.
	Exports []Export

	// Clears empty slots whose sequence finished or was preempted.
	Clears []Slot

	// Restores fill empty slots with KV kept in host memory: a cached
	// prefix of a new sequence, which then computes only the rest.
	Restores []Restore

	// Batch holds the tokens to decode, one chunk per scheduled sequence.
	Batch []Chunk

	// Removed are sequences that are gone for good (finished or aborted). The
	// engine frees their sampler after decoding Batch. Their KV is released
	// through Clears, not here.
	Removed []SeqID

	// Embeds are inputs to embed (pooled hidden states), evaluated together
	// after Batch. They hold no slot and leave no KV behind: an embedding
	// input is complete in one step.
	Embeds []EmbedInput
}

// EmbedInput is one input of an embedding request.
type EmbedInput struct {
	// Tag is the caller's, handed back with the result.
	Tag    uint64
	Tokens []int32
}

// Embedding is the result of one EmbedInput: the pooled vector (for a
// reranker's rank pooling, its class scores), not normalized, or the
// reason there is none. Err wraps ErrInvalidBatch when the input itself
// was wrong (too long, a token outside the vocabulary, no pooling).
type Embedding struct {
	Tag    uint64
	Vector []float32
	Err    error
}

// EmbedCapacity says how much embedding work one step takes.
type EmbedCapacity struct {
	// Tokens is the most tokens of all Embeds of one step together, and so
	// of one input.
	Tokens int
	// Inputs is the most Embeds of one step.
	Inputs int
}

// NumTokens is the number of tokens the step passes to the model, draft
// tokens (or, before the executor proposes them, DraftLimit) included.
func (s *Step) NumTokens() int {
	n := 0
	for i := range s.Batch {
		n += len(s.Batch[i].Tokens) + max(len(s.Batch[i].Draft), s.Batch[i].DraftLimit)
	}
	return n
}

// Empty reports whether the step does nothing.
func (s *Step) Empty() bool {
	return len(s.Added) == 0 && len(s.Exports) == 0 && len(s.Clears) == 0 && len(s.Restores) == 0 &&
		len(s.Batch) == 0 && len(s.Removed) == 0 && len(s.Embeds) == 0
}

// NewSequence introduces a sequence to the engine.
type NewSequence struct {
	Seq      SeqID
	Sampling Sampling
	// History holds tokens that count as already seen by the repetition
	// penalty (the prompt). Presence and frequency penalties see only
	// generated tokens.
	History []int32
	// Adapter, when not nil, is the LoRA adapter every chunk of the
	// sequence is computed with (an executor's own handle, from the
	// runtime that loaded it; engine.Adapter says what crosses the
	// boundary). Nil computes with the base weights.
	Adapter Adapter
}

// Adapter is a LoRA adapter loaded by an executor's model: an opaque
// handle the runtime gets when it loads one and hands to the scheduler
// with each request that names it. Its name keys the prefix cache, the
// metrics and the logs; two adapters of one model never share a name.
type Adapter interface {
	AdapterName() string
}

// MediaSpan is a run of a chunk's positions whose inputs are embeddings
// (an encoded image or audio clip) rather than tokens.
type MediaSpan struct {
	// Offset is the index in Chunk.Tokens of the span's first position;
	// the span covers Tokens[Offset : Offset+Rows]. Those tokens are the
	// media's placeholders (MediaToken), which the executor does not
	// decode.
	Offset int
	Rows   int
	// Embd holds Rows rows of the model's embedding width, row-major.
	Embd []float32
}

// Chunk is the part of one sequence that a step decodes.
type Chunk struct {
	Seq  SeqID
	Slot Slot
	// Pos is the position of Tokens[0]. It equals the number of positions
	// the slot already holds.
	Pos    int32
	Tokens []int32
	// Sample asks for the next token after Tokens: the chunk reaches the end
	// of everything known about the sequence.
	Sample bool
	// Ban lists tokens that must not be sampled this step (min_tokens holds
	// back stop tokens this way).
	Ban []int32
	// Only, when not empty, are the only tokens that may be sampled this
	// step; it overrides Ban and Sampling.AllowedTokens. One token forces
	// it: the reasoning budget ends a thinking section this way. The
	// token still goes through the sampler chain (penalties and a grammar
	// see it; a grammar that forbids it fails the sequence with
	// ErrSampling), and its logprob is the model's raw one.
	Only []int32
	// Targets, when not nil, asks for prompt logprobs: Targets[i] is the token
	// that follows Tokens[i], and the engine returns its logprob (with the top
	// alternatives when Sampling.TopLogprobs > 0). len(Targets) <= len(Tokens).
	Targets []int32
	// Media are the spans of Tokens that are embeddings, in order, not
	// overlapping. A chunk with media asks for no Targets over them.
	Media []MediaSpan
	// Draft, with Sample set, are speculative tokens proposed to follow
	// Tokens (positions Pos+len(Tokens), ...). The executor computes them
	// in the same step and samples at the last of Tokens and after each
	// draft token in order, with the sequence's own chain, as if the
	// tokens had come one step at a time: while the drawn token equals
	// the next draft token it is accepted and drawing goes on; the first
	// token that differs (or the one after the last draft token) ends the
	// chunk as Sample.Token. Drawing a token from p and keeping the draft
	// only when they are equal is speculative sampling's rejection rule
	// for a draft that proposes one token with certainty, so the output is
	// distributed, and with a seed drawn, exactly as without a draft. The
	// KV of rejected draft tokens is removed: afterwards the slot holds
	// Pos+len(Tokens)+len(Sample.Accepted) positions.
	Draft []int32
	// DraftLimit, with Sample set and Draft empty, lets an executor that
	// has a draft model of its own propose up to DraftLimit draft tokens
	// for the chunk (draft-model speculation: the scheduler decides how
	// many, and has reserved their KV, but cannot propose them). The
	// executor sets Draft to what it proposed before computing the chunk,
	// so that after Execute the step records the draft the chunk carried,
	// and verifies it as above. An executor without a draft model ignores
	// it.
	DraftLimit int
}

// MediaToken is the placeholder token of a media position: negative, so
// it is never a vocabulary token, and derived from the media's hash so
// that the prefix cache, which keys blocks by tokens, keys media by their
// bytes. i is the position within the media item; successive positions
// take successive 30-bit windows of the hash, so a block of placeholders
// carries all of it.
func MediaToken(hash [32]byte, i int) int32 {
	o := (i * 4) % 32
	v := uint32(hash[o]) | uint32(hash[(o+1)%32])<<8 | uint32(hash[(o+2)%32])<<16 | uint32(hash[(o+3)%32])<<24
	return -1 - int32(v&0x3fffffff)
}

// Export asks for the KV of positions [From, To) of the sequence in Slot.
type Export struct {
	// Tag is the caller's, handed back with the result.
	Tag      uint64
	Seq      SeqID
	Slot     Slot
	From, To int
}

// Restore fills an empty slot with positions [0, n) of a sequence: the
// concatenation of KV, in order.
type Restore struct {
	Seq  SeqID
	Slot Slot
	KV   []*KV
}

// StepResult is what the engine hands back.
type StepResult struct {
	// Samples has one entry per chunk with Sample set whose sequence did
	// not fail, in Batch order.
	Samples []Sample
	// PromptLogprobs has one entry per chunk with Targets whose sequence
	// did not fail, in Batch order.
	PromptLogprobs []PromptLogprobs
	// Exported has one entry per Export, in order. An export that failed
	// has a nil KV.
	Exported []Exported
	// Failures are sequences the engine could not serve this step (their
	// restore, decode or sampling failed). Nothing else in the result
	// concerns them; the other sequences of the step are unaffected. A
	// failed sequence's slot holds unknown KV until it is cleared.
	Failures []Failure
	// Embeddings has one entry per Step.Embeds, in order.
	Embeddings []Embedding
}

// Exported is the result of one Export.
type Exported struct {
	Tag  uint64
	Seq  SeqID
	From int
	// KV holds positions [From, From+KV.N), or is nil when the export
	// failed (the prefix cache then simply does not keep those blocks).
	KV *KV
}

// Failure says why the engine failed a sequence. Err wraps ErrKVFull when
// the sequence did not fit the KV memory (the caller may preempt and retry
// it), ErrInvalidBatch when the step contradicted the engine's memory, and
// ErrSampling when the model produced logits the sampler cannot use.
type Failure struct {
	Seq SeqID
	Err error
}

// Sample is a token the engine drew for a sequence.
type Sample struct {
	Seq   SeqID
	Token int32
	// Logprobs is set when Sampling.Logprobs is true.
	Logprobs *Logprobs
	// Accepted are the chunk's draft tokens the engine accepted, in
	// order; they come before Token. AcceptedLogprobs parallels it when
	// Sampling.Logprobs is true.
	Accepted         []int32
	AcceptedLogprobs []Logprobs
}

// PromptLogprobs are the logprobs of a chunk's Targets.
type PromptLogprobs struct {
	Seq      SeqID
	Logprobs []Logprobs
}

// TokenLogprob is a token with its log-probability under the model's raw
// distribution (before penalties, temperature and truncation).
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Logprobs describes one position: the chosen token and the most likely
// alternatives, most likely first.
type Logprobs struct {
	Chosen TokenLogprob
	Top    []TokenLogprob
	// Rank is the chosen token's rank among all tokens (1: the most
	// likely), for prompt logprobs; 0 when not computed.
	Rank int
}

// Executor runs steps. Implementations are not safe for concurrent use: one
// goroutine owns an executor and calls Execute in a loop.
type Executor interface {
	// Execute applies step and decodes its batch. Failures of single
	// sequences are reported in the result, never as an error: a non-nil
	// error means the executor itself is broken (closed, out of memory, a
	// failure it cannot pin on a sequence) and must be replaced.
	Execute(ctx context.Context, step *Step) (StepResult, error)
	// Close frees the executor. It is idempotent.
	Close() error
}

// Resizer is an Executor whose KV memory can change its number of slots
// between steps. The engine core grows it when requests wait for a slot,
// so that memory follows the load.
type Resizer interface {
	// Resize changes the number of slots to n. Growing keeps every slot's
	// KV, bit for bit; shrinking requires slots n and above to be empty. On
	// error the executor is as it was.
	Resize(n int) error
}

// Embedder is an Executor that can run Step.Embeds.
type Embedder interface {
	// EmbedCapacity is the most embedding work one step may carry.
	EmbedCapacity() EmbedCapacity
}

// Idler is an Executor that can release resources while there is no work:
// the engine core calls Idle before it waits for requests (llama.cpp's
// thread pool stops polling for work then).
type Idler interface {
	Idle()
}

// KVMemory is what an executor's KV memory takes now.
type KVMemory struct {
	// Paged reports that the memory follows the positions held: pages are
	// committed when a position is written and given back when its slot
	// empties, so a slot's capacity costs address space, not memory.
	Paged bool
	// Committed is the bytes resident for the positions the slots hold
	// (whole pages; for memory that is not paged, every slot's capacity).
	// Reserved is the address space of every slot's capacity.
	Committed, Reserved int64
}

// AdapterSwitchReporter is an Executor that counts the batches it decoded
// with a LoRA adapter set (one per adapter per step where the runtime
// applies adapters per context, as llama.cpp does). The engine core asks
// after every step.
type AdapterSwitchReporter interface {
	AdapterSwitches() uint64
}

// KVMemoryReporter is an Executor that reports its KV memory. The engine
// core asks after every step.
type KVMemoryReporter interface {
	KVMemory() KVMemory
}
