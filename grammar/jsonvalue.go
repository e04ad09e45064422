package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// jsonKind is the type of a JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

func (k jsonKind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// value is a decoded JSON value that keeps the order of object keys: the
// grammar writes properties in the order the schema declares them.
type value struct {
	kind  jsonKind
	b     bool
	num   json.Number
	str   string
	elems []*value // array
	keys  []string // object, in order
	vals  []*value // object, parallel to keys
}

// get returns the member key of an object, or nil.
func (v *value) get(key string) *value {
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// maxJSONDepth bounds nesting in a schema.
const maxJSONDepth = 128

// parseJSON decodes one JSON value from data.
func parseJSON(data []byte) (*value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (*value, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("the JSON nests deeper than %d levels", maxJSONDepth)
	}
	tok, err := d.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("unexpected end of the JSON")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &value{kind: jsonNull}, nil
	case bool:
		return &value{kind: jsonBool, b: t}, nil
	case json.Number:
		return &value{kind: jsonNumber, num: t}, nil
	case string:
		return &value{kind: jsonString, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &value{kind: jsonArray}
			for d.More() {
				e, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				v.elems = append(v.elems, e)
			}
			_, err := d.Token()
			return v, err
		case '{':
			v := &value{kind: jsonObject}
			seen := map[string]bool{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				e, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				if seen[k] {
					return nil, fmt.Errorf("the key %q appears twice in one object", k)
				}
				seen[k] = true
				v.keys, v.vals = append(v.keys, k), append(v.vals, e)
			}
			_, err := d.Token()
			return v, err
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// encode writes v as compact JSON, the form a grammar for const and enum
// expects the model to write (strings escaped as encoding/json does).
func (v *value) encode(b *strings.Builder) {
	switch v.kind {
	case jsonNull:
		b.WriteString("null")
	case jsonBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case jsonNumber:
		b.WriteString(v.num.String())
	case jsonString:
		b.WriteString(quoteJSON(v.str))
	case jsonArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.encode(b)
		}
		b.WriteByte(']')
	case jsonObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quoteJSON(k))
			b.WriteByte(':')
			v.vals[i].encode(b)
		}
		b.WriteByte('}')
	}
}

// quoteJSON returns s as a JSON string without HTML escaping.
func quoteJSON(s string) string {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}
