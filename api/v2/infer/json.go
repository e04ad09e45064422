package infer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/llmserve/llmserve/api/jsonwire"
	"github.com/llmserve/llmserve/float16"
	"github.com/llmserve/llmserve/oip"
)

// SetJSONData sets the tensor's elements from the JSON value of "data": an
// array, flat or nested in any way (row-major order is the order the
// scalars appear in), of booleans for BOOL, integers for the integer
// types, numbers for the float types (or the strings "NaN", "Infinity",
// "-Infinity", which JSON has no number for, or null for NaN, as MLServer
// reads it) and strings for BYTES. A value that does not fit the datatype
// (a fraction for INT32, 300 for UINT8, a string for FP32) is an error
// naming the element. As in MLServer, a BYTES tensor of one element may
// have a bare string as its data ("data": "hello" for shape [1]).
func (t *Tensor) SetJSONData(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("data is not valid JSON: %w", err)
	}
	if s, ok := tok.(string); ok && t.Datatype == oip.BYTES {
		return t.setBareString(dec, s)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("data must be a JSON array, got %s", describeToken(tok))
	}
	t.Raw, t.Bytes = nil, nil
	size := t.Datatype.Size()
	nest := nesting{shape: t.Shape, counts: []int64{0}}
	i := 0
	for len(nest.counts) > 0 {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("data is not valid JSON: %w", err)
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '[':
				if len(nest.counts) >= 64 {
					return errors.New("data nests arrays more than 64 deep")
				}
				if err := nest.open(); err != nil {
					return err
				}
			case ']':
				if err := nest.close(); err != nil {
					return err
				}
			default:
				return fmt.Errorf("data[%d]: an object is not a tensor element", i)
			}
			continue
		}
		if i >= MaxElements {
			return fmt.Errorf("data has more than %d elements", MaxElements)
		}
		if err := nest.scalar(); err != nil {
			return err
		}
		if err := t.appendJSON(tok, size); err != nil {
			return fmt.Errorf("data[%d]: %w", i, err)
		}
		i++
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data has content after its array")
	}
	return nil
}

// setBareString sets a BYTES tensor of one element from data that is a
// bare string, as MLServer's content-type examples send it.
func (t *Tensor) setBareString(dec *json.Decoder, s string) error {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	if n != 1 {
		return fmt.Errorf("data is a single string, which is one element, but shape %v has %d: send a JSON array of strings", t.Shape, n)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data has content after its string")
	}
	t.Raw, t.Bytes = nil, [][]byte{[]byte(s)}
	return nil
}

// nesting checks the arrays of "data" against the tensor's shape as they
// are read. A flat array is the elements in row-major order, whatever the
// shape (its length is checked against the shape by the caller). A nested
// one must nest exactly as the shape: one level per dimension, each array
// as long as its dimension, the elements at the innermost level, as
// Triton, MLServer and numpy read it. Reading [[1, 2], [3, 4], [5, 6]] as
// a [2, 3] tensor would silently transpose what the client meant.
type nesting struct {
	shape []int64
	// counts holds, for each open array, the elements it has so far.
	counts []int64
	// nested is set when the outer array's first element is an array.
	nested, decided bool
}

// path names the element about to be read, such as data[1][0]: every
// open array but the innermost is at its last element (open counted it).
func (n *nesting) path() string {
	var b strings.Builder
	b.WriteString("data")
	for k, c := range n.counts {
		if k < len(n.counts)-1 {
			c--
		}
		fmt.Fprintf(&b, "[%d]", c)
	}
	return b.String()
}

// openPath names the innermost open array, such as data[1].
func (n *nesting) openPath() string {
	var b strings.Builder
	b.WriteString("data")
	for _, c := range n.counts[:len(n.counts)-1] {
		fmt.Fprintf(&b, "[%d]", c-1)
	}
	return b.String()
}

// first decides, at the outer array's first element, whether the data is
// nested.
func (n *nesting) first(array bool) {
	if !n.decided && len(n.counts) == 1 {
		n.nested, n.decided = array, true
	}
}

func (n *nesting) open() error {
	n.first(true)
	depth := len(n.counts) // the new array's depth, 1 for the outer one's elements
	if !n.nested {
		return fmt.Errorf("%s is an array, but data's first element is not: send data flat (row-major) or nested as the shape %v, not both", n.path(), n.shape)
	}
	if depth >= len(n.shape) {
		return fmt.Errorf("%s is an array, but shape %v has only %d dimension(s): data nests deeper than the shape", n.path(), n.shape, len(n.shape))
	}
	n.counts[len(n.counts)-1]++
	n.counts = append(n.counts, 0)
	return nil
}

func (n *nesting) scalar() error {
	n.first(false)
	if n.nested && len(n.counts) != len(n.shape) {
		return fmt.Errorf("%s is a value where shape %v needs an array of %d", n.path(), n.shape, n.shape[len(n.counts)])
	}
	n.counts[len(n.counts)-1]++
	return nil
}

func (n *nesting) close() error {
	n.first(false)
	depth := len(n.counts) - 1
	if got := n.counts[depth]; n.nested && got != n.shape[depth] {
		return fmt.Errorf("%s has %d elements, but dimension %d of shape %v is %d", n.openPath(), got, depth, n.shape, n.shape[depth])
	}
	n.counts = n.counts[:depth]
	return nil
}

func describeToken(tok any) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return string(v)
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// appendJSON appends one scalar from the JSON decoder.
func (t *Tensor) appendJSON(tok any, size int) error {
	d := t.Datatype
	switch d {
	case oip.BOOL:
		b, ok := tok.(bool)
		if !ok {
			return fmt.Errorf("want true or false for BOOL, got %s", describeToken(tok))
		}
		v := byte(0)
		if b {
			v = 1
		}
		t.Raw = append(t.Raw, v)
		return nil
	case oip.BYTES:
		s, ok := tok.(string)
		if !ok {
			return fmt.Errorf("want a string for BYTES, got %s", describeToken(tok))
		}
		t.Bytes = append(t.Bytes, []byte(s))
		return nil
	}
	if tok == nil && d.IsFloat() {
		tok = "NaN" // MLServer reads null as NaN in a float tensor
	}
	if str, ok := tok.(string); ok && d.IsFloat() {
		v, ok := nonFinite[str]
		if !ok {
			return fmt.Errorf("want a number, null or \"NaN\", \"Infinity\", \"-Infinity\" for %s, got the string %q", d, truncate(str))
		}
		switch d {
		case oip.FP16:
			t.Raw = AppendElement(t.Raw, uint64(float16.FromFloat32(float32(v))), 2)
		case oip.FP32:
			t.Raw = AppendElement(t.Raw, uint64(math.Float32bits(float32(v))), 4)
		default:
			t.Raw = AppendElement(t.Raw, math.Float64bits(v), 8)
		}
		return nil
	}
	num, ok := tok.(json.Number)
	if !ok {
		return fmt.Errorf("want a number for %s, got %s", d, describeToken(tok))
	}
	s := string(num)
	bits := 8 * size
	switch {
	case d.IsSigned():
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return fmt.Errorf("%s is not an %s (an integer in [%d, %d])", truncate(s), d, int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
		}
		t.Raw = AppendElement(t.Raw, uint64(v), size)
	case d.IsUnsigned():
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return fmt.Errorf("%s is not a %s (an integer in [0, %d])", truncate(s), d, uint64(math.MaxUint64)>>(64-bits))
		}
		t.Raw = AppendElement(t.Raw, v, size)
	case d == oip.FP16:
		v, err := strconv.ParseFloat(s, 32)
		if err != nil || math.Abs(v) > 65504 {
			return fmt.Errorf("%s is not an FP16 number (finite, magnitude at most 65504)", truncate(s))
		}
		t.Raw = AppendElement(t.Raw, uint64(float16.FromFloat32(float32(v))), 2)
	case d == oip.FP32:
		v, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return fmt.Errorf("%s is not an FP32 number (finite, magnitude at most %g)", truncate(s), math.MaxFloat32)
		}
		t.Raw = AppendElement(t.Raw, uint64(math.Float32bits(float32(v))), 4)
	case d == oip.FP64:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%s is not an FP64 number", truncate(s))
		}
		t.Raw = AppendElement(t.Raw, math.Float64bits(v), 8)
	default:
		return fmt.Errorf("datatype %q has no JSON form", d)
	}
	return nil
}

// JSONData returns the elements as a flat slice that encoding/json writes
// as the protocol's "data": []bool, []int64, []uint64, []float32,
// []float64 or []string. BYTES elements that are not valid UTF-8 lose
// their invalid bytes in JSON; ask for binary output to keep them.
func (t *Tensor) JSONData() any {
	n := t.Len()
	switch d := t.Datatype; {
	case d == oip.BOOL:
		out := make([]bool, n)
		for i, b := range t.Raw {
			out[i] = b != 0
		}
		return out
	case d == oip.BYTES:
		out := make([]string, n)
		for i, b := range t.Bytes {
			out[i] = string(b)
		}
		return out
	case d.IsSigned():
		out := make([]int64, n)
		for i := range out {
			out[i], _ = t.Int(i)
		}
		return out
	case d.IsUnsigned():
		out := make([]uint64, n)
		for i := range out {
			out[i] = t.uint(i)
		}
		return out
	case d == oip.FP64:
		out := make([]float64, n)
		for i := range out {
			out[i], _ = t.Float(i)
		}
		return withNonFinite(out)
	default: // FP16, FP32
		out := make([]float32, n)
		for i := range out {
			v, _ := t.Float(i)
			out[i] = float32(v)
		}
		return withNonFinite(out)
	}
}

// nonFinite are the strings that stand for the float values JSON has no
// number for, in "data" both ways (JavaScript's and NumPy's spellings:
// float("Infinity") and np.float32("NaN") read them).
var nonFinite = map[string]float64{"NaN": math.NaN(), "Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}

// withNonFinite returns out as is when every value is finite, else as
// []any with NaN, +Inf and -Inf written as the strings "NaN", "Infinity"
// and "-Infinity" (encoding/json refuses them as numbers).
func withNonFinite[F float32 | float64](out []F) any {
	if !slices.ContainsFunc(out, func(v F) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }) {
		return out
	}
	mixed := make([]any, len(out))
	for i, v := range out {
		switch f := float64(v); {
		case math.IsNaN(f):
			mixed[i] = "NaN"
		case math.IsInf(f, 1):
			mixed[i] = "Infinity"
		case math.IsInf(f, -1):
			mixed[i] = "-Infinity"
		default:
			mixed[i] = v
		}
	}
	return mixed
}

// Parameters are V2 parameters: name to a string, bool, int64, uint64 or
// float64 (and, from JSON, a list of strings for "stop").
type Parameters map[string]any

// DecodeParameters decodes a JSON "parameters" object. Numbers become
// int64 when they are integers that fit, else float64. Values other than
// strings, numbers and booleans are an error, except arrays of strings
// (generate's "stop").
//
// It runs for the request and each of its tensors, so it avoids
// json.Decoder (its buffers were a sixth of the bytes a one-row tensor
// request allocated): each value is kept raw and read by its first byte.
func DecodeParameters(raw []byte) (Parameters, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if p, ok := decodeFlatParameters(raw); ok {
		return p, nil
	}
	return decodeParameters(raw)
}

// decodeParameters is DecodeParameters for any JSON.
func decodeParameters(raw []byte) (Parameters, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("parameters must be a JSON object of names to strings, numbers or booleans")
	}
	p := make(Parameters, len(m))
	for k, v := range m {
		// v is one valid JSON value (Unmarshal checked the whole object).
		switch v[0] {
		case '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("parameter %q: %w", truncate(k), err)
			}
			p[k] = s
		case 't':
			p[k] = true
		case 'f':
			p[k] = false
		case 'n':
			// null is the same as absent.
		case '[':
			var list []any
			if err := json.Unmarshal(v, &list); err != nil {
				return nil, fmt.Errorf("parameter %q: %w", truncate(k), err)
			}
			ss := make([]string, len(list))
			for i, e := range list {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("parameter %q: a list parameter must hold strings only", truncate(k))
				}
				ss[i] = s
			}
			p[k] = ss
		case '{':
			return nil, fmt.Errorf("parameter %q must be a string, number or boolean", truncate(k))
		default: // a number
			x := string(v)
			if i, err := strconv.ParseInt(x, 10, 64); err == nil {
				p[k] = i
			} else if f, err := strconv.ParseFloat(x, 64); err == nil {
				p[k] = f
			} else {
				return nil, fmt.Errorf("parameter %q: %s is not a number that fits a float64", truncate(k), truncate(x))
			}
		}
	}
	return p, nil
}

// decodeFlatParameters is DecodeParameters' fast path for the objects
// clients send with every tensor ({"binary_data_size": 3136}): names and
// string values without escapes, numbers, booleans and nulls, read in one
// pass. ok is false for anything else (arrays, escapes, non-ASCII text,
// a number that does not fit, malformed JSON), which decodeParameters
// then reads or refuses; where ok is true the two agree
// (FuzzDecodeParameters).
func decodeFlatParameters(raw []byte) (p Parameters, ok bool) {
	i := jsonwire.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	p = Parameters{}
	i = jsonwire.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return p, jsonwire.SkipSpace(raw, i+1) == len(raw)
	}
	for {
		key, j, ok := jsonwire.PlainString(raw, i)
		if !ok {
			return nil, false
		}
		i = jsonwire.SkipSpace(raw, j)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = jsonwire.SkipSpace(raw, i+1)
		if i >= len(raw) {
			return nil, false
		}
		switch c := raw[i]; {
		case c == '"':
			v, j, ok := jsonwire.PlainString(raw, i)
			if !ok {
				return nil, false
			}
			p[key], i = v, j
		case bytes.HasPrefix(raw[i:], []byte("true")):
			p[key], i = true, i+4
		case bytes.HasPrefix(raw[i:], []byte("false")):
			p[key], i = false, i+5
		case bytes.HasPrefix(raw[i:], []byte("null")):
			delete(p, key) // null is the same as absent (a repeated name's last value counts)
			i += 4
		case c == '-' || c >= '0' && c <= '9':
			j := jsonwire.NumberEnd(raw, i)
			if j < 0 {
				return nil, false
			}
			x := string(raw[i:j])
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				p[key] = n
			} else if f, err := strconv.ParseFloat(x, 64); err == nil {
				p[key] = f
			} else {
				return nil, false
			}
			i = j
		default:
			return nil, false
		}
		i = jsonwire.SkipSpace(raw, i)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = jsonwire.SkipSpace(raw, i+1)
		case '}':
			return p, jsonwire.SkipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// Int64 returns the integer parameter name; ok is false when absent. A
// value of another type is an error.
func (p Parameters) Int64(name string) (v int64, ok bool, err error) {
	return typedParam(p, name, "an integer", func(x any) (int64, bool) {
		switch n := x.(type) {
		case int64:
			return n, true
		case uint64:
			return int64(min(n, math.MaxInt64)), true
		case float64:
			return int64(n), n == math.Trunc(n) && math.Abs(n) < 1<<63
		}
		return 0, false
	})
}

// Float64 returns the numeric parameter name.
func (p Parameters) Float64(name string) (v float64, ok bool, err error) {
	return typedParam(p, name, "a number", func(x any) (float64, bool) {
		switch n := x.(type) {
		case int64:
			return float64(n), true
		case uint64:
			return float64(n), true
		case float64:
			return n, true
		}
		return 0, false
	})
}

// Bool returns the boolean parameter name.
func (p Parameters) Bool(name string) (v, ok bool, err error) {
	return typedParam(p, name, "true or false", func(x any) (bool, bool) {
		b, isBool := x.(bool)
		return b, isBool
	})
}

// Strings returns a parameter that is a string or a list of strings.
func (p Parameters) Strings(name string) (v []string, ok bool, err error) {
	return typedParam(p, name, "a string or a list of strings", func(x any) ([]string, bool) {
		switch s := x.(type) {
		case string:
			return []string{s}, true
		case []string:
			return s, true
		}
		return nil, false
	})
}

// typedParam returns parameter name as conv reads it; ok is false when
// absent. A value conv does not take is an error that says the parameter
// must be want.
func typedParam[T any](p Parameters, name, want string, conv func(any) (T, bool)) (v T, ok bool, err error) {
	x, ok := p[name]
	if !ok {
		return v, false, nil
	}
	v, good := conv(x)
	if !good {
		var zero T
		return zero, true, fmt.Errorf("parameter %s must be %s, got %s", name, want, describeValue(x))
	}
	return v, true, nil
}

func describeValue(x any) string {
	switch v := x.(type) {
	case string:
		return "the string " + strconv.Quote(truncate(v))
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []string:
		return "a list of strings"
	}
	return fmt.Sprintf("a %T", x)
}
