package v2

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/api/v2/infer"
)

// appendHead appends w as encoding/json marshals it, byte for byte, for
// the responses a tensor model gives over the binary extension (plain
// ASCII names, integer, boolean and string parameters, no "data"), and
// reports false, having appended nothing usable, for anything else: the
// caller then marshals w with encoding/json. extra is one more output
// parameter, binary_data_size, merged into each output's parameters in
// their sorted place instead of a clone of the map holding it; extraFor
// says which outputs get it (their value: extra[i] < 0 for none).
//
// encoding/json takes about 4 µs (reflection, the maps' sorted keys and
// their clone) for a response of two outputs, a tenth of the server's CPU
// for a one-row request beside the model's own 3 (the tree ensemble at
// c=1); this takes a fraction of one. TestAppendHead and FuzzAppendHead
// compare it with encoding/json.
func appendHead(dst []byte, w *wireResponse, extra []int64) ([]byte, bool) {
	dst = append(dst, `{"model_name":`...)
	var ok bool
	if dst, ok = appendPlainString(dst, w.ModelName); !ok {
		return dst, false
	}
	if w.ModelVersion != "" {
		dst = append(dst, `,"model_version":`...)
		if dst, ok = appendPlainString(dst, w.ModelVersion); !ok {
			return dst, false
		}
	}
	if w.ID != "" {
		dst = append(dst, `,"id":`...)
		if dst, ok = appendPlainString(dst, w.ID); !ok {
			return dst, false
		}
	}
	if len(w.Parameters) > 0 {
		dst = append(dst, `,"parameters":`...)
		if dst, ok = appendParameters(dst, w.Parameters, -1); !ok {
			return dst, false
		}
	}
	dst = append(dst, `,"outputs":`...)
	if w.Outputs == nil {
		return append(dst, "null}"...), true
	}
	dst = append(dst, '[')
	for i := range w.Outputs {
		o := &w.Outputs[i]
		if o.Data != nil {
			return dst, false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		if dst, ok = appendPlainString(dst, o.Name); !ok {
			return dst, false
		}
		dst = append(dst, `,"datatype":`...)
		if dst, ok = appendPlainString(dst, string(o.Datatype)); !ok {
			return dst, false
		}
		dst = append(dst, `,"shape":`...)
		if o.Shape == nil {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, '[')
			for j, d := range o.Shape {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = strconv.AppendInt(dst, d, 10)
			}
			dst = append(dst, ']')
		}
		x := int64(-1)
		if i < len(extra) {
			x = extra[i]
		}
		if len(o.Parameters) > 0 || x >= 0 {
			dst = append(dst, `,"parameters":`...)
			if dst, ok = appendParameters(dst, o.Parameters, x); !ok {
				return dst, false
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...), true
}

// appendParameters appends p, with binary_data_size = size merged in when
// size >= 0, as a JSON object of sorted keys; false for a value other
// than an integer, a boolean or a plain string, or a key that is not
// plain.
func appendParameters(dst []byte, p infer.Parameters, size int64) ([]byte, bool) {
	keys := make([]string, 0, len(p)+1)
	for k := range p {
		if k != paramBinarySize || size < 0 {
			keys = append(keys, k)
		}
	}
	if size >= 0 {
		keys = append(keys, paramBinarySize)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	var ok bool
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, ok = appendPlainString(dst, k); !ok {
			return dst, false
		}
		dst = append(dst, ':')
		if k == paramBinarySize && size >= 0 {
			dst = strconv.AppendInt(dst, size, 10)
			continue
		}
		switch v := p[k].(type) {
		case int64:
			dst = strconv.AppendInt(dst, v, 10)
		case int:
			dst = strconv.AppendInt(dst, int64(v), 10)
		case uint64:
			dst = strconv.AppendUint(dst, v, 10)
		case bool:
			dst = strconv.AppendBool(dst, v)
		case string:
			if dst, ok = appendPlainString(dst, v); !ok {
				return dst, false
			}
		default:
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendPlainString appends s quoted when encoding/json would write it as
// it is (printable ASCII but ", \, <, > and &, which it escapes); false
// otherwise.
func appendPlainString(dst []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return dst, false
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), true
}

// decodeHead fills w from the JSON header b as encoding/json would, for
// the headers clients send (keys spelled as the protocol spells them,
// each once; names and datatypes plain ASCII without escapes; shapes of
// integers), and reports false for anything else, which the caller then
// decodes with encoding/json (its case-insensitive keys, null fields,
// escapes, and its errors' wording). The raw fields (id, parameters,
// data) are the bytes of b as encoding/json's RawMessage would hold them,
// not a copy: they are decoded before the body is let go.
//
// json.Unmarshal took 3.3 µs of the 78 µs of server CPU a one-row tree
// ensemble request costs; this takes a fraction. TestDecodeHead and
// FuzzDecodeHead compare it with encoding/json.
func decodeHead(b []byte, w *wireRequest) bool {
	if !json.Valid(b) {
		return false // encoding/json's error, worded as strictJSON words it
	}
	s := headScanner{b: b}
	var seen [4]bool
	ok := s.object(func(key string) bool {
		switch key {
		case "id":
			return once(&seen[0]) && s.raw(&w.ID)
		case "parameters":
			return once(&seen[1]) && s.raw(&w.Parameters)
		case "inputs":
			w.Inputs = []wireInput{} // [] decodes to an empty slice, not nil
			return once(&seen[2]) && s.array(func() bool {
				var in wireInput
				var got [5]bool
				if !s.object(func(key string) bool {
					switch key {
					case "name":
						return once(&got[0]) && s.plain(&in.Name)
					case "shape":
						return once(&got[1]) && s.ints(&in.Shape)
					case "datatype":
						return once(&got[2]) && s.plain(&in.Datatype)
					case "parameters":
						return once(&got[3]) && s.raw(&in.Parameters)
					case "data":
						return once(&got[4]) && s.raw(&in.Data)
					}
					return false
				}) {
					return false
				}
				w.Inputs = append(w.Inputs, in)
				return true
			})
		case "outputs":
			w.Outputs = []wireOutput{}
			return once(&seen[3]) && s.array(func() bool {
				var out wireOutput
				var got [2]bool
				if !s.object(func(key string) bool {
					switch key {
					case "name":
						return once(&got[0]) && s.plain(&out.Name)
					case "parameters":
						return once(&got[1]) && s.raw(&out.Parameters)
					}
					return false
				}) {
					return false
				}
				w.Outputs = append(w.Outputs, out)
				return true
			})
		}
		return false
	})
	s.space()
	return ok && s.i == len(b)
}

// once marks a key seen, false if it was already.
func once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

// headScanner reads a JSON text that json.Valid accepted.
type headScanner struct {
	b []byte
	i int
}

func (s *headScanner) space() { s.i = jsonwire.SkipSpace(s.b, s.i) }

// next skips spaces and reports whether the next byte is c, taking it.
func (s *headScanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads an object, calling field with each key after its colon;
// field reads the value.
func (s *headScanner) object(field func(key string) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		var key string
		if !s.plain(&key) || !s.next(':') || !field(key) {
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// array reads an array, calling elem for each element.
func (s *headScanner) array(elem func() bool) bool {
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.next(']') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// plain reads a string of printable ASCII without escapes.
func (s *headScanner) plain(dst *string) bool {
	s.space()
	v, next, ok := jsonwire.PlainString(s.b, s.i)
	if ok {
		*dst, s.i = v, next
	}
	return ok
}

// ints reads an array of integers that fit int64 (no fraction, no
// exponent: encoding/json refuses those for an int64).
func (s *headScanner) ints(dst *[]int64) bool {
	if !s.next('[') {
		return false
	}
	out := []int64{}
	if s.next(']') {
		*dst = out
		return true
	}
	for {
		s.space()
		start := s.i
		for s.i < len(s.b) && (s.b[s.i] == '-' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
			s.i++
		}
		v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
		if err != nil || s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
			return false
		}
		out = append(out, v)
		if s.next(']') {
			*dst = out
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// raw reads any value, as the bytes encoding/json's RawMessage holds.
func (s *headScanner) raw(dst *json.RawMessage) bool {
	s.space()
	start := s.i
	if !s.skip() {
		return false
	}
	*dst = s.b[start:s.i:s.i]
	return true
}

// skip passes over one value of a valid text.
func (s *headScanner) skip() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		for s.i++; s.i < len(s.b); s.i++ {
			switch s.b[s.i] {
			case '\\':
				s.i++
			case '"':
				s.i++
				return true
			}
		}
		return false
	case '{', '[':
		depth := 0
		for ; s.i < len(s.b); s.i++ {
			switch s.b[s.i] {
			case '"':
				if !s.skip() {
					return false
				}
				s.i--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					s.i++
					return true
				}
			}
		}
		return false
	}
	for s.i < len(s.b) && !strings.ContainsRune(" \t\r\n,}]", rune(s.b[s.i])) {
		s.i++
	}
	return true
}
