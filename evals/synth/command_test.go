package synth

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmserve/llmserve/gguf"
)

func runCommand(args ...string) (string, error) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestCommand(t *testing.T) {
	vocab := writeVocab(t, 40)
	path := filepath.Join(t.TempDir(), "m.gguf")
	out, err := runCommand("--shape", "stories260k", "--dtype", "Q8_0", "--vocab", vocab, "-o", path, "--seed", "3")
	if err != nil {
		t.Fatal(err, out)
	}
	for _, want := range []string{
		"wrote " + path + ": stories260k q8_0",
		"vocabulary of 40 tokens",
		"note: 5 matrices are F16",
		"note: the vocabulary has 40 tokens, karpathy/tinyllamas stories260K has 512",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}
}

func TestCommandErrors(t *testing.T) {
	vocab := writeVocab(t, 40)
	out := filepath.Join(t.TempDir(), "m.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", out}, `"vocab" not set`},
		{[]string{"--vocab", vocab}, `"output" not set`},
		{[]string{"--vocab", vocab, "-o", out, "--shape", "gpt-5"}, "unknown shape"},
		{[]string{"--vocab", vocab, "-o", out, "--dtype", "q4_k"}, "unknown dtype"},
		{[]string{"--vocab", vocab, "-o", out, "extra"}, "unknown command"},
	} {
		if _, err := runCommand(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// TestCommandChatTemplate: --chat-template writes the file's template into
// the model; with --reasoning (which writes its own) it is refused.
func TestCommandChatTemplate(t *testing.T) {
	vocab := writeVocab(t, 40)
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "tools.jinja")
	const text = "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}"
	if err := os.WriteFile(tmpl, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "m.gguf")
	if out, err := runCommand("--shape", "stories260k", "--vocab", vocab, "-o", path, "--chat-template", tmpl); err != nil {
		t.Fatal(err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Lookup("tokenizer.chat_template"); got != text {
		t.Errorf("tokenizer.chat_template = %q, want the file's", got)
	}
	if _, err := runCommand("--vocab", vocab, "-o", path, "--chat-template", tmpl, "--reasoning"); err == nil || !strings.Contains(err.Error(), "leave out --chat-template") {
		t.Errorf("--reasoning with --chat-template: %v", err)
	}
	if _, err := runCommand("--vocab", vocab, "-o", path, "--chat-template", filepath.Join(dir, "missing.jinja")); err == nil || !strings.Contains(err.Error(), "--chat-template") {
		t.Errorf("a missing template file: %v", err)
	}
}

// TestDocListsShapes keeps doc.go's table of shapes in step with the code.
func TestDocListsShapes(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	writeShapes(&table)
	for _, line := range strings.Split(strings.TrimSpace(table.String()), "\n") {
		want := "//\t" + strings.TrimSpace(line) + "\n"
		if !strings.Contains(string(doc), want) {
			t.Errorf("doc.go lacks the line %q", want)
		}
	}
}
