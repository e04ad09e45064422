package tokenizer

import "strings"

// StopMatcher finds stop strings in streamed text. It holds back any suffix
// of the text seen so far that could still grow into a stop string, so that
// text emitted to a client never contains a stop string, not even a part of
// one that later completes. It holds back nothing else: text that cannot be
// the start of a stop string is emitted by the Push that brought it.
//
// Which stop wins: the occurrence that is complete first in the text (the
// earliest end), and among occurrences ending at the same place the longest
// (so the earliest start). That is what checking after every token finds, as
// vLLM does, and the result does not depend on how the text is cut into
// Pushes nor on the order of the stop list. (vLLM breaks a tie between stops
// completed by the same token by list order; here the longer stop wins, so
// nothing of either reaches the client.)
//
// A StopMatcher is not safe for concurrent use; use one per sequence.
type StopMatcher struct {
	stops   []string
	maxLen  int       // length of the longest stop
	first   [256]bool // first bytes of the stops
	pending string    // held-back text: a proper prefix of some stop
	stopped bool
	matched string
}

// NewStopMatcher returns a matcher for stops; empty strings are ignored.
// With no stops it passes text straight through.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s == "" {
			continue
		}
		m.stops = append(m.stops, s)
		m.maxLen = max(m.maxLen, len(s))
		m.first[s[0]] = true
	}
	return m
}

// Push adds text and returns what is safe to emit. When a stop string is
// found, stopped is true, emit ends just before the stop string, and matched
// is the stop string; the matcher then ignores further input: later Pushes
// return "", "", false and Flush returns "".
func (m *StopMatcher) Push(text string) (emit string, matched string, stopped bool) {
	if m.stopped {
		return "", "", false
	}
	if len(m.stops) == 0 {
		return text, "", false
	}
	buf := text
	if m.pending != "" {
		buf = m.pending + text
	}
	// The held-back part holds no complete stop, so any occurrence ends
	// inside text; the earliest-ending occurrence of each stop is its
	// first one.
	start, end, which := -1, -1, -1
	for j, s := range m.stops {
		i := strings.Index(buf, s)
		if i < 0 {
			continue
		}
		if e := i + len(s); end < 0 || e < end || (e == end && i < start) {
			start, end, which = i, e, j
		}
	}
	if which >= 0 {
		m.stopped = true
		m.matched = m.stops[which]
		m.pending = ""
		return buf[:start], m.matched, true
	}
	hold := m.holdBack(buf)
	// Clone so that a large Push is not kept alive by a few held bytes.
	m.pending = strings.Clone(buf[len(buf)-hold:])
	return buf[:len(buf)-hold], "", false
}

// holdBack returns the length of the longest suffix of buf that is a proper
// prefix of some stop string.
func (m *StopMatcher) holdBack(buf string) int {
	for k := min(len(buf), m.maxLen-1); k > 0; k-- {
		if !m.first[buf[len(buf)-k]] {
			continue
		}
		suffix := buf[len(buf)-k:]
		for _, s := range m.stops {
			if len(s) > k && s[:k] == suffix {
				return k
			}
		}
	}
	return 0
}

// Flush returns held-back text at the end of generation (when it ended
// without a stop string) and empties the matcher.
func (m *StopMatcher) Flush() string {
	p := m.pending
	m.pending = ""
	return p
}

// Stopped reports whether a stop string has been found.
func (m *StopMatcher) Stopped() bool { return m.stopped }

// Matched returns the stop string that was found, or "".
func (m *StopMatcher) Matched() string { return m.matched }
