package tokenizer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/tokenizer"
)

// A client may send its own template: whatever it does, rendering ends
// with an error, not a hang, an out-of-memory crash or a stack overflow.
func TestChatTemplateLimits(t *testing.T) {
	tests := []struct{ name, tmpl, want string }{
		{"recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested deeper"},
		{"nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loop iterations"},
		{"doubling string", "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}", "exceeds"},
		{"doubling concat", "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "exceeds"},
		{"repeat", "{{ 'x' * 100000000000 }}", "exceeds"},
		{"center", "{{ 'x' | center(100000000000) }}", "too large"},
		{"ljust", "{{ 'x'.ljust(100000000000) }}", "too large"},
		{"budget variable", "{% set __py_render_state = none %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loop iterations"},
		{"big output", "{{ 'x' * 15000000 }}{{ 'x' * 15000000 }}", "exceeds"},
		{"replace method", "{% set s = 'x' * 10000000 %}{{ s.replace('x', s) }}", "exceeds"},
		{"replace filter", "{% set s = 'x' * 10000000 %}{{ s | replace('x', s) }}", "exceeds"},
		{"join filter", "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | join(',') }}", "exceeds"},
		{"join method", "{% set s = 'x' * 10000000 %}{{ ','.join([s] * 1000) }}", "exceeds"},
		{"indent", "{% set s = '\n' * 10000000 %}{{ s | indent(60000) }}", "exceeds"},
		{"format method", "{% set s = 'x' * 10000000 %}{{ ('{0}' * 100).format(s) }}", "exceeds"},
		{"tojson", "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | tojson }}", "exceeds"},
		{"expandtabs", "{{ ('\t' * 1000000).expandtabs(60000) }}", "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, err := tokenizer.NewChatTemplate(tt.tmpl, "", "")
			if err != nil {
				t.Fatal(err)
			}
			_, err = ct.Render(nil, tokenizer.ChatOptions{})
			if !errors.Is(err, tokenizer.ErrChatTemplate) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrChatTemplate containing %q", err, tt.want)
			}
		})
	}
	for _, src := range []string{
		strings.Repeat("x", tokenizer.MaxChatTemplateBytes+1),
		"{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}",
		"{% endpyroot %}{{ 'x' * 100000000000 }}{% pyroot %}",
		"{%- endpyroot -%}",
	} {
		if _, err := tokenizer.NewChatTemplate(src, "", ""); !errors.Is(err, tokenizer.ErrChatTemplate) {
			t.Errorf("template %.40q: err = %v, want a parse error", src, err)
		}
	}
}
