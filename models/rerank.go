package models

import (
	"strings"

	"github.com/llmserve/llmserve/engine/llamacpp"
)

// rerankFormat is what a reranker's pair prompt is built from: the GGUF's
// rerank template, or the vocabulary's special tokens.
type rerankFormat struct {
	// template is tokenizer.chat_template.rerank, or "".
	template string
	// addBOS, addEOS and addSEP say which special tokens the vocabulary
	// adds; bos, eos and sep are those tokens (-1 when absent).
	addBOS, addEOS, addSEP bool
	bos, eos, sep          int32
}

// rerankTokenizer tokenizes text (llamacpp.Model).
type rerankTokenizer interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
}

// tokens formats the pair (query, document) as llama.cpp's server does for
// a rerank task. With a rerank template, {query} and {document} are
// replaced in it and the result is tokenized with special tokens parsed
// and none added. Without one it is
//
//	[BOS] query [EOS] [SEP] document [EOS]
//
// where BOS, the EOSes and SEP appear only if the vocabulary adds them,
// EOS falls back to SEP when the vocabulary has no EOS, and query and
// document are tokenized as plain text (special-token texts in them are
// not parsed).
func (f rerankFormat) tokens(tok rerankTokenizer, query, document string) ([]int32, error) {
	if f.template != "" {
		prompt := strings.ReplaceAll(f.template, "{query}", query)
		prompt = strings.ReplaceAll(prompt, "{document}", document)
		return tok.Tokenize(prompt, false, true)
	}
	q, err := tok.Tokenize(query, false, false)
	if err != nil {
		return nil, err
	}
	d, err := tok.Tokenize(document, false, false)
	if err != nil {
		return nil, err
	}
	eos := f.eos
	if eos < 0 {
		eos = f.sep
	}
	out := make([]int32, 0, len(q)+len(d)+4)
	if f.addBOS {
		out = append(out, f.bos)
	}
	out = append(out, q...)
	if f.addEOS {
		out = append(out, eos)
	}
	if f.addSEP {
		out = append(out, f.sep)
	}
	out = append(out, d...)
	if f.addEOS {
		out = append(out, eos)
	}
	return out, nil
}

// VocabRerankTokens is Generative.RerankTokens over a vocabulary-only
// model (llamacpp.ModelParams{VocabOnly: true}, whose Info has no rerank
// template: it is read from the metadata), for a head that formats rerank
// pairs for its workers: the same tokens as the worker would build.
func VocabRerankTokens(m *llamacpp.Model) func(query, document string) ([]int32, error) {
	info := m.Info()
	f := rerankFormat{
		template: m.Meta("tokenizer.chat_template.rerank"),
		addBOS:   info.AddBOS, addEOS: info.AddEOS, addSEP: info.AddSEP,
		bos: m.BOS(), eos: m.EOS(), sep: m.SEP(),
	}
	return func(query, document string) ([]int32, error) { return f.tokens(m, query, document) }
}
