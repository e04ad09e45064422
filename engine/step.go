package engine

import "context"

// SeqID names one generated sequence (one choice of one request) for its
// whole life, across preemptions. The scheduler assigns it; the engine keys
// per-sequence state (the sampler chain) by it.
type SeqID uint64

// Slot is a sequence id inside the engine's KV memory (llama.cpp's
// llama_seq_id). The KV manager assigns slots; a sequence may get a different
// slot after it is preempted.
type Slot int32

// Step is everything the engine must do in one iteration. The engine applies
// the fields in the order they are declared.
type Step struct {
	// Added are sequences the engine has not seen before. The engine must
	// create their sampler chain before decoding Batch.
	Added []NewSequence

	// MemOps are KV memory operations to apply, in order, before Batch is
	// decoded: they release cells of finished or evicted sequences and share
	// cached prefix cells with new ones.
	MemOps []MemOp

	// Batch holds the tokens to decode in one call, one chunk per scheduled
	// sequence. Decode chunks come first, then prefill chunks.
	Batch []Chunk

	// Removed are sequences that are gone for good (finished or aborted). The
	// engine must free their sampler after decoding Batch. Their KV cells are
	// released through MemOps, not here.
	Removed []SeqID
}

// NumTokens is the number of tokens the step passes to the model.
func (s *Step) NumTokens() int {
	n := 0
	for i := range s.Batch {
		n += len(s.Batch[i].Tokens)
	}
	return n
}

// NewSequence introduces a sequence to the engine.
type NewSequence struct {
	Seq      SeqID
	Sampling Sampling
	// History holds tokens that count as already seen by the repetition
	// penalty (the prompt). Presence and frequency penalties see only
	// generated tokens.
	History []int32
}

// Chunk is the part of one sequence that a step decodes.
type Chunk struct {
	Seq  SeqID
	Slot Slot
	// Pos is the position of Tokens[0]. Positions in a slot stay consecutive:
	// Pos equals the number of tokens the slot already holds.
	Pos    int32
	Tokens []int32
	// Sample asks for the next token after Tokens: the chunk reaches the end
	// of everything known about the sequence.
	Sample bool
	// Ban lists tokens that must not be sampled this step (min_tokens holds
	// back stop tokens this way).
	Ban []int32
	// Targets, when not nil, asks for prompt logprobs: Targets[i] is the token
	// that follows Tokens[i], and the engine returns its logprob (with the top
	// alternatives when Sampling.TopLogprobs > 0). len(Targets) <= len(Tokens).
	Targets []int32
}

// MemOpKind says what a MemOp does.
type MemOpKind uint8

const (
	// MemCopy makes Dst share the cells Src holds in [P0, P1): no data is
	// copied, the cells gain a sequence (llama_memory_seq_cp).
	MemCopy MemOpKind = iota + 1
	// MemRemove drops Dst from its cells in [P0, P1); cells no sequence holds
	// any more become free (llama_memory_seq_rm). P1 < 0 means to the end.
	MemRemove
)

// MemOp is one KV memory operation.
type MemOp struct {
	Kind   MemOpKind
	Src    Slot // MemCopy only
	Dst    Slot
	P0, P1 int32
}

// StepResult is what the engine hands back: only new tokens and their
// logprobs.
type StepResult struct {
	// Samples has one entry per chunk with Sample set, in Batch order.
	Samples []Sample
	// PromptLogprobs has one entry per chunk with Targets, in Batch order.
	PromptLogprobs []PromptLogprobs
}

// Sample is a token the engine drew for a sequence.
type Sample struct {
	Seq   SeqID
	Token int32
	// Logprobs is set when Sampling.Logprobs is true.
	Logprobs *Logprobs
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
}

// Executor runs steps. Implementations are not safe for concurrent use: one
// goroutine owns an executor and calls Execute in a loop.
type Executor interface {
	// Execute applies step and decodes its batch. A non-nil error means the
	// step did not complete; ErrKVFull is the only error after which the
	// caller may continue with the same executor.
	Execute(ctx context.Context, step *Step) (StepResult, error)
}
