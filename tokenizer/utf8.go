package tokenizer

import "unicode/utf8"

// replacement is U+FFFD as UTF-8.
const replacement = "\uFFFD"

// seqLen reports how many bytes of p, starting at p[0], form the longest
// prefix of a well-formed UTF-8 sequence (Unicode's "maximal subpart"), and
// how long the whole sequence would be. need == 0 means p[0] can start no
// sequence at all (a stray continuation byte, C0, C1, F5..FF).
func seqLen(p []byte) (have, need int) {
	b := p[0]
	switch {
	case b < 0x80:
		return 1, 1
	case b < 0xC2:
		return 0, 0
	case b < 0xE0:
		need = 2
	case b < 0xF0:
		need = 3
	case b < 0xF5:
		need = 4
	default:
		return 0, 0
	}
	lo, hi := byte(0x80), byte(0xBF) // range of the second byte
	switch b {
	case 0xE0:
		lo = 0xA0 // no overlong 3-byte forms
	case 0xED:
		hi = 0x9F // no surrogates
	case 0xF0:
		lo = 0x90 // no overlong 4-byte forms
	case 0xF4:
		hi = 0x8F // nothing above U+10FFFF
	}
	have = 1
	for have < need && have < len(p) {
		c := p[have]
		if have == 1 {
			if c < lo || c > hi {
				break
			}
		} else if c < 0x80 || c > 0xBF {
			break
		}
		have++
	}
	return have, need
}

// appendValid appends src to dst as valid UTF-8. Every maximal subpart of an
// ill-formed sequence becomes one U+FFFD, as Python's
// bytes.decode(errors="replace") and Rust's String::from_utf8_lossy (which
// Hugging Face tokenizers use) do. When final is false, a well-formed but
// incomplete sequence at the very end of src is not written; its length is
// returned as held so the caller can keep those bytes for the next call.
func appendValid(dst, src []byte, final bool) (out []byte, held int) {
	for i := 0; i < len(src); {
		// Fast path over ASCII and complete runes.
		if c := src[i]; c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		have, need := seqLen(src[i:])
		switch {
		case need == 0:
			dst = append(dst, replacement...)
			i++
		case have == need:
			dst = append(dst, src[i:i+have]...)
			i += have
		case i+have == len(src) && !final:
			// Truncated by the end of the input: it may still complete.
			return dst, have
		default:
			dst = append(dst, replacement...)
			i += have
		}
	}
	return dst, 0
}

// utf8Tail is how a token's bytes b leave UTF-8 text (scheduler.Thinking's
// UTF8): 0 when they end on a character boundary (or hold no character
// start at their end); 1 to 3 when they end inside a character, that many
// bytes short of it; -n when they are n (at most 3) continuation bytes
// only, which complete (part of) a character the text before left open.
func utf8Tail(b []byte) int8 {
	i := len(b)
	for i > 0 && b[i-1]&0xC0 == 0x80 && len(b)-i < 3 {
		i--
	}
	if i == 0 {
		return -int8(len(b))
	}
	have, need := seqLen(b[i-1:])
	if have == len(b)-i+1 && need > have {
		return int8(need - have)
	}
	return 0
}
