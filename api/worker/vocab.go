package worker

import "github.com/llmserve/llmserve/engine/llamacpp"

// chatTemplateKey is the GGUF key of the Jinja chat template.
const chatTemplateKey = "tokenizer.chat_template"

// vocabGGUF returns a vocabulary-only GGUF of the model file at path:
// every metadata key and value, no tensors, as llama.cpp's
// ggml-vocab-*.gguf files are. llama.cpp loads it with vocab_only, which
// is all a head needs to tokenize as the worker does. template, when not
// empty, replaces the file's chat template (the worker's
// --chat-template), so the head renders chats as the worker would.
func vocabGGUF(path, template string) ([]byte, error) {
	var set map[string]string
	if template != "" {
		set = map[string]string{chatTemplateKey: template}
	}
	return llamacpp.GGUFMetadataOnly(path, set)
}
