package frontend

import (
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// Params is a request validated for its model, minus its prompts:
// everything that turns into scheduler.Requests and into the shape of the
// answer. NewParams starts it from a Request; the prepare sequence's steps
// (SetLogprobs, ApplyExtras, Finish, SetTools, the thinking budget) fill
// it in. A protocol keeps its wire-only options beside it (api/openai's
// genParams embeds it).
type Params struct {
	// Base is the scheduler request every prompt starts from; ID, Prompt,
	// MaxTokens and Arrival are filled per prompt.
	Base scheduler.Request
	// MaxTokens is the client's cap on generated tokens when MaxTokensSet
	// (else the rest of the context is the cap); MaxTokensParam is the
	// field that sets it.
	MaxTokens      int
	MaxTokensSet   bool
	MaxTokensParam string
	// Stops are the stop strings.
	Stops []string
	// Stream asks for a streamed answer.
	Stream bool
	// Logprobs asks for the chosen tokens' logprobs, TopLogprobs for that
	// many alternatives; TopLogprobsParam names the field that set
	// TopLogprobs.
	Logprobs         bool
	TopLogprobs      int
	TopLogprobsParam string
	// User is only logged.
	User string
	// KeepSpecial shows control tokens in the text (skip_special_tokens
	// false); Truncate keeps a prompt's last tokens (truncate_prompt_tokens;
	// 0: off); PromptLogprobs lists that many alternatives per prompt
	// token (prompt_logprobs; -1: off).
	KeepSpecial    bool
	Truncate       int
	PromptLogprobs int

	// ThinkingBudget bounds the tokens each choice may generate inside the
	// model's thinking section (<think> ... </think>, by the model's
	// reasoning parser): once a choice has written that many, the engine
	// forces the end-of-thinking tokens (</think> and the newlines the
	// template puts after it) and the answer follows. nil is no limit; 0
	// is no thinking (the end is forced at once when the prompt opens the
	// section, or right after the model opens it). The markers are not
	// counted. The prepare sequence sets it from the request's
	// ThinkingBudget (thinking_token_budget; Anthropic's
	// thinking.budget_tokens; a budget for the Responses API's
	// reasoning.effort), with ThinkingParam naming its wire field.
	// ThinkingFor refuses a negative budget, and any budget when the model
	// has no reasoning parser, with a BadRequest naming ThinkingParam.
	// Whether or not it is set, a model with a reasoning parser reports
	// the reasoning tokens in usage.
	ThinkingBudget *int
	// ThinkingParam is the wire name of ThinkingBudget, for errors
	// ("thinking_token_budget" when empty).
	ThinkingParam string

	// sampling is the request's sampling fields, for error messages
	// (Finish).
	sampling *Sampling
}

// NewParams validates r's sampling and scheduling fields into the
// parameters every prompt starts from (Sampling.Apply). Ranges where
// sampling is defined are the engine's (Finish) and capacity is the
// scheduler's (RequestError). stopTokens are the model's end-of-generation
// tokens. randomSeed is used when the client sent no seed.
func NewParams(r *Request, nVocab int, stopTokens []int32, randomSeed uint32) (*Params, error) {
	p := &Params{Base: scheduler.Request{N: 1, PromptLogprobs: -1, Sampling: engine.DefaultSampling()}, sampling: &r.Sampling, PromptLogprobs: -1}
	p.Base.Sampling.Temperature = 1 // OpenAI's and vLLM's default
	p.MaxTokensParam = Name(r.Fields.MaxTokens, "max_tokens")
	if r.MaxTokens != nil {
		p.MaxTokens, p.MaxTokensSet = *r.MaxTokens, true
	}
	stops, err := r.Sampling.Apply(&p.Base, nVocab, stopTokens, randomSeed)
	if err != nil {
		return nil, err
	}
	p.Stops = stops
	p.Stream = r.Stream
	if r.User != nil {
		p.User = *r.User
	}
	return p, nil
}

// SetLogprobs records the logprobs request (already range-checked by the
// caller) in the sampling parameters.
func (p *Params) SetLogprobs(on bool, top int) {
	p.Logprobs, p.TopLogprobs = on, top
	p.Base.Sampling.Logprobs, p.Base.Sampling.TopLogprobs = on, top
}

// Finish checks the sampling parameters where the engine defines them.
func (p *Params) Finish(nVocab int) error {
	return p.sampling.Finish(&p.Base, nVocab, p.TopLogprobsParam)
}

// RequestError maps the scheduler's capacity checks to the request's
// fields (promptParam names prompt i), with what to do about it.
func (p *Params) RequestError(err error, promptParam func(int) string) error {
	return RequestError(err, p.MaxTokensParam, p.MaxTokensSet, promptParam)
}

// ApplyExtras validates the extension fields into p (Extensions.Apply),
// tokenizing bad words with tok. maxLen is the model's length
// (truncate_prompt_tokens -1).
func (p *Params) ApplyExtras(e *Extensions, tok *tokenizer.Tokenizer, maxLen int) error {
	x, err := e.Apply(&p.Base, tok, maxLen, p.Stream)
	if err != nil {
		return err
	}
	p.KeepSpecial, p.Truncate, p.PromptLogprobs = x.KeepSpecial, x.Truncate, x.PromptLogprobs
	return nil
}

// TruncatePrompt keeps the last tokens of a prompt when
// truncate_prompt_tokens asks for it (vLLM truncates on the left).
func (p *Params) TruncatePrompt(toks []int32) []int32 {
	if p.Truncate > 0 && len(toks) > p.Truncate {
		return toks[len(toks)-p.Truncate:]
	}
	return toks
}

// SetConstraint sets the grammar of a structured-output constraint (its
// Schema the schema document itself), checked by the model's runtime when
// it can (GrammarChecker).
func (p *Params) SetConstraint(c Constraint, m Model) error {
	g, err := c.Grammar()
	if err != nil {
		return err
	}
	if gc, ok := m.(GrammarChecker); ok {
		if err := gc.CheckGrammar(g); err != nil {
			return Invalid(c.Param, "The model's runtime cannot use the grammar this gives: %v.", err)
		}
	}
	if p.Base.MinTokens > 0 {
		return Invalid("min_tokens", "min_tokens cannot be combined with %s: the grammar decides where the output ends, and a stop token held back past that point leaves nothing to write.", c.Param)
	}
	p.Base.Sampling.Grammar = g
	return nil
}

// SetTools applies the tool plan to the request: in the constrained modes,
// the grammar that holds the answer to calls (each function's parameters
// checked as a JSON schema, errors naming the tool with paramsName); in
// the auto mode, a decoder that keeps control tokens, since several
// families write their call markers as control tokens ([TOOL_CALLS],
// <|python_tag|>), unless the client set skip_special_tokens
// (skipSpecialSet).
func (p *Params) SetTools(tp *ToolPlan, m Model, skipSpecialSet bool, paramsName string) error {
	if tp.Mode == ToolAuto && tp.Parser != "" && !skipSpecialSet {
		p.KeepSpecial = true
	}
	if !tp.Constrained() {
		return nil
	}
	if p.Base.Sampling.Grammar != "" {
		return Invalid("tool_choice", "tool_choice %s cannot be combined with structured output (response_format or guided_*): both decide the answer's form.", tp.ChoiceName())
	}
	if p.Base.MinTokens > 0 {
		return Invalid("min_tokens", "min_tokens cannot be combined with tool_choice %s: the grammar decides where the calls end.", tp.ChoiceName())
	}
	g, err := tp.Grammar(m, paramsName)
	if err != nil {
		return err
	}
	p.Base.Sampling.Grammar = g
	return nil
}

// SetThinking sets the thinking budget from r (its ThinkingBudget, named
// by r.Fields.Thinking). A request that IgnoreThinkingWithoutParser sets
// it only when m has a reasoning parser: a model without one has no
// thinking to bound, and the Messages and Responses clients (Claude Code,
// Codex) send their thinking settings whatever the model, so there the
// setting is ignored rather than refused, as Anthropic and OpenAI ignore
// it for models that do not think.
func (p *Params) SetThinking(r *Request, m Model) {
	if !r.IgnoreThinkingWithoutParser {
		p.ThinkingBudget, p.ThinkingParam = r.ThinkingBudget, r.Fields.Thinking
		return
	}
	if r.ThinkingBudget == nil || ReasoningParserOf(m) == "" {
		return
	}
	budget := *r.ThinkingBudget
	p.ThinkingBudget, p.ThinkingParam = &budget, r.Fields.Thinking
}

// ReasoningModel is a Model that names a reasoning parser (one of
// tokenizer.ReasoningParsers, or "" for none).
type ReasoningModel interface {
	ReasoningParser() string
}

// ReasoningParserOf returns m's reasoning parser name, "" for none.
func ReasoningParserOf(m Model) string {
	if rm, ok := m.(ReasoningModel); ok {
		return rm.ReasoningParser()
	}
	return ""
}

// ThinkingFor returns the thinking section of a prompt's request
// (scheduler.Thinking: its markers as tokens of m's vocabulary, where the
// output starts and p.ThinkingBudget), or nil when m has no reasoning
// parser; prompt is the prompt's text as rendered. A budget that is
// negative, or set for a model without a reasoning parser, is the
// client's error, named by p.ThinkingParam.
//
// Refusing a budget the model cannot honour (vLLM ignores it) tells the
// client at once that its cap does nothing, rather than letting a thinking
// model run to max_tokens.
func (p *Params) ThinkingFor(m Model, prompt string) (*scheduler.Thinking, error) {
	param := p.ThinkingParam
	if param == "" {
		param = "thinking_token_budget"
	}
	parser := ReasoningParserOf(m)
	budget := -1
	if b := p.ThinkingBudget; b != nil {
		if *b < 0 {
			return nil, Invalid(param, "%s must be a non-negative integer, got %d.", param, *b)
		}
		if parser == "" {
			return nil, Invalid(param, "%s needs a model with a reasoning parser; model %q has none (serve it with --reasoning-parser).", param, m.Name())
		}
		budget = *b
	}
	if parser == "" {
		return nil, nil
	}
	return Thinking(m.Tokenizer(), parser, prompt, budget)
}
