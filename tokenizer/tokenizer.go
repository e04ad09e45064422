package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Vocab is the model vocabulary as the runtime exposes it. Implementations
// must be safe for concurrent use.
type Vocab interface {
	// Tokenize encodes text. addSpecial adds the model's BOS/EOS as it is
	// configured to; parseSpecial turns the text of special tokens (such as
	// "<|im_start|>") into those tokens instead of plain text.
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	// Piece returns the bytes token tok stands for in text. Control tokens
	// (BOS, EOS, chat markers) give their text only when special is true.
	// A byte-fallback token gives a single raw byte, which may be part of a
	// multi-byte UTF-8 character.
	Piece(tok int32, special bool) []byte
	// NumTokens is the vocabulary size.
	NumTokens() int
	// BOS and EOS are the beginning- and end-of-sequence tokens, -1 if none.
	BOS() int32
	EOS() int32
	// IsEOG reports whether tok ends generation (EOS, EOT, ...).
	IsEOG(tok int32) bool
	// IsControl reports whether tok is a control/special token.
	IsControl(tok int32) bool
}

// Tokenizer wraps a Vocab with the model's chat template.
// It is safe for concurrent use.
type Tokenizer struct {
	vocab Vocab
	chat  *ChatTemplate
	stops []int32 // sorted; every token with IsEOG
	// maxPiece is the longest token text, special tokens included.
	maxPiece int
	// utf8 is each token's utf8Tail (UTF8Tails).
	utf8 []int8
}

// New returns a Tokenizer for v. chatTemplate is the model's Jinja chat
// template source; when it is empty the fallback template (see
// FallbackChatTemplate) is used. The template is parsed here, once; an
// error wraps ErrChatTemplate, and a caller that prefers serving with the
// fallback over failing can call New(v, "") after it.
func New(v Vocab, chatTemplate string) (*Tokenizer, error) {
	if v == nil {
		return nil, errors.New("tokenizer: nil vocabulary")
	}
	chat, err := NewChatTemplate(chatTemplate, specialText(v, v.BOS()), specialText(v, v.EOS()))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t := &Tokenizer{vocab: v, chat: chat, maxPiece: 1, utf8: make([]int8, v.NumTokens())}
	for i := range v.NumTokens() {
		if v.IsEOG(int32(i)) {
			t.stops = append(t.stops, int32(i))
		}
		p := v.Piece(int32(i), true)
		t.maxPiece = max(t.maxPiece, len(p))
		t.utf8[i] = utf8Tail(p)
	}
	return t, nil
}

// UTF8Tails says, for each token id, how the token's bytes leave UTF-8
// text: 0 on a character boundary; 1 to 3 inside a character, that many
// bytes short of it; -n for n continuation bytes only (byte-fallback
// tokens, byte-level BPE pieces of a character). The scheduler reads it to
// end a thinking section on a whole character (scheduler.Thinking.UTF8).
// The slice is shared: do not modify it.
func (t *Tokenizer) UTF8Tails() []int8 { return t.utf8 }

// MaxTextBytes is the longest text, in bytes, that can encode to at most n
// tokens: every token stands for at most the longest token text. A longer
// text can be refused without tokenizing it, which for a huge prompt costs
// seconds of CPU. (A vocabulary whose normalizer drops input, such as a
// T5-style one collapsing runs of spaces, could encode more text than this;
// such text is refused all the same.)
func (t *Tokenizer) MaxTextBytes(n int) int { return n * t.maxPiece }

// specialText is the text of a special token such as BOS, or "" if tok is -1.
func specialText(v Vocab, tok int32) string {
	if tok < 0 {
		return ""
	}
	return string(v.Piece(tok, true))
}

// Vocab returns the underlying vocabulary.
func (t *Tokenizer) Vocab() Vocab { return t.vocab }

// Encode tokenizes text with special tokens parsed, as Hugging Face
// tokenizers do; addSpecial adds BOS as the model is configured to.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int32, error) {
	return t.vocab.Tokenize(text, addSpecial, true)
}

// Decode returns the text of toks, leaving out control tokens. Invalid UTF-8
// becomes U+FFFD, one per maximal ill-formed subsequence, as Hugging Face
// tokenizers and Python do.
func (t *Tokenizer) Decode(toks []int32) string {
	var raw []byte
	for _, tok := range toks {
		raw = append(raw, t.vocab.Piece(tok, false)...)
	}
	if utf8.Valid(raw) {
		return string(raw)
	}
	out, _ := appendValid(make([]byte, 0, len(raw)+8), raw, true)
	return string(out)
}

// TokenText is the text of a single token for logprob listings. Control
// tokens show their text (such as "</s>"), so a client can see that the model
// considered ending. A token that is not valid UTF-8 on its own (a
// byte-fallback piece such as <0xE2>) is written as "bytes:" followed by a
// \xNN escape per byte, e.g. `bytes:\xe2`, the way vLLM and OpenAI do it.
func (t *Tokenizer) TokenText(tok int32) string {
	piece := t.vocab.Piece(tok, true)
	if utf8.Valid(piece) {
		return string(piece)
	}
	var b strings.Builder
	b.Grow(len("bytes:") + 4*len(piece))
	b.WriteString("bytes:")
	for _, c := range piece {
		fmt.Fprintf(&b, "\\x%02x", c)
	}
	return b.String()
}

// NewDecoder returns an incremental decoder for one generated sequence.
func (t *Tokenizer) NewDecoder() *Decoder {
	return &Decoder{vocab: t.vocab}
}

// NewSpecialDecoder is NewDecoder for text that shows control tokens (such
// as "<|im_end|>"), as vLLM's skip_special_tokens=false does.
func (t *Tokenizer) NewSpecialDecoder() *Decoder {
	return &Decoder{vocab: t.vocab, special: true}
}

// ApplyChatTemplate renders messages into the prompt text with the model's
// chat template (or the fallback). The result still has to be encoded; its
// special-token text (BOS, <|im_start|>, ...) becomes special tokens because
// Encode parses special tokens.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, opts ChatOptions) (string, error) {
	return t.chat.Render(msgs, opts)
}

// ParseChatTemplate parses another chat template (a client's, sent with a
// request) for this model: it sees the model's bos_token and eos_token and
// renders under the same limits as the model's own (MaxChatTemplateBytes
// and the per-render bounds). Errors wrap ErrChatTemplate.
func (t *Tokenizer) ParseChatTemplate(source string) (*ChatTemplate, error) {
	if strings.TrimSpace(source) == "" {
		return nil, fmt.Errorf("%w: parse: the template is empty", ErrChatTemplate)
	}
	return NewChatTemplate(source, t.chat.bos, t.chat.eos)
}

// ChatTemplate returns the parsed chat template in use.
func (t *Tokenizer) ChatTemplate() *ChatTemplate { return t.chat }

// StopTokens returns every token that ends generation (EOS, EOT and the
// like), sorted. Computed once in New; the caller gets its own copy.
func (t *Tokenizer) StopTokens() []int32 {
	return slices.Clone(t.stops)
}
