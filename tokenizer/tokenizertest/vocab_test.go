package tokenizertest_test

import (
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestVocab(t *testing.T) {
	v := tokenizertest.New(tokenizertest.Spec{
		Pieces:  []string{"a", "ab", "abc", " ", "", "a"},
		Special: []string{"<|x|>", "<|y|>"},
		EOG:     []string{"<|y|>", "not special"},
		AddBOS:  true,
	})
	a, ab, abc, sp, x, y := v.Token("a"), v.Token("ab"), v.Token("abc"), v.Token(" "), v.Token("<|x|>"), v.Token("<|y|>")
	if v.NumTokens() != 258+4+2 || a != 258 || y != 263 || v.Token("zz") != -1 {
		t.Fatalf("layout: n=%d a=%d y=%d", v.NumTokens(), a, y)
	}
	tests := []struct {
		text                     string
		addSpecial, parseSpecial bool
		want                     []int32
	}{
		{"abcab a", false, false, []int32{abc, ab, sp, a}},
		{"ab", true, false, []int32{tokenizertest.BOS, ab}},
		{"a<|x|>", false, true, []int32{a, x}},
		{"<s>", false, true, []int32{tokenizertest.BOS}},
		{"a<|x|>", false, false, []int32{a, tokenizertest.ByteToken('<'), tokenizertest.ByteToken('|'), tokenizertest.ByteToken('x'), tokenizertest.ByteToken('|'), tokenizertest.ByteToken('>')}},
		{"é", false, false, []int32{tokenizertest.ByteToken(0xC3), tokenizertest.ByteToken(0xA9)}},
	}
	for _, tt := range tests {
		got, err := v.Tokenize(tt.text, tt.addSpecial, tt.parseSpecial)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Tokenize(%q, %v, %v) = %v, %v; want %v", tt.text, tt.addSpecial, tt.parseSpecial, got, err, tt.want)
		}
	}
	if string(v.Piece(x, false)) != "" || string(v.Piece(x, true)) != "<|x|>" || string(v.Piece(abc, false)) != "abc" {
		t.Error("Piece of control or ordinary token")
	}
	if got := v.Piece(tokenizertest.ByteToken(0xE2), false); !slices.Equal(got, []byte{0xE2}) {
		t.Errorf("byte piece = %v", got)
	}
	if v.Piece(-1, true) != nil || v.Piece(int32(v.NumTokens()), true) != nil {
		t.Error("out-of-range Piece is not nil")
	}
	if !v.IsEOG(tokenizertest.EOS) || !v.IsEOG(y) || v.IsEOG(x) || v.IsEOG(-1) {
		t.Error("IsEOG")
	}
	if !v.IsControl(tokenizertest.BOS) || !v.IsControl(x) || v.IsControl(a) || v.IsControl(1<<20) {
		t.Error("IsControl")
	}
	if v.BOS() != tokenizertest.BOS || v.EOS() != tokenizertest.EOS {
		t.Error("BOS/EOS")
	}
}
