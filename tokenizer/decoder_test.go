package tokenizer_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmserve/llmserve/tokenizer/tokenizertest"
)

func TestDecoder(t *testing.T) {
	tk, v := newTokenizer(t, "")
	tok := v.Token
	b := tokenizertest.ByteToken
	tests := []struct {
		name  string
		toks  []int32
		steps []string // what each Add returns
		flush string
	}{
		{"words", []int32{tok("Hello"), tok(" world"), tok("!")}, []string{"Hello", " world", "!"}, ""},
		{"control tokens give nothing", []int32{tokenizertest.BOS, tok("Hello"), tok("<|im_end|>"), tokenizertest.EOS}, []string{"", "Hello", "", ""}, ""},
		{"3-byte char held until complete", []int32{b(0xE2), b(0x82), b(0xAC), tok("!")}, []string{"", "", "€", "!"}, ""},
		{"4-byte char", []int32{b(0xF0), b(0x9F), b(0x98), b(0x80)}, []string{"", "", "", "😀"}, ""},
		{"held bytes survive a control token", []int32{b(0xE2), tokenizertest.EOS, b(0x82), b(0xAC)}, []string{"", "", "", "€"}, ""},
		{"incomplete at end flushes as U+FFFD", []int32{tok("Hello"), b(0xE2), b(0x82)}, []string{"Hello", "", ""}, "\uFFFD"},
		{"broken by ASCII", []int32{b(0xE2), b(0x82), tok("!")}, []string{"", "", "\uFFFD!"}, ""},
		{"broken by a new lead byte", []int32{b(0xE2), b(0x82), b(0xE2), b(0x82), b(0xAC)}, []string{"", "", "\uFFFD", "", "€"}, ""},
		{"invalid lead byte at once", []int32{b(0xFF), b(0x80), tok("!")}, []string{"\uFFFD", "\uFFFD", "!"}, ""},
		{"overlong lead at once", []int32{b(0xC0), b(0xAF)}, []string{"\uFFFD", "\uFFFD"}, ""},
		{"surrogate never completes", []int32{b(0xED), b(0xA0), b(0x80)}, []string{"", "\uFFFD\uFFFD", "\uFFFD"}, ""},
		{"above U+10FFFF", []int32{b(0xF4), b(0x90)}, []string{"", "\uFFFD\uFFFD"}, ""},
		{"piece after held bytes", []int32{b(0xC3), b(0xA9), tok("é"), b(0xE6), tok("日本")}, []string{"", "é", "é", "", "\uFFFD日本"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tk.NewDecoder()
			var all strings.Builder
			for i, x := range tt.toks {
				got := d.Add(x)
				if got != tt.steps[i] {
					t.Errorf("Add #%d (%d) = %q, want %q", i, x, got, tt.steps[i])
				}
				all.WriteString(got)
			}
			if got := d.Flush(); got != tt.flush {
				t.Errorf("Flush = %q, want %q", got, tt.flush)
			}
			all.WriteString(tt.flush)
			if want := tk.Decode(tt.toks); all.String() != want {
				t.Errorf("streamed %q, Decode %q", all.String(), want)
			}
		})
	}
}

func TestDecoderReuseAfterFlush(t *testing.T) {
	tk, v := newTokenizer(t, "")
	d := tk.NewDecoder()
	d.Add(tokenizertest.ByteToken(0xE2))
	if got := d.Flush(); got != "\uFFFD" {
		t.Fatalf("Flush = %q", got)
	}
	if got := d.Flush(); got != "" {
		t.Fatalf("second Flush = %q", got)
	}
	if got := d.Add(v.Token("Hello")); got != "Hello" {
		t.Fatalf("Add after Flush = %q", got)
	}
}

// FuzzDecoder checks the Decoder's contract on any token sequence: every
// Add returns valid UTF-8, and everything streamed plus Flush equals Decode.
func FuzzDecoder(f *testing.F) {
	tk, v := newTokenizer(f, "")
	n := v.NumTokens()
	f.Add([]byte{0, 0xE4, 0, 0x84, 0, 0xAE}) // bytes of €
	f.Add([]byte{1, 2, 0, 0xE4, 1, 3, 0, 0x84})
	f.Add([]byte{0, 0xF2, 0, 0xA1, 0, 0x9A, 0, 0x82, 0, 1})
	f.Add([]byte{0, 0xEF, 0, 0xA2, 0, 0x82, 1, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		var toks []int32
		for i := 0; i+1 < len(data); i += 2 {
			// Two bytes per token, a few ids out of range on purpose.
			toks = append(toks, int32(int(data[i])<<8|int(data[i+1]))%int32(n+3)-1)
		}
		d := tk.NewDecoder()
		var all strings.Builder
		for _, x := range toks {
			s := d.Add(x)
			if !utf8.ValidString(s) {
				t.Fatalf("Add(%d) returned invalid UTF-8 %q", x, s)
			}
			all.WriteString(s)
		}
		s := d.Flush()
		if !utf8.ValidString(s) {
			t.Fatalf("Flush returned invalid UTF-8 %q", s)
		}
		all.WriteString(s)
		if want := tk.Decode(toks); all.String() != want {
			t.Fatalf("tokens %v: streamed %q, Decode %q", toks, all.String(), want)
		}
	})
}

// BenchmarkDecoderAdd streams a long sequence mixing whole pieces and
// byte-fallback characters, one token at a time.
func BenchmarkDecoderAdd(b *testing.B) {
	tk, v := newTokenizer(b, "")
	var toks []int32
	for range 256 {
		toks = append(toks, v.Token("Hello"), v.Token(" world"), v.Token("é"))
		toks = append(toks, bytesOf("€")...)
	}
	b.ReportAllocs()
	for b.Loop() {
		d := tk.NewDecoder()
		for _, x := range toks {
			d.Add(x)
		}
		d.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(toks)), "ns/token")
}
