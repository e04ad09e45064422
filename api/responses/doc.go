// Package responses serves OpenAI's Responses API over the chat path of
// an openai.Server, with its store of responses (package store):
//
//	POST /v1/responses, /v1/responses/input_tokens
//	GET, DELETE /v1/responses/{id}
//	GET  /v1/responses/{id}/input_items
//	POST /v1/responses/{id}/cancel
//
// Mount adds the routes; api/router.go mounts them beside api/openai's.
//
// # Built on the chat path, not beside it
//
// decodeResponses checks the request and its input items (errors name
// input[i]...), prepends the conversation of previous_response_id from the
// store, and turns the items, decoded once, into a frontend.Request
// (function_call items become an assistant message's tool calls,
// function_call_output a tool message, reasoning the next assistant
// message's reasoning content, instructions a system message, text.format
// a structured-output constraint, input_image and input_audio parts media
// parts). startResponse then runs it through openai.Server.Prepare and
// Run.Start, so templates, tools, structured output, limits, cancellation
// and metrics are the chat path's; errors found there name the Responses
// fields (input, max_output_tokens, tools[i].parameters, tool_choice.name:
// the request's Fields). The answer is split into output items (reasoning,
// message, function calls) as chat splits it into reasoning_content,
// content and tool_calls. The stream (responses_stream.go) writes named
// events with sequence numbers, one output item at a time, and no [DONE].
// Because a continued conversation renders to a prompt that starts with
// the previous turn's prompt and answer, the prefix cache serves it, and
// cached_tokens grows over turns.
//
// # The store
//
// Stored responses live in a store.Store (Options.Store; a bounded LRU,
// persisted with bbolt when the server is given --responses-store-dir):
// one JSON record per response with the response, its own input items and
// the whole conversation so far. Background responses run on a context
// apart from the HTTP request's (values kept, cancellation not) and are
// cancelled by POST /v1/responses/{id}/cancel or DELETE.
// reasoning.effort is the thinking budget (frontend.EffortBudget: minimal
// 0, low a quarter, medium half, high three quarters of max_output_tokens;
// without it 1024, 4096, 16384 tokens), ignored for a model without a
// reasoning parser.
//
// # Errors
//
// Errors are OpenAI's, written by the openai.Server (Fail). An unknown
// response id is a 404 (notFoundError; "Previous response with id '...'
// not found." with param previous_response_id, as OpenAI).
package responses
