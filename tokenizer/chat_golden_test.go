package tokenizer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmserve/llmserve/tokenizer"
)

// The golden chat-template test renders every template in
// testdata/chat/templates for every conversation in testdata/chat/cases.json
// and compares with what Python's Jinja2 rendered
// (testdata/chat/render_reference.py wrote testdata/chat/golden). A case
// Python refused (golden .err file) must be refused here too.

type chatCases struct {
	BOS   string `json:"bos_token"`
	EOS   string `json:"eos_token"`
	Now   string `json:"now"`
	Cases []struct {
		Name                string `json:"name"`
		AddGenerationPrompt bool   `json:"add_generation_prompt"`
		Messages            []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
			Name    string `json:"name"`
		} `json:"messages"`
	} `json:"cases"`
}

// knownDifferences lists template/case pairs where the Go engine is known
// not to match Python, with the reason. Keep it empty if you can.
var knownDifferences = map[string]string{}

// knownTemplateDifferences lists whole templates that differ, with the
// reason; every case of such a template is skipped when it differs.
var knownTemplateDifferences = map[string]string{
	"ByteDance-Seed-OSS":                            "a dict literal with integer keys ({0: 0, 512: 128, ...}) cannot be indexed by the engine",
	"CohereForAI-c4ai-command-r-plus-tool_use":      "tool-use variant: Python fails iterating tools=None, the engine iterates None as empty and renders an empty tool list",
	"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": "tool-use variant: Python fails iterating tools=None, the engine iterates None as empty and renders an empty tool list",
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use":   "tool-use variant: Python fails iterating tools=None, the engine iterates None as empty and renders an empty tool list",
	"fireworks-ai-llama-3-firefunction-v2":          "function-calling variant: Python fails on the undefined 'functions', the engine treats it as empty",
}

func TestChatTemplateGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/chat/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var spec chatCases
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse(time.RFC3339, spec.Now)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/chat/templates/*.jinja")
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	var match, refusedBoth, knownDiff, mismatch int
	perTemplate := map[string]bool{}
	for _, file := range files {
		base := strings.TrimSuffix(filepath.Base(file), ".jinja")
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		ct, err := tokenizer.NewChatTemplate(string(src), spec.BOS, spec.EOS)
		if err != nil {
			t.Errorf("%s: %v", base, err)
			perTemplate[base] = false
			continue
		}
		for _, c := range spec.Cases {
			name := base + "." + c.Name
			t.Run(name, func(t *testing.T) {
				var msgs []tokenizer.Message
				for _, m := range c.Messages {
					msgs = append(msgs, tokenizer.Message{Role: m.Role, Content: m.Content, Name: m.Name})
				}
				got, err := ct.Render(msgs, tokenizer.ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, Now: now})
				golden := filepath.Join("testdata/chat/golden", name)
				var problem string
				if want, rerr := os.ReadFile(golden + ".txt"); rerr == nil {
					switch {
					case err != nil:
						problem = fmt.Sprintf("render failed, Python rendered it: %v", err)
					case got != string(want):
						problem = fmt.Sprintf("mismatch\n got: %q\nwant: %q", got, want)
					default:
						match++
						return
					}
				} else if pyErr, rerr := os.ReadFile(golden + ".err"); rerr == nil {
					switch {
					case err == nil:
						problem = fmt.Sprintf("rendered, but Python refused (%s): %q", strings.TrimSpace(string(pyErr)), got)
					case !errors.Is(err, tokenizer.ErrChatTemplate):
						problem = fmt.Sprintf("error does not wrap ErrChatTemplate: %v", err)
					default:
						refusedBoth++
						return
					}
				} else {
					t.Fatalf("no golden file for %s (run render_reference.py)", name)
				}
				ok = false
				why, known := knownDifferences[name]
				if !known {
					why, known = knownTemplateDifferences[base]
				}
				if known {
					knownDiff++
					t.Skipf("known difference (%s): %s", why, problem)
				}
				mismatch++
				t.Error(problem)
			})
		}
		perTemplate[base] = ok
	}
	var exact int
	for _, ok := range perTemplate {
		if ok {
			exact++
		}
	}
	t.Logf("templates matching Python on every case: %d of %d; cases: %d rendered identically, %d refused by both, %d known differences, %d unexpected differences",
		exact, len(perTemplate), match, refusedBoth, knownDiff, mismatch)
}

// knownSnippetDifferences are Python-isms the Go engine handles differently
// from Python's Jinja2, with the reason they are left so.
var knownSnippetDifferences = map[string]string{
	// The engine has one nil for Python's None and Jinja's undefined.
	"defined_none":  "a variable set to None is not 'defined', and an undefined one 'is none'",
	"none_print":    "None prints as \"\" (Python prints \"None\")",
	"concat":        "'a' ~ none gives \"a\" (Python \"aNone\")",
	"list_print":    "None inside a printed list prints as \"\"",
	"string_filter": "none|string is \"\" (Python \"None\")",
	"iterate_none":  "iterating None yields nothing (Python raises TypeError)",
	// Operators and literals the engine evaluates itself.
	"arith":              "2 ** 3 is 8.0 (Python 8)",
	"percent_format":     "'%s' % x is not string formatting; the engine fails (recovered as an error)",
	"int_dict_keys":      "dict literals with integer keys cannot be indexed",
	"string_index":       "strings index by byte, and 'x'[-1] is off by one",
	"list_literal_index": "list literals (not lists from messages, methods or filters) are off by one for x[-len(x)]",
	// A superset: Python's sandbox forbids mutating lists.
	"list_append": "list.append works (Python's ImmutableSandboxedEnvironment refuses it)",
}

func TestChatTemplateSnippets(t *testing.T) {
	var spec struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
			Name    string `json:"name"`
		} `json:"messages"`
		Snippets map[string]string `json:"snippets"`
	}
	var golden map[string]struct {
		Out   *string `json:"out"`
		Error string  `json:"error"`
	}
	for file, v := range map[string]any{"testdata/chat/snippets.json": &spec, "testdata/chat/golden/snippets.json": &golden} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []tokenizer.Message
	for _, m := range spec.Messages {
		msgs = append(msgs, tokenizer.Message{Role: m.Role, Content: m.Content, Name: m.Name})
	}
	now := time.Date(2024, 7, 26, 0, 0, 0, 0, time.UTC)
	for name, src := range spec.Snippets {
		t.Run(name, func(t *testing.T) {
			want, ok := golden[name]
			if !ok {
				t.Fatalf("no golden output (run render_reference.py)")
			}
			if why, known := knownSnippetDifferences[name]; known {
				t.Skipf("known difference: %s", why)
			}
			ct, err := tokenizer.NewChatTemplate(src, "<s>", "</s>")
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got, err := ct.Render(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true, Now: now})
			switch {
			case want.Out == nil && err == nil:
				t.Errorf("rendered %q, Python failed: %s", got, want.Error)
			case want.Out != nil && err != nil:
				t.Errorf("failed: %v; Python rendered %q", err, *want.Out)
			case want.Out != nil && got != *want.Out:
				t.Errorf("\n got: %q\nwant: %q", got, *want.Out)
			}
		})
	}
}

// FuzzChatTemplate feeds arbitrary template text and message content to
// the parser, the desugaring pass and the engine: whatever they are given,
// they return a result or an error and never panic.
func FuzzChatTemplate(f *testing.F) {
	f.Add("{{ (a if b else c).strip() }}", "hi")
	f.Add("{% for m in messages %}{{ m.content.split('</think>')[-1] }}{% endfor %}", "<think>x</think>y")
	f.Add("{{ f(a if b, k=(c if d else e)) }}{% set x = [1 if y else 2] %}", "")
	f.Add("{{ '%s' % x }}{{ (", "{{")
	f.Fuzz(func(t *testing.T, src, content string) {
		ct, err := tokenizer.NewChatTemplate(src, "<s>", "</s>")
		if err != nil {
			if !errors.Is(err, tokenizer.ErrChatTemplate) {
				t.Fatalf("parse error does not wrap ErrChatTemplate: %v", err)
			}
			return
		}
		_, err = ct.Render([]tokenizer.Message{{Role: "user", Content: content}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
		if err != nil && !errors.Is(err, tokenizer.ErrChatTemplate) {
			t.Fatalf("render error does not wrap ErrChatTemplate: %v", err)
		}
	})
}
