package frontend

import (
	"bytes"
	"encoding/json"

	"github.com/llmserve/llmserve/media"
	"github.com/llmserve/llmserve/tokenizer"
)

// Request is one generation request of the chat family (OpenAI chat and
// completions, Responses, Anthropic Messages) as its protocol decoded it,
// once, from its own wire types: messages, or a raw prompt. Every field is plain data: the protocol has checked the
// shapes (types, required fields, enums) and named what it found wrong in
// its own field paths; ranges that depend on the model (vocabulary,
// context length, grammar support) are checked when the request is
// rendered for a model. A nil pointer is a field the client left out.
type Request struct {
	// Model is the model the client asked for ("" for the only one).
	Model string

	// Messages is the conversation, in the order the chat template sees
	// it (a protocol that merges or splits turns has done so).
	Messages []Message
	// Prompt is a completion request's raw prompts instead (nil for a
	// chat request), and Suffix the text to fill in before
	// (fill-in-the-middle; nil: none).
	Prompt *RawPrompt
	Suffix *string
	// Template shapes how the messages become the prompt.
	Template Template
	// Tools are the functions the model may call, and ToolChoice how the
	// answer becomes calls; ParallelToolCalls nil is true.
	Tools             []Tool
	ToolChoice        ToolChoice
	ParallelToolCalls *bool
	// Constraints are the structured-output requests (a JSON schema, any
	// JSON object, a regular expression, a list of choices, a grammar).
	// The protocol lists them as the client wrote them; more than one is
	// refused by the protocol, which knows its fields.
	Constraints []Constraint

	// Sampling and scheduling.
	Sampling Sampling
	// MaxTokens caps the generated tokens (nil: the rest of the context).
	MaxTokens *int
	// Logprobs asks for the chosen tokens' logprobs, TopLogprobs for that
	// many alternatives each.
	Logprobs    bool
	TopLogprobs *int
	// ThinkingBudget bounds the tokens generated inside the thinking
	// section (nil: no bound; see api/openai genParams.ThinkingBudget).
	// IgnoreThinkingWithoutParser drops the budget for a model without a
	// reasoning parser instead of refusing it: the Messages and Responses
	// clients send their thinking settings whatever the model.
	ThinkingBudget              *int
	IgnoreThinkingWithoutParser bool
	// Stream asks for the answer as it is generated.
	Stream bool
	// User is only logged.
	User *string

	// Extensions are vLLM's sampling extensions, which the OpenAI
	// protocols accept.
	Extensions Extensions

	// Fields names this request's fields in its protocol's terms, for the
	// errors found after decoding.
	Fields Fields
}

// Message is one turn of the conversation.
type Message struct {
	// Role is system, user, assistant or tool ("developer" is rendered as
	// system).
	Role string
	// Content is the text, with media.Marker where each of Media goes;
	// HasContent is false for an assistant turn with no content at all.
	Content    string
	HasContent bool
	Name       string
	// Media are the turn's images and audio clips, in order.
	Media []MediaRef
	// MarkerParam names the first text of the turn that holds
	// media.Marker itself ("" for none): with media in the request it
	// would take an item's place. A protocol that checks this over the
	// whole request itself leaves it empty.
	MarkerParam string
	// ToolCalls are an assistant's calls, ToolCallID the call a tool
	// turn answers, ReasoningContent an assistant's earlier thinking.
	ToolCalls        []tokenizer.ToolCall
	ToolCallID       string
	ReasoningContent string
}

// MediaRef is an image or audio clip of a message as the client sent it,
// checked for shape but not yet decoded or fetched.
type MediaRef struct {
	Kind media.Kind
	// Param names the part in the protocol's terms, Field the field that
	// holds its data (an image's url, a clip's data), for errors about the
	// bytes.
	Param, Field string
	// URL is an image's data: or http(s) URL.
	URL string
	// Data and Format are an audio clip's base64 and "wav" or "mp3".
	Data, Format string
}

// Template is how the messages are rendered.
type Template struct {
	// Source is the client's chat template ("" for the model's).
	Source string
	// Kwargs are extra template variables (values as JSON).
	Kwargs map[string]any
	// AddGenerationPrompt ends the prompt with the assistant's turn
	// opener; ContinueFinalMessage continues the last message instead.
	AddGenerationPrompt  bool
	ContinueFinalMessage bool
	// Documents are retrieval documents the template may show.
	Documents []json.RawMessage
}

// Tool is one function the model may call.
type Tool struct {
	Name string
	// Parameters is its JSON schema (nil: none).
	Parameters json.RawMessage
	// Definition is the tool as the chat template sees it: OpenAI's
	// {"type": "function", "function": {...}} object, which Hugging Face
	// templates read.
	Definition json.RawMessage
}

// ToolMode is how tool_choice shapes the answer.
type ToolMode int

const (
	// ToolDefault is "auto" with tools and "none" without.
	ToolDefault ToolMode = iota
	ToolNone
	ToolAuto
	ToolRequired
	// ToolNamed holds the answer to the function ToolChoice.Name.
	ToolNamed
)

// ToolChoice is the request's tool choice.
type ToolChoice struct {
	Mode ToolMode
	Name string
	// Text is the choice as errors quote it ("" when not given).
	Text string
}

// ConstraintKind is what a structured-output constraint holds the answer
// to.
type ConstraintKind int

const (
	// JSONSchema: Schema, an object or a string holding one.
	JSONSchema ConstraintKind = iota
	// JSONObject: any JSON object.
	JSONObject
	// Regex: Pattern, matched in full.
	Regex
	// Choice: one of Choices.
	Choice
	// Grammar: Pattern, a GBNF grammar with a root rule.
	Grammar
)

// Constraint is one structured-output request.
type Constraint struct {
	Kind ConstraintKind
	// Param is the protocol's field that asked for it.
	Param   string
	Schema  json.RawMessage
	Pattern string
	Choices []string
}

// Sampling are the sampling and scheduling fields; nil is the default.
type Sampling struct {
	Temperature, TopP, MinP                              *float64
	PresencePenalty, FrequencyPenalty, RepetitionPenalty *float64
	TopK                                                 *int
	Seed                                                 *int64
	N                                                    *int
	// LogitBias maps token ids written as decimal strings to a bias.
	LogitBias    map[string]float64
	Stop         []string
	StopTokenIDs []int64
	IgnoreEOS    bool
	MinTokens    *int
	CacheSalt    *string
	Priority     *int
}

// Extensions are vLLM's sampling extensions.
type Extensions struct {
	BadWords             []string
	AllowedTokenIDs      []int64
	SkipSpecialTokens    *bool
	TruncatePromptTokens *int
	PromptLogprobs       *int
	BestOf               *int
}

// Fields names a request's fields in its protocol's terms, for the errors
// found after decoding (the zero value of each is OpenAI chat's name).
type Fields struct {
	// Messages names the conversation ("messages"; Responses: "input").
	Messages string
	// MaxTokens names the generation cap ("max_tokens").
	MaxTokens string
	// TopLogprobs names the number of alternatives ("top_logprobs").
	TopLogprobs string
	// ToolParameters names tool i's parameters, with %d for i
	// ("tools[%d].function.parameters").
	ToolParameters string
	// ToolChoiceName names a named tool choice's function
	// ("tool_choice.function.name").
	ToolChoiceName string
	// Thinking names the thinking budget ("thinking_token_budget").
	Thinking string
}

// Name returns name, or def when name is empty.
func Name(name, def string) string {
	if name == "" {
		return def
	}
	return name
}

// FunctionTool is a function tool's Definition in OpenAI's form, for
// protocols whose tools have another shape: {"type": "function",
// "function": {"name", "description", "parameters"}}, description and
// parameters only when given.
func FunctionTool(name string, description *string, parameters json.RawMessage) (json.RawMessage, error) {
	fn := map[string]any{"name": name}
	if description != nil {
		fn["description"] = *description
	}
	if len(parameters) > 0 {
		fn["parameters"] = parameters
	}
	return json.Marshal(map[string]any{"type": "function", "function": fn})
}

// NewFunctionTool is a function tool of a protocol other than OpenAI
// chat: its Definition in the form chat templates read (FunctionTool).
// Absent or null parameters are none.
func NewFunctionTool(name string, description *string, parameters json.RawMessage) (Tool, error) {
	if p := bytes.TrimSpace(parameters); len(p) == 0 || string(p) == "null" {
		parameters = nil
	}
	def, err := FunctionTool(name, description, parameters)
	if err != nil {
		return Tool{}, Invalid("", "The tool could not be read: %v", err)
	}
	return Tool{Name: name, Parameters: parameters, Definition: def}, nil
}

// Budgets the Responses API's reasoning.effort stands for: a share of
// max_output_tokens when the request sets it (the rest is left for the
// answer), else a fixed number of tokens; "minimal" is no thinking.
var (
	effortShare  = map[string][2]int{"low": {1, 4}, "medium": {1, 2}, "high": {3, 4}}
	effortTokens = map[string]int{"low": 1024, "medium": 4096, "high": 16384}
)

// EffortBudget is the thinking budget for a reasoning effort (minimal,
// low, medium or high: the Responses API's reasoning.effort), with
// maxOutput the request's output cap (nil: not set).
func EffortBudget(effort string, maxOutput *int) int {
	if effort == "minimal" {
		return 0
	}
	if maxOutput != nil {
		s := effortShare[effort]
		return *maxOutput * s[0] / s[1]
	}
	return effortTokens[effort]
}
