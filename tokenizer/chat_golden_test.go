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
		Name                string            `json:"name"`
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
		ContinueFinal       bool              `json:"continue_final_message"`
		Messages            []caseMessage     `json:"messages"`
		Tools               []json.RawMessage `json:"tools"`
		Documents           []json.RawMessage `json:"documents"`
		Kwargs              map[string]any    `json:"kwargs"`
	} `json:"cases"`
}

// caseMessage is an OpenAI chat message as a client sends it.
type caseMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"` // string, text parts or null
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// toMessages shapes the messages as the API does (and vLLM): text parts
// joined with "\n", null content as "".
func toMessages(t *testing.T, in []caseMessage) []tokenizer.Message {
	t.Helper()
	var out []tokenizer.Message
	for _, m := range in {
		msg := tokenizer.Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		var s string
		var parts []struct{ Type, Text string }
		switch {
		case len(m.Content) == 0 || string(m.Content) == "null":
		case json.Unmarshal(m.Content, &s) == nil:
			msg.Content = s
		case json.Unmarshal(m.Content, &parts) == nil:
			var texts []string
			for _, p := range parts {
				if p.Type == "text" {
					texts = append(texts, p.Text)
				}
			}
			msg.Content = strings.Join(texts, "\n")
		default:
			t.Fatalf("bad content %s", m.Content)
		}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, tokenizer.ToolCall{ID: c.ID, Type: c.Type, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		out = append(out, msg)
	}
	return out
}

// knownDifferences lists template/case pairs where the Go engine is known
// not to match Python, with the reason. Keep it empty if you can.
var knownDifferences = map[string]string{}

// knownTemplateDifferences lists whole templates that differ, with the
// reason; every case of such a template is skipped when it differs.
var knownTemplateDifferences = map[string]string{}

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
				msgs := toMessages(t, c.Messages)
				got, err := ct.Render(msgs, tokenizer.ChatOptions{
					AddGenerationPrompt: c.AddGenerationPrompt, ContinueFinalMessage: c.ContinueFinal, Now: now,
					Tools: c.Tools, Documents: c.Documents, Kwargs: c.Kwargs,
				})
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
// from Python's Jinja2, with the reason they are left so. Keep it empty.
var knownSnippetDifferences = map[string]string{}

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
