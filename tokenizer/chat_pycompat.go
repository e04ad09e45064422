package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python semantics that the engine gets wrong and chat templates rely on,
// fixed through the engine's extension points (methods, filters, tests and
// the values we hand it) rather than by changing templates. The snippet
// tests (testdata/chat/snippets.json) pin each of them against Python.

// pyList is a list with Python's indexing: negative indices count from the
// end, out of range is undefined. The engine's own lists are off by one for
// x[-len(x)] (so "a".split(",")[-1] is empty). Messages and every list
// produced by a method or filter are handed to templates as pyList.
type pyList []any

// GetItem implements exec.ItemGetter.
func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// toPyList turns any Go slice or array result into a pyList.
func toPyList(v *exec.Value) *exec.Value {
	if v == nil || !v.IsList() || v.IsError() {
		return v
	}
	if _, ok := v.Interface().(pyList); ok {
		return v
	}
	n := v.Len()
	l := make(pyList, 0, n)
	for i := range n {
		l = append(l, v.Index(i).Interface())
	}
	return &exec.Value{Val: exec.AsValue(l).Val, Safe: v.Safe}
}

// pyResult wraps a method result so that lists become pyList.
func pyResult(x any) any {
	switch l := x.(type) {
	case []string:
		out := make(pyList, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out
	case []any:
		return pyList(l)
	}
	return x
}

// The engine's built-in method and filter names, for delegation: its
// method and filter sets cannot be listed.
var (
	strMethodNames = strings.Fields(`capitalize capwords casefold center count encode
		endswith expandtabs find format format_map isalnum isalpha isascii isdecimal
		isdigit islower isnumeric isprintable isspace istitle isupper join ljust lower
		lstrip partition removeprefix removesuffix replace rfind rjust rpartition rsplit
		rstrip split splitlines startswith strip swapcase title upper zfill`)
	dictMethodNames = strings.Fields(`keys values items get pop setdefault update copy clear`)
	// No append: Python's sandbox refuses to mutate a list.
	listMethodNames = strings.Fields(`reverse copy`)
	filterNames     = strings.Fields(`abs attr batch capitalize center default d dictsort e
		escape filesizeformat first float forceescape format groupby indent int join items
		last length count list lower map max min pprint random rejectattr reject replace
		reverse round safe selectattr select slice sort string striptags sum title tojson
		trim truncate unique upper urlencode urlize wordcount wordwrap xmlattr`)
)

// delegate builds a method set from the engine's, with every list result
// turned into a pyList, and overrides in place of the engine's own.
func delegate[T any](base *exec.MethodSet[T], names []string, overrides map[string]exec.Method[T]) *exec.MethodSet[T] {
	methods := map[string]exec.Method[T]{}
	for _, name := range names {
		if m, ok := base.Get(name); ok {
			methods[name] = func(self T, selfValue *exec.Value, args *exec.VarArgs) (any, error) {
				if err := checkIntArgs(args); err != nil {
					return nil, err
				}
				if selfValue.IsString() && methodGrowth(name, selfValue.String(), args) > maxRenderBytes {
					return nil, errTooLarge
				}
				out, err := m(self, selfValue, args)
				return pyResult(out), err
			}
		}
	}
	for name, m := range overrides {
		methods[name] = m
	}
	return exec.NewMethodSet(methods)
}

func newMethods() exec.Methods {
	base := builtins.Methods
	return exec.Methods{
		Bool:  base.Bool,
		Int:   base.Int,
		Float: base.Float,
		Str: delegate(base.Str, strMethodNames, map[string]exec.Method[string]{
			"strip":   stripMethod(true, true),
			"lstrip":  stripMethod(true, false),
			"rstrip":  stripMethod(false, true),
			"split":   splitMethod(false),
			"rsplit":  splitMethod(true),
			"replace": replaceMethod,
			"count":   countMethod,
		}),
		Dict: delegate(base.Dict, dictMethodNames, map[string]exec.Method[map[string]any]{
			"items":  dictItemsMethod,
			"keys":   dictKeysMethod,
			"values": dictValuesMethod,
			"get":    dictGetMethod,
		}),
		List: delegate(base.List, listMethodNames, nil),
	}
}

// checkIntArgs refuses integer arguments (widths, counts) so large that
// the engine's filters and methods would try to build a string that
// cannot fit in memory: '|center(10**12)' must be an error, not a crash.
func checkIntArgs(args *exec.VarArgs) error {
	check := func(v *exec.Value) error {
		if v != nil && v.IsInteger() && (v.Integer() > maxIntArg || v.Integer() < -maxIntArg) {
			return fmt.Errorf("argument %d is too large", v.Integer())
		}
		return nil
	}
	for _, a := range args.Args {
		if err := check(a); err != nil {
			return err
		}
	}
	for _, a := range args.KwArgs {
		if err := check(a); err != nil {
			return err
		}
	}
	return nil
}

// pyArgs reads up to len(names) positional-or-keyword arguments.
func pyArgs(method string, args *exec.VarArgs, names ...string) ([]*exec.Value, error) {
	out := make([]*exec.Value, len(names))
	if len(args.Args) > len(names) {
		return nil, fmt.Errorf("%s() takes at most %d arguments (%d given)", method, len(names), len(args.Args))
	}
	copy(out, args.Args)
	for k, v := range args.KwArgs {
		i := indexOf(names, k)
		if i < 0 || out[i] != nil {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument %q", method, k)
		}
		out[i] = v
	}
	return out, nil
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

// optString is a string argument that may be missing or None.
func optString(v *exec.Value) (s string, ok bool, err error) {
	if v == nil || v.IsNil() || isPyNone(v) {
		return "", false, nil
	}
	if !v.IsString() {
		return "", false, fmt.Errorf("expected a string, got %s", v.String())
	}
	return v.String(), true, nil
}

func optInt(v *exec.Value, def int) (int, error) {
	if v == nil || v.IsNil() || isPyNone(v) {
		return def, nil
	}
	if !v.IsInteger() {
		return 0, fmt.Errorf("expected an integer, got %s", v.String())
	}
	return v.Integer(), nil
}

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// stripMethod is str.strip / lstrip / rstrip: with no argument (or None)
// all whitespace goes, as in Python, not only spaces.
func stripMethod(left, right bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := pyArgs("strip", args, "chars")
		if err != nil {
			return nil, err
		}
		chars, ok, err := optString(a[0])
		if err != nil {
			return nil, err
		}
		cut := isPySpace
		if ok {
			cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
		}
		if left {
			self = strings.TrimLeftFunc(self, cut)
		}
		if right {
			self = strings.TrimRightFunc(self, cut)
		}
		return self, nil
	}
}

// splitMethod is str.split / str.rsplit(sep=None, maxsplit=-1).
func splitMethod(fromRight bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		a, err := pyArgs("split", args, "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		sep, hasSep, err := optString(a[0])
		if err != nil {
			return nil, err
		}
		maxsplit, err := optInt(a[1], -1)
		if err != nil {
			return nil, err
		}
		if hasSep && sep == "" {
			return nil, errors.New("empty separator")
		}
		var parts []string
		switch {
		case hasSep && !fromRight:
			parts = strings.SplitN(self, sep, splitN(maxsplit))
		case hasSep:
			parts = rsplitSep(self, sep, maxsplit)
		default:
			parts = splitSpace(self, maxsplit, fromRight)
		}
		return pyResult(parts), nil
	}
}

func splitN(maxsplit int) int {
	if maxsplit < 0 {
		return -1
	}
	return maxsplit + 1
}

func rsplitSep(s, sep string, maxsplit int) []string {
	if maxsplit < 0 {
		return strings.Split(s, sep)
	}
	var rev []string
	for len(rev) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// splitSpace splits on runs of whitespace as Python's split() with no
// separator: no empty strings, and after maxsplit splits the rest is kept
// with only its leading (split) or trailing (rsplit) whitespace removed.
func splitSpace(s string, maxsplit int, fromRight bool) []string {
	if !fromRight {
		var out []string
		for {
			s = strings.TrimLeftFunc(s, isPySpace)
			if s == "" {
				return out
			}
			if maxsplit >= 0 && len(out) == maxsplit {
				return append(out, s)
			}
			i := strings.IndexFunc(s, isPySpace)
			if i < 0 {
				return append(out, s)
			}
			out = append(out, s[:i])
			s = s[i:]
		}
	}
	var rev []string
	for {
		s = strings.TrimRightFunc(s, isPySpace)
		if s == "" {
			break
		}
		if maxsplit >= 0 && len(rev) == maxsplit {
			rev = append(rev, s)
			break
		}
		i := strings.LastIndexFunc(s, isPySpace)
		if i < 0 {
			rev = append(rev, s)
			break
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		rev = append(rev, s[i+size:])
		s = s[:i]
	}
	out := make([]string, 0, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// replaceMethod is str.replace(old, new, count=-1).
func replaceMethod(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
	a, err := pyArgs("replace", args, "old", "new", "count")
	if err != nil {
		return nil, err
	}
	if a[0] == nil || a[1] == nil || !a[0].IsString() || !a[1].IsString() {
		return nil, errors.New("replace() takes two string arguments")
	}
	n, err := optInt(a[2], -1)
	if err != nil {
		return nil, err
	}
	if replaceSize(self, a[0].String(), a[1].String(), n) > maxRenderBytes {
		return nil, errTooLarge
	}
	return strings.Replace(self, a[0].String(), a[1].String(), n), nil
}

// countMethod is str.count(sub[, start[, end]]), positions in characters.
func countMethod(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
	a, err := pyArgs("count", args, "sub", "start", "end")
	if err != nil {
		return nil, err
	}
	if a[0] == nil || !a[0].IsString() {
		return nil, errors.New("count() takes a string argument")
	}
	runes := []rune(self)
	start, err := optInt(a[1], 0)
	if err != nil {
		return nil, err
	}
	end, err := optInt(a[2], len(runes))
	if err != nil {
		return nil, err
	}
	start, end = clampSlice(start, len(runes)), clampSlice(end, len(runes))
	if start > end {
		return 0, nil
	}
	return strings.Count(string(runes[start:end]), a[0].String()), nil
}

// clampSlice resolves a Python slice bound against length n.
func clampSlice(i, n int) int {
	if i < 0 {
		i += n
	}
	return min(max(i, 0), n)
}

// Dict methods that keep the dict's order (Python dicts keep insertion
// order; the engine sorts keys). Dicts a template builds and the messages
// we pass keep their order this way.

func dictKeysMethod(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.Args)+len(args.KwArgs) > 0 {
		return nil, errors.New("keys() takes no arguments")
	}
	var out pyList
	for _, k := range self.Keys() {
		out = append(out, k.Interface())
	}
	return out, nil
}

func dictValuesMethod(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.Args)+len(args.KwArgs) > 0 {
		return nil, errors.New("values() takes no arguments")
	}
	var out pyList
	for _, k := range self.Keys() {
		v, _ := self.GetItem(k.Interface())
		out = append(out, v.Interface())
	}
	return out, nil
}

// dictGetMethod is dict.get(key, default=None).
func dictGetMethod(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	a, err := pyArgs("get", args, "key", "default")
	if err != nil {
		return nil, err
	}
	if a[0] == nil {
		return nil, errors.New("get expected at least 1 argument, got 0")
	}
	// Plain values: a *exec.Value result would read as an error.
	if v, ok := self.GetItem(a[0].Interface()); ok {
		return v.Interface(), nil
	}
	if a[1] != nil {
		return a[1].Interface(), nil
	}
	return pyNone, nil
}

func dictItemsMethod(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.Args)+len(args.KwArgs) > 0 {
		return nil, errors.New("items() takes no arguments")
	}
	return orderedItems(self), nil
}

// orderedItems lists a dict's (key, value) pairs in the dict's order.
func orderedItems(d *exec.Value) pyList {
	out := pyList{}
	if dict, ok := d.Interface().(*exec.Dict); ok {
		for _, p := range dict.Pairs {
			out = append(out, pyList{p.Key.Interface(), p.Value.Interface()})
		}
		return out
	}
	for _, k := range d.Keys() {
		v, _ := d.GetItem(k.Interface())
		out = append(out, pyList{k.Interface(), v.Interface()})
	}
	return out
}

// newFilters returns the engine's filters with list results as pyList and
// Python's behaviour where the engine differs.
func newFilters() *exec.FilterSet {
	filters := map[string]exec.FilterFunction{}
	for _, name := range filterNames {
		if f, ok := builtins.Filters.Get(name); ok {
			filters[name] = func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
				if err := checkIntArgs(params); err != nil {
					return exec.AsValue(err)
				}
				if !in.IsError() && filterGrowth(name, in, params) > maxRenderBytes {
					return exec.AsValue(errTooLarge)
				}
				return toPyList(f(e, in, params))
			}
		}
	}
	for _, name := range strings.Fields("map select reject selectattr rejectattr") {
		filters[name] = generatorFilter(filters[name])
	}
	filters["tojson"] = filterToJSON
	filters["safe"] = filterSafe
	for _, name := range strings.Fields("trim upper lower capitalize title replace") {
		filters[name] = softStr(filters[name])
	}
	filters["items"] = filterItems
	filters["dictsort"] = filterDictSort
	return exec.NewFilterSet(filters)
}

// pyIter is the generator that Jinja's map, select, reject, selectattr
// and rejectattr return: it iterates like a list, |list makes it one, and
// |tojson refuses it (json.dumps cannot serialise a generator).
type pyIter []any

func generatorFilter(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		out := f(e, in, params)
		if l, ok := out.Interface().(pyList); ok {
			return exec.AsValue(pyIter(l))
		}
		return out
	}
}

// softStr makes a string filter take any value as Jinja's do, through
// str(): undefined is "", None is "None".
func softStr(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if !in.IsError() && !in.IsString() {
			in = exec.AsValue(in.String())
		}
		return f(e, in, params)
	}
}

// filterItems is Jinja's |items: a dict's pairs in order (the engine's
// walks a Go map in random order and skips ordered dicts).
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	switch {
	case in.IsError():
		return in
	case len(params.Args)+len(params.KwArgs) > 0:
		return exec.AsValue(errors.New("items takes no arguments"))
	case in.IsNil():
		return exec.AsValue(pyList{})
	case !in.IsDict():
		return exec.AsValue(errors.New("items requires a mapping"))
	}
	return exec.AsValue(orderedItems(in))
}

// filterDictSort is Jinja's |dictsort(case_sensitive=false, by='key',
// reverse=false) for any dict.
func filterDictSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	a, err := pyArgs("dictsort", params, "case_sensitive", "by", "reverse")
	if err != nil {
		return exec.AsValue(err)
	}
	caseSensitive := a[0] != nil && a[0].IsTrue()
	reverse := a[2] != nil && a[2].IsTrue()
	by := 0
	if a[1] != nil {
		switch a[1].String() {
		case "key":
		case "value":
			by = 1
		default:
			return exec.AsValue(errors.New("dictsort: by must be 'key' or 'value'"))
		}
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("dictsort requires a mapping"))
	}
	items := orderedItems(in)
	less := func(x, y any) bool {
		vx, vy := exec.ToValue(x), exec.ToValue(y)
		if vx.IsNumber() && vy.IsNumber() {
			return vx.Float() < vy.Float()
		}
		sx, sy := vx.String(), vy.String()
		if !caseSensitive {
			sx, sy = strings.ToLower(sx), strings.ToLower(sy)
		}
		return sx < sy
	}
	slices.SortStableFunc(items, func(i, j any) int {
		a, b := i.(pyList)[by], j.(pyList)[by]
		if reverse {
			a, b = b, a
		}
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
	return exec.AsValue(items)
}

// newTests returns the engine's tests with Python's "sequence" (strings
// and dicts are sequences too).
func newTests() *exec.TestSet {
	sequence := func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		return in.IsString() || in.IsList() || in.IsDict(), nil
	}
	tests := pyTests()
	tests["sequence"] = sequence
	return exec.NewTestSet(map[string]exec.TestFunction{}).
		Update(builtins.Tests).
		Update(exec.NewTestSet(tests))
}
