package grammar

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
)

// RegexError is a pattern FromRegex cannot turn into a grammar: a syntax
// error or a construct it does not support, named in Msg.
type RegexError struct {
	Msg string
}

func (e *RegexError) Error() string { return "regex: " + e.Msg }

// FromRegex returns a grammar for the strings the pattern matches in full
// (the pattern is anchored at both ends, as vLLM's guided_regex is). The
// syntax is Go's (RE2, Perl flags): literals, escapes, classes, '.',
// groups, alternation, ? * + {m,n} (lazy or not), and ^ and $ at the ends.
// Backreferences, lookaround and \b are not regular or not supported and
// are errors that name the construct; so is an unbounded repetition of
// something that can match the empty string (llama.cpp refuses the left
// recursion it becomes). Every error is a *RegexError.
func FromRegex(pattern string) (string, error) {
	if len(pattern) > MaxBytes {
		return "", &RegexError{Msg: fmt.Sprintf("the pattern is larger than %d bytes", MaxBytes)}
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		msg := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) && se.Code == syntax.ErrInvalidPerlOp {
			msg += " (lookaround, backreferences and other non-regular constructs are not supported)"
		}
		return "", &RegexError{Msg: msg}
	}
	// Anchors at the ends mean nothing: the match is always whole.
	if re.Op == syntax.OpConcat {
		subs := re.Sub
		for len(subs) > 0 && isBegin(subs[0].Op) {
			subs = subs[1:]
		}
		for len(subs) > 0 && isEnd(subs[len(subs)-1].Op) {
			subs = subs[:len(subs)-1]
		}
		re = &syntax.Regexp{Op: syntax.OpConcat, Sub: subs, Flags: re.Flags}
	} else if isBegin(re.Op) || isEnd(re.Op) {
		re = &syntax.Regexp{Op: syntax.OpEmptyMatch}
	}
	var b strings.Builder
	b.WriteString("root ::= ")
	if _, err := writeRegex(&b, re); err != nil {
		return "", err
	}
	b.WriteByte('\n')
	g := b.String()
	if err := Check(g); err != nil {
		return "", &RegexError{Msg: "the pattern gives a grammar llama.cpp cannot use: " + err.Error()}
	}
	return g, nil
}

func isBegin(op syntax.Op) bool { return op == syntax.OpBeginLine || op == syntax.OpBeginText }
func isEnd(op syntax.Op) bool   { return op == syntax.OpEndLine || op == syntax.OpEndText }

// writeRegex writes re as a GBNF expression and reports whether it can
// match the empty string.
func writeRegex(b *strings.Builder, re *syntax.Regexp) (nullable bool, err error) {
	switch re.Op {
	case syntax.OpNoMatch:
		return false, &RegexError{Msg: "the pattern (or a part of it, such as an empty class) matches nothing"}
	case syntax.OpEmptyMatch:
		b.WriteString(`""`)
		return true, nil
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			b.WriteString(`""`)
			return true, nil
		}
		if re.Flags&syntax.FoldCase != 0 {
			b.WriteByte('(')
			for i, r := range re.Rune {
				if i > 0 {
					b.WriteByte(' ')
				}
				writeClass(b, foldRanges(r))
			}
			b.WriteByte(')')
			return false, nil
		}
		b.WriteString(Literal(string(re.Rune)))
		return false, nil
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return false, &RegexError{Msg: "an empty character class matches nothing"}
		}
		writeClass(b, re.Rune)
		return false, nil
	case syntax.OpAnyCharNotNL:
		b.WriteString(`[^\n]`)
		return false, nil
	case syntax.OpAnyChar:
		b.WriteString(".")
		return false, nil
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return false, &RegexError{Msg: "the anchors ^ and $ (and \\A, \\z) are only supported at the start and the end of the pattern"}
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return false, &RegexError{Msg: "word boundaries (\\b, \\B) are not supported"}
	case syntax.OpCapture:
		return writeRegex(b, re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := re.Min, re.Max
		switch re.Op {
		case syntax.OpStar:
			lo, hi = 0, -1
		case syntax.OpPlus:
			lo, hi = 1, -1
		case syntax.OpQuest:
			lo, hi = 0, 1
		}
		if hi > MaxRepetition || lo > MaxRepetition {
			return false, &RegexError{Msg: fmt.Sprintf("repetition counts above %d are not supported", MaxRepetition)}
		}
		var sub strings.Builder
		n, err := writeRegex(&sub, re.Sub[0])
		if err != nil {
			return false, err
		}
		if n && hi < 0 {
			return false, &RegexError{Msg: fmt.Sprintf("an unbounded repetition of something that can match the empty string (%s) is not supported; make the repeated part non-empty", re.Sub[0])}
		}
		b.WriteByte('(')
		b.WriteString(sub.String())
		b.WriteByte(')')
		b.WriteString(strings.TrimPrefix(repeat("", lo, hi), `""`))
		if hi == 0 {
			b.WriteString("{0}")
		}
		return n || lo == 0, nil
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			b.WriteString(`""`)
			return true, nil
		}
		n, err := writeGroup(b, re.Sub, " ")
		return n == len(re.Sub), err
	case syntax.OpAlternate:
		n, err := writeGroup(b, re.Sub, " | ")
		return n > 0, err
	}
	return false, &RegexError{Msg: fmt.Sprintf("the construct %s is not supported", re)}
}

// writeGroup writes subs in parentheses, separated by sep (a sequence or
// alternatives), and returns how many of them can match the empty string.
func writeGroup(b *strings.Builder, subs []*syntax.Regexp, sep string) (nullable int, err error) {
	b.WriteByte('(')
	for i, s := range subs {
		if i > 0 {
			b.WriteString(sep)
		}
		n, err := writeRegex(b, s)
		if err != nil {
			return 0, err
		}
		if n {
			nullable++
		}
	}
	b.WriteByte(')')
	return nullable, nil
}

// foldRanges returns the ranges of r and its case variants.
func foldRanges(r rune) []rune {
	rs := []rune{r, r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		rs = append(rs, f, f)
	}
	return rs
}

// writeClass writes a class of rune ranges (lo, hi pairs).
func writeClass(b *strings.Builder, ranges []rune) {
	b.WriteByte('[')
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		classRune(b, lo)
		if hi != lo {
			b.WriteByte('-')
			classRune(b, hi)
		}
	}
	b.WriteByte(']')
}
