package tokenizer

// Decoder turns a growing list of tokens into text incrementally. Text it
// returns is always whole UTF-8 characters; bytes of a character that is not
// complete yet are held until it is (at most 3 bytes). Bytes that can never
// become valid UTF-8 are returned at once as U+FFFD. Control tokens produce
// no text. The concatenation of everything Add and Flush return equals
// Tokenizer.Decode of the same tokens.
//
// Each Add costs O(len(piece)): nothing already decoded is looked at again.
// A Decoder is not safe for concurrent use; use one per sequence.
type Decoder struct {
	vocab Vocab
	// special renders control tokens' text instead of dropping it.
	special bool
	held    [4]byte // bytes of an incomplete character, held[:nheld]
	nheld   int
	buf     []byte // scratch: held bytes followed by the new piece
	out     []byte // scratch: the validated output
}

// Add appends a token and returns the text that became final.
func (d *Decoder) Add(tok int32) string {
	piece := d.vocab.Piece(tok, d.special)
	if len(piece) == 0 {
		return ""
	}
	src := piece
	if d.nheld > 0 {
		d.buf = append(append(d.buf[:0], d.held[:d.nheld]...), piece...)
		src = d.buf
	}
	var held int
	d.out, held = appendValid(d.out[:0], src, false)
	d.nheld = copy(d.held[:], src[len(src)-held:])
	return string(d.out)
}

// Flush returns whatever is held back at the end of the sequence; incomplete
// UTF-8 becomes U+FFFD. The Decoder is empty afterwards and may be reused.
func (d *Decoder) Flush() string {
	if d.nheld == 0 {
		return ""
	}
	d.out, _ = appendValid(d.out[:0], d.held[:d.nheld], true)
	d.nheld = 0
	return string(d.out)
}
