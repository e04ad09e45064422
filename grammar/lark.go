package grammar

import (
	"fmt"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode"
)

// LarkError is a Lark grammar FromLark cannot translate: a syntax error or
// a construct outside the subset, named in Msg with its line.
type LarkError struct {
	Line int
	Msg  string
}

func (e *LarkError) Error() string { return fmt.Sprintf("lark: line %d: %s", e.Line, e.Msg) }

// larkCommon are the terminals of Lark's common.lark that %import may
// name, as GBNF expressions.
var larkCommon = map[string]string{
	"LF":             `"\n"`,
	"CR":             `"\r"`,
	"NEWLINE":        `("\r"? "\n")+`,
	"WS":             `[ \t\f\r\n]+`,
	"WS_INLINE":      `[ \t]+`,
	"DIGIT":          `[0-9]`,
	"HEXDIGIT":       `[0-9a-fA-F]`,
	"INT":            `[0-9]+`,
	"SIGNED_INT":     `[+\x2D]? [0-9]+`,
	"DECIMAL":        `([0-9]+ "." [0-9]* | "." [0-9]+)`,
	"NUMBER":         `([0-9]+ ("." [0-9]*)? | "." [0-9]+)`,
	"SIGNED_NUMBER":  `[+\x2D]? ([0-9]+ ("." [0-9]*)? | "." [0-9]+)`,
	"LETTER":         `[a-zA-Z]`,
	"UCASE_LETTER":   `[A-Z]`,
	"LCASE_LETTER":   `[a-z]`,
	"WORD":           `[a-zA-Z]+`,
	"CNAME":          `[_a-zA-Z] [_a-zA-Z0-9]*`,
	"ESCAPED_STRING": `"\"" ([^"\\] | "\\" [^\n])* "\""`,
}

// FromLark translates a grammar in a subset of Lark (the syntax OpenAI's
// custom tools take) to GBNF, starting at the rule "start":
//
//	rules and terminals   name: expansion, NAME: expansion; continuation
//	                      lines start with "|"; ?name, !name and _name
//	                      are plain rules; priorities (name.2) are dropped
//	expansions            "literal", /regex/ (Go's RE2 syntax, flags i, s,
//	                      m), names, ( ), [ ] (optional), ? * +, ~ n and
//	                      ~ n..m, alternatives with |, "-> alias" (dropped)
//	directives            %import common.NAME (and common.(A, B)) for the
//	                      terminals in larkCommon
//
// %ignore, %declare, %override and %extend, templates and the "i" flag
// of string literals are errors, as are names used but not defined.
// Lark parses with a lexer, which may split text differently from a
// grammar over characters where terminals overlap; a grammar that is
// unambiguous over characters (like Codex's apply_patch grammar) means
// the same. Every error is a *LarkError or a *GBNFError.
func FromLark(src string) (string, error) {
	if len(src) > MaxBytes {
		return "", &LarkError{Msg: fmt.Sprintf("the grammar is larger than %d bytes", MaxBytes)}
	}
	l := &larkTranslator{defined: map[string]bool{}, used: map[string]int{}}
	if err := l.parse(src); err != nil {
		return "", err
	}
	if !l.defined["start"] {
		return "", &LarkError{Line: 1, Msg: "no rule \"start\""}
	}
	for name, line := range l.used {
		if !l.defined[name] {
			return "", &LarkError{Line: line, Msg: fmt.Sprintf("%q is used but not defined (or imported)", name)}
		}
	}
	g := "root ::= " + larkRule("start") + "\n" + l.out.String()
	if err := Check(g); err != nil {
		return "", err
	}
	return g, nil
}

type larkTranslator struct {
	out     strings.Builder
	defined map[string]bool
	used    map[string]int // name -> first line that uses it
	line    int
}

// larkRule is the GBNF rule name of a Lark name (GBNF names take letters,
// digits and dashes).
func larkRule(name string) string {
	return "lark-" + strings.ReplaceAll(name, "_", "-u")
}

func (l *larkTranslator) fail(format string, args ...any) error {
	return &LarkError{Line: l.line, Msg: fmt.Sprintf(format, args...)}
}

// parse reads the definitions, joining continuation lines.
func (l *larkTranslator) parse(src string) error {
	lines := strings.Split(src, "\n")
	type def struct {
		line int
		text string
	}
	var defs []def
	for i, raw := range lines {
		l.line = i + 1
		text := strings.TrimSpace(stripLarkComment(raw))
		switch {
		case text == "":
		case strings.HasPrefix(text, "|"):
			if len(defs) == 0 {
				return l.fail("a continuation line with no rule before it")
			}
			defs[len(defs)-1].text += " " + text
		case strings.HasPrefix(text, "%"):
			if err := l.directive(text); err != nil {
				return err
			}
		default:
			defs = append(defs, def{i + 1, text})
		}
	}
	for _, d := range defs {
		l.line = d.line
		if err := l.definition(d.text); err != nil {
			return err
		}
	}
	return nil
}

// stripLarkComment drops a // comment outside literals and regexes.
func stripLarkComment(s string) string {
	inStr, inRe := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && (inStr || inRe):
			i++
		case c == '"' && !inRe:
			inStr = !inStr
		case c == '/' && !inStr && i+1 < len(s) && s[i+1] == '/' && !inRe:
			return s[:i]
		case c == '/' && !inStr:
			inRe = !inRe
		}
	}
	return s
}

func (l *larkTranslator) directive(text string) error {
	fields := strings.Fields(text)
	switch fields[0] {
	case "%import":
		if len(fields) < 2 {
			return l.fail("%%import needs a name")
		}
		spec := strings.Join(fields[1:], "")
		mod, names, ok := strings.Cut(spec, ".")
		if !ok || mod != "common" {
			return l.fail("only %%import common.NAME is supported, got %q", spec)
		}
		list := []string{names}
		if strings.HasPrefix(names, "(") && strings.HasSuffix(names, ")") {
			list = strings.Split(names[1:len(names)-1], ",")
		}
		for _, n := range list {
			n = strings.TrimSpace(n)
			alias := n
			if a, b, ok := strings.Cut(n, "->"); ok {
				n, alias = strings.TrimSpace(a), strings.TrimSpace(b)
			}
			expr, ok := larkCommon[n]
			if !ok {
				return l.fail("common.%s is not supported (supported: LF, CR, NEWLINE, WS, WS_INLINE, DIGIT, INT, NUMBER, LETTER, WORD, CNAME, ESCAPED_STRING, ...)", n)
			}
			if l.defined[alias] {
				return l.fail("%q is defined twice", alias)
			}
			l.defined[alias] = true
			fmt.Fprintf(&l.out, "%s ::= %s\n", larkRule(alias), expr)
		}
		return nil
	default:
		return l.fail("the directive %s is not supported", fields[0])
	}
}

// definition translates "name: expansion".
func (l *larkTranslator) definition(text string) error {
	colon := -1
	for i, c := range text {
		if c == ':' {
			colon = i
			break
		}
		if !isLarkNameChar(c) && c != '?' && c != '!' && c != '.' {
			break
		}
	}
	if colon <= 0 {
		return l.fail("expected \"name: expansion\", got %q", text)
	}
	name := strings.TrimLeft(text[:colon], "?!")
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name = name[:i] // a priority
	}
	if name == "" {
		return l.fail("a definition with no name")
	}
	if strings.ContainsAny(name, "{}") {
		return l.fail("templates are not supported")
	}
	if l.defined[name] {
		return l.fail("%q is defined twice", name)
	}
	l.defined[name] = true
	p := &larkExpr{l: l, s: text[colon+1:]}
	expr, err := p.alternatives()
	if err != nil {
		return err
	}
	if p.skip(); p.i < len(p.s) {
		return l.fail("unexpected %q", p.s[p.i:])
	}
	fmt.Fprintf(&l.out, "%s ::= %s\n", larkRule(name), expr)
	return nil
}

// larkExpr parses one expansion.
type larkExpr struct {
	l *larkTranslator
	s string
	i int
}

func (p *larkExpr) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *larkExpr) alternatives() (string, error) {
	var alts []string
	for {
		seq, err := p.sequence()
		if err != nil {
			return "", err
		}
		alts = append(alts, seq)
		p.skip()
		if p.i < len(p.s) && p.s[p.i] == '|' {
			p.i++
			continue
		}
		return strings.Join(alts, " | "), nil
	}
}

func (p *larkExpr) sequence() (string, error) {
	var items []string
	for {
		p.skip()
		if p.i >= len(p.s) || p.s[p.i] == '|' || p.s[p.i] == ')' || p.s[p.i] == ']' {
			break
		}
		if strings.HasPrefix(p.s[p.i:], "->") {
			// An alias names the tree node; the text is the same.
			p.i += 2
			p.skip()
			for p.i < len(p.s) && (p.s[p.i] == '_' || unicode.IsLetter(rune(p.s[p.i])) || unicode.IsDigit(rune(p.s[p.i]))) {
				p.i++
			}
			continue
		}
		item, err := p.item()
		if err != nil {
			return "", err
		}
		items = append(items, item)
	}
	if len(items) == 0 {
		return `""`, nil
	}
	return strings.Join(items, " "), nil
}

// item is an atom with its repetition.
func (p *larkExpr) item() (string, error) {
	atom, err := p.atom()
	if err != nil {
		return "", err
	}
	p.skip()
	if p.i >= len(p.s) {
		return atom, nil
	}
	switch p.s[p.i] {
	case '?', '*', '+':
		op := p.s[p.i]
		p.i++
		return atom + string(op), nil
	case '~':
		p.i++
		p.skip()
		j := p.i
		for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
			p.i++
		}
		lo, hi, ranged := strings.Cut(p.s[j:p.i], "..")
		n, err := strconv.Atoi(lo)
		if err != nil {
			return "", p.l.fail("a repetition ~ needs a count, got %q", p.s[j:p.i])
		}
		m := n
		if ranged {
			if m, err = strconv.Atoi(hi); err != nil || m < n {
				return "", p.l.fail("a repetition ~ n..m needs n <= m, got %q", p.s[j:p.i])
			}
		}
		return fmt.Sprintf("%s{%d,%d}", atom, n, m), nil
	}
	return atom, nil
}

func (p *larkExpr) atom() (string, error) {
	c := p.s[p.i]
	switch {
	case c == '(' || c == '[':
		p.i++
		inner, err := p.alternatives()
		if err != nil {
			return "", err
		}
		closer := byte(')')
		if c == '[' {
			closer = ']'
		}
		if p.skip(); p.i >= len(p.s) || p.s[p.i] != closer {
			return "", p.l.fail("missing %q", closer)
		}
		p.i++
		if c == '[' {
			return "(" + inner + ")?", nil
		}
		return "(" + inner + ")", nil
	case c == '"':
		return p.literal()
	case c == '/':
		return p.regex()
	case c == '_' || unicode.IsLetter(rune(c)):
		j := p.i
		for p.i < len(p.s) && (p.s[p.i] == '_' || unicode.IsLetter(rune(p.s[p.i])) || unicode.IsDigit(rune(p.s[p.i]))) {
			p.i++
		}
		name := p.s[j:p.i]
		if _, ok := p.l.used[name]; !ok {
			p.l.used[name] = p.l.line
		}
		return larkRule(name), nil
	}
	return "", p.l.fail("unexpected %q", p.s[p.i:])
}

// closing returns the index of the first delim after p.i that no
// backslash escapes, or len(p.s) when there is none.
func (p *larkExpr) closing(delim byte) int {
	j := p.i + 1
	for j < len(p.s) && p.s[j] != delim {
		if p.s[j] == '\\' {
			j++
		}
		j++
	}
	return j
}

// literal reads a "..." literal (Python string escapes).
func (p *larkExpr) literal() (string, error) {
	j := p.closing('"')
	if j >= len(p.s) {
		return "", p.l.fail("an unterminated string")
	}
	text, err := strconv.Unquote(p.s[p.i : j+1])
	if err != nil {
		return "", p.l.fail("a string literal Lark reads and this translator cannot: %s", p.s[p.i:j+1])
	}
	p.i = j + 1
	if p.i < len(p.s) && p.s[p.i] == 'i' {
		return "", p.l.fail("case-insensitive literals (\"...\"i) are not supported")
	}
	if text == "" {
		return `""`, nil
	}
	return Literal(text), nil
}

// regex reads a /.../flags terminal.
func (p *larkExpr) regex() (string, error) {
	j := p.closing('/')
	if j >= len(p.s) {
		return "", p.l.fail("an unterminated regular expression")
	}
	pattern := strings.ReplaceAll(p.s[p.i+1:j], `\/`, "/")
	p.i = j + 1
	flags := ""
	for p.i < len(p.s) && strings.IndexByte("imslux", p.s[p.i]) >= 0 {
		flags += string(p.s[p.i])
		p.i++
	}
	for _, f := range flags {
		if !strings.ContainsRune("ims", f) {
			return "", p.l.fail("the regular expression flag %q is not supported", f)
		}
	}
	if flags != "" {
		pattern = "(?" + flags + ")" + pattern
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", p.l.fail("regular expression /%s/: %v", pattern, err)
	}
	var b strings.Builder
	if _, err := writeRegex(&b, re); err != nil {
		return "", p.l.fail("regular expression /%s/: %v", pattern, err)
	}
	return "(" + b.String() + ")", nil
}

// isLarkNameChar reports whether c may be part of a Lark rule or terminal
// name.
func isLarkNameChar(c rune) bool {
	return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c)
}
