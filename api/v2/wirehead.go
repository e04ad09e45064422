package v2

import (
	"slices"
	"strconv"

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
