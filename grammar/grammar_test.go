package grammar

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	good := []string{
		`root ::= "a"`,
		"root ::= \"a\" | [0-9]+ # comment\n",
		"# leading comment\n\nroot ::= x y\nx ::= \"x\"*\ny ::= (\n  \"a\" |\n  \"b\"\n){2,3}\n",
		`root ::= [^"\\\x00-\x1F] "\u00e9" "\U0001F600" "\t\r\n\"\[\]"`,
		`root ::= "a"{0,2000} "b"{3} "c"{1,} .? <[42]> !<[7]> <|end|>`,
		`root ::= "x"{ 2 , 4 }`,
		`root ::= a? b` + "\na ::= \"a\"*\nb ::= \"b\"",
		"root ::= \"a\"\r\nb ::= \"b\"\r\n",
	}
	for _, g := range good {
		if err := Check(g); err != nil {
			t.Errorf("Check(%q) = %v", g, err)
		}
	}
	bad := []struct{ g, want string }{
		{``, "no rules"},
		{`start ::= "a"`, `no "root"`},
		{`root ::= "a`, "unterminated literal"},
		{`root ::= [a`, "unterminated character class"},
		{`root ::= x`, `rule "x" is used but not defined`},
		{`root ::= root "a"`, "left-recursive"},
		{"root ::= a \"b\"\na ::= \"\" | root", "left-recursive"},
		{"root ::= e root\ne ::= \"\"", "left-recursive"},
		{`root ::= ("a"?)*`, "repeats without bound something that can be empty"},
		{`root ::= ("a" | "")+ "b"`, "repeats without bound something that can be empty"},
		{`root ::= "a"{5,2}`, "below the minimum"},
		{`root ::= "a"{2001}`, "at most 2000"},
		{`root ::= "a"{99999999999999999999}`, "at most 2000"},
		{`root ::= *`, "must follow an item"},
		{`root ::= ""*`, "must follow an item"},
		{`root ::= "\q"`, "unknown escape"},
		{`root ::= "\x4"`, "hex digits"},
		{`root = "a"`, "expecting ::="},
		{`root ::= ("a"`, "expecting ')'"},
		{`root ::= "a" )`, "expecting the end of the rule"},
		{"root ::= \"a\"\n| \"b\"", "expecting a rule name"},
		{`root ::= <[x]>`, "<[123]>"},
		{`root ::= <abc`, "expecting '>'"},
		{"root ::= \"a\x00\"", "NUL"},
		{"root ::= \"\xff\"", "UTF-8"},
		{"root ::= " + strings.Repeat("(", MaxNesting+1) + `"a"` + strings.Repeat(")", MaxNesting+1), "nested deeper"},
		{`root ::= "` + strings.Repeat("a", 1000) + `"{2000}`, "more than"},
	}
	for _, tc := range bad {
		err := Check(tc.g)
		var ge *GBNFError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%.60q) = %v, want a *GBNFError with %q", tc.g, err, tc.want)
		}
	}
	// A chain of rules that each start with the next one.
	var chain strings.Builder
	chain.WriteString("root ::= r0\n")
	for i := range MaxLeftDepth + 5 {
		chain.WriteString("r" + itoa(i) + " ::= r" + itoa(i+1) + " \"x\"\n")
	}
	chain.WriteString("r" + itoa(MaxLeftDepth+5) + " ::= \"y\"\n")
	if err := Check(chain.String()); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Errorf("a chain of %d rules: %v", MaxLeftDepth+5, err)
	}
	if err := Check(`root ::= "a"` + "\n" + `x ::= ("b" | "c"`); err == nil || !strings.Contains(err.Error(), "line 2, column") {
		t.Errorf("no position in %v", err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func TestJSONSchema(t *testing.T) {
	cases := []struct {
		name   string
		schema string
		accept []string
		reject []string
	}{
		{"object", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}`,
			[]string{`{"name":"Al","age":3}`, `{ "name" : "" , "age" : -12 }`, "{\n  \"name\": \"x\",\n  \"age\": 0\n}"},
			[]string{`{"age":3,"name":"Al"}`, `{"name":"Al"}`, `{"name":"Al","age":3,"x":1}`, `{"name":"Al","age":3.5}`, `{"name":"Al","age":01}`, ` {"name":"Al","age":3}`}},
		{"optional properties", `{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},"required":["b"]}`,
			[]string{`{"b":null}`, `{"a":true,"b":null}`, `{"b":null,"c":1.5e-3}`, `{"a":false,"b":null,"c":-0.25}`},
			[]string{`{}`, `{"a":true}`, `{"a":true,"c":1,"b":null}`, `{"b":null,}`, `{,"b":null}`}},
		{"all optional", `{"properties":{"a":{"const":1},"b":{"const":2}}}`,
			[]string{`{}`, `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
			[]string{`{"b":2,"a":1}`, `{"a":2}`, `{,}`}},
		{"additional properties", `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
			[]string{`{}`, `{"a":1}`, `{"a":1,"x":"y"}`, `{"x":"y","z":"w"}`},
			[]string{`{"x":1}`, `{"a":1,"x":2}`}},
		{"any object", `{"type":"object"}`,
			[]string{`{}`, `{"a":[1,{"b":null}],"c":"d"}`},
			[]string{`[]`, `{"a"}`}},
		{"string lengths", `{"type":"string","minLength":2,"maxLength":3}`,
			[]string{`"ab"`, `"abc"`, `"a\"c"`, `"é\u00e9"`},
			[]string{`"a"`, `"abcd"`, `"a` + "\n" + `b"`, `'ab'`}},
		{"enum and const", `{"type":"object","properties":{"c":{"enum":["red","green",1,null,{"x":[1]}]},"k":{"const":"a\"b"}},"required":["c","k"]}`,
			[]string{`{"c":"red","k":"a\"b"}`, `{"c":1,"k":"a\"b"}`, `{"c":null,"k":"a\"b"}`, `{"c":{"x":[1]},"k":"a\"b"}`},
			[]string{`{"c":"blue","k":"a\"b"}`, `{"c":"red","k":"ab"}`}},
		{"enum filtered by type", `{"type":"string","enum":["a",1]}`, []string{`"a"`}, []string{`1`}},
		{"anyOf and type lists", `{"anyOf":[{"type":"integer"},{"type":["string","null"],"maxLength":1}]}`,
			[]string{`5`, `"x"`, `null`, `""`},
			[]string{`"xy"`, `true`, `1.5`}},
		{"oneOf", `{"oneOf":[{"type":"boolean"},{"type":"array","items":{"type":"integer"},"maxItems":2}]}`,
			[]string{`true`, `[]`, `[1,2]`},
			[]string{`[1,2,3]`, `[true]`}},
		{"array bounds", `{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`,
			[]string{`[1,2]`, `[1, 2, 3]`, "[\n  1,\n  2\n]"},
			[]string{`[]`, `[1]`, `[1,2,3,4]`, `[1,,2]`, `[1,2,]`}},
		{"array min only", `{"type":"array","items":{"type":"boolean"},"minItems":1}`,
			[]string{`[true]`, `[true,false,true,true]`},
			[]string{`[]`}},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":{"type":"boolean"},"minItems":1,"maxItems":4}`,
			[]string{`["a"]`, `["a",1]`, `["a",1,true]`, `["a",1,true,false]`},
			[]string{`[]`, `[1]`, `["a",true]`, `["a",1,true,false,true]`}},
		{"prefixItems closed", `{"type":"array","prefixItems":[{"type":"null"},{"type":"null"}],"items":false}`,
			[]string{`[]`, `[null]`, `[null,null]`},
			[]string{`[null,null,null]`}},
		{"any array", `{"type":"array"}`, []string{`[]`, `[1,"a",[{}]]`}, []string{`{}`}},
		{"formats", `{"type":"object","properties":{"d":{"format":"date"},"t":{"type":"string","format":"date-time"},"u":{"type":"string","format":"uuid"},"h":{"type":"string","format":"time"}},"required":["d","t","u","h"]}`,
			[]string{`{"d":"2024-02-28","t":"2024-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","h":"08:30:00+02:00"}`,
				`{"d":"0001-04-30","t":"1999-01-31T00:00:00.5-11:30","u":"00000000-0000-0000-0000-000000000000","h":"23:59:59.123456Z"}`},
			[]string{`{"d":"2024-13-01","t":"2024-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","h":"08:30:00Z"}`,
				`{"d":"2023-02-30","t":"2024-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","h":"08:30:00Z"}`,
				`{"d":"2023-04-31","t":"2024-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","h":"08:30:00Z"}`,
				`{"d":"2024-02-29","t":"2024-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","h":"08:30:00Z"}`,
				`{"d":"2023-01-01","t":"2024-12-31 23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","h":"08:30:00Z"}`,
				`{"d":"2023-01-01","t":"2024-12-31T23:59:59Z","u":"123E4567-e89b-12d3-a456-426614174000","h":"08:30:00Z"}`,
				`{"d":"2023-01-01","t":"2024-12-31T23:59:59Z","u":"123e4567-e89b-12d3-a456-426614174000","h":"24:00:00Z"}`}},
		{"refs", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"}`,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`},
			[]string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
		{"definitions and pointer escapes", `{"definitions":{"a/b":{"type":"boolean"}},"type":"array","items":{"$ref":"#/definitions/a~1b"}}`,
			[]string{`[true,false]`}, []string{`[1]`}},
		{"true and empty schemas", `{"type":"object","properties":{"x":true,"y":{},"z":false},"required":["x","y"]}`,
			[]string{`{"x":1,"y":"s"}`, `{"x":[],"y":{"a":null}}`}, []string{`{"x":1,"y":2,"z":3}`}},
		{"annotations", `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"T","description":"d","type":"boolean","default":true,"examples":[true]}`,
			[]string{`true`}, []string{`"true"`}},
		{"unicode keys", `{"type":"object","properties":{"é \"q\"":{"type":"integer"}},"required":["é \"q\""]}`,
			[]string{`{"é \"q\"":1}`}, []string{`{"e":1}`}},
		{"numbers", `{"type":"number"}`,
			[]string{`0`, `-1.5`, `3e10`, `2.5E-7`},
			[]string{`01`, `1.`, `.5`, `+1`, `1e999`, `NaN`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := FromJSONSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			p := mustMatcher(t, g)
			for _, s := range tc.accept {
				if !matches(p, s) {
					t.Errorf("rejects %s\n%s", s, g)
				}
			}
			for _, s := range tc.reject {
				if matches(p, s) {
					t.Errorf("accepts %s\n%s", s, g)
				}
			}
		})
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	cases := []struct {
		schema, keyword, pointer, msg string
	}{
		{`{"type":"integer","minimum":3}`, "minimum", "", "not supported"},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"x+"}}}`, "pattern", "/properties/a", "not supported"},
		{`{"type":"array","items":{"allOf":[{}]}}`, "allOf", "/items", "not supported"},
		{`{"anyOf":[{"type":"string"},{"not":{}}]}`, "not", "/anyOf/1", "not supported"},
		{`{"type":"strin"}`, "type", "", "unknown type"},
		{`{"type":5}`, "type", "", "string or an array"},
		{`{"type":"string","format":"email"}`, "format", "", `"email"`},
		{`{"type":"string","maxLength":5000}`, "maxLength", "", "at most 2000"},
		{`{"type":"string","minLength":3,"maxLength":2}`, "maxLength", "", "below minLength"},
		{`{"type":"array","minItems":-1}`, "minItems", "", "non-negative integer"},
		{`{"type":"array","maxItems":1.5}`, "maxItems", "", "non-negative integer"},
		{`{"$ref":"https://example.com/s.json"}`, "$ref", "", "only local"},
		{`{"$ref":"#/$defs/missing"}`, "$ref", "", "points to nothing"},
		{`{"$ref":"#/$defs/a","type":"object"}`, "type", "", "beside $ref"},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, "required", "", `"b"`},
		{`{"enum":[]}`, "enum", "", "non-empty"},
		{`{"anyOf":{}}`, "anyOf", "", "non-empty array"},
		{`{"type":"string","enum":[1,2]}`, "enum", "", "no value"},
		{`{"properties":{"a":{"type":"object","properties":{"b":{"if":{}}}}}}`, "if", "/properties/a/properties/b", "not supported"},
		{`{"properties":{"a/b~":{"exclusiveMinimum":1}}}`, "exclusiveMinimum", "/properties/a~1b~0", "not supported"},
		{`[1]`, "", "", "must be an object"},
		{`false`, "", "", "accepts nothing"},
		{`{"type":"object"`, "", "", "not valid JSON"},
		{`{"a":1} x`, "", "", "not valid JSON"},
		{`{"type":"object","type":"string"}`, "", "", "twice"},
		{`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "", "", "left-recursive"},
		{strings.Repeat(`{"items":`, 200) + "{}" + strings.Repeat("}", 200), "", "", "deeper"},
	}
	for _, tc := range cases {
		_, err := FromJSONSchema([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%.60s: %v, want a *SchemaError", tc.schema, err)
			continue
		}
		if se.Keyword != tc.keyword || se.Pointer() != tc.pointer || !strings.Contains(se.Error(), tc.msg) {
			t.Errorf("%.60s: keyword %q at %q: %v; want %q at %q with %q", tc.schema, se.Keyword, se.Pointer(), se, tc.keyword, tc.pointer, tc.msg)
		}
	}
}

func TestAnyJSONObject(t *testing.T) {
	p := mustMatcher(t, AnyJSONObject())
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,2,{"c":"d"}]},"e":true,"f":null,"g":-1.5e3}`, "{\n  \"a\": [ ]\n}"} {
		if !matches(p, s) {
			t.Errorf("rejects %s", s)
		}
	}
	for _, s := range []string{`[]`, `"a"`, `{"a":}`, `{a:1}`, `{"a":1}x`, `{"a":1,}`} {
		if matches(p, s) {
			t.Errorf("accepts %s", s)
		}
	}
}

// regexCases are patterns with strings to compare against Go's regexp.
var regexCases = []struct {
	pattern string
	inputs  []string
}{
	{`[a-z]+@[a-z]+\.com`, []string{"ab@cd.com", "ab@cd.org", "@cd.com", "AB@cd.com"}},
	{`^\d{3}-\d{4}$`, []string{"555-1234", "55-1234", "5555-1234", "abc-defg"}},
	{`(cat|dog)s?`, []string{"cat", "dogs", "cats", "bird", "catss", ""}},
	{`a.c`, []string{"abc", "a\nc", "ac", "a€c"}},
	{`(?s)a.c`, []string{"a\nc"}},
	{`[^0-9\s]{2,}`, []string{"ab", "a1", "a b", "é€"}},
	{`(?i)hello`, []string{"HeLLo", "hello", "help"}},
	{`x*?y+?z??`, []string{"y", "xxyy", "xyz", "z"}},
	{`\w+\W\S\D`, []string{"ab_1-xy", "ab 1 x", "a!!!"}},
	{`[\]\[\-^\\"]+`, []string{`][-^\"`, "a"}},
	{`\x41\x{e9}\t\n`, []string{"Aé\t\n", "A\t\n"}},
	{`(a|)b`, []string{"ab", "b", "aab"}},
	{`(ab){2}(c){0,2}`, []string{"abab", "ababcc", "ababccc", "ab"}},
	{`true|false`, []string{"true", "false", "tru"}},
	{``, []string{"", "a"}},
	{`^$`, []string{"", "a"}},
}

func TestRegex(t *testing.T) {
	for _, tc := range regexCases {
		g, err := FromRegex(tc.pattern)
		if err != nil {
			t.Errorf("FromRegex(%q): %v", tc.pattern, err)
			continue
		}
		p := mustMatcher(t, g)
		re := regexp.MustCompile(`^(?:` + tc.pattern + `)$`)
		for _, s := range tc.inputs {
			if got, want := matches(p, s), re.MatchString(s); got != want {
				t.Errorf("%q on %q: grammar %v, regexp %v\n%s", tc.pattern, s, got, want, g)
			}
		}
	}
}

func TestRegexErrors(t *testing.T) {
	cases := []struct{ pattern, want string }{
		{`(?=a)b`, "`(?=`"},
		{`(a)\1`, `\1`},
		{`a\bb`, `\b`},
		{`a^b`, "anchors"},
		{`(a*)*`, "empty string"},
		{`[a-`, "missing closing ]"},
		{`a{2001}`, "repeat count"},
		{`(a`, "missing closing )"},
		{`[^\x00-\x{10FFFF}]`, "matches nothing"},
	}
	for _, tc := range cases {
		_, err := FromRegex(tc.pattern)
		var re *RegexError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromRegex(%q) = %v, want a *RegexError with %q", tc.pattern, err, tc.want)
		}
	}
}

func TestChoices(t *testing.T) {
	choices := []string{"yes", "no", `a "quoted" \ one`, "", "é\n", "-]["}
	g, err := Choices(choices)
	if err != nil {
		t.Fatal(err)
	}
	p := mustMatcher(t, g)
	for _, c := range choices {
		if !matches(p, c) {
			t.Errorf("rejects %q\n%s", c, g)
		}
	}
	for _, s := range []string{"ye", "yesno", "No", " yes"} {
		if matches(p, s) {
			t.Errorf("accepts %q", s)
		}
	}
	if _, err := Choices(nil); err == nil {
		t.Error("no choices: no error")
	}
}
