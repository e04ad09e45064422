package tokenizer_test

import (
	"strings"
	"testing"

	"github.com/llmserve/llmserve/tokenizer"
)

type stopStep struct {
	push    string
	emit    string
	matched string
	stopped bool
}

func TestStopMatcher(t *testing.T) {
	tests := []struct {
		name  string
		stops []string
		steps []stopStep
		flush string
	}{
		{"no stops passes through", nil, []stopStep{{push: "abc", emit: "abc"}, {push: "", emit: ""}}, ""},
		{"empty stops ignored", []string{"", ""}, []stopStep{{push: "abc", emit: "abc"}}, ""},
		{"unrelated text is not held", []string{"STOP"}, []stopStep{{push: "hello", emit: "hello"}, {push: " world", emit: " world"}}, ""},
		{"stop inside one push", []string{"STOP"}, []stopStep{{push: "abSTOPcd", emit: "ab", matched: "STOP", stopped: true}}, ""},
		{"stop at start", []string{"STOP"}, []stopStep{{push: "STOP", emit: "", matched: "STOP", stopped: true}}, ""},
		{"stop across pushes", []string{"STOP"}, []stopStep{
			{push: "abST", emit: "ab"},
			{push: "O", emit: ""},
			{push: "Pxyz", emit: "", matched: "STOP", stopped: true},
		}, ""},
		{"partial that does not complete is released", []string{"STOP"}, []stopStep{
			{push: "abST", emit: "ab"},
			{push: "OX", emit: "STOX"},
		}, ""},
		{"held text released by flush", []string{"STOP"}, []stopStep{{push: "abSTO", emit: "ab"}}, "STO"},
		{"minimal hold: only the suffix that can start a stop", []string{"abc"}, []stopStep{
			{push: "xxab", emit: "xx"},
			{push: "ab", emit: "ab"},
			{push: "c", emit: "", matched: "abc", stopped: true},
		}, ""},
		{"overlapping prefix restarts", []string{"aab"}, []stopStep{
			{push: "aa", emit: ""},
			{push: "a", emit: "a"},
			{push: "b", emit: "", matched: "aab", stopped: true},
		}, ""},
		{"earliest end wins", []string{"bcde", "cd"}, []stopStep{{push: "abcdef", emit: "ab", matched: "cd", stopped: true}}, ""},
		{"same end: longest wins", []string{"cd", "bcd"}, []stopStep{{push: "abcde", emit: "a", matched: "bcd", stopped: true}}, ""},
		{"later pushes return nothing", []string{"X"}, []stopStep{
			{push: "aXb", emit: "a", matched: "X", stopped: true},
			{push: "more", emit: ""},
		}, ""},
		{"newline stop", []string{"\n\n"}, []stopStep{
			{push: "line\n", emit: "line"},
			{push: "\n", emit: "", matched: "\n\n", stopped: true},
		}, ""},
		{"multibyte stop", []string{"。"}, []stopStep{{push: "日本。語", emit: "日本", matched: "。", stopped: true}}, ""},
		{"held prefix of one stop, match of another", []string{"abcd", "bx"}, []stopStep{
			{push: "zab", emit: "z"},
			{push: "x", emit: "a", matched: "bx", stopped: true},
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tokenizer.NewStopMatcher(tt.stops)
			for i, s := range tt.steps {
				emit, matched, stopped := m.Push(s.push)
				if emit != s.emit || matched != s.matched || stopped != s.stopped {
					t.Fatalf("Push #%d(%q) = %q, %q, %v; want %q, %q, %v", i, s.push, emit, matched, stopped, s.emit, s.matched, s.stopped)
				}
			}
			if got := m.Flush(); got != tt.flush {
				t.Fatalf("Flush = %q, want %q", got, tt.flush)
			}
		})
	}
}

func TestStopMatcherState(t *testing.T) {
	m := tokenizer.NewStopMatcher([]string{"END"})
	m.Push("abEN")
	if m.Stopped() || m.Matched() != "" {
		t.Fatal("stopped early")
	}
	m.Push("D!")
	if !m.Stopped() || m.Matched() != "END" {
		t.Fatalf("Stopped=%v Matched=%q", m.Stopped(), m.Matched())
	}
	if got := m.Flush(); got != "" {
		t.Fatalf("Flush after stop = %q", got)
	}
}

// referenceStop is the rule stated on StopMatcher, applied to the whole
// text at once: the occurrence that ends first, the longest among those
// ending at the same place.
func referenceStop(text string, stops []string) (before, matched string, found bool) {
	start, end := -1, -1
	for _, s := range stops {
		if s == "" {
			continue
		}
		i := strings.Index(text, s)
		if i < 0 {
			continue
		}
		if e := i + len(s); end < 0 || e < end || (e == end && i < start) {
			start, end, matched = i, e, s
		}
	}
	if start < 0 {
		return text, "", false
	}
	return text[:start], matched, true
}

// FuzzStopMatcher splits text into pushes at the given cut points and
// checks the streamed result against referenceStop on the whole text, that
// nothing emitted ever contains a stop or a piece of one that later
// completed, and that holding back is minimal.
func FuzzStopMatcher(f *testing.F) {
	f.Add("hello STOP world", "STOP", "\n\n", []byte{3, 1, 4, 1, 5})
	f.Add("aaab", "aab", "b", []byte{1, 1, 1, 1})
	f.Add("abcdef", "bcde", "cd", []byte{2, 2, 2})
	f.Add("x<|im_end|>y", "<|im_end|>", "<|", []byte{1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, cuts []byte) {
		stops := []string{stop1, stop2}
		wantBefore, wantMatched, wantFound := referenceStop(text, stops)

		var chunks []string
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			chunks, rest = append(chunks, rest[:n]), rest[n:]
		}
		chunks = append(chunks, rest)

		m := tokenizer.NewStopMatcher(stops)
		var emitted strings.Builder
		var matched string
		stopped, seen := false, 0
		for _, chunk := range chunks {
			seen += len(chunk)
			emit, mt, st := m.Push(chunk)
			if stopped {
				if emit != "" || mt != "" || st {
					t.Fatalf("Push after stop returned %q %q %v", emit, mt, st)
				}
				continue
			}
			emitted.WriteString(emit)
			if st {
				stopped, matched = true, mt
				continue
			}
			// Minimal hold: exactly the longest suffix of the text so far
			// that is a proper prefix of a stop is held back.
			if held, want := seen-emitted.Len(), longestStopPrefix(text[:seen], stops); held != want {
				t.Fatalf("after %q: holding %d bytes, want %d", text[:seen], held, want)
			}
		}
		if !stopped {
			emitted.WriteString(m.Flush())
		}
		if stopped != wantFound || matched != wantMatched || emitted.String() != wantBefore {
			t.Fatalf("text %q stops %q cuts %v:\n got %q %q %v\nwant %q %q %v",
				text, stops, cuts, emitted.String(), matched, stopped, wantBefore, wantMatched, wantFound)
		}
	})
}

// longestStopPrefix is the length of the longest suffix of s that is a
// proper, non-empty prefix of one of stops.
func longestStopPrefix(s string, stops []string) int {
	best := 0
	for _, stop := range stops {
		for k := min(len(s), len(stop)-1); k > best; k-- {
			if strings.HasSuffix(s, stop[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// BenchmarkStopMatcherPush streams token-sized chunks through a matcher
// with a few typical stop strings, none of which occurs.
func BenchmarkStopMatcherPush(b *testing.B) {
	chunks := strings.Fields(strings.Repeat("Once upon a time there was a little <girl> who liked to write code. ", 32))
	m := tokenizer.NewStopMatcher([]string{"<|im_end|>", "\n\nUser:", "</s>", "###"})
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range chunks {
			m.Push(c)
			m.Push(" ")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*len(chunks)), "ns/push")
}
