package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one chat message as chat templates see it.
type Message struct {
	Role    string
	Content string
	// Name is the optional participant name. Templates see it as
	// message.name only when it is set, as with transformers.
	Name string
}

// ChatOptions control rendering.
type ChatOptions struct {
	// AddGenerationPrompt ends the prompt with the assistant's turn opener.
	AddGenerationPrompt bool
	// Kwargs are extra template variables, as vLLM's chat_template_kwargs
	// (for example {"enable_thinking": false} for Qwen3). Values are plain
	// Go values: bool, numbers, string, []any, map[string]any. They cannot
	// replace the variables the other fields set (messages,
	// add_generation_prompt, bos_token, eos_token, tools, documents).
	Kwargs map[string]any
	// Now is the time the template's strftime_now formats (some templates
	// print today's date). The zero value means time.Now().
	Now time.Time
}

// ErrChatTemplate is wrapped by every error from parsing or rendering a chat
// template. A render error is nearly always the template refusing the
// conversation (raise_exception, such as "Conversation roles must
// alternate"), so the API reports it as a bad request.
var ErrChatTemplate = errors.New("chat template")

// ChatTemplate is a parsed Jinja chat template. Parsing happens once, in
// NewChatTemplate; Render may be called from many goroutines at once, each
// call gets its own variable scope. A render walks the parsed tree once;
// its cost is proportional to the template's output, tens of microseconds
// for typical templates and conversations.
type ChatTemplate struct {
	source   string
	fallback bool
	bos, eos string
	tmpl     *exec.Template
}

// FallbackChatTemplate is used for models that ship no chat template. It is
// ChatML, the same text llama.cpp's server produces for such models:
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message and
// "<|im_start|>assistant\n" when a generation prompt is asked for.
const FallbackChatTemplate = "{%- for message in messages -%}" +
	"{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}" +
	"{%- endfor -%}" +
	"{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"

// NewChatTemplate parses a Hugging Face chat template. bosToken and
// eosToken are the texts the template sees as bos_token and eos_token.
// An empty source selects FallbackChatTemplate.
func NewChatTemplate(source, bosToken, eosToken string) (c *ChatTemplate, err error) {
	c = &ChatTemplate{source: source, bos: bosToken, eos: eosToken}
	if strings.TrimSpace(source) == "" {
		c.source, c.fallback = FallbackChatTemplate, true
	}
	// The engine is a third-party parser fed with model-supplied text:
	// whatever it does, a bad template must come back as an error.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("%w: parse: panic: %v", ErrChatTemplate, r)
		}
	}()
	cfg := jinjaConfig()
	c.tmpl, err = exec.NewTemplate(rootTemplate, cfg, sourceLoader(desugarConditionals(c.source, cfg)), jinjaEnv)
	if err != nil {
		// The engine's message quotes the whole template; keep the cause.
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("%w: parse: %w", ErrChatTemplate, err)
	}
	return c, nil
}

// Source returns the template text in use (FallbackChatTemplate for a model
// without one).
func (c *ChatTemplate) Source() string { return c.source }

// IsFallback reports whether the model had no template of its own.
func (c *ChatTemplate) IsFallback() bool { return c.fallback }

// Render renders msgs into prompt text. The template sees the variables
// transformers' apply_chat_template passes: messages (a list of dicts with
// role, content and, when set, name), add_generation_prompt, bos_token,
// eos_token, tools and documents (both none), the functions
// raise_exception(msg) and strftime_now(format), plus opts.Kwargs.
func (c *ChatTemplate) Render(msgs []Message, opts ChatOptions) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: render: panic: %v", ErrChatTemplate, r)
		}
	}()
	// Messages are ordered dicts, as Python's are, so that |tojson and
	// .items() list role, content, name in that order.
	messages := make(pyList, len(msgs))
	for i, m := range msgs {
		d := exec.NewDict()
		d.Pairs = append(d.Pairs,
			&exec.Pair{Key: exec.AsValue("role"), Value: exec.AsValue(m.Role)},
			&exec.Pair{Key: exec.AsValue("content"), Value: exec.AsValue(m.Content)})
		if m.Name != "" {
			d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue("name"), Value: exec.AsValue(m.Name)})
		}
		messages[i] = d
	}
	vars := make(map[string]any, len(opts.Kwargs)+8)
	for k, v := range opts.Kwargs {
		vars[k] = pyData(v)
	}
	vars["messages"] = messages
	vars["add_generation_prompt"] = opts.AddGenerationPrompt
	vars["bos_token"] = c.bos
	vars["eos_token"] = c.eos
	vars["tools"] = nil
	vars["documents"] = nil
	// raise_exception is transformers': rendering stops, and the error is
	// the template's message (without the engine's trace around it).
	var raised error
	vars["raise_exception"] = func(args *exec.VarArgs) (any, error) {
		msg := "raise_exception called"
		if len(args.Args) > 0 {
			msg = args.Args[0].String()
		}
		raised = errors.New(msg)
		return nil, raised
	}
	vars["strftime_now"] = func(args *exec.VarArgs) (string, error) {
		if len(args.Args) != 1 || !args.Args[0].IsString() {
			return "", errors.New("strftime_now takes one string argument")
		}
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		return strftime(now, args.Args[0].String()), nil
	}
	out, err = c.tmpl.ExecuteToString(exec.NewContext(vars))
	if raised != nil {
		return "", fmt.Errorf("%w: %w", ErrChatTemplate, raised)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrChatTemplate, err)
	}
	return out, nil
}

// rootTemplate is the name the one template is known by inside the engine.
const rootTemplate = "chat_template"

// jinjaConfig is the engine configuration transformers uses for chat
// templates: trim_blocks and lstrip_blocks on, a trailing newline dropped,
// undefined values lenient (they print as "" and test as false).
func jinjaConfig() *config.Config {
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	cfg.KeepTrailingNewline = false
	cfg.AutoEscape = false
	return cfg
}

// sourceLoader serves the chat template itself and nothing else: a model's
// template must not read files through {% include %} or {% import %}.
type sourceLoader string

func (s sourceLoader) Read(path string) (io.Reader, error) {
	if path != rootTemplate {
		return nil, fmt.Errorf("chat templates cannot load other templates (%q)", path)
	}
	return strings.NewReader(string(s)), nil
}

func (s sourceLoader) Resolve(path string) (string, error) { return path, nil }

func (s sourceLoader) Inherit(string) (loaders.Loader, error) { return s, nil }

// pyData converts caller-supplied values (ChatOptions.Kwargs) so that lists
// index as in Python.
func pyData(v any) any {
	switch x := v.(type) {
	case []any:
		l := make(pyList, len(x))
		for i, e := range x {
			l[i] = pyData(e)
		}
		return l
	case []string:
		return pyResult(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = pyData(e)
		}
		return m
	}
	return v
}
