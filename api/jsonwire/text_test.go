package jsonwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestBadTextPath(t *testing.T) {
	tests := []struct {
		body string
		path string // "" and ok false: valid
		ok   bool
	}{
		{`{"a":"x","b":["y","z"]}`, "", false},
		{"{\"a\":\"\xff\"}", "a", true},
		{"{\"a\":{\"b\":[1,{\"c\":\"\xc3\"}]}}", "a.b[1].c", true},
		{`{"a":["ok","\ud800"]}`, "a[1]", true},
		{`{"a":"\ud83d\ude00"}`, "", false},
		{`{"a":"\udc00\ud800"}`, "a", true},
		{`{"a":"\ud800\u0041"}`, "a", true},
		{`{"a":"\\ud800"}`, "", false},   // an escaped backslash, not an escape
		{"{\"\xff\":1}", "\uFFFD", true}, // the path names the key as decoded
		{"[\"\xff\"]", "[0]", true},
		{`{"a":`, "", false}, // malformed JSON is the decoder's business
	}
	for _, tt := range tests {
		path, ok := badTextPath([]byte(tt.body))
		if ok != tt.ok || path != tt.path {
			t.Errorf("badTextPath(%q) = %q, %v; want %q, %v", tt.body, path, ok, tt.path, tt.ok)
		}
	}
}

// FuzzCheckText: CheckText never panics, and when it lets a well-formed
// body through, decoding it produces no U+FFFD the client did not send.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{`{"a":"x"}`, "{\"a\":\"\xff\"}", `{"a":["\ud800"]}`, `{"a":"\ud83d\ude00"}`, `[{"b":{"c":"\u00e9"}}]`, `"\\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := CheckText(body)
		if err != nil || !json.Valid(body) {
			return
		}
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		sent := bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if strings.ContainsRune(x, '\uFFFD') && !sent {
					t.Fatalf("CheckText let %q through, which decodes with U+FFFD", body)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}
