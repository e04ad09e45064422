package grammar

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// SchemaError is a JSON schema FromJSONSchema cannot turn into a grammar:
// a keyword it does not support, or a keyword with a value it cannot use.
type SchemaError struct {
	// Path is where the keyword sits, as JSON pointer tokens from the
	// schema's root ("properties", "age"); empty for the root.
	Path []string
	// Keyword is the keyword at fault ("minimum"), or "" when the schema
	// itself is at fault (not JSON, not an object).
	Keyword string
	Msg     string
}

// Pointer returns the JSON pointer of the schema that holds the keyword
// ("" for the root, "/properties/age").
func (e *SchemaError) Pointer() string {
	var b strings.Builder
	for _, t := range e.Path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

func (e *SchemaError) Error() string {
	at := e.Pointer()
	if at == "" {
		at = "the root"
	}
	if e.Keyword == "" {
		return fmt.Sprintf("json schema: at %s: %s", at, e.Msg)
	}
	return fmt.Sprintf("json schema: keyword %q at %s: %s", e.Keyword, at, e.Msg)
}

// Keywords without effect on what is generated.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$defs": true, "definitions": true,
	"title": true, "description": true, "default": true, "examples": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// Keywords FromJSONSchema turns into grammar.
var supported = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "anyOf": true, "oneOf": true,
	"items": true, "prefixItems": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true, "format": true, "$ref": true,
}

var (
	objectWords = []string{"properties", "required", "additionalProperties"}
	arrayWords  = []string{"items", "prefixItems", "minItems", "maxItems"}
	stringWords = []string{"minLength", "maxLength", "format"}
)

// The building blocks every JSON grammar shares. ws allows a space or a
// newline with some indentation between tokens, but never unbounded
// whitespace: a model stuck on spaces must still reach the end. Numbers
// are bounded the same way (16 digits before and after the point, an
// exponent of two digits, which stays within float64's range).
var primitives = map[string]string{
	"ws":      `| " " | "\n" [ \t]{0,20}`,
	"string":  `"\"" char* "\""`,
	"char":    `[^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`,
	"integer": `"-"? ("0" | [1-9] [0-9]{0,15})`,
	"number":  `"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?`,
	"boolean": `"true" | "false"`,
	"null":    `"null"`,
	"value":   `object | array | string | number | boolean | null`,
	"object":  `"{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}"`,
	"array":   `"[" ws (value ws ("," ws value ws)*)? "]"`,
}

// What each primitive refers to, so that only the ones used are written.
var primitiveDeps = map[string][]string{
	"string": {"char"}, "value": {"object", "array", "string", "number", "boolean", "null"},
	"object": {"ws", "string", "value"}, "array": {"ws", "value"},
}

// The grammar of a format's content. Dates are valid calendar dates
// except February 29 (which depends on the year): a subset of RFC 3339's,
// so that a validator that checks formats accepts every one.
const (
	dateGrammar = `[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))`
	timeGrammar = `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])`
)

var formats = map[string]string{
	"date":      dateGrammar,
	"time":      timeGrammar,
	"date-time": dateGrammar + ` "T" ` + timeGrammar,
	"uuid":      `[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}`,
}

// builder collects named rules.
type builder struct {
	names []string
	rules map[string]string
	used  map[string]bool // primitives
}

func newBuilder() *builder {
	return &builder{rules: map[string]string{}, used: map[string]bool{}}
}

// prim marks a primitive rule as used and returns its name.
func (b *builder) prim(name string) string {
	if !b.used[name] {
		b.used[name] = true
		for _, d := range primitiveDeps[name] {
			b.prim(d)
		}
	}
	return name
}

// add adds a rule named after hint and returns its name.
func (b *builder) add(hint, body string) string {
	name := b.reserve(hint)
	b.rules[name] = body
	return name
}

// reserve picks a free rule name after hint.
func (b *builder) reserve(hint string) string {
	var s strings.Builder
	for _, r := range hint {
		if r < 0x80 && isWordChar(byte(r)) {
			s.WriteRune(r)
		} else {
			s.WriteByte('-')
		}
	}
	base := strings.Trim(s.String(), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "r"
	}
	name := base
	for i := 2; ; i++ {
		_, taken := b.rules[name]
		if !taken && primitives[name] == "" {
			break
		}
		name = base + "-" + strconv.Itoa(i)
	}
	b.rules[name] = ""
	b.names = append(b.names, name)
	return name
}

func (b *builder) String() string {
	var s strings.Builder
	for _, n := range b.names {
		fmt.Fprintf(&s, "%s ::= %s\n", n, b.rules[n])
	}
	for _, n := range []string{"value", "object", "array", "string", "char", "integer", "number", "boolean", "null", "ws"} {
		if b.used[n] {
			fmt.Fprintf(&s, "%s ::= %s\n", n, primitives[n])
		}
	}
	return s.String()
}

// AnyJSONObject returns a grammar for any JSON object (OpenAI's
// response_format json_object).
func AnyJSONObject() string {
	b := newBuilder()
	b.add("root", b.prim("object"))
	return b.String()
}

// FromJSONSchema returns a grammar for the JSON texts that the schema (a
// JSON document) accepts, within the supported keywords (see the package
// doc). Every error is a *SchemaError.
func FromJSONSchema(schema []byte) (string, error) {
	if len(schema) > MaxBytes {
		return "", &SchemaError{Msg: fmt.Sprintf("the schema is larger than %d bytes", MaxBytes)}
	}
	root, err := parseJSON(schema)
	if err != nil {
		return "", &SchemaError{Msg: "not valid JSON: " + err.Error()}
	}
	c := &converter{root: root, b: newBuilder(), refs: map[string]string{}}
	name := c.b.reserve("root")
	expr, err := c.schema(root, nil, "root")
	if err != nil {
		return "", err
	}
	c.b.rules[name] = expr
	g := c.b.String()
	if err := Check(g); err != nil {
		return "", &SchemaError{Msg: "the schema gives a grammar llama.cpp cannot use: " + err.Error()}
	}
	return g, nil
}

type converter struct {
	root *value
	b    *builder
	// refs maps a $ref target to its rule; a target being converted is
	// already there, so that recursive schemas refer to their own rule.
	refs map[string]string
}

func serr(path []string, kw, format string, args ...any) *SchemaError {
	return &SchemaError{Path: slices.Clone(path), Keyword: kw, Msg: fmt.Sprintf(format, args...)}
}

func child(path []string, tokens ...string) []string {
	return append(slices.Clip(path), tokens...)
}

// schema returns a GBNF expression for the schema v found at path; hint
// names the rules it makes.
func (c *converter) schema(v *value, path []string, hint string) (string, error) {
	switch v.kind {
	case jsonBool:
		if v.b {
			return c.b.prim("value"), nil
		}
		return "", serr(path, "", "the schema false accepts nothing")
	case jsonObject:
	default:
		return "", serr(path, "", "a schema must be an object or a boolean, not %s", v.kind)
	}
	for _, k := range v.keys {
		if !supported[k] && !annotations[k] {
			return "", serr(path, k, "not supported; the supported keywords are type, properties, required, additionalProperties, enum, const, anyOf, oneOf, items, prefixItems, minItems, maxItems, minLength, maxLength, format (date, time, date-time, uuid) and $ref to $defs or definitions")
		}
	}
	// Keywords that replace the rest.
	for _, kw := range []string{"$ref", "anyOf", "oneOf"} {
		if x := v.get(kw); x != nil {
			for _, k := range v.keys {
				if k != kw && supported[k] {
					return "", serr(path, k, "not supported beside %s", kw)
				}
			}
			switch kw {
			case "$ref":
				return c.ref(x, path)
			default:
				return c.anyOf(x, child(path, kw), kw, hint)
			}
		}
	}
	types, err := c.types(v, path)
	if err != nil {
		return "", err
	}
	if x := v.get("const"); x != nil {
		return c.enum([]*value{x}, types, path, "const")
	}
	if x := v.get("enum"); x != nil {
		if x.kind != jsonArray || len(x.elems) == 0 {
			return "", serr(path, "enum", "must be a non-empty array")
		}
		return c.enum(x.elems, types, path, "enum")
	}
	if len(types) == 0 {
		return c.b.prim("value"), nil
	}
	var alts []string
	for _, t := range types {
		var e string
		switch t {
		case "object":
			e, err = c.object(v, path, hint)
		case "array":
			e, err = c.array(v, path, hint)
		case "string":
			e, err = c.str(v, path, hint)
		case "number", "integer", "boolean", "null":
			e = c.b.prim(t)
		}
		if err != nil {
			return "", err
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

// types returns the schema's types: "type" as given, else what its
// keywords imply, else none (any value).
func (c *converter) types(v *value, path []string) ([]string, error) {
	t := v.get("type")
	if t == nil {
		var ts []string
		for _, g := range []struct {
			t     string
			words []string
		}{{"object", objectWords}, {"array", arrayWords}, {"string", stringWords}} {
			for _, w := range g.words {
				if v.get(w) != nil {
					ts = append(ts, g.t)
					break
				}
			}
		}
		return ts, nil
	}
	var names []*value
	switch t.kind {
	case jsonString:
		names = []*value{t}
	case jsonArray:
		names = t.elems
		if len(names) == 0 {
			return nil, serr(path, "type", "must not be an empty array")
		}
	default:
		return nil, serr(path, "type", "must be a string or an array of strings")
	}
	var ts []string
	for _, n := range names {
		if n.kind != jsonString {
			return nil, serr(path, "type", "must be a string or an array of strings")
		}
		switch n.str {
		case "object", "array", "string", "number", "integer", "boolean", "null":
			if slices.Contains(ts, n.str) {
				return nil, serr(path, "type", "lists %q twice", n.str)
			}
			ts = append(ts, n.str)
		default:
			return nil, serr(path, "type", "unknown type %q; use object, array, string, number, integer, boolean or null", n.str)
		}
	}
	return ts, nil
}

// ref follows a local $ref ("#", "#/$defs/name", any JSON pointer into
// the schema).
func (c *converter) ref(x *value, path []string) (string, error) {
	if x.kind != jsonString {
		return "", serr(path, "$ref", "must be a string")
	}
	target := x.str
	if name, ok := c.refs[target]; ok {
		return name, nil
	}
	if !strings.HasPrefix(target, "#") {
		return "", serr(path, "$ref", "only local references (#/$defs/name) are supported, not %q", target)
	}
	v := c.root
	var tpath []string
	if ptr := target[1:]; ptr != "" {
		if ptr[0] != '/' {
			return "", serr(path, "$ref", "%q is not a JSON pointer (#/$defs/name)", target)
		}
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
			tpath = append(tpath, tok)
			var next *value
			switch v.kind {
			case jsonObject:
				next = v.get(tok)
			case jsonArray:
				if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v.elems) {
					next = v.elems[i]
				}
			}
			if next == nil {
				return "", serr(path, "$ref", "%q points to nothing in the schema", target)
			}
			v = next
		}
	}
	hint := "ref"
	if len(tpath) > 0 {
		hint = tpath[len(tpath)-1]
	}
	name := c.b.reserve(hint)
	c.refs[target] = name
	expr, err := c.schema(v, tpath, hint)
	if err != nil {
		return "", err
	}
	c.b.rules[name] = expr
	return name, nil
}

func (c *converter) anyOf(x *value, path []string, kw, hint string) (string, error) {
	if x.kind != jsonArray || len(x.elems) == 0 {
		return "", serr(path[:len(path)-1], kw, "must be a non-empty array of schemas")
	}
	alts := make([]string, 0, len(x.elems))
	for i, s := range x.elems {
		e, err := c.schema(s, child(path, strconv.Itoa(i)), hint)
		if err != nil {
			return "", err
		}
		alts = append(alts, e)
	}
	return c.b.add(hint, strings.Join(alts, " | ")), nil
}

// enum is a choice of JSON values, written compactly. Values whose JSON
// type the schema's "type" excludes are dropped.
func (c *converter) enum(vals []*value, types []string, path []string, kw string) (string, error) {
	var alts []string
	for _, v := range vals {
		if len(types) > 0 && !typeAllows(types, v) {
			continue
		}
		var s strings.Builder
		v.encode(&s)
		lit := Literal(s.String())
		if !slices.Contains(alts, lit) {
			alts = append(alts, lit)
		}
	}
	if len(alts) == 0 {
		return "", serr(path, kw, "no value matches the schema's type")
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

func typeAllows(types []string, v *value) bool {
	for _, t := range types {
		switch {
		case t == "null" && v.kind == jsonNull, t == "boolean" && v.kind == jsonBool,
			t == "string" && v.kind == jsonString, t == "array" && v.kind == jsonArray,
			t == "object" && v.kind == jsonObject, t == "number" && v.kind == jsonNumber:
			return true
		case t == "integer" && v.kind == jsonNumber:
			if r, ok := new(big.Rat).SetString(v.num.String()); ok && r.IsInt() {
				return true
			}
		}
	}
	return false
}

// count reads a non-negative integer keyword, or def when absent.
func count(v *value, path []string, kw string, def int) (int, error) {
	x := v.get(kw)
	if x == nil {
		return def, nil
	}
	if x.kind != jsonNumber {
		return 0, serr(path, kw, "must be a non-negative integer")
	}
	r, ok := new(big.Rat).SetString(x.num.String())
	if !ok || !r.IsInt() || r.Sign() < 0 {
		return 0, serr(path, kw, "must be a non-negative integer")
	}
	if !r.Num().IsInt64() || r.Num().Int64() > MaxRepetition {
		return 0, serr(path, kw, "must be at most %d here: llama.cpp's grammars repeat an item at most that often", MaxRepetition)
	}
	return int(r.Num().Int64()), nil
}

// bounds reads a pair of count keywords (minLength and maxLength,
// minItems and maxItems): lo defaults to 0, hi to -1 (unbounded), and hi
// may not be below lo.
func bounds(v *value, path []string, minKw, maxKw string) (lo, hi int, err error) {
	if lo, err = count(v, path, minKw, 0); err != nil {
		return 0, 0, err
	}
	if hi, err = count(v, path, maxKw, -1); err != nil {
		return 0, 0, err
	}
	if hi >= 0 && hi < lo {
		return 0, 0, serr(path, maxKw, "is below %s", minKw)
	}
	return lo, hi, nil
}

// repeat returns item{min,max} (max < 0: unbounded) in GBNF.
func repeat(item string, min, max int) string {
	switch {
	case max < 0 && min == 0:
		return item + "*"
	case max < 0 && min == 1:
		return item + "+"
	case max < 0:
		return fmt.Sprintf("%s{%d,}", item, min)
	case max == 0:
		return `""`
	case min == max && min == 1:
		return item
	case min == max:
		return fmt.Sprintf("%s{%d}", item, min)
	case min == 0 && max == 1:
		return item + "?"
	default:
		return fmt.Sprintf("%s{%d,%d}", item, min, max)
	}
}

func (c *converter) str(v *value, path []string, hint string) (string, error) {
	if f := v.get("format"); f != nil {
		if f.kind != jsonString {
			return "", serr(path, "format", "must be a string")
		}
		body, ok := formats[f.str]
		if !ok {
			return "", serr(path, "format", "the format %q is not supported; use date, time, date-time or uuid, or leave it out", f.str)
		}
		for _, kw := range []string{"minLength", "maxLength"} {
			if v.get(kw) != nil {
				return "", serr(path, kw, "not supported beside format")
			}
		}
		return c.b.add(hint+"-"+f.str, `"\"" `+body+` "\""`), nil
	}
	lo, hi, err := bounds(v, path, "minLength", "maxLength")
	if err != nil {
		return "", err
	}
	if lo == 0 && hi < 0 {
		return c.b.prim("string"), nil
	}
	return c.b.add(hint+"-string", `"\"" `+repeat(c.b.prim("char"), lo, hi)+` "\""`), nil
}

func (c *converter) object(v *value, path []string, hint string) (string, error) {
	var names []string
	var exprs []string
	defined := map[string]bool{}
	if p := v.get("properties"); p != nil {
		if p.kind != jsonObject {
			return "", serr(path, "properties", "must be an object of schemas")
		}
		for i, k := range p.keys {
			s := p.vals[i]
			if s.kind == jsonBool && !s.b {
				continue // the property must not appear
			}
			e, err := c.schema(s, child(path, "properties", k), hint+"-"+k)
			if err != nil {
				return "", err
			}
			names = append(names, k)
			defined[k] = true
			exprs = append(exprs, Literal(quoteJSON(k))+" ws \":\" ws "+e)
		}
	}
	if v.get("properties") == nil && v.get("additionalProperties") == nil {
		if v.get("required") != nil {
			return "", serr(path, "required", "needs properties that define the required names")
		}
		return c.b.prim("object"), nil
	}
	required := map[string]bool{}
	if r := v.get("required"); r != nil {
		if r.kind != jsonArray {
			return "", serr(path, "required", "must be an array of property names")
		}
		for _, n := range r.elems {
			if n.kind != jsonString {
				return "", serr(path, "required", "must be an array of property names")
			}
			if !defined[n.str] {
				return "", serr(path, "required", "names %q, which properties does not define (or defines as false)", n.str)
			}
			required[n.str] = true
		}
	}
	// Additional properties: absent means none (what OpenAI's strict mode
	// asks for, and what vLLM's xgrammar assumes).
	extra := ""
	if a := v.get("additionalProperties"); a != nil {
		switch {
		case a.kind == jsonBool && !a.b:
		case a.kind == jsonBool || a.kind == jsonObject:
			e, err := c.schema(a, child(path, "additionalProperties"), hint+"-extra")
			if err != nil {
				return "", err
			}
			extra = c.b.add(hint+"-kv", c.b.prim("string")+` ws ":" ws `+e)
		default:
			return "", serr(path, "additionalProperties", "must be a boolean or a schema")
		}
	}
	c.b.prim("ws")
	// first_i: the members from property i on when none is written yet;
	// after_i: the same after one was written (each starts with a comma).
	n := len(names)
	first := make([]string, n+1)
	after := make([]string, n+1)
	switch extra {
	case "":
		first[n], after[n] = `""`, `""`
	default:
		after[n] = c.b.add(hint+"-more", `("," ws `+extra+` ws)*`)
		first[n] = c.b.add(hint+"-rest", `(`+extra+` ws ("," ws `+extra+` ws)*)?`)
	}
	for i := n - 1; i >= 0; i-- {
		kv := exprs[i] + " ws"
		if required[names[i]] {
			after[i] = c.b.add(hint+"-after", `"," ws `+kv+" "+after[i+1])
			first[i] = c.b.add(hint+"-first", kv+" "+after[i+1])
		} else {
			after[i] = c.b.add(hint+"-after", `("," ws `+kv+`)? `+after[i+1])
			first[i] = c.b.add(hint+"-first", kv+" "+after[i+1]+" | "+first[i+1])
		}
	}
	return c.b.add(hint+"-object", `"{" ws `+first[0]+` "}"`), nil
}

func (c *converter) array(v *value, path []string, hint string) (string, error) {
	var prefix []string
	if p := v.get("prefixItems"); p != nil {
		if p.kind != jsonArray {
			return "", serr(path, "prefixItems", "must be an array of schemas")
		}
		for i, s := range p.elems {
			e, err := c.schema(s, child(path, "prefixItems", strconv.Itoa(i)), hint+"-"+strconv.Itoa(i))
			if err != nil {
				return "", err
			}
			prefix = append(prefix, e)
		}
	}
	lo, hi, err := bounds(v, path, "minItems", "maxItems")
	if err != nil {
		return "", err
	}
	item := ""
	if it := v.get("items"); it == nil || it.kind != jsonBool || it.b {
		if it == nil {
			item = c.b.prim("value")
		} else {
			e, err := c.schema(it, child(path, "items"), hint+"-item")
			if err != nil {
				return "", err
			}
			item = e
		}
	}
	k := len(prefix)
	if item == "" {
		// No items beyond the prefix.
		if lo > k {
			return "", serr(path, "minItems", "asks for more items than prefixItems allows with items false")
		}
		if hi < 0 || hi > k {
			hi = k
		}
	}
	c.b.prim("ws")
	// The tail: items after the prefix, each with its comma.
	tail := `""`
	if item != "" && (hi < 0 || hi > k) {
		rlo, rhi := max(lo-k, 0), -1
		if hi >= 0 {
			rhi = hi - k
		}
		if k == 0 {
			// No prefix: the first item has no comma.
			more := c.b.add(hint+"-more", `"," ws `+item+" ws")
			var body string
			switch {
			case rlo == 0 && rhi < 0:
				body = "(" + item + " ws " + more + "*)?"
			case rlo == 0:
				body = "(" + item + " ws " + repeat(more, 0, rhi-1) + ")?"
			case rhi < 0:
				body = item + " ws " + repeat(more, rlo-1, -1)
			default:
				body = item + " ws " + repeat(more, rlo-1, rhi-1)
			}
			return c.b.add(hint+"-array", `"[" ws `+body+` "]"`), nil
		}
		tail = repeat(c.b.add(hint+"-more", `"," ws `+item+" ws"), rlo, rhi)
	}
	// seq_j: the items from j on, j items written; the first has no comma.
	seq := tail
	for j := k - 1; j >= 0; j-- {
		if hi >= 0 && j >= hi {
			seq = `""`
			continue
		}
		sep := ""
		if j > 0 {
			sep = `"," ws `
		}
		body := sep + prefix[j] + " ws " + seq
		if j >= lo {
			body = "(" + body + ")?"
		}
		seq = c.b.add(hint+"-items", body)
	}
	return c.b.add(hint+"-array", `"[" ws `+seq+` "]"`), nil
}
