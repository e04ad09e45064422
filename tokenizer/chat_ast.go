package tokenizer

import (
	"errors"
	"fmt"
	"html"
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// The engine evaluates a few operators more leniently than Python, and
// templates depend on Python's behaviour (a template that adds an
// undefined attribute to a string is refused by Python, and so by vLLM).
// They cannot be changed through the engine's extension points, so after
// parsing, the template's syntax tree is rewritten: every a + b becomes a
// call of pyAdd(a, b), and every x[<integer literal>] a call of
// pyGetItem(x, n). The whole template is parsed inside a statement of our
// own, {% pyroot %}...{% endpyroot %}, whose parser does the rewrite
// (wrapRoot adds it around the source).

const (
	rootOpen  = "{% pyroot %}"
	rootClose = "{% endpyroot %}"
)

// wrapRoot puts the template inside {% pyroot %}. trim_blocks drops a
// newline right after a block tag, so a template starting with one gets
// an extra one; keep_trailing_newline is off, so the one trailing newline
// the engine would have dropped is dropped here.
func wrapRoot(src string) string {
	open := rootOpen
	if strings.HasPrefix(src, "\n") {
		open += "\n"
	}
	return open + strings.TrimSuffix(src, "\n") + rootClose
}

// checkReservedTags refuses a template that writes {% pyroot %} or
// {% endpyroot %} itself: it could end our statement early and leave part
// of the template outside the rewrite (and its size limits).
func checkReservedTags(src string, cfg *config.Config) error {
	stream := tokens.LexAll(src, cfg)
	prevBlock := false
	for !stream.End() {
		t := stream.Next()
		if prevBlock && t.Type == tokens.Name && (t.Val == "pyroot" || t.Val == "endpyroot") {
			return fmt.Errorf("{%% %s %%} is reserved", t.Val)
		}
		prevBlock = t.Type == tokens.BlockBegin
	}
	return nil
}

// pyRoot is the {% pyroot %} statement: it renders its body in place.
type pyRoot struct {
	location *tokens.Token
	body     *nodes.Wrapper
}

func (r *pyRoot) Position() *tokens.Token { return r.location }
func (r *pyRoot) String() string          { return "pyroot" }

// Execute implements exec.ControlStructure.
func (r *pyRoot) Execute(rd *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return rd.ExecuteWrapper(r.body)
}

func pyRootParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	body, _, err := p.WrapUntil("endpyroot")
	if err != nil {
		return nil, err
	}
	rewriteTree(reflect.ValueOf(body), map[uintptr]bool{})
	return &pyRoot{location: p.Current(), body: body}, nil
}

var (
	exprType = reflect.TypeFor[nodes.Expression]()
	nodeType = reflect.TypeFor[nodes.Node]()
)

// rewriteTree walks the parsed tree through every field and
// replaces the nodes that need Python's semantics.
func rewriteTree(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		rewriteTree(v.Elem(), seen)
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		if v.CanSet() && v.Elem().CanInterface() {
			if n, ok := rewriteNode(v.Elem().Interface()); ok && reflect.TypeOf(n).Implements(v.Type()) {
				v.Set(reflect.ValueOf(n))
			}
		}
		rewriteTree(v.Elem(), seen)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() && f.CanAddr() {
				// The engine keeps some expressions (those of {% set %})
				// in unexported fields; they are rewritten in place too.
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			if f.CanSet() {
				rewriteTree(f, seen)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			rewriteTree(v.Index(i), seen)
		}
	case reflect.Map:
		if v.Type().Elem() != exprType && v.Type().Elem() != nodeType {
			for _, k := range v.MapKeys() {
				rewriteTree(v.MapIndex(k), seen)
			}
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			rewriteTree(e, seen)
			v.SetMapIndex(k, e)
		}
	}
}

// rewriteNode returns the replacement for one node, if it has one.
func rewriteNode(n any) (any, bool) {
	switch x := n.(type) {
	case *nodes.BinaryExpression:
		if x.Operator != nil && x.Operator.Token != nil {
			switch x.Operator.Token.Type {
			case tokens.Addition:
				return callNode(x.Operator.Token, "py:add", x.Left, x.Right), true
			case tokens.Power:
				return callNode(x.Operator.Token, "py:pow", x.Left, x.Right), true
			case tokens.Modulo:
				return callNode(x.Operator.Token, "py:mod", x.Left, x.Right), true
			case tokens.Multiply:
				return callNode(x.Operator.Token, "py:mul", x.Left, x.Right), true
			case tokens.Tilde:
				return callNode(x.Operator.Token, "py:concat", x.Left, x.Right), true
			}
		}
	case *nodes.GetItem:
		// x['literal'] (nearly every item access) stays with the engine.
		_, isString := x.Arg.(*nodes.String)
		key, isExpr := x.Arg.(nodes.Expression)
		target, isTarget := x.Node.(nodes.Expression)
		if !isString && isExpr && isTarget {
			return callNode(x.Location, "py:getitem", target, key), true
		}
	}
	return nil, false
}

func callNode(at *tokens.Token, fn string, args ...nodes.Expression) *nodes.Call {
	name := &tokens.Token{Type: tokens.Name, Val: fn}
	if at != nil {
		name.Pos, name.Line, name.Col = at.Pos, at.Line, at.Col
	}
	return &nodes.Call{Location: at, Func: &nodes.Name{Name: name}, Args: args, Kwargs: map[string]nodes.Expression{}}
}

// typeName is Python's name for a value's type, for error messages.
func typeName(v *exec.Value) string {
	switch {
	case v.IsNil():
		return "Undefined"
	case isPyNone(v):
		return "NoneType"
	case v.IsBool():
		return "bool"
	case v.IsInteger():
		return "int"
	case v.IsFloat():
		return "float"
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	}
	return "object"
}

// pyAdd is Python's a + b: numbers add, strings and lists concatenate,
// anything else (an undefined operand, a string plus a dict) is an error.
// A string marked safe (|safe, Markup in Python) escapes a plain string
// added to it, and the result stays safe, as markupsafe does.
func pyAdd(args *exec.VarArgs) (*exec.Value, error) {
	if len(args.Args) != 2 {
		return nil, errors.New("add takes two operands")
	}
	a, b := args.Args[0], args.Args[1]
	switch {
	case a.IsNil() || b.IsNil():
		return nil, errors.New("UndefinedError: an undefined value was used in an addition")
	case isPyNone(a) || isPyNone(b):
	case a.IsInteger() && b.IsInteger():
		return exec.AsValue(a.Integer() + b.Integer()), nil
	case a.IsNumber() && b.IsNumber():
		return exec.AsValue(a.Float() + b.Float()), nil
	case a.IsString() && b.IsString():
		if err := checkSize(len(a.String()) + len(b.String())); err != nil {
			return nil, err
		}
		_, ma := a.Interface().(markup)
		_, mb := b.Interface().(markup)
		switch {
		case ma && mb:
			return exec.AsValue(markup(a.String() + b.String())), nil
		case ma:
			return exec.AsValue(markup(a.String() + escapeMarkup(b.String()))), nil
		case mb:
			return exec.AsValue(markup(escapeMarkup(a.String()) + b.String())), nil
		}
		return exec.AsValue(a.String() + b.String()), nil
	case a.IsList() && b.IsList():
		if err := checkSize(a.Len() + b.Len()); err != nil {
			return nil, err
		}
		out := make(pyList, 0, a.Len()+b.Len())
		for i := range a.Len() {
			out = append(out, a.Index(i).Interface())
		}
		for i := range b.Len() {
			out = append(out, b.Index(i).Interface())
		}
		return exec.AsValue(out), nil
	}
	if a.IsString() {
		return nil, fmt.Errorf("TypeError: can only concatenate str (not %q) to str", typeName(b))
	}
	return nil, fmt.Errorf("TypeError: unsupported operand type(s) for +: %q and %q", typeName(a), typeName(b))
}

// markup is a string marked safe by |safe (Python's markupsafe.Markup):
// adding a plain string to it escapes that string. Templates rarely mean
// it (functionary v3.1 escapes its tool JSON this way), but Python does it.
type markup string

// filterSafe is |safe.
func filterSafe(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	return exec.AsSafeValue(markup(in.String()))
}

// escapeMarkup is markupsafe's escape.
func escapeMarkup(s string) string {
	return html.EscapeString(s) // the same five characters, the same entities
}

// pyGetItem is x[key] as Jinja's getitem: dicts by key (integer keys
// too: {0: 0, 512: 128}[512]), lists and strings by Python index
// (negative from the end, strings by character), else the attribute of
// that name; whatever is missing is undefined. Subscripting undefined is
// an error.
func pyGetItem(args *exec.VarArgs) (*exec.Value, error) {
	if len(args.Args) != 2 {
		return nil, errors.New("getitem takes two operands")
	}
	x, key := args.Args[0], args.Args[1]
	undefined := exec.AsValue(nil)
	switch {
	case x.IsNil():
		return nil, errors.New("UndefinedError: an undefined value was subscripted")
	case isPyNone(x):
		return undefined, nil
	}
	if d, ok := x.Interface().(*exec.Dict); ok {
		for _, p := range d.Pairs {
			if p.Key.EqualValueTo(key) {
				return p.Value, nil
			}
		}
		return undefined, nil
	}
	if key.IsInteger() && (x.IsString() || x.IsList()) {
		i := key.Integer()
		if x.IsString() {
			r := []rune(x.String())
			if i < 0 {
				i += len(r)
			}
			if i < 0 || i >= len(r) {
				return undefined, nil
			}
			return exec.AsValue(string(r[i])), nil
		}
		if i < 0 {
			i += x.Len()
		}
		if i < 0 || i >= x.Len() {
			return undefined, nil
		}
		return x.Index(i), nil
	}
	if !key.IsString() && !key.IsInteger() {
		return undefined, nil
	}
	if v, found := x.GetItem(key.Interface()); found {
		return v, nil
	}
	if key.IsString() {
		if v, found := x.GetAttribute(key.String()); found {
			return v, nil
		}
	}
	return undefined, nil
}

// pyPow is Python's a ** b: an int for ints with a non-negative exponent.
func pyPow(args *exec.VarArgs) (any, error) {
	a, b := args.Args[0], args.Args[1]
	if !a.IsNumber() || !b.IsNumber() {
		return nil, fmt.Errorf("TypeError: unsupported operand type(s) for **: %q and %q", typeName(a), typeName(b))
	}
	if a.IsInteger() && b.IsInteger() && b.Integer() >= 0 {
		r, base := 1, a.Integer()
		for range min(b.Integer(), 4096) {
			r *= base
		}
		return r, nil
	}
	return math.Pow(a.Float(), b.Float()), nil
}

// pyMod is Python's a % b: printf-style formatting when a is a string
// (%s, %d, %i, %r, %f and %%), else the modulo with the sign of b.
func pyMod(args *exec.VarArgs) (any, error) {
	a, b := args.Args[0], args.Args[1]
	if a.IsString() {
		var vals []*exec.Value
		if b.IsList() {
			for i := range b.Len() {
				vals = append(vals, b.Index(i))
			}
		} else {
			vals = []*exec.Value{b}
		}
		return percentFormat(a.String(), vals)
	}
	switch {
	case a.IsInteger() && b.IsInteger():
		if b.Integer() == 0 {
			return nil, errors.New("ZeroDivisionError: integer modulo by zero")
		}
		m := a.Integer() % b.Integer()
		if m != 0 && (m < 0) != (b.Integer() < 0) {
			m += b.Integer()
		}
		return m, nil
	case a.IsNumber() && b.IsNumber():
		if b.Float() == 0 {
			return nil, errors.New("ZeroDivisionError: float modulo")
		}
		m := math.Mod(a.Float(), b.Float())
		if m != 0 && (m < 0) != (b.Float() < 0) {
			m += b.Float()
		}
		return m, nil
	}
	return nil, fmt.Errorf("TypeError: unsupported operand type(s) for %%: %q and %q", typeName(a), typeName(b))
}

func percentFormat(f string, vals []*exec.Value) (string, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		if i+1 >= len(f) {
			return "", errors.New("ValueError: incomplete format")
		}
		i++
		verb := f[i]
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if next >= len(vals) {
			return "", errors.New("TypeError: not enough arguments for format string")
		}
		v := vals[next]
		next++
		switch verb {
		case 's':
			b.WriteString(v.String())
		case 'r':
			if v.IsString() {
				b.WriteString("'" + v.String() + "'")
			} else {
				b.WriteString(v.String())
			}
		case 'd', 'i':
			if !v.IsNumber() {
				return "", fmt.Errorf("TypeError: %%%c format: a real number is required, not %s", verb, typeName(v))
			}
			if v.IsInteger() {
				fmt.Fprint(&b, v.Integer())
			} else {
				fmt.Fprint(&b, int(v.Float()))
			}
		case 'f':
			if !v.IsNumber() {
				return "", fmt.Errorf("TypeError: must be real number, not %s", typeName(v))
			}
			fmt.Fprintf(&b, "%f", v.Float())
		default:
			return "", fmt.Errorf("ValueError: unsupported format character %q", verb)
		}
	}
	if next < len(vals) {
		return "", errors.New("TypeError: not all arguments converted during string formatting")
	}
	return b.String(), nil
}
