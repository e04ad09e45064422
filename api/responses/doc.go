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
// # What agents send (Codex CLI)
//
// tools.go reads the tool types: function; namespace (each function
// offered as "<namespace>__<name>", its calls named back apart); custom
// (freeform: offered as a function with one string "input"; a call is a
// custom_tool_call; named by tool_choice, the whole answer is its input,
// held to its grammar, Lark through grammar.FromLark or a regex); hosted
// tools (web_search, ...), accepted and not offered to the model. It also
// reads include (reasoning.encrypted_content: the reasoning text, base64
// behind a prefix and not encrypted, read back from later input;
// message.output_text.logprobs with top_logprobs) and checks text.format's
// json_schema name. prompt_cache_key becomes the request's routing key
// (openai.Run.SetRouteKey, scheduler.Request.RouteKey), which the head's
// router uses to keep a session on one worker. truncation "auto" drops the
// oldest items but system and developer messages until the prompt fits
// (startResponse: doubling, then bisecting the number dropped).
// client_metadata is accepted and unused.
//
// # The store
//
// Stored responses live in a store.Store (Options.Store; a bounded LRU,
// persisted with bbolt when the server is given --responses-store-dir):
// one JSON record per response with the response, its own input items and
// the whole conversation so far. Background responses (background.go)
// run on a context apart from the HTTP request's (values kept,
// cancellation not) and are cancelled by POST /v1/responses/{id}/cancel
// or DELETE. The background run alone decides how it ends and stores it
// before it is done; cancel waits for that and answers what the store
// holds, so cancel, GET and the stream agree. With stream, its events go
// to an event log (bgRun) that the creating request follows and GET
// ?stream=true&starting_after=N resumes.
// reasoning.effort is the thinking budget (respEffortBudget: none and
// minimal 0, low a quarter, medium half, high three quarters, xhigh all of
// max_output_tokens; without it 1024, 4096, 16384, 32768 tokens), ignored
// for a model without a reasoning parser.
//
// # Errors
//
// Errors are OpenAI's, written by the openai.Server (Fail). An unknown
// response id is a 404 (notFoundError); an unknown previous_response_id a
// 400 "Previous response with id '...' not found." with param
// previous_response_id and code previous_response_not_found, as OpenAI.
package responses
