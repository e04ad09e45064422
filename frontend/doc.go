// Package frontend is what every protocol shares between its wire format and
// the engine core, the way vLLM's serving layer shares one chat
// preprocessing path and one OutputProcessor across its APIs. A feature added
// here reaches OpenAI chat and completions, Responses, Anthropic Messages, V2
// generate/generate_stream/infer, Triton v1 and the head's worker service at
// once; a protocol package only decodes its wire types into a Request and
// renders the Deltas it gets back.
//
// # The target layout (issue 27; landing in steps that each stay green)
//
//	api/openai, api/anthropic,      each decodes its own wire types ONCE,
//	api/responses (+ its store),    directly into a frontend.Request (no JSON
//	api/v2, api/tritonv1,           round trip between protocols), with field
//	api/kservev1, api/worker        errors in its own field paths; renders
//	        │                       frontend.Deltas; maps frontend.Error to its
//	        ▼                       wire in one place.
//	frontend            (this package, pure Go, no cgo, no net/http)
//	  request.go        Request: messages with media parts, tools and tool
//	                    choice, response format / grammar, sampling, stop,
//	                    reasoning budget, logprobs, n, cache salt, LoRA,
//	                    priority; or a raw prompt (text or token ids).
//	  render.go         Render: chat template, media preparation, grammar
//	                    (grammar.go), limits, tokenization, the BOS rule →
//	                    a prepared prompt.
//	  submit.go         Submit: scheduler.Requests with their defaults
//	                    (arrival, deadline, generation cap), all or none.
//	  output*.go        ONE output processor: incremental detokenization,
//	                    stop strings and stop tokens, reasoning and tool-call
//	                    splitting, logprobs, finish reason and usage, as
//	                    Deltas per choice, for streaming and non-streaming
//	                    answers alike.
//	  errors.go         ONE error classification (bad request with its
//	                    param, not found, too long for the context,
//	                    overloaded, unavailable, timed out, canceled,
//	                    internal) that each protocol maps to its wire once.
//	  model.go          what the frontend needs of an LLM (name, context
//	                    length, tokenizer, submit, media); embedding, tensor
//	                    and custom-runtime models have interfaces of their
//	                    own elsewhere, never stubs of this one.
//	core, scheduler, tokenizer, media, grammar   (below: the frontend calls
//	                    core.EngineCore through Model.Submit and reads
//	                    core.Streams)
//
// # Where it stands
//
// Landed: request.go, the typed Request of the chat family. OpenAI chat
// (api/openai decodeChat), Anthropic Messages (api/anthropic) and
// Responses (api/responses, with the conversation of
// previous_response_id) each decode their own wire types into it once,
// and api/openai's prepareChat is the one prepare sequence they share
// (openai.Server.Prepare); Request.Fields names the fields in each
// protocol's terms for the errors found after decoding. OpenAI completions decode into it too,
// with their raw prompts (Request.Prompt, rendered by render_raw.go's
// RenderRaw: token ids checked, fill-in-the-middle, truncation). LoRA
// adapters are chosen by model name, so Request has no field for them
// yet.
//
// media_check.go holds the shape checks of media parts that every
// protocol's decoder shares (CheckImageURL, CheckDetail, MarkerText);
// api/jsonwire the JSON decoding helpers the HTTP protocols share, whose
// errors are this package's.
//
// render.go renders (Prompt: template, BOS rule, length limits, media
// through a MediaModel), media_resolve.go prepares a prompt's media
// (Prompt.PrepareMedia: the checks before anything is fetched, then
// MediaResolver: base64 decoding, the limits, the check that the bytes
// are the format they claim; fetching URLs and naming unknown formats are
// net/http's, which stays in the protocol and is handed in as
// MediaResolver.Fetch and Detect), grammar.go turns structured-output
// constraints into grammars, submit.go builds the
// scheduler.Requests with their defaults (Submission), errors.go
// classifies errors (Error, Classify) and model.go says what the frontend
// needs of an LLM (Model, MediaModel, GrammarChecker); tools.go decides
// the tool plan (ToolPlan: mode, parser, the grammar of the constrained
// modes), which the output side reads to split calls, and
// tools_generic.go the generic tool format of templates that do not
// render tools (RendersTools; the tools and a JSON answer shape in the
// system prompt, which Prompt.Apply adds, so that usage and every token
// count include it); sampling.go
// validates the sampling and scheduling fields and vLLM's extensions into
// the scheduler.Request every prompt starts from, and names the engine's
// range errors and the scheduler's capacity errors by the request's
// fields. (grammar.go, tools.go and sampling.go are render.go's grammar
// and limits, split by concern.) params.go's Params is a request
// validated for its model, minus its prompts: the scheduler.Request every
// prompt starts from, the stops, logprobs, extensions, tools and the
// thinking budget (ThinkingFor), which the prepare sequence fills in
// step by step (api/openai's prepareChat) and api/openai's genParams
// embeds beside its wire-only options; its output side reads it.
//
// output.go is the output processor: Output turns one choice's
// scheduler.Outputs into one Delta per token (text, reasoning, tool-call
// pieces, logprobs, the finish reason in the frontend's words) and counts
// the tokens usage reports; OutputConfig says how (stops, stop tokens,
// min_tokens, logprobs, the reasoning parser, the ToolPlan). The reasoning
// split (output.go) and the tool-call split (output_tools.go: the auto
// mode's parser, the required mode's JSON scanner, the named mode;
// output_tools_generic.go: the generic format's auto answers) happen
// there and nowhere else. output_reasoning.go's Thinking gives the
// scheduler the thinking section its budget bounds. OpenAI chat,
// completions, Responses and Messages (api/openai choice.go, generate.go)
// and V2 generate, generate_stream, infer and Triton v1 (api/v2/infer
// generation.go) render its Deltas; usage is summed per protocol from
// Output.Tokens and the streams' counts. The head's worker service
// forwards scheduler outputs (tokens) to the head, which runs them through
// the protocol that took the request, so it needs no output path of its
// own.
//
// # What it must not do
//
// It knows no protocol: no net/http, no gRPC, no wire type of any API, no
// JSON body parsing. It holds no model state and makes no scheduling
// decision. It takes the time from a clock it is given, never time.Now.
package frontend
