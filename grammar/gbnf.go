package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits Check enforces. llama.cpp's parser and matcher recurse without
// bounds and expand repetitions in place, so a grammar beyond these would
// overflow its C stack or take gigabytes; the client gets a 400 instead.
const (
	// MaxBytes bounds a grammar's text, a schema and a pattern.
	MaxBytes = 1 << 20
	// MaxRepetition is llama.cpp's own bound on m and n in {m,n}.
	MaxRepetition = 2000
	// MaxNesting bounds nested parentheses.
	MaxNesting = 200
	// MaxElements bounds the grammar's size once llama.cpp has expanded
	// its repetitions (one element per character, class range and rule
	// reference).
	MaxElements = 1 << 20
	// MaxLeftDepth bounds chains of rules that start with a rule
	// reference, which llama.cpp follows recursively at every step.
	MaxLeftDepth = 1000
)

// GBNFError is a grammar Check refuses, with the byte offset and line of
// the fault when it has one.
type GBNFError struct {
	// Line and Col are 1-based; 0 when the fault has no single place (an
	// undefined rule, left recursion, the size).
	Line, Col int
	Msg       string
}

func (e *GBNFError) Error() string {
	if e.Line == 0 {
		return "gbnf: " + e.Msg
	}
	return fmt.Sprintf("gbnf: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// gItem is one element of a sequence as llama.cpp sees it before
// expanding repetitions: a run of terminals (a literal, a class, '.', a
// token) or a reference to a rule (named, or synthesized for a group),
// repeated min..max times (max -1: unbounded).
type gItem struct {
	ref      string // "" for terminals
	term     *gTerm // the terminal when ref is ""
	elems    int    // elements one copy takes
	nullable bool   // a terminal run that matches the empty string ("")
	min, max int
}

// gTerm is a terminal: a literal, a class, '.' or a token.
type gTerm struct {
	kind   byte   // '"', '[', '.', '<'
	runes  []rune // a literal's characters
	ranges []rune // a class's ranges, lo and hi pairs
	neg    bool   // [^...]
}

type gRule struct {
	alts    [][]gItem
	defined bool
}

type gbnfParser struct {
	src   string
	pos   int
	rules map[string]*gRule
	order []string
	nGen  int
	depth int
}

// parseGBNF parses g without the semantic checks.
func parseGBNF(g string) (*gbnfParser, error) {
	if len(g) > MaxBytes {
		return nil, &GBNFError{Msg: fmt.Sprintf("the grammar is larger than %d bytes", MaxBytes)}
	}
	if !utf8.ValidString(g) {
		return nil, &GBNFError{Msg: "the grammar is not valid UTF-8"}
	}
	if strings.IndexByte(g, 0) >= 0 {
		return nil, &GBNFError{Msg: "the grammar contains a NUL byte"}
	}
	p := &gbnfParser{src: g, rules: map[string]*gRule{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p, nil
}

// Check parses g as llama.cpp's GBNF (start rule "root") and checks what
// llama.cpp would refuse, plus the limits above: syntax, undefined rules,
// a missing root, left recursion (also through rules that match the empty
// string, as llama.cpp detects it), {m,n} with n < m or beyond
// MaxRepetition, and the size. A grammar that passes is still parsed by
// the runtime (it knows the vocabulary for <token> references).
func Check(g string) error {
	p, err := parseGBNF(g)
	if err != nil {
		return err
	}
	return p.check()
}

func (p *gbnfParser) fail(at int, format string, args ...any) error {
	line := 1 + strings.Count(p.src[:at], "\n")
	col := at - strings.LastIndexByte(p.src[:at], '\n')
	return &GBNFError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c >= '0' && c <= '9'
}

func (p *gbnfParser) peek(off int) byte {
	if p.pos+off < len(p.src) {
		return p.src[p.pos+off]
	}
	return 0
}

func (p *gbnfParser) space(newlineOK bool) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\r' && p.src[p.pos] != '\n' {
				p.pos++
			}
		case newlineOK && (c == '\r' || c == '\n'):
			p.pos++
		default:
			return
		}
	}
}

func (p *gbnfParser) name() (string, error) {
	start := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return "", p.fail(start, "expecting a rule name (letters, digits and '-')")
	}
	return p.src[start:p.pos], nil
}

func (p *gbnfParser) rule(name string) *gRule {
	r := p.rules[name]
	if r == nil {
		r = &gRule{}
		p.rules[name] = r
		p.order = append(p.order, name)
	}
	return r
}

func (p *gbnfParser) parse() error {
	p.space(true)
	for p.pos < len(p.src) {
		name, err := p.name()
		if err != nil {
			return err
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.fail(p.pos, "expecting ::= after the rule name %q", name)
		}
		p.pos += 3
		p.space(true)
		alts, err := p.alternates(false)
		if err != nil {
			return err
		}
		r := p.rule(name)
		r.alts, r.defined = alts, true
		switch p.peek(0) {
		case '\r':
			p.pos++
			if p.peek(0) == '\n' {
				p.pos++
			}
		case '\n':
			p.pos++
		case 0:
		default:
			return p.fail(p.pos, "unexpected %q; expecting the end of the rule", p.src[p.pos:p.pos+1])
		}
		p.space(true)
	}
	if len(p.rules) == 0 {
		return &GBNFError{Msg: "the grammar has no rules"}
	}
	return nil
}

func (p *gbnfParser) alternates(nested bool) ([][]gItem, error) {
	var alts [][]gItem
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.peek(0) != '|' {
			return alts, nil
		}
		p.pos++
		p.space(true)
	}
}

// char parses one character of a literal or class, escapes included.
func (p *gbnfParser) char() (rune, error) {
	if p.pos >= len(p.src) {
		return 0, p.fail(p.pos, "unexpected end of input")
	}
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	hex := 0
	switch c := p.peek(1); c {
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	case 't':
		p.pos += 2
		return '\t', nil
	case 'r':
		p.pos += 2
		return '\r', nil
	case 'n':
		p.pos += 2
		return '\n', nil
	case '\\', '"', '[', ']':
		p.pos += 2
		return rune(c), nil
	default:
		return 0, p.fail(p.pos, "unknown escape; use \\x, \\u, \\U, \\t, \\r, \\n, \\\\, \\\", \\[ or \\]")
	}
	start := p.pos
	p.pos += 2
	v := rune(0)
	for range hex {
		c := p.peek(0)
		var d rune
		switch {
		case c >= '0' && c <= '9':
			d = rune(c - '0')
		case c >= 'a' && c <= 'f':
			d = rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = rune(c-'A') + 10
		default:
			return 0, p.fail(start, "expecting %d hex digits", hex)
		}
		v = v<<4 | d
		p.pos++
	}
	return v, nil
}

func (p *gbnfParser) integer() (int, error) {
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == start {
		return 0, p.fail(start, "expecting an integer")
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	if err != nil || n > MaxRepetition {
		return 0, p.fail(start, "repetition counts must be at most %d", MaxRepetition)
	}
	return n, nil
}

func (p *gbnfParser) sequence(nested bool) ([]gItem, error) {
	var seq []gItem
	last := -1 // index in seq of the item a repetition applies to
	repeat := func(at, min, max int) error {
		if last < 0 {
			return p.fail(at, "a repetition must follow an item")
		}
		it := &seq[last]
		if it.min != 1 || it.max != 1 {
			// llama.cpp applies it to the reference it made for the first
			// repetition: a rule that matches the empty string when min is 0.
			inner := gItem{ref: p.synth(it), elems: 1, min: 1, max: 1}
			seq[last] = inner
			it = &seq[last]
		}
		it.min, it.max = min, max
		return nil
	}
	for p.pos < len(p.src) {
		at := p.pos
		switch c := p.src[p.pos]; {
		case c == '"':
			p.pos++
			t := &gTerm{kind: '"'}
			for p.peek(0) != '"' {
				if p.pos >= len(p.src) {
					return nil, p.fail(at, "unterminated literal")
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				t.runes = append(t.runes, r)
			}
			p.pos++
			if n := len(t.runes); n == 0 {
				last = -1 // llama.cpp: nothing to repeat
			} else {
				seq = append(seq, gItem{term: t, elems: n, min: 1, max: 1})
				last = len(seq) - 1
			}
		case c == '[':
			p.pos++
			t := &gTerm{kind: '['}
			if p.peek(0) == '^' {
				p.pos++
				t.neg = true
			}
			n := 0
			for p.peek(0) != ']' {
				if p.pos >= len(p.src) {
					return nil, p.fail(at, "unterminated character class")
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				n++
				if p.peek(0) == '-' && p.peek(1) != ']' {
					if p.pos+1 >= len(p.src) {
						return nil, p.fail(at, "unterminated character class")
					}
					p.pos++
					if hi, err = p.char(); err != nil {
						return nil, err
					}
					n++
				}
				t.ranges = append(t.ranges, lo, hi)
			}
			p.pos++
			if n == 0 {
				last = -1 // llama.cpp: an empty class adds nothing
			} else {
				seq = append(seq, gItem{term: t, elems: n, min: 1, max: 1})
				last = len(seq) - 1
			}
		case c == '<' || c == '!':
			if c == '!' {
				p.pos++
				if p.peek(0) != '<' {
					return nil, p.fail(p.pos, "expecting '<' after '!'")
				}
			}
			end := strings.IndexByte(p.src[p.pos:], '>')
			if end < 0 {
				return nil, p.fail(at, "expecting '>' to close the token")
			}
			tok := p.src[p.pos+1 : p.pos+end]
			if strings.HasPrefix(tok, "[") {
				if !strings.HasSuffix(tok, "]") || len(tok) < 3 || strings.Trim(tok[1:len(tok)-1], "0123456789") != "" {
					return nil, p.fail(at, "a token id is written <[123]>")
				}
				if _, err := strconv.ParseInt(tok[1:len(tok)-1], 10, 32); err != nil {
					return nil, p.fail(at, "token id out of range")
				}
			}
			p.pos += end + 1
			seq = append(seq, gItem{term: &gTerm{kind: '<'}, elems: 1, min: 1, max: 1})
			last = len(seq) - 1
		case isWordChar(c):
			name, _ := p.name()
			p.rule(name)
			seq = append(seq, gItem{ref: name, elems: 1, min: 1, max: 1})
			last = len(seq) - 1
		case c == '(':
			p.depth++
			if p.depth > MaxNesting {
				return nil, p.fail(at, "parentheses nested deeper than %d", MaxNesting)
			}
			p.pos++
			p.space(true)
			alts, err := p.alternates(true)
			if err != nil {
				return nil, err
			}
			if p.peek(0) != ')' {
				return nil, p.fail(p.pos, "expecting ')' to close the group opened at column %d", at-strings.LastIndexByte(p.src[:at], '\n'))
			}
			p.pos++
			p.depth--
			name := p.newRule(alts)
			seq = append(seq, gItem{ref: name, elems: 1, min: 1, max: 1})
			last = len(seq) - 1
		case c == '.':
			p.pos++
			seq = append(seq, gItem{term: &gTerm{kind: '.'}, elems: 1, min: 1, max: 1})
			last = len(seq) - 1
		case c == '*' || c == '+' || c == '?':
			p.pos++
			lo, hi := 0, -1
			switch c {
			case '+':
				lo = 1
			case '?':
				hi = 1
			}
			if err := repeat(at, lo, hi); err != nil {
				return nil, err
			}
		case c == '{':
			p.pos++
			p.space(nested)
			lo, err := p.integer()
			if err != nil {
				return nil, err
			}
			p.space(nested)
			hi := lo
			switch p.peek(0) {
			case '}':
			case ',':
				p.pos++
				p.space(nested)
				hi = -1
				if c := p.peek(0); c >= '0' && c <= '9' {
					if hi, err = p.integer(); err != nil {
						return nil, err
					}
					p.space(nested)
				}
				if p.peek(0) != '}' {
					return nil, p.fail(p.pos, "expecting '}'")
				}
			default:
				return nil, p.fail(p.pos, "expecting ',' or '}'")
			}
			p.pos++
			if hi >= 0 && hi < lo {
				return nil, p.fail(at, "{%d,%d}: the maximum is below the minimum", lo, hi)
			}
			if err := repeat(at, lo, hi); err != nil {
				return nil, err
			}
		default:
			return seq, nil
		}
		p.space(nested)
	}
	return seq, nil
}

// newRule adds a synthesized rule; its name cannot clash with a GBNF name.
func (p *gbnfParser) newRule(alts [][]gItem) string {
	p.nGen++
	name := "_" + strconv.Itoa(p.nGen)
	r := p.rule(name)
	r.alts, r.defined = alts, true
	return name
}

// synth wraps a repeated item in a rule of its own, as llama.cpp's
// rewrite does.
func (p *gbnfParser) synth(it *gItem) string {
	return p.newRule([][]gItem{{*it}})
}

func (p *gbnfParser) check() error {
	root := p.rules["root"]
	if root == nil || !root.defined {
		return &GBNFError{Msg: `the grammar has no "root" rule`}
	}
	for _, name := range p.order {
		if !p.rules[name].defined {
			return &GBNFError{Msg: fmt.Sprintf("rule %q is used but not defined", name)}
		}
	}
	// Nullable rules, in linear time: an alternative is nullable once each
	// of its items is; waiting lists what each rule's nullability unblocks.
	nullable := map[string]bool{}
	itemNullable := func(it gItem) bool {
		return it.min == 0 || it.nullable || (it.ref != "" && nullable[it.ref])
	}
	type altRef struct {
		rule string
		alt  int
	}
	pending := map[altRef]int{}
	waiting := map[string][]altRef{}
	var queue []string
	for _, name := range p.order {
		for ai, alt := range p.rules[name].alts {
			n, dead := 0, false
			for _, it := range alt {
				switch {
				case it.min == 0 || it.nullable:
				case it.ref == "":
					dead = true
				default:
					n++
					waiting[it.ref] = append(waiting[it.ref], altRef{name, ai})
				}
			}
			if dead {
				pending[altRef{name, ai}] = -1
				continue
			}
			pending[altRef{name, ai}] = n
			if n == 0 && !nullable[name] {
				nullable[name] = true
				queue = append(queue, name)
			}
		}
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		for _, w := range waiting[name] {
			if pending[w] <= 0 {
				continue
			}
			pending[w]--
			if pending[w] == 0 && !nullable[w.rule] {
				nullable[w.rule] = true
				queue = append(queue, w.rule)
			}
		}
	}
	// Size, unbounded repetitions of what can be empty, and the leftmost
	// reference graph.
	size := 0
	left := map[string][]string{}
	for _, name := range p.order {
		r := p.rules[name]
		for _, alt := range r.alts {
			size++
			leftmost := true
			for _, it := range alt {
				base := it.elems
				if it.ref != "" {
					base = 1
				}
				if it.ref != "" && nullable[it.ref] && it.max < 0 {
					return &GBNFError{Msg: fmt.Sprintf("rule %q repeats without bound something that can be empty (llama.cpp refuses it as left recursion)", displayName(name))}
				}
				switch {
				case it.max < 0:
					size += base*max(it.min, 1) + base + 3
				default:
					size += base*it.min + (it.max-it.min)*(base+3)
				}
				if leftmost && it.ref != "" {
					left[name] = append(left[name], it.ref)
				}
				leftmost = leftmost && itemNullable(it)
			}
			if size > MaxElements {
				return &GBNFError{Msg: fmt.Sprintf("the grammar expands to more than %d elements; make it smaller", MaxElements)}
			}
		}
	}
	// Left recursion and depth: a depth-first search over leftmost edges.
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	depth := map[string]int{}
	var visit func(name string, d int) error
	visit = func(name string, d int) error {
		switch state[name] {
		case active:
			return &GBNFError{Msg: fmt.Sprintf("rule %q is left-recursive (it can reach itself before matching anything), which llama.cpp does not support", displayName(name))}
		case done:
			return nil
		}
		if d > MaxLeftDepth {
			return &GBNFError{Msg: fmt.Sprintf("rules nest deeper than %d at their start", MaxLeftDepth)}
		}
		state[name] = active
		best := 0
		for _, next := range left[name] {
			if err := visit(next, d+1); err != nil {
				return err
			}
			best = max(best, depth[next]+1)
		}
		if best > MaxLeftDepth {
			return &GBNFError{Msg: fmt.Sprintf("rules nest deeper than %d at their start", MaxLeftDepth)}
		}
		depth[name], state[name] = best, done
		return nil
	}
	for _, name := range p.order {
		if err := visit(name, 0); err != nil {
			return err
		}
	}
	return nil
}

// displayName names a rule for a message: groups are "a group".
func displayName(name string) string {
	if strings.HasPrefix(name, "_") {
		return "(group " + name[1:] + ")"
	}
	return name
}

// Literal returns s as a GBNF string literal.
func Literal(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			writeRune(&b, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeRune writes r for a literal or class: printable ASCII as itself,
// anything else as an escape (llama.cpp's parser reads raw UTF-8 too, but
// escapes keep the grammar readable in logs).
func writeRune(b *strings.Builder, r rune) {
	switch {
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r == '\t':
		b.WriteString(`\t`)
	case r >= 0x20 && r < 0x7f:
		b.WriteRune(r)
	case r < 0x100:
		fmt.Fprintf(b, `\x%02X`, r)
	case r < 0x10000:
		fmt.Fprintf(b, `\u%04X`, r)
	default:
		fmt.Fprintf(b, `\U%08X`, r)
	}
}

// classRune writes r inside a character class.
func classRune(b *strings.Builder, r rune) {
	switch r {
	case ']', '[', '\\', '"':
		b.WriteByte('\\')
		b.WriteRune(r)
	case '-', '^':
		fmt.Fprintf(b, `\x%02X`, r)
	default:
		writeRune(b, r)
	}
}

// Choices returns a grammar that matches exactly one of the strings.
func Choices(choices []string) (string, error) {
	if len(choices) == 0 {
		return "", fmt.Errorf("grammar: no choices")
	}
	var b strings.Builder
	b.WriteString("root ::= ")
	for i, c := range choices {
		if !utf8.ValidString(c) {
			return "", fmt.Errorf("grammar: choice %d is not valid UTF-8", i)
		}
		if i > 0 {
			b.WriteString(" | ")
		}
		if c == "" {
			b.WriteString(`""`)
			continue
		}
		b.WriteString(Literal(c))
	}
	b.WriteByte('\n')
	g := b.String()
	if err := Check(g); err != nil {
		return "", err
	}
	return g, nil
}
