package benchio

import (
	"strings"
	"testing"
)

func TestWordsAreDistinctLowercaseWords(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range words {
		if seen[w] {
			t.Errorf("duplicate word %q", w)
		}
		seen[w] = true
		if w == "" || strings.ToLower(w) != w || strings.ContainsAny(w, " \t\n") {
			t.Errorf("word %q: want a single lowercase word", w)
		}
	}
}
