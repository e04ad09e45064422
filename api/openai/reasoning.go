package openai

import (
	"github.com/llmserve/llmserve/frontend"
	"github.com/llmserve/llmserve/scheduler"
)

// Reasoning models (serve --reasoning-parser) write their reasoning between
// <think> and </think>. With a parser set, the chat endpoint returns it as
// message.reasoning_content (delta.reasoning_content when streaming) and
// only the rest as content, as vLLM does; the tags never reach the client
// and reasoning never leaks into content (tokenizer.ReasoningParser holds
// back what may still become a tag). The split is the output processor's
// (frontend.Output, as on V2 generate): chat, Messages and Responses turn it
// on with generation.splitReasoning; the completions endpoint returns the
// raw text.

// reasoningModel is a Model that names a reasoning parser (one of
// tokenizer.ReasoningParsers, or "" for none).
type reasoningModel interface {
	ReasoningParser() string
}

// reasoningParserOf returns m's reasoning parser name, "" for none.
func reasoningParserOf(m Model) string {
	if rm, ok := m.(reasoningModel); ok {
		return rm.ReasoningParser()
	}
	return ""
}

// chatMessageOf is the answer message of a choice: its text as content,
// its thinking (split by the output processor when the model has a
// reasoning parser) as reasoning_content.
func chatMessageOf(reasoning, text string) chatMessage {
	msg := chatMessage{Role: "assistant", Content: contentOf(text)}
	if reasoning != "" {
		msg.ReasoningContent = &reasoning
	}
	return msg
}

// setChatDelta fills a chunk's delta with what a choice settled: its
// reasoning, and its content (also when empty, if the chunk carries
// logprobs and no reasoning). It reports whether the delta says anything.
func setChatDelta(d *chatDelta, reasoning, content string, hasLogprobs bool) bool {
	if reasoning != "" {
		d.ReasoningContent = &reasoning
	}
	if content != "" || (hasLogprobs && reasoning == "") {
		d.Content = contentOf(content)
	}
	return d.ReasoningContent != nil || d.Content != nil
}

// thinkingFor returns the thinking section of prompt pr's request
// (scheduler.Thinking: its markers as tokens of m's vocabulary, where the
// output starts and p.ThinkingBudget), or nil when m has no reasoning
// parser. A budget that is negative, or set for a model without a
// reasoning parser, is the client's error, named by p.ThinkingParam.
//
// Refusing a budget the model cannot honour (vLLM ignores it) tells the
// client at once that its cap does nothing, rather than letting a thinking
// model run to max_tokens.
func thinkingFor(m Model, p *genParams, pr promptInput) (*scheduler.Thinking, error) {
	param := p.ThinkingParam
	if param == "" {
		param = "thinking_token_budget"
	}
	parser := reasoningParserOf(m)
	budget := -1
	if b := p.ThinkingBudget; b != nil {
		if *b < 0 {
			return nil, invalid(param, "%s must be a non-negative integer, got %d.", param, *b)
		}
		if parser == "" {
			return nil, invalid(param, "%s needs a model with a reasoning parser; model %q has none (serve it with --reasoning-parser).", param, m.Name())
		}
		budget = *b
	}
	if parser == "" {
		return nil, nil
	}
	text := pr.rendered
	if text == "" {
		text = pr.text
	}
	return frontend.Thinking(m.Tokenizer(), parser, text, budget)
}

// setThinkingBudget sets p's thinking budget from another API's field
// (param names it for errors) when the model has a reasoning parser. A
// model without one has no thinking to bound: the Messages and Responses
// clients (Claude Code, Codex) send their thinking settings whatever the
// model, so there the setting is ignored rather than refused, as Anthropic
// and OpenAI ignore it for models that do not think.
func setThinkingBudget(m Model, p *genParams, budget int, param string) {
	if reasoningParserOf(m) == "" {
		return
	}
	p.ThinkingBudget, p.ThinkingParam = &budget, param
}
