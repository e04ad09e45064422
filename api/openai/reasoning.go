package openai

import (
	"github.com/llmserve/llmserve/tokenizer"
)

// Reasoning models (serve --reasoning-parser) write their reasoning between
// <think> and </think>. With a parser set, the chat endpoint returns it as
// message.reasoning_content (delta.reasoning_content when streaming) and
// only the rest as content, as vLLM does; the tags never reach the client
// and reasoning never leaks into content (tokenizer.ReasoningParser holds
// back what may still become a tag). The completions endpoint returns the
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

// chatMessageOf is the answer message for generated text: with a
// reasoning parser, split into reasoning_content and content.
func chatMessageOf(parser, prompt, text string) chatMessage {
	msg := chatMessage{Role: "assistant", Content: contentOf(text)}
	if parser == "" {
		return msg
	}
	reasoning, content, err := tokenizer.SplitReasoning(parser, prompt, text)
	if err != nil {
		return msg // the name was checked at start-up
	}
	msg.Content = contentOf(content)
	if reasoning != "" {
		msg.ReasoningContent = &reasoning
	}
	return msg
}

// reasoningStream splits each streamed choice's text.
type reasoningStream struct {
	parser  string
	prompt  string
	choices map[int]*tokenizer.ReasoningParser
}

// newReasoningStream returns nil when there is no parser.
func newReasoningStream(parser, prompt string) *reasoningStream {
	if parser == "" {
		return nil
	}
	return &reasoningStream{parser: parser, prompt: prompt, choices: map[int]*tokenizer.ReasoningParser{}}
}

// split takes the next text of a choice and returns its settled reasoning
// and content; at the end of the choice (final), what was held back too.
func (s *reasoningStream) split(choice int, text string, final bool) (reasoning, content string) {
	p := s.choices[choice]
	if p == nil {
		var err error
		if p, err = tokenizer.NewReasoningParser(s.parser, s.prompt); err != nil {
			return "", text
		}
		s.choices[choice] = p
	}
	reasoning, content = p.Push(text)
	if final {
		r, c := p.Flush()
		reasoning, content = reasoning+r, content+c
		delete(s.choices, choice)
	}
	return reasoning, content
}

// setDelta fills a chunk's delta with text, split when s is not nil. It
// reports whether the delta says anything.
func (s *reasoningStream) setDelta(d *chatDelta, choice int, text string, final, hasLogprobs bool) bool {
	if s == nil {
		if text != "" || hasLogprobs {
			d.Content = contentOf(text)
			return true
		}
		return false
	}
	reasoning, content := s.split(choice, text, final)
	if reasoning != "" {
		d.ReasoningContent = &reasoning
	}
	if content != "" || (hasLogprobs && reasoning == "") {
		d.Content = contentOf(content)
	}
	return d.ReasoningContent != nil || d.Content != nil
}
