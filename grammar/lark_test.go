package grammar

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// applyPatchLark is the shape of Codex CLI 0.171's apply_patch grammar (a
// freeform custom tool), as its requests carry it: literals, regexes,
// + ? and alternatives, an alias, %import common.LF. tests/codex_test.go
// sends the same file.
func applyPatchLark(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/codex_apply_patch.lark")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFromLark(t *testing.T) {
	g, err := FromLark(applyPatchLark(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`root ::= lark-start`, `lark-start ::= lark-begin-upatch lark-hunk+ lark-end-upatch`, `lark-LF ::= "\n"`, `lark-filename ::= (`} {
		if !strings.Contains(g, want) {
			t.Errorf("grammar lacks %q:\n%s", want, g)
		}
	}
	m := mustMatcher(t, g)
	patch := "*** Begin Patch\n*** Update File: a.go\n@@ func f\n-\told\n+\tnew\n*** End Patch\n"
	if !matches(m, patch) {
		t.Errorf("the grammar refuses a patch:\n%s", patch)
	}
	if matches(m, "*** Begin Patch\n*** End Patch\n") || matches(m, "diff --git a/a.go b/a.go\n") {
		t.Error("the grammar takes a patch with no hunk, or a git diff")
	}
	small, err := FromLark("start: \"a\" [B] x ~ 2..3 | /[0-9]+/i\nB: \"b\" // a comment\nx: \"x\"\n    | \"y\"")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(small, `lark-start ::= "a" (lark-B)? lark-x{2,3} | (`) {
		t.Errorf("grammar:\n%s", small)
	}
}

func TestFromLarkErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`rule: "a"`, `no rule "start"`},
		{"start: a\n", `"a" is used but not defined`},
		{"start: \"a\"\n%ignore WS", "%ignore is not supported"},
		{"start: \"a\"i", "case-insensitive"},
		{"start: \"a\"\n%import common.FOO", "common.FOO is not supported"},
		{"start: (\"a\"", "missing ')'"},
		{"start: /(a/", "regular expression"},
		{"start: \"a\"\nstart: \"b\"", "defined twice"},
	} {
		_, err := FromLark(tc.src)
		var le *LarkError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromLark(%q) = %v; want a LarkError with %q", tc.src, err, tc.want)
		}
	}
}

// FuzzFromLark: any Lark text gives a grammar Check accepts or an error,
// never a panic.
func FuzzFromLark(f *testing.F) {
	f.Add(applyPatchLark(f))
	f.Add("start: \"a\" [B] x ~ 2..3 | /[0-9]+/i\nB: \"b\"\nx: \"x\"")
	f.Fuzz(func(t *testing.T, src string) {
		g, err := FromLark(src)
		if err == nil {
			if cerr := Check(g); cerr != nil {
				t.Fatalf("FromLark(%q) gave a grammar Check refuses: %v\n%s", src, cerr, g)
			}
		}
	})
}
