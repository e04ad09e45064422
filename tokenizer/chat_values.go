package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python has two "nothing" values that chat templates tell apart: None
// (tools=None, a JSON null, dict.get of a missing key) and Jinja's
// Undefined (a missing variable, key or attribute). The engine has one,
// nil, which is both. Here nil stays Jinja's undefined and None is pyNone,
// a value of its own: it is defined, false, prints as "None", is "none",
// and iterating it is an error, as in Python.

// pyNoneType is the type of pyNone. Its kind is bool (false), so the
// engine treats it as false in conditions and negates it to true; the
// tests that look at booleans are overridden so it is not one.
type pyNoneType bool

// String implements fmt.Stringer: the engine prints values through it.
func (pyNoneType) String() string { return "None" }

// pyNone is Python's None as templates see it.
const pyNone = pyNoneType(false)

func isPyNone(v *exec.Value) bool {
	if v == nil || v.IsNil() {
		return false
	}
	_, ok := v.Interface().(pyNoneType)
	return ok
}

// Tests that differ for None and undefined.
func pyTests() map[string]exec.TestFunction {
	return map[string]exec.TestFunction{
		"none": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return isPyNone(in), nil
		},
		"defined": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return !in.IsNil() && !in.IsError(), nil
		},
		"undefined": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsNil() || in.IsError(), nil
		},
		"boolean": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsBool() && !isPyNone(in), nil
		},
		"true": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsBool() && !isPyNone(in) && in.Bool(), nil
		},
		"false": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsBool() && !isPyNone(in) && !in.Bool(), nil
		},
	}
}

// decodeJSON decodes JSON text the way Python's json.loads does, as
// template values: objects are dicts that keep their key order (a repeated
// key keeps its first place and takes its last value), arrays are lists,
// null is None, integers are ints and other numbers floats.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: trailing data")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > 100 {
		return nil, errors.New("invalid JSON: nesting too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case nil:
		return pyNone, nil
	case bool, string:
		return t, nil
	case json.Number:
		if i, err := strconv.Atoi(t.String()); err == nil {
			return i, nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON number %s", t)
		}
		return f, nil
	case json.Delim:
		switch t {
		case '[':
			l := pyList{}
			for dec.More() {
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		case '{':
			d := exec.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				k, _ := kt.(string)
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				setPair(d, k, v)
			}
			_, err := dec.Token()
			return d, err
		}
	}
	return nil, fmt.Errorf("invalid JSON token %v", tok)
}

// setPair sets d[k] = v, keeping the place of an existing key.
func setPair(d *exec.Dict, k string, v any) {
	for _, p := range d.Pairs {
		if p.Key.String() == k {
			p.Value = exec.AsValue(v)
			return
		}
	}
	d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(v)})
}

// newDict builds an ordered dict from key, value, key, value...
func newDict(kv ...any) *exec.Dict {
	d := exec.NewDict()
	for i := 0; i+1 < len(kv); i += 2 {
		d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(kv[i]), Value: exec.AsValue(kv[i+1])})
	}
	return d
}
