package infer

// Kind is what a served model is. Each kind has an interface of its own
// (LLM, Embedder, TensorModel, RuntimeModel) and its own path through an
// inference request; KindOf decides the kind, here and nowhere else, and
// Run (run.go) dispatches a request by it.
type Kind int

// The kinds of served models.
const (
	// KindNone is a model with none of the kinds' interfaces: a backend's
	// mistake, answered as Internal.
	KindNone Kind = iota
	// KindLLM is a generative model (LLM): text_input in, generated text
	// out; generate and the streams.
	KindLLM
	// KindEmbedding is a model whose Task method says "embed": text_input
	// in, embedding out (RunEmbed, through its Embedder).
	KindEmbedding
	// KindTensor is a tensor model (TensorModel): its graph's inputs in,
	// its outputs out (RunTensor).
	KindTensor
	// KindRuntime is a custom runtime (RuntimeModel): the request goes to
	// the user's process as the client sent it (RunRuntime).
	KindRuntime
)

func (k Kind) String() string {
	switch k {
	case KindLLM:
		return "LLM"
	case KindEmbedding:
		return "embedding model"
	case KindTensor:
		return "tensor model"
	case KindRuntime:
		return "custom runtime"
	}
	return "model of no kind"
}

// tasker is a model that says its V2 task (*models.Generative: the model
// repository's parameters.task, or serve --task).
type tasker interface{ Task() string }

// KindOf is m's kind: a custom runtime if it is a RuntimeModel, else a
// tensor model if it is a TensorModel, else an embedding model if its
// Task is "embed" (an LLM's methods it may also have are not used on V2
// infer and generate), else an LLM if it is one.
func KindOf(m Model) Kind {
	switch m := m.(type) {
	case RuntimeModel:
		return KindRuntime
	case TensorModel:
		return KindTensor
	case tasker:
		if m.Task() == "embed" {
			return KindEmbedding
		}
	}
	if _, ok := m.(LLM); ok {
		return KindLLM
	}
	return KindNone
}

// AsLLM returns m as an LLM for a generative call (what it does, e.g.
// "generate" or "stream tokens", for the error), or an Invalid error
// saying what m is instead.
func AsLLM(m Model, what string) (LLM, error) {
	switch KindOf(m) {
	case KindLLM:
		return m.(LLM), nil
	case KindEmbedding:
		return nil, invalidf("model %q is an embedding model (task embed): it does not generate; send its texts to infer", m.Name())
	case KindTensor, KindRuntime:
		return nil, invalidf("model %q is a tensor model, not an LLM: it does not %s; send its input tensors to infer (V2) or :predict (KServe V1)", m.Name(), what)
	}
	return nil, noKind(m)
}

// AsTensor returns m's tensor model, if it is one.
func AsTensor(m Model) (TensorModel, bool) {
	if KindOf(m) != KindTensor {
		return nil, false
	}
	return m.(TensorModel), true
}

// AsRuntime returns m's custom runtime, if it is one.
func AsRuntime(m Model) (RuntimeModel, bool) {
	if KindOf(m) != KindRuntime {
		return nil, false
	}
	return m.(RuntimeModel), true
}

// AsSignature returns m's declared tensors if its kind declares them: a
// tensor model's and a custom runtime's metadata, Triton configuration
// and KServe V1 instances follow them.
func AsSignature(m Model) (Signature, bool) {
	switch KindOf(m) {
	case KindTensor, KindRuntime:
		return m.(Signature), true
	}
	return nil, false
}

func noKind(m Model) *Error {
	return Errorf(Internal, "model %q is of no kind this server serves (an LLM, an embedding model, a tensor model or a custom runtime)", m.Name())
}
