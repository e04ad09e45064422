package jsonwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/llmserve/llmserve/frontend"
)

// Decode unmarshals body into v and turns every failure into a
// *frontend.Error: the bytes come from the client, so no decoding failure
// is the server's fault.
func Decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return frontend.Invalid("", "The request body is empty; it must be a JSON object.")
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var (
		ve  *frontend.Error
		te  *json.UnmarshalTypeError
		syn *json.SyntaxError
	)
	switch {
	case errors.As(err, &ve):
		return ve
	case errors.As(err, &syn):
		return frontend.Invalid("", "The request body is not valid JSON: %v (at byte %d).", syn, syn.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return frontend.Invalid("", "The request body must be a JSON object, not %s.", article(te.Value))
		}
		return TypeError(te.Field, expected(te.Type), te.Value)
	default:
		return frontend.Invalid("", "The request body could not be decoded: %v.", err)
	}
}

// DecodeBody checks that a client's body is valid Unicode (CheckText) and
// decodes it into each of parts (Decode): one struct, or the flat structs a
// request is read as (a struct embedded in another would put its Go name
// into the field paths of type errors). The first error is returned.
func DecodeBody(body []byte, parts ...any) error {
	if err := CheckText(body); err != nil {
		return err
	}
	for _, p := range parts {
		if err := Decode(body, p); err != nil {
			return err
		}
	}
	return nil
}

// Array returns the elements of raw, which must be a JSON array; any other
// value is a TypeError for param, which expected want. A caller that
// takes null, or a string form beside the array, checks for it first.
func Array(raw []byte, param, want string) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if Kind(raw) != "array" || json.Unmarshal(raw, &elems) != nil {
		return nil, TypeError(param, want, Kind(raw))
	}
	return elems, nil
}

// Object decodes raw, which must be a JSON object, into v (Decode); any
// other value is a TypeError for param, which expected want. The errors
// of the object's own fields are named below param ("messages[1].role"),
// or as Decode names them when param is "".
func Object(raw []byte, param, want string, v any) error {
	if Kind(raw) != "object" {
		return TypeError(param, want, Kind(raw))
	}
	err := Decode(raw, v)
	if err != nil && param != "" {
		return frontend.WithPrefix(param, err)
	}
	return err
}

// OptionalArray is Array for a field that may be null, which is the same
// as absent: set is false then, and there is no error.
func OptionalArray(raw []byte, param, want string) (elems []json.RawMessage, set bool, err error) {
	if Kind(raw) == "null" {
		return nil, false, nil
	}
	elems, err = Array(raw, param, want)
	return elems, err == nil, err
}

// String returns the value of raw, which must be a JSON string; any other
// value is a TypeError for param, which expected want.
func String(raw []byte, param, want string) (string, error) {
	var s string
	if Kind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		return "", TypeError(param, want, Kind(raw))
	}
	return s, nil
}

// TypeError is the error for a field of the wrong JSON type. got is a JSON
// type name ("string", "number", "array", ...: Kind's) or encoding/json's
// "number 1.5".
func TypeError(param, want, got string) *frontend.Error {
	return frontend.Invalid(param, "Invalid type for '%s': expected %s, but got %s.", param, want, article(got))
}

// article turns encoding/json's value description into prose.
func article(v string) string {
	switch {
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	case v == "array" || v == "object" || v == "integer":
		return "an " + v
	case v == "bool":
		return "a boolean"
	default:
		return "a " + v
	}
}

// expected names the JSON type a Go type decodes from.
func expected(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(expected(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	default:
		return "a " + t.String()
	}
}

// Kind names the JSON type of a raw value by its first byte: "nothing"
// (absent), "null", "string", "array", "object", "bool" or "number".
func Kind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// IsAbsent reports whether raw is absent or null (the same to a decoder:
// null is never a value of its own here).
func IsAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// Str is *p, or "" for nil.
func Str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Marshal encodes v as JSON without encoding/json's HTML escaping, so that
// "<|im_end|>" reads as OpenAI and vLLM write it, not as "\u003c|im_end|\u003e".
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
