package anthropic

import (
	"encoding/json"

	"github.com/llmserve/llmserve/frontend"
)

// messagesStream turns an answer's pieces (thinking, text, tool call
// deltas, the end) into Anthropic's event sequence:
//
//	message_start, ping,
//	(content_block_start, content_block_delta*, content_block_stop)*,
//	message_delta, message_stop
//
// A block is opened when a piece of another kind arrives, and closed when
// the next one opens or the answer ends. It writes through emit, so that
// tests can record the sequence without HTTP.
type messagesStream struct {
	emit func(event string, v any) error
	// index is the open block's index, -1 before the first.
	index int
	// open is the open block's type, "" when none is open.
	open string
}

func newMessagesStream(emit func(event string, v any) error) *messagesStream {
	return &messagesStream{emit: emit, index: -1}
}

// start writes message_start, with an empty content list, and a ping.
func (s *messagesStream) start(id, model string, u messagesUsage) error {
	err := s.emit("message_start", messagesStartEvent{Type: "message_start", Message: messagesResponse{
		ID: id, Type: "message", Role: "assistant", Model: model, Content: []messagesBlock{}, Usage: u,
	}})
	if err != nil {
		return err
	}
	return s.emit("ping", messagesTypeEvent{Type: "ping"})
}

// openBlock closes the open block and starts block.
func (s *messagesStream) openBlock(block messagesBlock) error {
	if err := s.closeBlock(); err != nil {
		return err
	}
	s.index++
	s.open = block.Type
	return s.emit("content_block_start", messagesBlockEvent{Type: "content_block_start", Index: s.index, ContentBlock: &block})
}

func (s *messagesStream) closeBlock() error {
	if s.open == "" {
		return nil
	}
	s.open = ""
	return s.emit("content_block_stop", messagesBlockEvent{Type: "content_block_stop", Index: s.index})
}

func (s *messagesStream) delta(d messagesDelta) error {
	return s.emit("content_block_delta", messagesBlockEvent{Type: "content_block_delta", Index: s.index, Delta: &d})
}

// openThinking opens a thinking block, if one is not open, without text
// (thinking.display "omitted").
func (s *messagesStream) openThinking() error {
	if s.open == "thinking" {
		return nil
	}
	return s.openBlock(thinkingBlock(""))
}

// thinking adds reasoning text.
func (s *messagesStream) thinking(text string) error {
	if text == "" {
		return nil
	}
	if s.open != "thinking" {
		if err := s.openBlock(thinkingBlock("")); err != nil {
			return err
		}
	}
	return s.delta(messagesDelta{Type: "thinking_delta", Thinking: &text})
}

// text adds answer text.
func (s *messagesStream) text(text string) error {
	if text == "" {
		return nil
	}
	if s.open != "text" {
		empty := ""
		if err := s.openBlock(messagesBlock{Type: "text", Text: &empty}); err != nil {
			return err
		}
	}
	return s.delta(messagesDelta{Type: "text_delta", Text: &text})
}

// tool adds a piece of a tool call: its header (id, name) opens a
// tool_use block, its arguments are input_json_delta.
func (s *messagesStream) tool(d frontend.ToolCallDelta) error {
	if d.ID != "" || d.Name != "" || s.open != "tool_use" {
		block := messagesBlock{Type: "tool_use", ID: toolUseID(d.ID), Name: d.Name, Input: json.RawMessage("{}")}
		if err := s.openBlock(block); err != nil {
			return err
		}
	}
	if d.Arguments == "" {
		return nil
	}
	return s.delta(messagesDelta{Type: "input_json_delta", PartialJSON: &d.Arguments})
}

// finish closes the open block and writes message_delta and message_stop.
func (s *messagesStream) finish(reason string, seq *string, u messagesUsage) error {
	if err := s.closeBlock(); err != nil {
		return err
	}
	err := s.emit("message_delta", messagesDeltaEvent{
		Type:  "message_delta",
		Delta: messagesStop{StopReason: reason, StopSequence: seq},
		Usage: u,
	})
	if err != nil {
		return err
	}
	return s.emit("message_stop", messagesTypeEvent{Type: "message_stop"})
}

// The events' data, fields in Anthropic's order.
type (
	messagesTypeEvent struct {
		Type string `json:"type"`
	}
	messagesStartEvent struct {
		Type    string           `json:"type"`
		Message messagesResponse `json:"message"`
	}
	messagesBlockEvent struct {
		Type         string         `json:"type"`
		Index        int            `json:"index"`
		ContentBlock *messagesBlock `json:"content_block,omitempty"`
		Delta        *messagesDelta `json:"delta,omitempty"`
	}
	messagesDelta struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		Thinking    *string `json:"thinking,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	// messagesDeltaEvent is message_delta. Its usage is the request's
	// whole usage, cumulative, as Anthropic's is: message_start's knows
	// only the prompt's size, not yet its cache hits.
	messagesDeltaEvent struct {
		Type  string        `json:"type"`
		Delta messagesStop  `json:"delta"`
		Usage messagesUsage `json:"usage"`
	}
	messagesStop struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
)
