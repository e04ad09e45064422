package grammar

import (
	"errors"
	"strings"
	"testing"
)

// applyPatchLark is the shape of Codex CLI's apply_patch grammar (a
// freeform custom tool): literals, regexes, + ? and alternatives, an
// alias, %import common.LF.
const applyPatchLark = `start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?

filename: /(.+)/
add_line: "+" /(.*)/ LF -> line

change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF

%import common.LF
`

func TestFromLark(t *testing.T) {
	g, err := FromLark(applyPatchLark)
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
	f.Add(applyPatchLark)
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
