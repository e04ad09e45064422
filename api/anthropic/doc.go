// Package anthropic serves Anthropic's Messages API over the chat path of
// an openai.Server, so that Claude Code and the Anthropic SDKs talk to the
// served models:
//
//	POST /v1/messages
//	POST /v1/messages/count_tokens
//
// Mount adds the routes; api/router.go mounts them beside api/openai's.
//
// # One wire format over the chat path
//
// A Messages request is decoded once, straight into a frontend.Request
// (messages_request.go: system and content blocks into messages, tool_use
// into tool calls, tool_result into tool messages, thinking into reasoning
// content, image blocks into media parts, tool_choice any/tool into
// required/named, thinking.budget_tokens, or adaptive thinking bounded by
// output_config.effort, into the thinking budget, output_config.format's
// JSON schema into the answer's grammar), with errors naming Anthropic's
// fields. What Claude Code sends beyond that is read or knowingly
// ignored: cache_control is checked (the prefix cache needs no
// breakpoints), context_management accepted, a system turn in the
// conversation read as the user's text where it stands, defer_loading
// tools offered, server tools left out. openai.Server.Prepare then runs
// the chat family's one prepare sequence, so the checks, limits,
// templates, tools and media are chat's by construction. The answer is
// shaped as content blocks (thinking, text, tool_use; messages.go), or
// streamed as Anthropic's event sequence (messages_stream.go:
// message_start, sent with the first piece of the answer so that its
// usage, cache hits included, is message_delta's; ping;
// content_block_start/delta/stop per block; message_delta with the stop
// reason and the whole usage; message_stop), with a ping whenever the
// stream has been silent for Options.PingInterval of Options.Clock's time
// (messages_ping.go). count_tokens answers the length of the prompt the
// request renders to, without generating. Every answer has Anthropic's
// request-id header, whose id the message's id shares.
//
// # Errors
//
// Errors are Anthropic's {"type": "error", "error": {"type", "message"}},
// mapped in one place, messagesErrorOf (messages_errors.go), from
// openai.ErrorOf's status, so both APIs agree on whose fault an error is;
// a bad request's message starts with the field it names; a prompt too
// long for the context is worded as Anthropic's ("prompt is too long: N
// tokens > M maximum"), which Claude Code reads to compact. WriteAuthError
// is the router's 401 in this shape.
//
// It holds no state of its own and never touches the engine: everything
// below the wire goes through the openai.Server.
package anthropic
