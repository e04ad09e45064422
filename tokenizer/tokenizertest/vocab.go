// Package tokenizertest provides a fake tokenizer.Vocab for tests of
// packages that need a vocabulary but not a model: the scheduler, the API
// layer, the detokenizer and the stop matcher. It has no cgo and loads
// nothing. It is for tests only; its tokenization is a greedy longest match,
// not any real model's.
//
// Token ids are laid out as:
//
//	0            BOS "<s>"   (control)
//	1            EOS "</s>"  (control, ends generation)
//	2 ... 257    byte-fallback tokens, one per byte value (ByteToken)
//	258 ...      Spec.Pieces, in order
//	then         Spec.Special, in order (control tokens)
//
// Like SentencePiece byte fallback, any text can be encoded: a byte that no
// piece covers becomes its byte token, which decodes to that single byte
// (possibly part of a multi-byte UTF-8 character).
package tokenizertest

import "github.com/llmserve/llmserve/tokenizer"

// Fixed token ids.
const (
	BOS       int32 = 0
	EOS       int32 = 1
	firstByte int32 = 2
	numFixed        = 2 + 256
)

// ByteToken returns the byte-fallback token for b.
func ByteToken(b byte) int32 { return firstByte + int32(b) }

// Spec describes a fake vocabulary.
type Spec struct {
	// Pieces are ordinary text tokens. Duplicates and "" are skipped.
	Pieces []string
	// Special are control tokens such as "<|im_start|>": Piece gives their
	// text only with special=true, and Tokenize recognises them only with
	// parseSpecial=true.
	Special []string
	// EOG lists the Special tokens that end generation besides EOS (for
	// example "<|im_end|>" or "<|eot_id|>").
	EOG []string
	// AddBOS makes Tokenize(text, addSpecial=true, ...) prepend BOS.
	AddBOS bool
}

// Vocab is a fake tokenizer.Vocab. It is immutable after New and safe for
// concurrent use.
type Vocab struct {
	pieces   [][]byte
	control  []bool
	eog      []bool
	text     map[string]int32 // ordinary pieces
	special  map[string]int32 // control tokens by text, "<s>" and "</s>" included
	maxText  int
	maxSpec  int
	addBOS   bool
	numTotal int
}

var _ tokenizer.Vocab = (*Vocab)(nil)

// New builds a vocabulary from s.
func New(s Spec) *Vocab {
	v := &Vocab{
		text:    map[string]int32{},
		special: map[string]int32{},
		addBOS:  s.AddBOS,
	}
	add := func(piece string, control bool) {
		id := int32(len(v.pieces))
		v.pieces = append(v.pieces, []byte(piece))
		v.control = append(v.control, control)
		v.eog = append(v.eog, false)
		if control {
			v.special[piece] = id
			v.maxSpec = max(v.maxSpec, len(piece))
		} else if piece != "" {
			v.text[piece] = id
			v.maxText = max(v.maxText, len(piece))
		}
	}
	add("<s>", true)
	add("</s>", true)
	v.eog[EOS] = true
	for b := range 256 {
		v.pieces = append(v.pieces, []byte{byte(b)})
		v.control = append(v.control, false)
		v.eog = append(v.eog, false)
	}
	for _, p := range s.Pieces {
		if _, dup := v.text[p]; dup || p == "" {
			continue
		}
		add(p, false)
	}
	for _, p := range s.Special {
		if _, dup := v.special[p]; dup || p == "" {
			continue
		}
		add(p, true)
	}
	for _, p := range s.EOG {
		if id, ok := v.special[p]; ok {
			v.eog[id] = true
		}
	}
	v.numTotal = len(v.pieces)
	return v
}

// Token returns the id of an ordinary piece or a special token with the
// given text, or -1.
func (v *Vocab) Token(text string) int32 {
	if id, ok := v.text[text]; ok {
		return id
	}
	if id, ok := v.special[text]; ok {
		return id
	}
	return -1
}

// Tokenize encodes text by greedy longest match. With parseSpecial, the
// text of control tokens becomes those tokens; otherwise it is plain text.
// Bytes no piece covers become byte-fallback tokens. It never fails.
func (v *Vocab) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	var out []int32
	if addSpecial && v.addBOS {
		out = append(out, BOS)
	}
	for i := 0; i < len(text); {
		if parseSpecial {
			if id, n := longest(text[i:], v.special, v.maxSpec); n > 0 {
				out = append(out, id)
				i += n
				continue
			}
		}
		if id, n := longest(text[i:], v.text, v.maxText); n > 0 {
			out = append(out, id)
			i += n
			continue
		}
		out = append(out, ByteToken(text[i]))
		i++
	}
	return out, nil
}

// longest finds the longest key of m that prefixes s.
func longest(s string, m map[string]int32, maxLen int) (id int32, n int) {
	for k := min(len(s), maxLen); k > 0; k-- {
		if id, ok := m[s[:k]]; ok {
			return id, k
		}
	}
	return -1, 0
}

// Piece returns the bytes of tok; control tokens are empty unless special.
// An unknown token gives nil.
func (v *Vocab) Piece(tok int32, special bool) []byte {
	if tok < 0 || int(tok) >= v.numTotal {
		return nil
	}
	if v.control[tok] && !special {
		return nil
	}
	return v.pieces[tok]
}

// NumTokens is the vocabulary size.
func (v *Vocab) NumTokens() int { return v.numTotal }

// BOS returns the beginning-of-sequence token.
func (v *Vocab) BOS() int32 { return BOS }

// EOS returns the end-of-sequence token.
func (v *Vocab) EOS() int32 { return EOS }

// IsEOG reports whether tok ends generation: EOS and Spec.EOG.
func (v *Vocab) IsEOG(tok int32) bool {
	return tok >= 0 && int(tok) < v.numTotal && v.eog[tok]
}

// IsControl reports whether tok is BOS, EOS or one of Spec.Special.
func (v *Vocab) IsControl(tok int32) bool {
	return tok >= 0 && int(tok) < v.numTotal && v.control[tok]
}
