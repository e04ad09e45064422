package grammar

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// Check never panics, whatever the bytes.
func FuzzCheck(f *testing.F) {
	for _, g := range []string{`root ::= "a"`, `root ::= [^a-z\x00]{2,5} | x` + "\nx ::= (\"b\" | .)*", "root ::= <[1]> !<a> \"\\u00e9\"\r\n# c\n", `root ::= "a"{5,2}`} {
		f.Add(g)
	}
	f.Fuzz(func(t *testing.T, g string) {
		if err := Check(g); err != nil {
			var ge *GBNFError
			if !errors.As(err, &ge) {
				t.Fatalf("%T %v", err, err)
			}
		}
	})
}

// A regex's grammar matches exactly what Go's regexp matches in full.
func FuzzRegex(f *testing.F) {
	for _, tc := range regexCases {
		for _, in := range tc.inputs {
			f.Add(tc.pattern, in)
		}
	}
	f.Fuzz(func(t *testing.T, pattern, input string) {
		if len(pattern) > 64 || len(input) > 32 || !utf8.ValidString(input) {
			return
		}
		g, err := FromRegex(pattern)
		if err != nil {
			var re *RegexError
			if !errors.As(err, &re) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		if err := Check(g); err != nil {
			t.Fatalf("FromRegex(%q) gave a grammar Check refuses: %v\n%s", pattern, err, g)
		}
		re, err := regexp.Compile(`^(?:` + pattern + `)$`)
		if err != nil {
			return
		}
		p, _ := parseGBNF(g)
		if got, want := matches(p, input), re.MatchString(input); got != want {
			t.Fatalf("%q on %q: grammar %v, regexp %v\n%s", pattern, input, got, want, g)
		}
	})
}

// A schema either converts to a grammar Check accepts or is a
// *SchemaError; nothing panics.
func FuzzJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]}`,
		`{"anyOf":[{"$ref":"#/$defs/x"},{"type":"null"}],"$defs":{"x":{"type":"array","prefixItems":[{"enum":[1,"a"]}],"items":false}}}`,
		`{"type":["integer","boolean"],"minimum":1}`,
		`{"format":"date-time"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		g, err := FromJSONSchema(schema)
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		if err := Check(g); err != nil {
			t.Fatalf("%s gave a grammar Check refuses: %v", schema, err)
		}
	})
}

// Every choice matches its grammar.
func FuzzChoices(f *testing.F) {
	f.Add("yes\x00no\x00")
	f.Add("\"\\]\x00[-^")
	f.Fuzz(func(t *testing.T, joined string) {
		if !utf8.ValidString(joined) || len(joined) > 200 {
			return
		}
		choices := strings.Split(joined, "\x00")
		g, err := Choices(choices)
		if err != nil {
			t.Fatalf("Choices(%q): %v", choices, err)
		}
		p, _ := parseGBNF(g)
		for _, c := range choices {
			if !matches(p, c) {
				t.Fatalf("%q rejects %q\n%s", g, c, g)
			}
		}
	})
}
