package infer

import "slices"

// Metadata returns the model's metadata, by its kind: the inputs and
// outputs a tensor model or custom runtime declares, an embedding
// model's, or an LLM's (with the reasoning and image inputs of a model
// that takes them).
func Metadata(m Model) ModelMetadata {
	if sig, ok := AsSignature(m); ok {
		return signatureMetadata(sig)
	}
	md := ModelMetadata{
		Name: m.Name(), Versions: []string{VersionOf(m)}, Platform: Platform,
		Inputs: llmInputs, Outputs: llmOutputs,
	}
	if KindOf(m) == KindEmbedding {
		md.Inputs, md.Outputs = embedInputs, embedOutputs
		return md
	}
	if ReasoningParserOf(m) != "" {
		md.Inputs, md.Outputs = slices.Concat(md.Inputs, reasoningInputs), slices.Concat(md.Outputs, reasoningOutputs)
	}
	if readsImages(m) {
		md.Inputs = slices.Concat(md.Inputs, mediaInputs)
	}
	return md
}
