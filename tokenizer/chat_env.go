package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// This file adapts the Jinja engine (gonja) to what Hugging Face chat
// templates expect from Python's Jinja2 as transformers sets it up. Each
// addition exists because a real template needs it and the engine lacks it
// or does it differently; the golden tests in testdata/chat check them.

// jinjaEnv is the engine environment shared by all chat templates. It is
// built once and never changed afterwards, so concurrent renders only read
// it.
var jinjaEnv = newJinjaEnv()

func newJinjaEnv() *exec.Environment {
	globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	// gonja's range feeds a channel from a goroutine, which leaks when a
	// loop breaks early; a list is what Python's range gives a template.
	globals.Set("range", rangeList)
	// none is Python's None (the parser reads None as none, see
	// desugarConditionals), distinct from an undefined name.
	globals.Set("none", pyNone)
	globals.Set("py:add", pyAdd)
	globals.Set("py:getitem", pyGetItem)
	globals.Set("py:pow", pyPow)
	globals.Set("py:mod", pyMod)
	globals.Set("py:mul", pyMul)
	globals.Set("py:concat", pyConcat)

	return &exec.Environment{
		Context:           globals,
		Filters:           newFilters(),
		Tests:             newTests(),
		ControlStructures: newControlStructures(),
		Methods:           newMethods(),
	}
}

// rangeList is Python's range(stop) / range(start, stop[, step]) as a list.
func rangeList(args *exec.VarArgs) (pyList, error) {
	var n [3]int
	for i, a := range args.Args {
		if i >= 3 || !a.IsInteger() {
			return nil, errors.New("range expects 1 to 3 integer arguments")
		}
		n[i] = a.Integer()
	}
	start, stop, step := 0, 0, 1
	switch len(args.Args) {
	case 1:
		stop = n[0]
	case 2:
		start, stop = n[0], n[1]
	case 3:
		start, stop, step = n[0], n[1], n[2]
	default:
		return nil, errors.New("range expects 1 to 3 integer arguments")
	}
	if step == 0 {
		return nil, errors.New("range() arg 3 must not be zero")
	}
	const limit = maxLoopIterations // a template has no business with more
	var out pyList
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) == limit {
			return nil, errors.New("range too large")
		}
		out = append(out, i)
	}
	return out, nil
}

// filterToJSON is transformers' tojson, which replaces Jinja2's: Python's
// json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), not HTML-escaped. Dicts keep their order when the
// template built them; Go maps (none come from this package) have no order
// and are written sorted.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	o := jsonOpts{itemSep: ", ", keySep: ": "}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	args := map[string]*exec.Value{}
	for i, a := range params.Args {
		if i >= len(names) {
			return exec.AsValue(errors.New("tojson: too many arguments"))
		}
		args[names[i]] = a
	}
	for k, v := range params.KwArgs {
		args[k] = v
	}
	for k, v := range args {
		switch k {
		case "ensure_ascii":
			o.ascii = v.IsTrue()
		case "sort_keys":
			o.sortKeys = v.IsTrue()
		case "indent":
			switch {
			case v.IsNil():
			case v.IsInteger():
				if v.Integer() > maxIntArg {
					return exec.AsValue(fmt.Errorf("tojson: indent %d is too large", v.Integer()))
				}
				o.indent, o.pretty = strings.Repeat(" ", max(v.Integer(), 0)), true
			case v.IsString():
				o.indent, o.pretty = v.String(), true
			default:
				return exec.AsValue(fmt.Errorf("tojson: bad indent %s", v.String()))
			}
		case "separators":
			if !v.IsNil() {
				if !v.IsList() || v.Len() != 2 {
					return exec.AsValue(errors.New("tojson: separators must be a pair of strings"))
				}
				o.itemSep, o.keySep, o.customSep = v.Index(0).String(), v.Index(1).String(), true
			}
		default:
			return exec.AsValue(fmt.Errorf("tojson: unexpected argument %q", k))
		}
	}
	if o.pretty && !o.customSep {
		o.itemSep = ","
	}
	var b strings.Builder
	if err := o.write(&b, in, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(b.String())
}

func isGenerator(v *exec.Value) bool {
	_, ok := v.Interface().(pyIter)
	return ok
}

type jsonOpts struct {
	ascii, sortKeys, pretty, customSep bool
	indent, itemSep, keySep            string
}

func (o *jsonOpts) newline(b *strings.Builder, depth int) {
	if o.pretty {
		b.WriteByte('\n')
		for range depth {
			b.WriteString(o.indent)
		}
	}
}

func (o *jsonOpts) write(b *strings.Builder, v *exec.Value, depth int) error {
	if depth > 100 {
		return errors.New("tojson: nesting too deep")
	}
	if b.Len() > maxRenderBytes {
		return errTooLarge
	}
	switch {
	case isPyNone(v):
		b.WriteString("null")
	case isGenerator(v):
		return errors.New("tojson: Object of type generator is not JSON serializable")
	case v.IsNil():
		// Python's json.dumps refuses Jinja's Undefined.
		return errors.New("tojson: Object of type Undefined is not JSON serializable")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.Bool()))
	case v.IsInteger():
		b.WriteString(strconv.Itoa(v.Integer()))
	case v.IsFloat():
		b.WriteString(pyFloat(v.Float()))
	case v.IsString():
		o.writeString(b, v.String())
	case v.IsList():
		n := v.Len()
		if n == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			if err := o.write(b, v.Index(i), depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte(']')
	case v.IsDict():
		keys := v.Keys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if o.sortKeys {
			sort.SliceStable(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			o.writeString(b, k.String())
			b.WriteString(o.keySep)
			item, _ := v.GetItem(k.Interface())
			if err := o.write(b, item, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", v.Val.Type())
	}
	return nil
}

// writeString writes s as Python's json module does: only ", \ and control
// characters are escaped, plus everything outside ASCII with ensure_ascii.
func (o *jsonOpts) writeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (o.ascii && r > 0x7e):
			if r == utf8.RuneError {
				r = 0xFFFD
			}
			units := []rune{r}
			if r > 0xFFFF {
				r1, r2 := utf16.EncodeRune(r)
				units = []rune{r1, r2}
			}
			for _, u := range units {
				b.WriteString(`\u`)
				for shift := 12; shift >= 0; shift -= 4 {
					b.WriteByte(hex[(u>>shift)&0xF])
				}
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyFloat formats f as Python's repr(float) does (json.dumps uses it).
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	// Shortest round-trip digits, then Python's layout: plain notation for
	// exponents in [-4, 16), scientific otherwise.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}
