package models

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// fakeTokenizer encodes each byte b as token 100+b, adds a 1 when asked
// for special tokens, and encodes "<s>" as the special token 7 when asked
// to parse special tokens.
type fakeTokenizer struct{ calls []string }

func (f *fakeTokenizer) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	f.calls = append(f.calls, fmt.Sprintf("%q add=%v parse=%v", text, addSpecial, parseSpecial))
	if text == "fail" {
		return nil, errors.New("cannot")
	}
	var out []int32
	if addSpecial {
		out = append(out, 1)
	}
	for len(text) > 0 {
		if parseSpecial && strings.HasPrefix(text, "<s>") {
			out = append(out, 7)
			text = text[3:]
			continue
		}
		out = append(out, 100+int32(text[0]))
		text = text[1:]
	}
	return out, nil
}

func TestRerankFormat(t *testing.T) {
	const q, d = 100 + 'q', 100 + 'd'
	for _, tc := range []struct {
		name       string
		f          rerankFormat
		query, doc string
		want       []int32
		calls      []string
	}{
		{"nothing added", rerankFormat{bos: 1, eos: 2, sep: 3}, "q", "d", []int32{q, d},
			[]string{`"q" add=false parse=false`, `"d" add=false parse=false`}},
		{"BOS only (llama)", rerankFormat{addBOS: true, bos: 1, eos: 2, sep: -1}, "q", "d", []int32{1, q, d}, nil},
		{"BOS and EOS", rerankFormat{addBOS: true, addEOS: true, bos: 1, eos: 2, sep: -1}, "q", "d", []int32{1, q, 2, d, 2}, nil},
		{"BERT: CLS q SEP SEP d SEP", rerankFormat{addBOS: true, addEOS: true, addSEP: true, bos: 101, eos: -1, sep: 102}, "q", "d", []int32{101, q, 102, 102, d, 102}, nil},
		{"EOS and SEP", rerankFormat{addEOS: true, addSEP: true, bos: 1, eos: 2, sep: 3}, "q", "d", []int32{q, 2, 3, d, 2}, nil},
		{"SEP only", rerankFormat{addSEP: true, bos: 1, eos: 2, sep: 3}, "q", "d", []int32{q, 3, d}, nil},
		{"special text in a plain pair is not parsed", rerankFormat{bos: 1, eos: 2, sep: 3}, "<s>", "d",
			[]int32{100 + '<', 100 + 's', 100 + '>', d}, nil},
		{"template", rerankFormat{template: "<s>Q{query}D{document}{query}", addBOS: true, addEOS: true, bos: 1, eos: 2, sep: 3}, "q", "d",
			[]int32{7, 100 + 'Q', q, 100 + 'D', d, q}, []string{`"<s>QqDdq" add=false parse=true`}},
		{"template without placeholders", rerankFormat{template: "x"}, "q", "d", []int32{100 + 'x'}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := &fakeTokenizer{}
			got, err := tc.f.tokens(tok, tc.query, tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tokens %v, want %v", got, tc.want)
			}
			if tc.calls != nil && !reflect.DeepEqual(tok.calls, tc.calls) {
				t.Errorf("tokenized %v, want %v", tok.calls, tc.calls)
			}
		})
	}
	for _, tc := range []struct{ query, doc string }{{"fail", "d"}, {"q", "fail"}} {
		if _, err := (rerankFormat{}).tokens(&fakeTokenizer{}, tc.query, tc.doc); err == nil {
			t.Errorf("%q, %q: no error", tc.query, tc.doc)
		}
	}
}
