package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Tool-call parsers turn a model's answer into OpenAI tool calls, one per
// model family, named as vLLM's --tool-call-parser values where vLLM has
// one. Each family writes its calls in its own syntax after a marker (or,
// for Llama 3.x, as a JSON object making up the whole answer); the text
// before the marker is content. The calls come back as ToolCall values
// with Arguments as JSON text, as the OpenAI API returns them.
const (
	// ToolsHermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
	// one block per call (Hermes 2/3, Qwen 2.5, QwQ, Qwen3, MiMo, Apriel).
	ToolsHermes = "hermes"
	// ToolsLlama3JSON: the whole answer is {"name": ..., "parameters":
	// {...}} (or "arguments"), optionally after <|python_tag|>, several
	// separated by ";" (Llama 3.1, 3.2, 3.3).
	ToolsLlama3JSON = "llama3_json"
	// ToolsMistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
	// (Mistral Nemo), or [TOOL_CALLS]name[ARGS]{...} per call (Mistral
	// Small 3.2, Ministral 3, Devstral), with an optional [CALL_ID]id.
	ToolsMistral = "mistral"
	// ToolsQwen3Coder: <tool_call><function=name><parameter=p>value
	// </parameter></function></tool_call> (Qwen3-Coder, Nemotron 3).
	ToolsQwen3Coder = "qwen3_coder"
	// ToolsSeedOSS: the same inside <seed:tool_call> (ByteDance Seed-OSS).
	ToolsSeedOSS = "seed_oss"
	// ToolsGLM45: <tool_call>name<arg_key>k</arg_key><arg_value>v
	// </arg_value></tool_call> (GLM 4.5, 4.6).
	ToolsGLM45 = "glm45"
	// ToolsKimiK2: <|tool_calls_section_begin|><|tool_call_begin|>
	// functions.name:0<|tool_call_argument_begin|>{...}<|tool_call_end|>
	// (Kimi K2; the call id is functions.name:0).
	ToolsKimiK2 = "kimi_k2"
	// ToolsDeepSeekV31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name
	// <｜tool▁sep｜>{...}<｜tool▁call▁end｜> (DeepSeek V3.1).
	ToolsDeepSeekV31 = "deepseek_v31"
	// ToolsDeepSeekV3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
	// <｜tool▁sep｜>name\n```json\n{...}\n```<｜tool▁call▁end｜> (DeepSeek V3,
	// R1 and its distillations).
	ToolsDeepSeekV3 = "deepseek_v3"
	// ToolsFunctionaryV31: <function=name>{...}</function> (functionary
	// v3.1; llama.cpp's name for it).
	ToolsFunctionaryV31 = "functionary_v3_1"
	// ToolsMiniMaxM2: <minimax:tool_call><invoke name="f"><parameter
	// name="k">v</parameter></invoke></minimax:tool_call> (MiniMax M2).
	ToolsMiniMaxM2 = "minimax_m2"
	// ToolsGranite: <|tool_call|>[{"name": ..., "arguments": {...}}]
	// (IBM Granite 3).
	ToolsGranite = "granite"
	// ToolsFirefunction: functools[{"name": ..., "arguments": {...}}]
	// (Fireworks firefunction v2).
	ToolsFirefunction = "firefunction_v2"
)

// toolFormat is one family's syntax.
type toolFormat struct {
	// marker starts the calls; "" for Llama 3 JSON, whose calls are the
	// whole answer.
	marker string
	parse  func(region string) ([]ToolCall, error)
}

var toolFormats = map[string]toolFormat{
	ToolsHermes:     {"<tool_call>", parseHermes},
	ToolsLlama3JSON: {"", parseLlama3JSON},
	ToolsMistral:    {"[TOOL_CALLS]", parseMistral},
	ToolsQwen3Coder: {"<tool_call>", func(r string) ([]ToolCall, error) { return parseXMLFunctions(r, "<tool_call>", "</tool_call>") }},
	ToolsSeedOSS: {"<seed:tool_call>", func(r string) ([]ToolCall, error) {
		return parseXMLFunctions(r, "<seed:tool_call>", "</seed:tool_call>")
	}},
	ToolsGLM45:          {"<tool_call>", parseGLM45},
	ToolsKimiK2:         {"<|tool_calls_section_begin|>", parseKimiK2},
	ToolsDeepSeekV31:    {"<｜tool▁calls▁begin｜>", parseDeepSeekV31},
	ToolsMiniMaxM2:      {"<minimax:tool_call>", parseMiniMaxM2},
	ToolsDeepSeekV3:     {"<｜tool▁calls▁begin｜>", parseDeepSeekV3},
	ToolsFunctionaryV31: {"<function=", parseFunctionaryV31},
	ToolsGranite:        {"<|tool_call|>", func(r string) ([]ToolCall, error) { return parseJSONCallList(strings.TrimPrefix(r, "<|tool_call|>")) }},
	ToolsFirefunction:   {"functools", func(r string) ([]ToolCall, error) { return parseJSONCallList(strings.TrimPrefix(r, "functools")) }},
}

// ToolCallParsers lists the names NewToolCallParser accepts.
func ToolCallParsers() []string {
	names := make([]string, 0, len(toolFormats))
	for n := range toolFormats {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ToolCallParserFor picks the parser for a chat template from the markers
// it writes tool calls with; "" when it shows none that a parser here
// reads (no tool calls, or a syntax such as gpt-oss's harmony, Cohere's
// Action: blocks or functionary v3.2's).
func ToolCallParserFor(template string) string {
	for _, d := range toolDetection {
		if containsAll(template, d.markers) {
			return d.parser
		}
	}
	return ""
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// toolDetection is how ToolCallParserFor tells the families apart: the
// first parser whose markers a template all holds, so a family whose
// markers contain another's comes before it.
var toolDetection = []struct {
	markers []string
	parser  string
}{
	{[]string{"<seed:tool_call>"}, ToolsSeedOSS},
	{[]string{"<minimax:tool_call>"}, ToolsMiniMaxM2},
	{[]string{"<|tool_calls_section_begin|>"}, ToolsKimiK2},
	{[]string{"<｜tool▁calls▁begin｜>", "```json"}, ToolsDeepSeekV3},
	{[]string{"<｜tool▁calls▁begin｜>"}, ToolsDeepSeekV31},
	{[]string{"<arg_key>"}, ToolsGLM45},
	{[]string{"<tool_call>", "<function="}, ToolsQwen3Coder},
	{[]string{"<tool_call>"}, ToolsHermes},
	{[]string{"<function="}, ToolsFunctionaryV31},
	{[]string{"[TOOL_CALLS]"}, ToolsMistral},
	{[]string{"<|tool_call|>"}, ToolsGranite},
	{[]string{"functools["}, ToolsFirefunction},
	{[]string{"<|python_tag|>"}, ToolsLlama3JSON},
	{[]string{"<|start_header_id|>", `"parameters"`}, ToolsLlama3JSON},
}

// ErrToolCall is wrapped by the errors of tool-call parsing.
var ErrToolCall = errors.New("tool call")

// ParseToolCalls splits a whole answer into content and tool calls, as a
// ToolCallParser does. Text that starts like calls but does not parse is
// returned as content, with no calls, as vLLM does.
func ParseToolCalls(name, text string) (content string, calls []ToolCall, err error) {
	p, err := NewToolCallParser(name)
	if err != nil {
		return "", nil, err
	}
	c1 := p.Push(text)
	c2, calls := p.Flush()
	return c1 + c2, calls, nil
}

// ToolCallParser splits one generated sequence into content and tool
// calls, incrementally: Push returns the content that is settled, holding
// back a suffix that may still become the family's marker, and everything
// from the marker on, so no call text ever reaches the content; Flush
// parses the calls at the end of the sequence. (The calls are not streamed
// piece by piece; they arrive whole at the end.) Not safe for concurrent
// use.
type ToolCallParser struct {
	format toolFormat
	// started: the first non-space text was seen (Llama 3 JSON decides
	// there whether the answer is a call).
	started bool
	inCalls bool
	held    strings.Builder
}

// NewToolCallParser returns a parser for one sequence; name is one of
// ToolCallParsers.
func NewToolCallParser(name string) (*ToolCallParser, error) {
	f, ok := toolFormats[name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown parser %q (known: %s)", ErrToolCall, name, strings.Join(ToolCallParsers(), ", "))
	}
	return &ToolCallParser{format: f}, nil
}

// Push adds generated text and returns the content that is settled.
func (p *ToolCallParser) Push(text string) (content string) {
	if p.inCalls {
		p.held.WriteString(text)
		return ""
	}
	s := p.held.String() + text
	p.held.Reset()
	if p.format.marker == "" {
		// Llama 3 JSON: the answer is calls when it starts, after
		// whitespace, with { or <|python_tag|>.
		if p.started {
			return s
		}
		trimmed := strings.TrimLeftFunc(s, unicode.IsSpace)
		switch {
		case trimmed == "" || strings.HasPrefix(pythonTag, trimmed):
			p.held.WriteString(s) // undecided
			return ""
		case strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, pythonTag):
			p.started, p.inCalls = true, true
			p.held.WriteString(s)
			return ""
		}
		p.started = true
		return s
	}
	if i := strings.Index(s, p.format.marker); i >= 0 {
		p.inCalls = true
		p.held.WriteString(s[i:])
		return s[:i]
	}
	keep := partialSuffix(s, p.format.marker)
	p.held.WriteString(s[len(s)-keep:])
	return s[:len(s)-keep]
}

// Flush ends the sequence and returns the rest of the content and the
// calls. When the call text does not parse, it is returned as content.
func (p *ToolCallParser) Flush() (content string, calls []ToolCall) {
	rest := p.held.String()
	p.held.Reset()
	if !p.inCalls {
		return rest, nil
	}
	p.inCalls = false
	calls, err := p.format.parse(rest)
	if err != nil || len(calls) == 0 {
		return rest, nil
	}
	return "", calls
}

const pythonTag = "<|python_tag|>"

// callJSON is a call written as JSON.
type callJSON struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
}

func (c callJSON) toolCall() (ToolCall, error) {
	if c.Name == "" {
		return ToolCall{}, fmt.Errorf("%w: a call without a name", ErrToolCall)
	}
	args := c.Arguments
	if len(args) == 0 {
		args = c.Parameters
	}
	return ToolCall{Type: "function", Name: c.Name, Arguments: argumentsText(args)}, nil
}

// argumentsText is the arguments as JSON text written as vLLM writes it
// (Python's json.dumps: ", " and ": " separators, key order kept, no
// ASCII escaping); a JSON string that holds JSON (some models
// double-encode) is unwrapped; none is "{}".
func argumentsText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && json.Valid([]byte(s)) {
		raw = []byte(s)
	}
	return pyJSON(raw)
}

// pyJSON rewrites JSON text as Python's json.dumps writes it.
func pyJSON(raw []byte) string {
	v, err := decodeJSON(raw)
	if err != nil {
		return string(raw)
	}
	o := jsonOpts{itemSep: ", ", keySep: ": "}
	var b strings.Builder
	if o.write(&b, exec.AsValue(v), 0) != nil {
		return string(raw)
	}
	return b.String()
}

// decodeJSONValues reads JSON values one after another from s, separated
// by whitespace and the given separator characters.
func decodeJSONValues[T any](s, seps string) ([]T, error) {
	var out []T
	for {
		s = strings.TrimLeft(s, " \t\r\n"+seps)
		if s == "" {
			if len(out) == 0 {
				return nil, fmt.Errorf("%w: no JSON", ErrToolCall)
			}
			return out, nil
		}
		dec := json.NewDecoder(strings.NewReader(s))
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrToolCall, err)
		}
		out = append(out, v)
		s = s[dec.InputOffset():]
	}
}

// firstJSON reads the JSON value at the start of s (after whitespace);
// what follows it is ignored.
func firstJSON(s string) (json.RawMessage, error) {
	var v json.RawMessage
	if err := json.NewDecoder(strings.NewReader(s)).Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToolCall, err)
	}
	return v, nil
}

func parseLlama3JSON(region string) ([]ToolCall, error) {
	s := strings.TrimSpace(region)
	s = strings.TrimSpace(strings.TrimPrefix(s, pythonTag))
	objs, err := decodeJSONValues[callJSON](s, ";")
	if err != nil {
		return nil, err
	}
	return toolCalls(objs)
}

func toolCalls(objs []callJSON) ([]ToolCall, error) {
	calls := make([]ToolCall, 0, len(objs))
	for _, o := range objs {
		c, err := o.toolCall()
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// parseJSONCallList reads a JSON array of calls.
func parseJSONCallList(s string) ([]ToolCall, error) {
	var objs []callJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &objs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToolCall, err)
	}
	return toolCalls(objs)
}

// blocks returns the text inside each open...close pair of s; the last
// block may be unclosed (the model stopped at the closing tag).
func blocks(s, open, close string) []string {
	var out []string
	for {
		i := strings.Index(s, open)
		if i < 0 {
			return out
		}
		s = s[i+len(open):]
		j := strings.Index(s, close)
		if j < 0 {
			return append(out, s)
		}
		out = append(out, s[:j])
		s = s[j+len(close):]
	}
}

func parseHermes(region string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, b := range blocks(region, "<tool_call>", "</tool_call>") {
		var o callJSON
		if err := json.Unmarshal([]byte(strings.TrimSpace(b)), &o); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrToolCall, err)
		}
		c, err := o.toolCall()
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, nil
}

var mistralCall = regexp.MustCompile(`^\s*([^\[\]{}\s]+)\s*(?:\[CALL_ID\]\s*([A-Za-z0-9_-]+)\s*)?\[ARGS\]`)

func parseMistral(region string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, part := range strings.Split(region, "[TOOL_CALLS]")[1:] {
		trimmed := strings.TrimSpace(part)
		if strings.HasPrefix(trimmed, "[") {
			cs, err := parseJSONCallList(trimmed)
			if err != nil {
				return nil, err
			}
			calls = append(calls, cs...)
			continue
		}
		m := mistralCall.FindStringSubmatchIndex(part)
		if m == nil {
			return nil, fmt.Errorf("%w: no name[ARGS] after [TOOL_CALLS]", ErrToolCall)
		}
		args, err := firstJSON(part[m[1]:])
		if err != nil {
			return nil, err
		}
		c := ToolCall{Type: "function", Name: part[m[2]:m[3]], Arguments: argumentsText(args)}
		if m[4] >= 0 {
			c.ID = part[m[4]:m[5]]
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// paramValue is a parameter written as text: JSON when it reads as JSON
// (numbers, booleans, objects), else a string; one newline around it is
// layout.
func paramValue(v string) json.RawMessage {
	v = strings.TrimPrefix(v, "\n")
	v = strings.TrimSuffix(v, "\n")
	if t := strings.TrimSpace(v); t != "" && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(v)
	return b
}

// argsObject writes ordered key/value pairs as a JSON object.
func argsObject(keys []string, vals []json.RawMessage) string {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vals[i])
	}
	b.WriteByte('}')
	return pyJSON(b.Bytes())
}

var (
	xmlFunction  = regexp.MustCompile(`(?s)<function=([^>\n]+)>(.*?)(?:</function>|$)`)
	xmlParameter = regexp.MustCompile(`(?s)<parameter=([^>\n]+)>(.*?)(?:</parameter>|$)`)
)

// parseXMLFunctions reads <function=name><parameter=k>v</parameter>
// </function> calls inside open...close blocks.
func parseXMLFunctions(region, open, close string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, b := range blocks(region, open, close) {
		for _, f := range xmlFunction.FindAllStringSubmatch(b, -1) {
			var keys []string
			var vals []json.RawMessage
			for _, p := range xmlParameter.FindAllStringSubmatch(f[2], -1) {
				keys = append(keys, strings.TrimSpace(p[1]))
				vals = append(vals, paramValue(p[2]))
			}
			calls = append(calls, ToolCall{Type: "function", Name: strings.TrimSpace(f[1]), Arguments: argsObject(keys, vals)})
		}
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%w: no <function=...> call", ErrToolCall)
	}
	return calls, nil
}

var glmArg = regexp.MustCompile(`(?s)<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>`)

func parseGLM45(region string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, b := range blocks(region, "<tool_call>", "</tool_call>") {
		name := b
		if i := strings.IndexAny(b, "\n<"); i >= 0 {
			name = b[:i]
		}
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%w: a call without a name", ErrToolCall)
		}
		var keys []string
		var vals []json.RawMessage
		for _, a := range glmArg.FindAllStringSubmatch(b, -1) {
			keys = append(keys, strings.TrimSpace(a[1]))
			vals = append(vals, paramValue(a[2]))
		}
		calls = append(calls, ToolCall{Type: "function", Name: name, Arguments: argsObject(keys, vals)})
	}
	return calls, nil
}

var kimiCall = regexp.MustCompile(`(?s)<\|tool_call_begin\|>\s*([^<]+?)\s*<\|tool_call_argument_begin\|>(.*?)(?:<\|tool_call_end\|>|$)`)

func parseKimiK2(region string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, m := range kimiCall.FindAllStringSubmatch(region, -1) {
		id := m[1]
		name := strings.TrimPrefix(id, "functions.")
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			name = name[:i]
		}
		args := strings.TrimSpace(m[2])
		if !json.Valid([]byte(args)) {
			return nil, fmt.Errorf("%w: arguments of %s are not JSON", ErrToolCall, name)
		}
		calls = append(calls, ToolCall{ID: id, Type: "function", Name: name, Arguments: argumentsText(json.RawMessage(args))})
	}
	return calls, nil
}

var deepseekCall = regexp.MustCompile(`(?s)<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>(.*?)(?:<｜tool▁call▁end｜>|$)`)

func parseDeepSeekV31(region string) ([]ToolCall, error) {
	return parseNameArgs(deepseekCall, region)
}

// parseNameArgs parses the calls call finds in region: the name is its
// first group and the JSON arguments its second, spaces around either
// trimmed.
func parseNameArgs(call *regexp.Regexp, region string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, m := range call.FindAllStringSubmatch(region, -1) {
		args := strings.TrimSpace(m[2])
		if !json.Valid([]byte(args)) {
			return nil, fmt.Errorf("%w: arguments are not JSON", ErrToolCall)
		}
		calls = append(calls, ToolCall{Type: "function", Name: strings.TrimSpace(m[1]), Arguments: argumentsText(json.RawMessage(args))})
	}
	return calls, nil
}

var (
	minimaxInvoke = regexp.MustCompile(`(?s)<invoke name="([^"]+)">(.*?)(?:</invoke>|$)`)
	minimaxParam  = regexp.MustCompile(`(?s)<parameter name="([^"]+)">(.*?)</parameter>`)
)

func parseMiniMaxM2(region string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, b := range blocks(region, "<minimax:tool_call>", "</minimax:tool_call>") {
		for _, inv := range minimaxInvoke.FindAllStringSubmatch(b, -1) {
			var keys []string
			var vals []json.RawMessage
			for _, p := range minimaxParam.FindAllStringSubmatch(inv[2], -1) {
				keys = append(keys, p[1])
				vals = append(vals, paramValue(p[2]))
			}
			calls = append(calls, ToolCall{Type: "function", Name: inv[1], Arguments: argsObject(keys, vals)})
		}
	}
	return calls, nil
}

var deepseekV3Call = regexp.MustCompile("(?s)<｜tool▁call▁begin｜>[^<]*?<｜tool▁sep｜>([^\n]*)\n\\s*```(?:json)?\\s*\n?(.*?)\\s*```\\s*(?:<｜tool▁call▁end｜>|$)")

func parseDeepSeekV3(region string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, m := range deepseekV3Call.FindAllStringSubmatch(region, -1) {
		if !json.Valid([]byte(m[2])) {
			return nil, fmt.Errorf("%w: arguments are not JSON", ErrToolCall)
		}
		calls = append(calls, ToolCall{Type: "function", Name: strings.TrimSpace(m[1]), Arguments: argumentsText(json.RawMessage(m[2]))})
	}
	return calls, nil
}

var functionaryCall = regexp.MustCompile(`(?s)<function=([^>]+)>(.*?)(?:</function>|$)`)

func parseFunctionaryV31(region string) ([]ToolCall, error) {
	return parseNameArgs(functionaryCall, region)
}
