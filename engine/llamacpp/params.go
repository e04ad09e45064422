package llamacpp

import "errors"

// The package's parameters, counters and errors, declared once for both
// builds: with cgo (model.go, context.go, ...) and without (stub.go).

// ModelParams says how to load a model.
type ModelParams struct {
	// GPULayers is how many layers to offload to GPUs; -1 offloads all. It is
	// passed through unchanged; with no GPU backend loaded it has no effect.
	GPULayers int
	// MainGPU is the device index used when the model is not split.
	MainGPU int
	// SplitMode: "none", "layer" (default) or "row".
	SplitMode string
	// NoMmap reads the file into memory instead of mapping it.
	NoMmap bool
	// Mlock pins the weights in RAM.
	Mlock bool
	// VocabOnly loads only the vocabulary (for tokenizer work and tests).
	VocabOnly bool
}

// Info describes a loaded model.
type Info struct {
	Architecture string
	Description  string
	// NCtxTrain is the context length the model was trained with.
	NCtxTrain int
	NEmbd     int
	NLayer    int
	NHead     int
	NHeadKV   int
	NVocab    int
	Size      uint64
	NParams   uint64
	// ChatTemplate is the Jinja source of tokenizer.chat_template, or "".
	ChatTemplate string
	// AddBOS says whether the vocabulary adds BOS when tokenizing.
	AddBOS bool
	// AddEOS and AddSEP say whether the vocabulary adds EOS and SEP when
	// tokenizing (encoders such as BERT do); a reranker's pair is joined
	// with them.
	AddEOS, AddSEP bool
	// RerankTemplate is tokenizer.chat_template.rerank, or "": the prompt
	// a reranker scores a pair with, {query} and {document} replaced.
	RerankTemplate string
	// KVBytesPerToken estimates the F16 KV memory one token takes in every
	// layer (keys and values).
	KVBytesPerToken int
}

// ContextParams says how to build a context.
type ContextParams struct {
	// Slots is the number of sequences the context holds at once, one KV
	// stream each (llama.cpp's n_seq_max with kv_unified off), at most
	// MaxSlots.
	Slots int
	// SlotTokens is the KV capacity of one slot in tokens: the most
	// positions one sequence can hold. It is rounded up to a multiple of
	// 256.
	SlotTokens int
	// MicroBatchTokens is the most tokens one model evaluation (llama.cpp's
	// ubatch) takes; 0 means 512. Prompt chunks longer than it are
	// evaluated in pieces.
	MicroBatchTokens int
	// Threads is the thread count for decoding; BatchThreads for
	// evaluations of many tokens (0 means Threads).
	Threads      int
	BatchThreads int
	// Poll is ggml's polling level for its worker threads between
	// evaluations (0: sleep at once, 100: spin the longest).
	Poll int
	// PauseEachStep makes the workers sleep at the end of every step
	// rather than only when the engine core goes idle (Idle).
	PauseEachStep bool
	// FlashAttention is "auto" (default), "on" or "off".
	FlashAttention string
	// NoOffloadKQV keeps the KV cache and attention off the GPU when layers
	// are offloaded.
	NoOffloadKQV bool
	// KVType is the KV cache element type: "f16" (default), "f32", "bf16",
	// "q8_0" or "q4_0". Quantized V needs flash attention.
	KVType string

	// Pooling is how embeddings pool a sequence's hidden states: "mean",
	// "cls", "last", "rank" (a reranker's classifier head) or "none"; ""
	// means the model's own ({arch}.pooling_type in the GGUF).
	Pooling string
	// EmbedTokens is the most tokens one step embeds (all inputs together,
	// so also the longest input); 0 means SlotTokens. EmbedInputs is the
	// most inputs one step embeds; 0 means 32.
	EmbedTokens int
	EmbedInputs int

	// LoRA makes a context that can decode sequences with LoRA adapters
	// (engine.NewSequence.Adapter); it turns llama.cpp's graph reuse off
	// (lora.go).
	LoRA bool

	// Draft, when not nil, is a draft model for draft-model speculation
	// (draft.go): the context builds a second context over it with the
	// same slots and slot capacity, and proposes the draft tokens of
	// chunks with a DraftLimit. Its vocabulary must be the model's
	// (CheckDraftVocab). The caller keeps it loaded while the context
	// lives.
	Draft *Model
}

// MaxSlots is the most slots a context can have (llama.cpp's LLAMA_MAX_SEQ
// is 256; one stream may be kept spare for padding, see decode.go).
const MaxSlots = 255

// Stats are counters of a context's work since it was created.
type Stats struct {
	// Steps is the number of Execute calls that decoded a batch.
	Steps uint64
	// DecodedTokens is the number of sequence tokens passed to llama_decode
	// (padding excluded); PaddingTokens the throwaway tokens that keep
	// every evaluation at two rows or more (decode.go).
	DecodedTokens, PaddingTokens uint64
	// Evaluations is the number of llama_decode calls.
	Evaluations uint64
	// DraftTokens counts draft tokens decoded (engine.Chunk.Draft, counted
	// in DecodedTokens too) and AcceptedTokens those accepted; the rest
	// were rolled back.
	DraftTokens, AcceptedTokens uint64
	// Restored and Exported count positions moved in and out of slots.
	Restored, Exported uint64
	// Resizes counts changes of the number of slots.
	Resizes uint64
	// EmbeddedTokens counts tokens evaluated for embeddings.
	EmbeddedTokens uint64
	// GrammarTokens counts tokens sampled under a grammar; GrammarScans
	// those for which the chain's first draw was forbidden and the grammar
	// was matched against the whole vocabulary (bridge.h).
	GrammarTokens, GrammarScans uint64
	// AdapterSwitches counts the batches decoded with a LoRA adapter set
	// (one per adapter per step, lora.go); AdapterSteps the steps that
	// decoded at least one.
	AdapterSwitches, AdapterSteps uint64
	// DraftModelTokens counts the rows the draft model computed (catching
	// its streams up and proposing) in DraftModelEvaluations llama_decode
	// calls (draft.go); DraftTokens above counts the tokens it proposed
	// that the model verified.
	DraftModelTokens, DraftModelEvaluations uint64
}

// ErrModelClosed is returned by methods called after Close.
var ErrModelClosed = errors.New("llamacpp: model closed")

// ErrGrammar is returned for a grammar llama.cpp cannot parse or use (a
// syntax error, an undefined rule, no root rule, left recursion).
var ErrGrammar = errors.New("llamacpp: invalid grammar")

// ErrAdapter is wrapped by the errors of adapter files llama.cpp refuses
// (not a LoRA GGUF, another architecture, tensors whose shapes differ from
// the model's).
var ErrAdapter = errors.New("llamacpp: bad LoRA adapter")

// ErrAdapterClosed is wrapped when a sequence names an adapter that was
// closed.
var ErrAdapterClosed = errors.New("llamacpp: LoRA adapter unloaded")

// ErrNoPooling says that the model cannot embed: it has no pooling and
// none was configured.
var ErrNoPooling = errors.New("llamacpp: no pooling")

// MediaMarker is the text libmtmd replaces with a media item.
const MediaMarker = "<__media__>"

// ProjectorParams says how to load a projector.
type ProjectorParams struct {
	// Threads is the encoder's thread count; 0 means 1.
	Threads int
	// GPU offloads the encoder to the GPU backend when one is loaded.
	GPU bool
}

// ErrMediaData says a media item's bytes could not be read as an image or
// an audio clip (corrupt, or a format libmtmd does not decode).
var ErrMediaData = errors.New("cannot decode the media data")

// ErrMediaCount says a prompt holds a different number of MediaMarker
// than it has items.
var ErrMediaCount = errors.New("the prompt's media markers do not match its media items")
