package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one chat message as chat templates see it. The template
// sees a dict with the keys role and content, then, when set, tool_calls,
// reasoning_content, tool_call_id and name, in that order (vLLM's order).
type Message struct {
	Role string
	// Content is the message text. A client's list of text parts is
	// joined with "\n" and a null content is "", as vLLM does for
	// templates that take content as a string.
	Content string
	// Name is the optional participant name (message.name).
	Name string
	// ToolCalls are the calls an assistant message made
	// (message.tool_calls, when there is at least one).
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers (message.tool_call_id).
	ToolCallID string
	// ReasoningContent is an assistant message's reasoning
	// (message.reasoning_content), for templates that show or drop it.
	ReasoningContent string
}

// ToolCall is one call in an assistant message. The template sees
// {"id": ..., "type": ..., "function": {"name": ..., "arguments": ...}}
// with arguments parsed from JSON text into a dict (an empty Arguments is
// {}), as vLLM passes it: templates expect an object there, while the
// OpenAI API carries a string.
type ToolCall struct {
	ID        string
	Type      string // "function"
	Name      string
	Arguments string // JSON text, as the OpenAI API sends it
}

// ChatOptions control rendering.
type ChatOptions struct {
	// AddGenerationPrompt ends the prompt with the assistant's turn opener.
	AddGenerationPrompt bool
	// ContinueFinalMessage leaves the final message open, so that the
	// model continues it (a prefilled assistant answer): the rendered
	// text is cut right after the final message's content, as
	// transformers and vLLM do. It cannot be combined with
	// AddGenerationPrompt.
	ContinueFinalMessage bool
	// Kwargs are extra template variables, as vLLM's chat_template_kwargs
	// (for example {"enable_thinking": false} for Qwen3). Values are plain
	// Go values: bool, numbers, string, []any, map[string]any. They cannot
	// replace the variables the other fields set (messages,
	// add_generation_prompt, bos_token, eos_token, tools, documents).
	Kwargs map[string]any
	// Now is the time the template's strftime_now formats (some templates
	// print today's date). The zero value means time.Now().
	Now time.Time
	// Tools are the tool definitions (the OpenAI request's tools, each one
	// JSON object as the client sent it, key order kept). nil renders as
	// tools=None; an empty non-nil slice as an empty list.
	Tools []json.RawMessage
	// Documents are retrieval documents (JSON objects) for templates that
	// take them (Command R, Granite); nil renders as documents=None.
	Documents []json.RawMessage
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
	if len(source) > MaxChatTemplateBytes {
		return nil, fmt.Errorf("%w: parse: the template has %d bytes, more than %d", ErrChatTemplate, len(source), MaxChatTemplateBytes)
	}
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
	if err := checkReservedTags(c.source, cfg); err != nil {
		return nil, fmt.Errorf("%w: parse: %w", ErrChatTemplate, err)
	}
	c.tmpl, err = exec.NewTemplate(rootTemplate, cfg, sourceLoader(wrapRoot(desugarConditionals(c.source, cfg))), jinjaEnv)
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
	if opts.AddGenerationPrompt && opts.ContinueFinalMessage {
		return "", fmt.Errorf("%w: cannot be combined with add_generation_prompt", ErrContinueFinalMessage)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: render: panic: %v", ErrChatTemplate, r)
		}
	}()
	messages, err := templateMessages(msgs)
	if err != nil {
		return "", err
	}
	tools, err := jsonList("tools", opts.Tools)
	if err != nil {
		return "", err
	}
	documents, err := jsonList("documents", opts.Documents)
	if err != nil {
		return "", err
	}
	vars := make(map[string]any, len(opts.Kwargs)+8)
	for k, v := range opts.Kwargs {
		if !strings.HasPrefix(k, "py:") { // our own names (see stateVar)
			vars[k] = pyData(v)
		}
	}
	vars["messages"] = messages
	vars["add_generation_prompt"] = opts.AddGenerationPrompt
	vars["bos_token"] = c.bos
	vars["eos_token"] = c.eos
	vars["tools"] = tools
	vars["documents"] = documents
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
	vars[stateVar] = &renderState{}
	w := &limitWriter{n: maxRenderBytes}
	err = c.tmpl.Execute(w, exec.NewContext(vars))
	out = w.b.String()
	if raised != nil {
		return "", fmt.Errorf("%w: %w", ErrChatTemplate, raised)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrChatTemplate, err)
	}
	if opts.ContinueFinalMessage {
		return cutAfterFinal(out, msgs)
	}
	return out, nil
}

// ErrContinueFinalMessage is wrapped by the errors of
// ChatOptions.ContinueFinalMessage.
var ErrContinueFinalMessage = errors.New("continue_final_message")

// cutAfterFinal cuts the rendered text right after the final message's
// content, as transformers' apply_chat_template does: at the last place the
// content (without surrounding whitespace) appears, keeping its trailing
// whitespace when the template kept it.
func cutAfterFinal(out string, msgs []Message) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("%w: there is no final message to continue", ErrContinueFinalMessage)
	}
	final := msgs[len(msgs)-1].Content
	trimmed := strings.TrimFunc(final, isPySpace)
	loc := strings.LastIndex(out, trimmed)
	if loc < 0 {
		return "", fmt.Errorf("%w: the final message does not appear in the rendered prompt (the chat template changes it), so it cannot be continued", ErrContinueFinalMessage)
	}
	left := strings.TrimLeftFunc(final, isPySpace)
	if strings.HasPrefix(out[loc:], left) {
		return out[:loc+len(left)], nil
	}
	return out[:loc+len(trimmed)], nil
}

// templateMessages builds the messages as the template sees them: ordered
// dicts, as Python's are, so that |tojson and .items() list the keys in
// vLLM's order.
func templateMessages(msgs []Message) (pyList, error) {
	messages := make(pyList, len(msgs))
	for i, m := range msgs {
		d := newDict("role", m.Role, "content", m.Content)
		if len(m.ToolCalls) > 0 {
			calls := make(pyList, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				var args any = exec.NewDict()
				if c.Arguments != "" {
					a, err := decodeJSON([]byte(c.Arguments))
					if err != nil {
						return nil, fmt.Errorf("%w: messages[%d].tool_calls[%d].function.arguments: %w", ErrChatTemplate, i, j, err)
					}
					args = a
				}
				calls[j] = newDict("id", c.ID, "type", c.Type, "function", newDict("name", c.Name, "arguments", args))
			}
			setPair(d, "tool_calls", calls)
		}
		if m.ReasoningContent != "" {
			setPair(d, "reasoning_content", m.ReasoningContent)
		}
		if m.ToolCallID != "" {
			setPair(d, "tool_call_id", m.ToolCallID)
		}
		if m.Name != "" {
			setPair(d, "name", m.Name)
		}
		messages[i] = d
	}
	return messages, nil
}

// jsonList decodes tools or documents: nil is None.
func jsonList(field string, items []json.RawMessage) (any, error) {
	if items == nil {
		return pyNone, nil
	}
	out := make(pyList, len(items))
	for i, raw := range items {
		v, err := decodeJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s[%d]: %w", ErrChatTemplate, field, i, err)
		}
		out[i] = v
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
	case nil:
		return pyNone
	case json.RawMessage:
		d, err := decodeJSON(x)
		if err != nil {
			return pyNone
		}
		return d
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
