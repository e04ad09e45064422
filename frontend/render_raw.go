package frontend

import (
	"fmt"

	"github.com/llmserve/llmserve/tokenizer"
)

// RawPrompt is a completion request's prompts as the client wrote them:
// texts, or arrays of token ids, each one prompt. Token ids are checked
// against the vocabulary when the prompts are rendered (RenderRaw).
type RawPrompt struct {
	// Field names the prompts in the protocol ("prompt").
	Field string
	// Single is set for the forms that hold one prompt (a string, a flat
	// array of ids): errors then name Field, not Field[i].
	Single bool
	Texts  []string
	Tokens [][]int64
}

// Param names prompt i.
func (p *RawPrompt) Param(i int) string {
	if p.Single {
		return p.Field
	}
	return fmt.Sprintf("%s[%d]", p.Field, i)
}

// RawInput is a raw prompt rendered: its tokens, and its text as echo
// shows it (what the model saw after truncation; decoded token ids when
// echo asked for them).
type RawInput struct {
	Tokens []int32
	Text   string
}

// RenderRaw tokenizes raw prompts for a model of context maxLen: texts
// with special tokens (or, with a suffix, as a fill-in-the-middle prompt
// around it), token ids as given once checked against the vocabulary.
// truncate keeps each prompt's last tokens (0: off); echo decodes token-id
// prompts for the answer. Text no context could hold is refused before it
// is tokenized: tokenizing megabytes costs seconds of CPU (with truncation
// the text may be longer, within bounds).
func RenderRaw(tok *tokenizer.Tokenizer, rp *RawPrompt, suffix *string, maxLen, truncate int, echo bool) ([]RawInput, error) {
	nVocab := tok.Vocab().NumTokens()
	cut := func(toks []int32) []int32 {
		if truncate > 0 && len(toks) > truncate {
			return toks[len(toks)-truncate:]
		}
		return toks
	}
	maxBytes := tok.MaxTextBytes(maxLen)
	if truncate > 0 {
		maxBytes *= 4
	}
	for i, text := range rp.Texts {
		if len(text) > maxBytes {
			return nil, TooMuchText(rp.Param(i), len(text), maxLen, maxBytes)
		}
	}
	var fim *fimSuffix
	if suffix != nil {
		var err error
		if fim, err = newFIM(tok, *suffix, maxBytes); err != nil {
			return nil, err
		}
		if len(rp.Tokens) > 0 {
			return nil, Invalid("suffix", "suffix needs the prompt as text, not token ids.")
		}
	}
	var inputs []RawInput
	for i, text := range rp.Texts {
		if text == "" {
			return nil, Invalid(rp.Param(i), "A prompt must not be empty.")
		}
		toks, err := tok.Encode(text, fim == nil)
		if err != nil {
			return nil, Invalid(rp.Param(i), "The prompt could not be tokenized: %v", err)
		}
		if fim != nil {
			toks = fim.wrap(toks)
		}
		if len(toks) == 0 {
			return nil, Invalid(rp.Param(i), "The prompt is empty after tokenization.")
		}
		in := RawInput{Tokens: cut(toks), Text: text}
		if len(in.Tokens) < len(toks) {
			in.Text = tok.Decode(in.Tokens) // echo shows what the model saw
		}
		inputs = append(inputs, in)
	}
	for i, ids := range rp.Tokens {
		if len(ids) == 0 {
			return nil, Invalid(rp.Param(i), "A prompt must not be empty.")
		}
		toks := make([]int32, len(ids))
		for j, id := range ids {
			if id < 0 || id >= int64(nVocab) {
				return nil, Invalid(fmt.Sprintf("%s[%d]", rp.Param(i), j), "Token id %d is outside the vocabulary [0, %d).", id, nVocab)
			}
			toks[j] = int32(id)
		}
		in := RawInput{Tokens: cut(toks)}
		if echo {
			in.Text = tok.Decode(toks)
		}
		inputs = append(inputs, in)
	}
	return inputs, nil
}

// FIMVocab is a vocabulary that knows its fill-in-the-middle tokens
// (llama.cpp reads them from the GGUF), -1 for those it lacks.
type FIMVocab interface {
	FIMTokens() (pre, suf, mid int32)
}

// fimSuffix turns a prompt and a suffix into a fill-in-the-middle prompt,
// as llama.cpp's server formats infill (prefix-suffix-middle order):
// [BOS] FIM_PRE prompt FIM_SUF suffix FIM_MID.
type fimSuffix struct {
	pre, suf, mid int32
	bos           int32 // -1: the model adds none
	suffix        []int32
}

func newFIM(tok *tokenizer.Tokenizer, suffix string, maxBytes int) (*fimSuffix, error) {
	fv, ok := tok.Vocab().(FIMVocab)
	f := &fimSuffix{pre: -1, suf: -1, mid: -1, bos: -1}
	if ok {
		f.pre, f.suf, f.mid = fv.FIMTokens()
	}
	if f.pre < 0 || f.suf < 0 || f.mid < 0 {
		return nil, Invalid("suffix", "This model's vocabulary has no fill-in-the-middle tokens (FIM prefix, suffix and middle), so it cannot complete between a prompt and a suffix. Leave out suffix.")
	}
	if len(suffix) > maxBytes {
		return nil, Invalid("suffix", "The suffix is %d bytes, longer than any context of this model holds (%d bytes).", len(suffix), maxBytes)
	}
	var err error
	if f.suffix, err = tok.Encode(suffix, false); err != nil {
		return nil, Invalid("suffix", "The suffix could not be tokenized: %v", err)
	}
	if probe, err := tok.Encode("a", true); err == nil && len(probe) > 0 && probe[0] == tok.Vocab().BOS() {
		f.bos = probe[0]
	}
	return f, nil
}

// wrap builds the FIM prompt around prefix (encoded without special
// tokens).
func (f *fimSuffix) wrap(prefix []int32) []int32 {
	out := make([]int32, 0, len(prefix)+len(f.suffix)+4)
	if f.bos >= 0 {
		out = append(out, f.bos)
	}
	out = append(out, f.pre)
	out = append(out, prefix...)
	out = append(out, f.suf)
	out = append(out, f.suffix...)
	return append(out, f.mid)
}
