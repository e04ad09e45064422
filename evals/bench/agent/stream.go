package agent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// agentUsage is what a turn's stream said of its tokens. Cached is -1 when
// the server reported nothing about its cache.
type agentUsage struct {
	input, cached, output int
	// cacheSource names where cached came from: "usage" (the API's own
	// field: cache_read_input_tokens, cached_tokens) or "timings"
	// (llama-server's timings.cache_n); "" when cached is -1.
	cacheSource string
}

// agentEvent is what one event of a turn's stream means for the clock.
type agentEvent struct {
	// output: the event carries generated output (text, thinking, tool
	// call name or arguments): the first one stops the TTFT clock.
	output bool
	// finish: the event says generation ended (a stop reason, a completed
	// response, a finish_reason); a stream without output takes its TTFT
	// here (its prompt was processed, the model stopped at once).
	finish bool
	// done: the last event of the stream; nothing after it is read.
	done bool
	// failure, when not "", fails the turn.
	failure string
}

// decodeAgentEvent reads one event of api's stream into u.
func decodeAgentEvent(api API, ev benchio.Event, u *agentUsage) agentEvent {
	switch api {
	case Messages:
		return decodeMessagesEvent(ev, u)
	case Responses:
		return decodeResponsesEvent(ev, u)
	}
	return decodeChatEvent(ev, u)
}

// messagesUsage is Anthropic's usage object; absent fields stay nil.
type messagesUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
}

// add records what u says: input_tokens counts only the tokens after the
// last cache breakpoint, so the prompt is input + cache read + cache
// creation.
func (m *messagesUsage) addTo(u *agentUsage) {
	if m == nil {
		return
	}
	if m.InputTokens != nil || m.CacheReadInputTokens != nil || m.CacheCreationInputTokens != nil {
		u.input = deref(m.InputTokens) + deref(m.CacheReadInputTokens) + deref(m.CacheCreationInputTokens)
	}
	if m.CacheReadInputTokens != nil {
		u.cached, u.cacheSource = *m.CacheReadInputTokens, "usage"
	}
	if m.OutputTokens != nil {
		u.output = *m.OutputTokens
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// typedEvent is the "type" field every Messages and Responses event has.
type typedEvent struct {
	Type string `json:"type"`
}

func (t *typedEvent) typed() *typedEvent { return t }

// decodeTyped decodes ev's data into e, a struct that embeds typedEvent,
// and returns the event's type: its "type" field, else the SSE event name.
// Data that does not decode is a failure naming api.
func decodeTyped(ev benchio.Event, api string, e interface{ typed() *typedEvent }) (typ, failure string) {
	if err := json.Unmarshal(ev.Data, e); err != nil {
		return "", fmt.Sprintf("bad %s event %q: %v", api, benchio.Truncate(string(ev.Data), 100), err)
	}
	if typ = e.typed().Type; typ == "" {
		typ = ev.Name
	}
	return typ, ""
}

// decodeMessagesEvent reads a Messages stream event: message_start (input
// usage), content_block_start/delta (output), message_delta (stop reason,
// final usage), message_stop, error.
func decodeMessagesEvent(ev benchio.Event, u *agentUsage) agentEvent {
	var e struct {
		typedEvent
		Message struct {
			Usage *messagesUsage `json:"usage"`
		} `json:"message"`
		ContentBlock struct {
			Type string `json:"type"`
		} `json:"content_block"`
		Delta struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Thinking    string `json:"thinking"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *messagesUsage  `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	typ, failure := decodeTyped(ev, "Messages", &e)
	if failure != "" {
		return agentEvent{failure: failure}
	}
	switch typ {
	case "error":
		return agentEvent{failure: "error event: " + benchio.OrUnknown(benchio.ErrorText(e.Error))}
	case "message_start":
		e.Message.Usage.addTo(u)
	case "content_block_start":
		return agentEvent{output: e.ContentBlock.Type == "tool_use" || e.ContentBlock.Type == "server_tool_use"}
	case "content_block_delta":
		d := e.Delta
		return agentEvent{output: d.Text != "" || d.Thinking != "" || d.PartialJSON != ""}
	case "message_delta":
		e.Usage.addTo(u)
		return agentEvent{finish: e.Delta.StopReason != ""}
	case "message_stop":
		return agentEvent{finish: true, done: true}
	}
	return agentEvent{}
}

// decodeResponsesEvent reads a Responses stream event: the *.delta events
// of output text, reasoning and tool-call arguments (output), and
// response.completed or response.incomplete (usage; the end).
func decodeResponsesEvent(ev benchio.Event, u *agentUsage) agentEvent {
	var e struct {
		typedEvent
		Delta    string `json:"delta"`
		Response struct {
			Error json.RawMessage `json:"error"`
			Usage *struct {
				InputTokens        int `json:"input_tokens"`
				OutputTokens       int `json:"output_tokens"`
				InputTokensDetails *struct {
					CachedTokens *int `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		} `json:"response"`
		Message string `json:"message"`
	}
	typ, failure := decodeTyped(ev, "Responses", &e)
	if failure != "" {
		return agentEvent{failure: failure}
	}
	switch typ {
	case "error":
		msg := e.Message
		if msg == "" {
			msg = benchio.ErrorBody(ev.Data)
		}
		return agentEvent{failure: "error event: " + benchio.OrUnknown(msg)}
	case "response.failed":
		return agentEvent{failure: "response.failed: " + benchio.OrUnknown(benchio.ErrorText(e.Response.Error))}
	case "response.output_text.delta", "response.reasoning_text.delta", "response.reasoning_summary_text.delta",
		"response.function_call_arguments.delta", "response.custom_tool_call_input.delta", "response.refusal.delta":
		return agentEvent{output: e.Delta != ""}
	case "response.completed", "response.incomplete":
		if us := e.Response.Usage; us != nil {
			u.input, u.output = us.InputTokens, us.OutputTokens
			if d := us.InputTokensDetails; d != nil && d.CachedTokens != nil {
				u.cached, u.cacheSource = *d.CachedTokens, "usage"
			}
		}
		return agentEvent{finish: true, done: true}
	}
	return agentEvent{}
}

// decodeChatEvent reads a chat.completions chunk: content (output), a
// finish_reason, the usage chunk (prompt_tokens_details.cached_tokens, or
// llama-server's timings.cache_n) and [DONE].
func decodeChatEvent(ev benchio.Event, u *agentUsage) agentEvent {
	if ev.Name != "error" && benchio.IsDone(ev.Data) {
		return agentEvent{done: true}
	}
	c, failure := benchio.DecodeChunk(ev)
	if failure != "" {
		return agentEvent{failure: failure}
	}
	var extra struct {
		Usage *struct {
			PromptTokensDetails *struct {
				CachedTokens *int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Timings *struct {
			CacheN *int `json:"cache_n"`
		} `json:"timings"`
	}
	if bytes.Contains(ev.Data, []byte(`"usage"`)) || bytes.Contains(ev.Data, []byte(`"timings"`)) {
		_ = json.Unmarshal(ev.Data, &extra) // DecodeChunk has read it as JSON already
	}
	if c.Usage != nil {
		u.input, u.output = c.Usage.PromptTokens, c.Usage.CompletionTokens
		if extra.Usage != nil && extra.Usage.PromptTokensDetails != nil && extra.Usage.PromptTokensDetails.CachedTokens != nil {
			u.cached, u.cacheSource = *extra.Usage.PromptTokensDetails.CachedTokens, "usage"
		}
	}
	if extra.Timings != nil && extra.Timings.CacheN != nil && u.cacheSource != "usage" {
		u.cached, u.cacheSource = *extra.Timings.CacheN, "timings"
	}
	return agentEvent{output: c.HasContent(), finish: c.Finished()}
}
