package agent

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// API is the request shape an agent session is sent in.
type API string

const (
	// Messages is Anthropic's Messages API: POST {base}/messages.
	Messages API = "messages"
	// Responses is OpenAI's Responses API: POST {base}/responses.
	Responses API = "responses"
	// Chat is OpenAI's Chat Completions: POST {base}/chat/completions.
	Chat API = "chat"
)

// ParseAPI parses an --api value.
func ParseAPI(s string) (API, error) {
	switch a := API(strings.TrimSpace(s)); a {
	case Messages, Responses, Chat:
		return a, nil
	}
	return "", fmt.Errorf("--api %q: want messages, responses or chat", s)
}

func (a API) path() string {
	switch a {
	case Messages:
		return "/messages"
	case Responses:
		return "/responses"
	}
	return "/chat/completions"
}

// Config describes an agent-session benchmark (`llmserve bench agent`):
// Sessions sessions per API, one after another, each Turns turns long.
type Config struct {
	// BaseURL is the API root, including /v1.
	BaseURL string
	// APIKey is sent as a bearer token and as x-api-key when set.
	APIKey string
	// Model is sent with every request; "" asks GET {base}/models.
	Model string
	// APIs are the request shapes to run, in order, each with its own
	// sessions.
	APIs []API
	// PrefixWords is the size of the system prompt plus the tool
	// definitions, in words (about one token each).
	PrefixWords int
	// Tools is the number of tool definitions; ToolWordsShare of
	// PrefixWords goes to their descriptions, the rest to the system
	// prompt.
	Tools int
	// Turns is the number of turns of a session.
	Turns int
	// UserWords is the length of each user message, ToolResultWords that
	// of each tool result.
	UserWords, ToolResultWords int
	// OutputLen is each turn's max_tokens (max_output_tokens).
	OutputLen int
	// Sessions is the number of sessions per API.
	Sessions int
	// Seed makes the transcripts: the same seed gives the same requests.
	Seed int64
	// Timeout bounds one turn's request, from sending it to the end of its
	// stream.
	Timeout time.Duration
	// Label is stored in the report.
	Label string
}

// ToolWordsShare is the part of Config.PrefixWords spent on the tools'
// descriptions (Claude Code's and Codex's requests carry about this much of
// their prefix as tool definitions).
const ToolWordsShare = 0.25

// DefaultConfig is issue 28's session: a 20,000-word system-plus-tools
// prefix, 5 turns, every API.
func DefaultConfig() Config {
	return Config{
		BaseURL:         "http://127.0.0.1:8080/v1",
		APIs:            []API{Messages, Responses, Chat},
		PrefixWords:     20000,
		Tools:           16,
		Turns:           5,
		UserWords:       40,
		ToolResultWords: 300,
		OutputLen:       16,
		Sessions:        1,
		Seed:            1,
		Timeout:         10 * time.Minute,
	}
}

// Validate reports every bad field at once.
func (c *Config) Validate() error {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		add("--base-url %q: want an http:// or https:// URL", c.BaseURL)
	}
	if len(c.APIs) == 0 {
		add("--api: give at least one of messages, responses, chat")
	}
	if c.Tools < 1 {
		add("--tools %d: want at least 1", c.Tools)
	}
	if c.PrefixWords < 4*c.Tools {
		add("--prefix-len %d: want at least 4 words per tool (%d)", c.PrefixWords, 4*c.Tools)
	}
	if c.Turns < 1 {
		add("--turns %d: want at least 1", c.Turns)
	}
	if c.UserWords < 1 || c.ToolResultWords < 1 {
		add("--user-len %d, --tool-result-len %d: want at least 1 each", c.UserWords, c.ToolResultWords)
	}
	if c.OutputLen < 1 {
		add("--output-len %d: want at least 1", c.OutputLen)
	}
	if c.Sessions < 1 {
		add("--sessions %d: want at least 1", c.Sessions)
	}
	if c.Timeout <= 0 {
		add("--timeout %v: want a positive duration", c.Timeout)
	}
	if len(bad) > 0 {
		return fmt.Errorf("bench agent: %s", strings.Join(bad, "; "))
	}
	return nil
}

// agentTool is one tool definition: a function with one string parameter
// per argument name.
type agentTool struct {
	name        string
	description string
}

// agentTurn is what a turn adds to the conversation. The first turn has a
// user message only; every later one first closes the previous turn with
// the assistant's tool call (scripted: the same for every server, whatever
// the model generated) and the tool's result, then a new user message.
type agentTurn struct {
	callID, callName, callArgs string // the previous turn's tool call ("" in turn 1)
	toolResult                 string
	user                       string
}

// transcript is one session's whole conversation.
type transcript struct {
	system string
	tools  []agentTool
	turns  []agentTurn
}

// RNG streams of the agent transcripts, apart from those of the load
// workload.
const streamAgent = 16

// newTranscript draws session number session (0-based) of API number
// apiIndex. Each (seed, API, session) has a prefix of its own, whose first
// words already differ, so a session never finds an earlier one's prefix in
// a server's cache: its first turn is cold, as an agent's first request is.
func newTranscript(cfg *Config, apiIndex, session int) transcript {
	r := rand.New(rand.NewPCG(uint64(cfg.Seed), streamAgent+uint64(apiIndex)<<8+uint64(session)<<16))
	toolWords := int(float64(cfg.PrefixWords) * ToolWordsShare)
	var t transcript
	var b strings.Builder
	benchio.AppendWords(&b, r, cfg.PrefixWords-toolWords)
	t.system = b.String()
	for i := range cfg.Tools {
		n := toolWords / cfg.Tools
		if i < toolWords%cfg.Tools {
			n++
		}
		b.Reset()
		benchio.AppendWords(&b, r, n)
		t.tools = append(t.tools, agentTool{name: fmt.Sprintf("tool_%d", i), description: b.String()})
	}
	for k := range cfg.Turns {
		var turn agentTurn
		if k > 0 {
			turn.callID = fmt.Sprintf("call_%d", k)
			turn.callName = t.tools[(k-1)%len(t.tools)].name
			b.Reset()
			benchio.AppendWords(&b, r, 3)
			args, _ := json.Marshal(map[string]string{"path": b.String()})
			turn.callArgs = string(args)
			b.Reset()
			benchio.AppendWords(&b, r, cfg.ToolResultWords)
			turn.toolResult = b.String()
		}
		b.Reset()
		benchio.AppendWords(&b, r, cfg.UserWords)
		turn.user = b.String()
		t.turns = append(t.turns, turn)
	}
	return t
}

// toolSchema is every tool's parameters: one required string.
var toolSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"the file to act on"}},"required":["path"]}`)

// body returns the JSON of turn k (0-based) of t in api's shape: the whole
// conversation up to and including turn k's user message.
func (t *transcript) body(api API, model string, k, maxTokens int) ([]byte, error) {
	switch api {
	case Messages:
		return json.Marshal(t.messagesBody(model, k, maxTokens))
	case Responses:
		return json.Marshal(t.responsesBody(model, k, maxTokens))
	}
	return json.Marshal(t.chatBody(model, k, maxTokens))
}

func (t *transcript) messagesBody(model string, k, maxTokens int) map[string]any {
	tools := make([]map[string]any, len(t.tools))
	for i, tl := range t.tools {
		tools[i] = map[string]any{"name": tl.name, "description": tl.description, "input_schema": toolSchema}
	}
	var msgs []map[string]any
	for _, turn := range t.turns[:k+1] {
		if turn.callID == "" {
			msgs = append(msgs, map[string]any{"role": "user", "content": turn.user})
			continue
		}
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []map[string]any{
				{"type": "tool_use", "id": turn.callID, "name": turn.callName, "input": json.RawMessage(turn.callArgs)},
			}},
			// Messages alternates roles: the tool's result and the next
			// user text share one user message, as Claude Code sends them.
			map[string]any{"role": "user", "content": []map[string]any{
				{"type": "tool_result", "tool_use_id": turn.callID, "content": turn.toolResult},
				{"type": "text", "text": turn.user},
			}})
	}
	return map[string]any{
		"model": model, "system": t.system, "tools": tools, "messages": msgs,
		"max_tokens": maxTokens, "temperature": 0, "stream": true,
	}
}

func (t *transcript) responsesBody(model string, k, maxTokens int) map[string]any {
	tools := make([]map[string]any, len(t.tools))
	for i, tl := range t.tools {
		tools[i] = map[string]any{"type": "function", "name": tl.name, "description": tl.description, "parameters": toolSchema}
	}
	var input []map[string]any
	for _, turn := range t.turns[:k+1] {
		if turn.callID != "" {
			input = append(input,
				map[string]any{"type": "function_call", "call_id": turn.callID, "name": turn.callName, "arguments": turn.callArgs},
				map[string]any{"type": "function_call_output", "call_id": turn.callID, "output": turn.toolResult})
		}
		input = append(input, map[string]any{"type": "message", "role": "user", "content": turn.user})
	}
	return map[string]any{
		"model": model, "instructions": t.system, "tools": tools, "input": input,
		"max_output_tokens": maxTokens, "temperature": 0, "stream": true, "store": false,
	}
}

func (t *transcript) chatBody(model string, k, maxTokens int) map[string]any {
	tools := make([]map[string]any, len(t.tools))
	for i, tl := range t.tools {
		tools[i] = map[string]any{"type": "function", "function": map[string]any{
			"name": tl.name, "description": tl.description, "parameters": toolSchema}}
	}
	msgs := []map[string]any{{"role": "system", "content": t.system}}
	for _, turn := range t.turns[:k+1] {
		if turn.callID != "" {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{
					{"id": turn.callID, "type": "function", "function": map[string]any{"name": turn.callName, "arguments": turn.callArgs}},
				}},
				map[string]any{"role": "tool", "tool_call_id": turn.callID, "content": turn.toolResult})
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": turn.user})
	}
	return map[string]any{
		"model": model, "tools": tools, "messages": msgs,
		"max_tokens": maxTokens, "max_completion_tokens": maxTokens, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true},
	}
}
