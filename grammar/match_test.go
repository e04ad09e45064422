package grammar

import (
	"slices"
	"testing"
)

// matcher recognizes the strings a checked grammar matches in full, by
// the sets of positions each rule can end at. Tests use it to prove what
// the converters' grammars accept and reject without a model.
type matcher struct {
	p    *gbnfParser
	in   []rune
	memo map[memoKey][]int
}

type memoKey struct {
	rule string
	pos  int
}

// mustMatcher parses and checks g.
func mustMatcher(t testing.TB, g string) *gbnfParser {
	t.Helper()
	p, err := parseGBNF(g)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, g)
	}
	if err := p.check(); err != nil {
		t.Fatalf("check: %v\n%s", err, g)
	}
	return p
}

// matches reports whether the grammar p matches all of s from root.
func matches(p *gbnfParser, s string) bool {
	m := &matcher{p: p, in: []rune(s), memo: map[memoKey][]int{}}
	return slices.Contains(m.rule("root", 0), len(m.in))
}

func (m *matcher) rule(name string, pos int) []int {
	k := memoKey{name, pos}
	if ends, ok := m.memo[k]; ok {
		return ends
	}
	m.memo[k] = nil // no left recursion in a checked grammar
	var ends []int
	for _, alt := range m.p.rules[name].alts {
		ends = union(ends, m.seq(alt, pos))
	}
	m.memo[k] = ends
	return ends
}

func (m *matcher) seq(alt []gItem, pos int) []int {
	cur := []int{pos}
	for _, it := range alt {
		var next []int
		for _, p := range cur {
			next = union(next, m.item(it, p))
		}
		cur = next
		if len(cur) == 0 {
			return nil
		}
	}
	return cur
}

func (m *matcher) item(it gItem, pos int) []int {
	once := func(ps []int) []int {
		var out []int
		for _, p := range ps {
			out = union(out, m.one(it, p))
		}
		return out
	}
	cur := []int{pos}
	for range it.min {
		cur = once(cur)
	}
	res := slices.Clone(cur)
	for i := it.min; (it.max < 0 || i < it.max) && len(cur) > 0; i++ {
		next := once(cur)
		var fresh []int
		for _, p := range next {
			if !slices.Contains(res, p) {
				fresh = append(fresh, p)
			}
		}
		res = union(res, fresh)
		cur = fresh
		if it.max < 0 && len(fresh) == 0 {
			break
		}
		if it.max >= 0 {
			cur = next
		}
	}
	return res
}

// one matches a single copy of the item.
func (m *matcher) one(it gItem, pos int) []int {
	if it.ref != "" {
		return m.rule(it.ref, pos)
	}
	t := it.term
	switch t.kind {
	case '"':
		if pos+len(t.runes) <= len(m.in) && slices.Equal(m.in[pos:pos+len(t.runes)], t.runes) {
			return []int{pos + len(t.runes)}
		}
	case '[':
		if pos < len(m.in) {
			r := m.in[pos]
			in := false
			for i := 0; i+1 < len(t.ranges); i += 2 {
				if r >= t.ranges[i] && r <= t.ranges[i+1] {
					in = true
				}
			}
			if in != t.neg {
				return []int{pos + 1}
			}
		}
	case '.':
		if pos < len(m.in) {
			return []int{pos + 1}
		}
	}
	return nil
}

func union(a, b []int) []int {
	for _, x := range b {
		if !slices.Contains(a, x) {
			a = append(a, x)
		}
	}
	return a
}
