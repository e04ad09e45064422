package jsonwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/llmserve/llmserve/frontend"
)

// encoding/json decodes invalid UTF-8 and unpaired UTF-16 surrogate escapes
// ("\ud800") into U+FFFD without a word, which would make the server answer
// a prompt the client did not send. CheckText finds such text before the
// body is decoded and names the field that holds it.

// CheckText returns a *frontend.Error (bad request) naming the first string in body (a
// value or an object key) that is not valid Unicode, or nil. A body that
// is not well-formed JSON is left to the decoder's own error.
func CheckText(body []byte) error {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) && !bytes.Contains(body, []byte(`\U`)) {
		return nil
	}
	path, ok := badTextPath(body)
	if !ok {
		return nil
	}
	if path == "" {
		return frontend.Invalid("", "The request body holds text that is not valid UTF-8 (or an unpaired \\u surrogate escape); send valid UTF-8.")
	}
	return frontend.Invalid(path, "%s holds text that is not valid UTF-8 (or an unpaired \\u surrogate escape); send valid UTF-8.", path)
}

// badTextPath walks the JSON tokens of body and returns the path of the
// first string whose raw bytes are not valid Unicode.
func badTextPath(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		array bool
		index int
		key   string
		// expectKey is set in an object when the next string is a key.
		expectKey bool
	}
	var stack []frame
	path := func() string {
		var b bytes.Buffer
		for _, f := range stack {
			switch {
			case f.array:
				fmt.Fprintf(&b, "[%d]", f.index)
			case f.key != "":
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	// valueDone advances the enclosing container after a value.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].expectKey = true
			}
		}
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return "", false
		}
		if err != nil {
			return "", false
		}
		end := dec.InputOffset()
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, frame{expectKey: true})
			case '[':
				stack = append(stack, frame{array: true})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			raw := rawString(body, start, end)
			isKey := len(stack) > 0 && !stack[len(stack)-1].array && stack[len(stack)-1].expectKey
			if isKey {
				stack[len(stack)-1].key = v
				stack[len(stack)-1].expectKey = false
				if !validRawString(raw) {
					return path(), true
				}
				continue
			}
			if !validRawString(raw) {
				return path(), true
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// rawString returns the quoted string token that ends at end: the decoder's
// offsets include leading separators, so the token starts at the first
// quote after start.
func rawString(body []byte, start, end int64) []byte {
	raw := body[start:end]
	if i := bytes.IndexByte(raw, '"'); i >= 0 {
		raw = raw[i:]
	}
	return raw
}

// validRawString reports whether a quoted JSON string is valid UTF-8 and
// its \u escapes pair every surrogate.
func validRawString(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			return false
		}
		i += 4
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00:
			// A high surrogate must be followed by \u and a low one.
			if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			lo, ok := hex4(raw, i+3)
			if !ok || utf16.DecodeRune(r, lo) == utf8.RuneError {
				return false
			}
			i += 6
		case utf16.IsSurrogate(r):
			return false // a low surrogate alone
		}
	}
	return true
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return rune(v), err == nil
}
