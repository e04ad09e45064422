package tokenizer

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// The engine's parser reads a conditional expression (X if C else Y) only
// as the whole of a {{ }} or of a {% set %} value. Python's Jinja2 allows
// it anywhere an expression goes, and templates use that: gpt-oss writes
// {{ (tool_call.content_type if ... else "json") + "<|message|>" }},
// others write '}' + (', ' if not loop.last else ”). desugarConditionals
// rewrites every conditional into a form the parser does read and that
// evaluates the same way, lazily:
//
//	X if C else Y   =>   ((C) and [X] or [Y])[0]
//	X if C          =>   ((C) and [X] or [none])[0]
//
// ([X] is a one-element list, so it is true even when X is not; "and" and
// "or" evaluate their right side only when needed, so a branch not taken is
// not evaluated, as in Python.) Only the text inside tags is touched; text,
// whitespace control and the shape of the template stay as they were. The
// for-loop filter ({% for x in xs if cond %}) and a top-level {{ x if c }}
// without else are left to the parser, which reads them.
func desugarConditionals(src string, cfg *config.Config) string {
	// The lexer normalises newlines before it records positions; do it
	// first so that positions index src.
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	stream := tokens.LexAll(src, cfg)
	var toks []*tokens.Token
	for !stream.End() {
		toks = append(toks, stream.Next())
	}
	if stream.IsError() {
		return src // the parser will report it
	}
	// The parser reads the literal None as its nil, which is also
	// undefined; the name none is Python's None (see pyNone). Same length,
	// so token positions still index src.
	b := []byte(src)
	for i, t := range toks {
		if t.Type == tokens.Name && t.Val == "None" && (i == 0 || toks[i-1].Val != "is") {
			copy(b[t.Pos:], "none")
		}
	}
	src = string(b)
	d := desugarer{src: src, toks: toks}
	var out strings.Builder
	pos := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		var endType tokens.Type
		switch t.Type {
		case tokens.VariableBegin:
			endType = tokens.VariableEnd
		case tokens.BlockBegin:
			endType = tokens.BlockEnd
		default:
			continue
		}
		j := i + 1
		for j < len(toks) && toks[j].Type != endType {
			j++
		}
		if j == len(toks) {
			break
		}
		lo, start, end := i+1, t.Pos+len(t.Val), toks[j].Pos
		out.WriteString(src[pos:start])
		var text string
		switch {
		case t.Type == tokens.VariableBegin:
			text = d.expr(lo, j, start, end, true)
		case lo < j && toks[lo].Type == tokens.Name:
			name := toks[lo]
			head := src[start : name.Pos+len(name.Val)]
			lo, start = lo+1, name.Pos+len(name.Val)
			switch name.Val {
			case "if", "elif":
				text = head + d.expr(lo, j, start, end, true)
			case "set":
				text = head + d.assignment(lo, j, start, end)
			default:
				text = head + d.groups(lo, j, start, end)
			}
		default:
			text = d.groups(lo, j, start, end)
		}
		out.WriteString(text)
		pos = end
		i = j
	}
	out.WriteString(src[pos:])
	return out.String()
}

type desugarer struct {
	src  string
	toks []*tokens.Token
}

func opens(t *tokens.Token) bool {
	return t.Type == tokens.LeftParenthesis || t.Type == tokens.LeftBracket || t.Type == tokens.LeftBrace
}

func closes(t *tokens.Token) bool {
	return t.Type == tokens.RightParenthesis || t.Type == tokens.RightBracket || t.Type == tokens.RightBrace
}

// match returns the index of the bracket closing the one at k, or -1.
func (d *desugarer) match(k, hi int) int {
	depth := 0
	for m := k; m < hi; m++ {
		switch {
		case opens(d.toks[m]):
			depth++
		case closes(d.toks[m]):
			depth--
			if depth == 0 {
				return m
			}
		}
	}
	return -1
}

// expr rewrites the expression made of toks[lo:hi], which spans
// src[start:end]. At the top of a tag (top) a conditional without else is
// left alone: the parser reads it there.
func (d *desugarer) expr(lo, hi, start, end int, top bool) string {
	ifAt, elseAt := -1, -1
	for k := lo; k < hi; k++ {
		t := d.toks[k]
		if opens(t) {
			if m := d.match(k, hi); m >= 0 {
				k = m
				continue
			}
			break
		}
		if t.Type != tokens.Name {
			continue
		}
		if t.Val == "if" && ifAt < 0 {
			ifAt = k
		} else if t.Val == "else" && ifAt >= 0 {
			elseAt = k
			break
		}
	}
	if ifAt <= lo || (elseAt < 0 && top) {
		return d.groups(lo, hi, start, end)
	}
	ifTok := d.toks[ifAt]
	x := d.expr(lo, ifAt, start, ifTok.Pos, false)
	cHi, cEnd, y := hi, end, "none"
	if elseAt >= 0 {
		elseTok := d.toks[elseAt]
		cHi, cEnd = elseAt, elseTok.Pos
		// Y may itself be a conditional: X if C else Y if D else Z.
		y = d.expr(elseAt+1, hi, elseTok.Pos+len(elseTok.Val), end, false)
	}
	c := d.expr(ifAt+1, cHi, ifTok.Pos+len(ifTok.Val), cEnd, false)
	return "((" + c + ") and [" + x + "] or [" + y + "])[0]"
}

// assignment rewrites the value of {% set target = value %}.
func (d *desugarer) assignment(lo, hi, start, end int) string {
	for k := lo; k < hi; k++ {
		if t := d.toks[k]; t.Type == tokens.Assign {
			split := t.Pos + len(t.Val)
			return d.src[start:split] + d.expr(k+1, hi, split, end, true)
		}
	}
	return d.groups(lo, hi, start, end)
}

// groups copies src[start:end], rewriting each item (separated by ",", ":"
// or "=") of every bracketed group as an expression.
func (d *desugarer) groups(lo, hi, start, end int) string {
	var b strings.Builder
	pos := start
	for k := lo; k < hi; k++ {
		open := d.toks[k]
		if !opens(open) {
			continue
		}
		closeAt := d.match(k, hi)
		if closeAt < 0 {
			break // unbalanced: leave it to the parser to report
		}
		itemLo, itemStart := k+1, open.Pos+len(open.Val)
		var items []string
		var seps []string
		for m := k + 1; m <= closeAt; m++ {
			t := d.toks[m]
			if m < closeAt && opens(t) {
				if n := d.match(m, closeAt); n >= 0 {
					m = n
				}
				continue
			}
			if m == closeAt || t.Type == tokens.Comma || t.Type == tokens.Colon || t.Type == tokens.Assign {
				items = append(items, d.expr(itemLo, m, itemStart, t.Pos, false))
				seps = append(seps, d.src[t.Pos:t.Pos+len(t.Val)])
				itemLo, itemStart = m+1, t.Pos+len(t.Val)
			}
		}
		if d.isMethodOnGroup(k, closeAt, len(items)) {
			// (E).method(...): the parser loses the receiver of a method
			// called on a parenthesised expression; [E][0].method(...)
			// is read correctly and means the same.
			b.WriteString(d.src[pos:open.Pos])
			b.WriteString("[" + items[0] + "][0]")
		} else {
			b.WriteString(d.src[pos : open.Pos+len(open.Val)])
			for i := range items {
				b.WriteString(items[i])
				b.WriteString(seps[i])
			}
		}
		pos = d.toks[closeAt].Pos + len(d.toks[closeAt].Val)
		k = closeAt
	}
	b.WriteString(d.src[pos:end])
	return b.String()
}

// isMethodOnGroup reports whether the parentheses at toks[open] and
// toks[close] group a single expression (they do not call anything) and are
// followed by .name( — a method call on the group.
func (d *desugarer) isMethodOnGroup(open, close, items int) bool {
	if d.toks[open].Type != tokens.LeftParenthesis || items != 1 || close+3 >= len(d.toks) {
		return false
	}
	if open > 0 {
		switch d.toks[open-1].Type {
		case tokens.Name, tokens.String, tokens.RightParenthesis, tokens.RightBracket:
			if v := d.toks[open-1].Val; d.toks[open-1].Type != tokens.Name || !isKeyword(v) {
				return false // a call: f(...), x[0](...)
			}
		}
	}
	return d.toks[close+1].Type == tokens.Dot && d.toks[close+2].Type == tokens.Name &&
		d.toks[close+3].Type == tokens.LeftParenthesis
}

// isKeyword reports whether a name token is a keyword that can precede an
// expression (so "(" after it groups rather than calls).
func isKeyword(name string) bool {
	switch name {
	case "if", "else", "elif", "in", "and", "or", "not", "is", "return":
		return true
	}
	return false
}
