// Package openai serves the OpenAI-compatible HTTP API: chat completions,
// completions, embeddings, score and rerank, and tokenize, with SSE
// streaming, in the shapes the OpenAI SDKs and vLLM's clients expect.
//
//	POST /v1/chat/completions
//	POST /v1/completions
//	POST /v1/embeddings
//	POST /v1/score, /score; /v1/rerank, /rerank, /v2/rerank
//	POST /tokenize, /detokenize
//
// New returns a Server over a Backend (backend.go) and Server.Mount adds
// the routes to a chi router (Mount does both). Each route's handler is
// one of two, which read the body, find the model and answer every failure
// once: serveGeneration for chat and completions (a generationRoute says
// how each prepares its prompts and writes its answer) and serveJSON for
// the routes that answer one JSON document (embeddings, score, rerank,
// tokenize, detokenize: a function from the decoded request and its model
// to the answer). The model list (GET
// /v1/models and /v1/models/{id}, in OpenAI's, Anthropic's, Codex's and
// KServe V1's shapes) is api/catalog's, over the same Backend; it writes
// its 404 with this package's error path (ModelNotFound, WriteError).
//
// # The chat family
//
// Every API that is a chat over a model shares one chat path, which this
// package owns: decoding into a frontend.Request, prepareChat (the one
// prepare sequence: model, tool plan, validation, template, media,
// grammar, limits), submit and the generation (the output processor's
// deltas, stop strings, cancellation on disconnect, usage), and the error
// mapping (toAPIError). OpenAI chat decodes its wire types into the
// frontend.Request (decodeChat); Anthropic's Messages (api/anthropic) and
// OpenAI's Responses (api/responses, with its store) each decode their
// own wire types once, straight into a frontend.Request with errors in
// their own field paths, and run it through the Server they hold
// (family.go: Server.Prepare, Run.Start, Generation.Collect and Receive,
// ErrorOf). What is OpenAI-wire and shared with them is exported and kept
// small: SSE (the event writer), Usage (the usage shape they rename),
// InputAudio (an input_audio part, which Responses shares with chat).
// The JSON decoding helpers every HTTP protocol uses are api/jsonwire's.
//
// # What it owns, and what it must not do
//
// The package turns wire requests into scheduler.Requests and scheduler
// Outputs back into wire responses. That covers: strict request decoding,
// chat template rendering and tokenization (through the model's
// tokenizer.Tokenizer), the BOS rule, request defaults (the one place they
// are set: arrival, deadline, the generation cap), incremental
// detokenization, stop strings, logprob formatting, usage counting, SSE, and
// the mapping of errors to HTTP statuses. It holds no model state, makes no
// scheduling decision and never touches the engine: it only calls
// Model.Submit and reads the returned core.Streams. Handlers are stateless
// apart from the request at hand.
//
// # Wire types
//
// Request and response types are this package's own, not go-openai's: those
// lack vLLM's extension fields (top_k, min_p, repetition_penalty,
// stop_token_ids, ignore_eos, min_tokens, cache_salt, priority, ...), encode
// "finish_reason" as "" instead of null in stream chunks, and cannot tell an
// absent field from a zero one. Responses follow OpenAI's schema exactly
// (ids "chatcmpl-…" and "cmpl-…", "object", "created", "model", "choices",
// "usage" with prompt_tokens_details.cached_tokens); go-openai is used in
// the tests to prove that its client reads them.
//
// # Decoding and validation
//
// A body that is not JSON, or a field of the wrong type, is a 400 whose
// "param" names the field (messages[1].content, prompt[0][3], stop[2]).
// Text that is not valid Unicode (invalid UTF-8 bytes, or a \u escape of an
// unpaired surrogate) is a 400 naming the field that holds it, not silently
// replaced. Unknown fields are ignored, since SDKs send new ones before
// servers know them; null is the same as absent.
//
// Validation happens once per layer. This package checks the wire's own
// rules (types, n <= 128, top_logprobs <= 20, logit_bias keys,
// stream_options). Sampling ranges are the engine's: engine.Sampling.
// Validate returns a *engine.RangeError, mapped here to the wire field with
// the value the client sent ("temperature must be 0 (greedy) or in [1e-05,
// 100000]; got 1e-40."). Capacity is the scheduler's: n against the
// server's max_num_seqs, prompt plus max_tokens against the context, the
// number of prompts against the waiting queue; its *scheduler.RequestError
// is mapped to the field (n, max_tokens, messages, prompt[i]). Those are
// 400s: a limit no retry can meet is not a 429. A prompt longer in bytes
// than the context could hold in tokens (tokenizer.MaxTextBytes) is refused
// before it is tokenized, since tokenizing megabytes costs seconds of CPU.
// Notable rules, mostly vLLM's:
//
//   - "model" is required, as OpenAI and its SDKs require it (vLLM serves
//     the first model instead): absent or empty is a 400 naming "model";
//     an unknown model is a 404 with code "model_not_found"; a tensor
//     model (a Backend that is TensorModels says so) is a 400 naming
//     "model" that points to the V2 and KServe V1 routes (api/catalog's
//     GET /v1/models/{id} gives its KServe V1 status {"name","ready"}). A
//     LoRA adapter is a Model of its own (the Backend resolves its name;
//     its Submit runs the base model with the adapter; api/catalog lists
//     one that is a catalog.AdapterModel with vLLM's "parent" and "root").
//   - temperature must be in OpenAI's range [0, 2] (a 400 naming it
//     otherwise); inside it, the engine's own range applies too.
//   - messages: content is a string or an array of text, image_url and
//     input_audio parts (joined with "\n", see Images and audio below);
//     other part types are a 400. Roles are system,
//     developer (rendered as system), user, assistant and tool. An
//     assistant message may carry tool_calls ({id, type, function: {name,
//     arguments}}; arguments, a JSON string as OpenAI sends it or an
//     object, reach the template as an object, as in vLLM) and
//     reasoning_content (or reasoning); a tool message tool_call_id.
//   - tools (function definitions, passed to the template as sent) and
//     documents (objects) are checked for shape only; the answer is not
//     parsed for tool calls.
//   - chat_template: a Jinja template used instead of the model's for this
//     request, parsed per request under the tokenizer's limits (size,
//     loop iterations, macro depth, string sizes); chat_template_kwargs
//     become template variables (enable_thinking, ...);
//     add_generation_prompt (default true) and continue_final_message
//     (leave the final message open; a 400 together with
//     add_generation_prompt) as in vLLM. A template that fails to parse
//     or refuses the messages is a 400 naming chat_template (or messages,
//     for the model's own).
//   - prompt: a string, an array of strings, an array of token ids or an
//     array of arrays of token ids. Each prompt in an array is its own
//     choice group: choice index = prompt_index*n + i. Token ids outside
//     the vocabulary are a 400.
//   - max_tokens / max_completion_tokens (the latter wins) must be >= 1;
//     when absent, the rest of the context is the limit. A prompt that
//     leaves no room, or a prompt plus max_tokens beyond MaxModelLen, is a
//     400 with vLLM's wording and code "context_length_exceeded".
//   - n must not exceed the server's --max-num-seqs (all choices of a
//     request run at once).
//   - seed: absent means a random seed per request; the scheduler gives
//     choice i the seed+i. The low 32 bits of a given seed are used.
//   - stop: any number of strings (OpenAI allows 4, vLLM any; the body
//     limit bounds them). stop_token_ids add to the model's stop tokens;
//     ignore_eos drops the model's own.
//   - top_k -1 or 0 disables it; temperature is 0 (greedy) or in
//     [1e-5, 2]; repetition_penalty in [0.01, 100]; presence and
//     frequency penalties in [-2, 2]; logit_bias values in [-100, 100].
//   - logprobs: chat takes logprobs (bool) and top_logprobs (0..20, only
//     with logprobs); completions take logprobs (0..20). With echo,
//     completions list the prompt's tokens too, the first one with null.
//   - stream_options is only allowed with stream; continuous_usage_stats
//     (vLLM) adds the usage so far to every chunk when include_usage is set.
//   - user is accepted and logged only.
//   - vLLM's extensions, chat and completions alike (extras.go):
//     allowed_token_ids (only those tokens may be generated), bad_words
//     (each word's tokens, as written and after a space: its last token
//     is banned whenever the output ends with the rest),
//     skip_special_tokens (false shows control tokens' text),
//     truncate_prompt_tokens (keep the prompt's last k tokens; -1 the
//     model's length), prompt_logprobs (0..20 alternatives per prompt
//     token, non-streamed answers only: a list with null first, then
//     {token id: {logprob, rank, decoded_token}}, per completion choice,
//     at the top of a chat answer). best_of is refused unless it equals
//     n (vLLM's V1 engine has no best_of either).
//   - suffix (completions): fill-in-the-middle with the vocabulary's FIM
//     tokens, [BOS] FIM_PRE prompt FIM_SUF suffix FIM_MID as llama.cpp's
//     server builds infill prompts; a 400 for models without them.
//   - structured output: response_format, guided_json, guided_regex,
//     guided_choice, guided_grammar and structured_outputs, at most one
//     per request (see below).
//
// Chat prompts are rendered with the model's template (or the request's
// chat_template) and, by default, add_generation_prompt (chat_template.go
// decodes the fields; frontend.Prompt renders).
// With serve --reasoning-parser, the text between <think> and </think> is
// returned as message.reasoning_content (delta.reasoning_content when
// streaming) and never as content (reasoning.go; the Model offers
// ReasoningParser()). For such models every request carries a
// scheduler.Thinking (frontend.Params.ThinkingFor, called by submit): the scheduler counts
// the tokens generated inside the thinking section, reported as
// usage.completion_tokens_details.reasoning_tokens, and enforces
// frontend.Params.ThinkingBudget (vLLM's thinking_token_budget on chat and
// completions; other APIs set the field before submit, e.g. Anthropic's
// thinking.budget_tokens) by forcing </think> and "\n\n" once the budget
// is spent. A negative budget, or a budget for a model without a reasoning
// parser, is a 400 naming the field (vLLM ignores the latter; refusing
// tells the client its cap would do nothing). BOS rule
// (frontend.Prompt.Render): templates from Hugging Face write the BOS text
// themselves, so when the rendered text starts with the BOS token's text
// it is encoded without adding special tokens, otherwise with them.
// Completion prompts are encoded with special tokens; token-id prompts are
// used as given.
//
// # Images and audio
//
// A chat message's image_url and input_audio parts (media.go), an
// Anthropic image block (api/anthropic) and a Responses input_image or
// input_audio part (api/responses) each become media.Marker in the
// message text, in the part's place as llama.cpp's server puts it, and a
// frontend.MediaRef named by its field in the request's own protocol.
// prepareChat hands a prompt with media to frontend.Prompt.PrepareMedia
// (frontend/media_resolve.go: the checks, the resolution and the
// rendering), with MediaOptions' limits; this package fetches the http(s)
// URLs of MediaOptions.AllowedDomains for it (media_fetch.go).
// /tokenize refuses media; completions and embeddings take no parts.
//
// # Structured output
//
// These fields constrain what the model writes; each becomes a GBNF
// grammar (package grammar) that the engine enforces token by token
// (engine.Sampling.Grammar), streamed or not:
//
//	response_format {"type":"text"}                      no constraint (the default)
//	response_format {"type":"json_object"}               any JSON object
//	response_format {"type":"json_schema","json_schema":{"name","schema","strict","description"}}
//	                                                     JSON that the schema accepts
//	guided_json (object, or a string holding one)        the same, vLLM's name
//	guided_regex                                         a full match of the regex (Go's RE2 syntax)
//	guided_choice (array of strings)                     exactly one of them
//	guided_grammar                                       a client's GBNF grammar (llama.cpp syntax, rule root)
//	structured_outputs {"json"|"regex"|"choice"|"grammar"|"json_object"}  vLLM's newer names
//
// A request may use at most one of them (a 400 naming the second and
// listing all). Everything is checked before the request is submitted, in
// setStructured (structured.go): the conversion, whose errors are a 400
// naming the field and, for a schema, the keyword and its JSON pointer
// ("The JSON schema keyword "minimum" at #/properties/n is not
// supported"); then the model's own parser when the Model implements
// GrammarChecker (the llama.cpp runtime does), so that a grammar the engine
// would refuse is a 400 rather than a failed request. strict is accepted
// and changes nothing: the grammar is always enforced. The schema subset,
// and why unsupported keywords are errors rather than ignored, is in the
// grammar package's doc. min_tokens with structured output is a 400 (the
// grammar decides where the output ends); with ignore_eos the answer goes
// on with stop tokens after the grammar is complete, up to max_tokens.
// The model writes until the grammar is complete: give max_tokens room
// enough, or the answer ends with finish_reason "length" and is cut.
//
// # Tool calling
//
// tools are rendered by the chat template; tool_choice decides how the
// answer becomes calls (tools.go): "none" leaves it content; "auto" (the
// default with tools) splits it with the tool-call parser of the
// template's family (tokenizer.ToolCallParserFor; decoded with control
// tokens shown, since several families write their markers as control
// tokens), calls arriving whole when the answer ends and their text never
// in content; "required" holds the answer, by a grammar, to a JSON array
// of calls [{"name", "parameters"}] (at most one when parallel_tool_calls
// is false), each call's parameters by its function's schema; a named
// function holds it to that function's parameters. Constrained calls
// stream as tool_calls deltas: the call's index, id, type and name first,
// then its arguments as they are generated. A choice that made calls and
// ended on its own has finish_reason "tool_calls"; its content is null
// when it said nothing else. tool_choice naming a function that is not in
// tools, tool_choice without tools, a parameters schema the grammar
// cannot express (named as tools[i].function.parameters), and tool_choice
// required or named together with structured output are 400s.
//
// # Generation and usage
//
// Every prompt becomes one scheduler.Request with n choices; the prompts of
// one HTTP request are submitted all or none. Each choice
// runs a tokenizer.Decoder and a tokenizer.StopMatcher. A stop string ends
// the choice at once (Stream.StopChoice); what the scheduler still sends for
// it is dropped. Neither stop strings nor stop tokens are in the text;
// finish_reason is "stop" for both and "length" at max_tokens or the
// context's end. Usage counts each prompt once (not once per choice) and,
// per choice, the generated tokens up to the stop: the stop token counts
// (as in vLLM), tokens generated after a stop string do not. cached_tokens
// is the scheduler's prefix-cache count. Stop strings are not checked in the
// first min_tokens tokens, as in vLLM. Logprob lists leave stop tokens out,
// since their text is not part of the answer.
//
// When the client goes away (the request context ends) or the handler ends
// for any other reason while choices still run, Stream.Cancel is called
// right away, so the scheduler frees their KV memory within a step.
//
// vLLM's kv_transfer_params (kvtransfer.go) go through Options.KVTransfer
// instead of Model.Submit: do_remote_decode submits a prefill whose prompt
// KV is kept for a remote decode and answers (not streamed, one choice)
// with the params that say where to pull it; do_remote_prefill pulls that
// KV and continues, computing the prompt itself when the pull fails. The
// transfer itself is api/worker's; docs/API.md has the contract.
//
// # Embeddings, score, rerank, tokenize
//
// POST /v1/embeddings takes input as a string, an array of strings, an
// array of token ids or an array of arrays of token ids (each one input);
// encoding_format "float" (default) or "base64" (the little-endian float32
// bytes, as OpenAI); normalize (vLLM; default true: unit L2 norm);
// dimensions, only for models served with --matryoshka-dimensions and
// only one of those sizes (the vector is cut, then normalized);
// truncate_prompt_tokens (vLLM: keep the last k tokens, -1 for the
// model's length; without it a longer input is a 400); add_special_tokens
// (default true). Usage counts the tokens embedded. The model must pool
// (models.GenerativeConfig.Pooling: the GGUF's pooling type, else last, as
// vLLM pools decoder models; --pooling none refuses embeddings with a
// 400). The same loaded model serves generation and embeddings at once:
// embedding inputs join the engine core's steps (core.EngineCore.Embed),
// batched with each other beside the running sequences, each input
// evaluated in one piece in an embedding context over the same weights.
//
// POST /v1/score and /score (vLLM) score text_1 against text_2: one text_1
// against each text_2 (string or list), or a list against a list of the
// same length, pairwise. POST /v1/rerank, /rerank and /v2/rerank (Jina and
// Cohere) take query, documents (strings or {"text"} objects), top_n (0 or
// absent: all) and return_documents (default true), and answer results
// sorted by relevance_score, with Cohere's meta on /v2/rerank. For an
// embedding model a score is the cosine similarity of the two texts'
// embeddings. For a reranker (a cross-encoder: rank pooling, which the
// GGUF must declare) each pair is one input, formatted as llama.cpp's
// server formats a rerank prompt (Embedder.RerankTokens: the GGUF's
// rerank template with {query} and {document} replaced, else [BOS] query
// [EOS] [SEP] document [EOS] with the special tokens the vocabulary
// adds), and the score is the classifier's first output (for a Qwen3
// reranker the softmaxed "yes"). All pairs of a request go through one
// Embed call; a pair scores the same batched as alone. A pair longer than
// the model's length is a 400 naming the text_2 or document, unless
// truncate_prompt_tokens (score only) keeps its last tokens. A reranker
// has no embeddings: /v1/embeddings refuses it with a 400.
//
// POST /tokenize (vLLM) takes a prompt (add_special_tokens default true)
// or messages (rendered with the chat template, add_generation_prompt
// default true, add_special_tokens default false) and answers count,
// max_model_len, tokens and, with return_token_strs, token_strs (each
// token's text as in logprobs). POST /detokenize takes tokens and answers
// the prompt text.
//
// # SSE contract
//
// A streamed answer has the headers Content-Type: text/event-stream;
// charset=utf-8 (without the charset, clients such as Python requests
// decode the text as Latin-1), Cache-Control: no-cache and X-Accel-Buffering: no, and is a sequence of
// "data: <json>\n\n" events, each flushed as it is written:
//
//  1. chat only: one chunk per choice with delta {"role":"assistant",
//     "content":""}, before any text;
//  2. content chunks, one choice per chunk, at most one per choice per batch
//     the scheduler delivered; finish_reason is null on all of them except
//     the last chunk of each choice, which carries it (with the remaining
//     text, or delta {} when there is none); with echo (completions) a
//     choice's first chunk starts with the prompt;
//  3. with stream_options.include_usage, every chunk above has "usage":
//     null and one more chunk follows with "choices": [] and the usage;
//  4. "data: [DONE]".
//
// An error after the headers went out is sent as data: {"error":{...}}
// followed by data: [DONE]. Errors before that are ordinary JSON responses
// with their status code: everything that can be checked (validation,
// Submit's admission errors) is checked before the headers are written.
//
// # Errors
//
// Every error is {"error":{"message","type","param","code"}}; one function
// (toAPIError) chooses the status. This protocol's own lookups and body
// reading (unknown model, body size, JSON syntax) are
// mapped there; every other cause is classified once by frontend.Classify
// (a frontend.Error: kind, param, message, code, retry advice), and its
// kind maps to the status:
//
//	cause                                    status  type                        code
//	invalid JSON, bad type or value          400     BadRequestError             context_length_exceeded or null
//	*media.Error, media.ErrNoProjector       400     BadRequestError             null
//	engine.RangeError, scheduler.RequestError 400    BadRequestError             context_length_exceeded or null
//	unknown model                            404     NotFoundError               model_not_found
//	unknown stored response (api/responses)  404     NotFoundError               null
//	body above Options.MaxBodyBytes          413     RequestEntityTooLargeError  request_too_large
//	scheduler.ErrQueueFull                   429     RateLimitError              rate_limit_exceeded (+ Retry-After)
//	scheduler.ErrDeadline, ctx deadline      408     TimeoutError                null
//	scheduler.ErrNoWorker (a head)           503     ServiceUnavailableError     no_healthy_worker (+ Retry-After)
//	scheduler.ErrClosed (shutdown)           503     ServiceUnavailableError     null
//	scheduler.ErrEngine, anything else       500     InternalServerError         null
//
// Retry-After is the QueueFullError's hint rounded up to whole seconds (at
// least 1), and 1 for scheduler.ErrNoWorker: a head (llmserve head) that
// found no healthy worker for the request, or lost the one running it
// with none to move to, after waiting --no-worker-wait for one. Only a
// shutdown says "shutting down". A request still running when a shutdown's grace period ends
// gets the 503: as a response when it is not streamed, as an error event
// followed by [DONE] when it is. A sequence the engine failed (say, the
// model produced NaN logits for it) gets the 500; the other requests of its
// batch are not affected.
//
// A deadline is a 408 rather than a 5xx because the server did not fail,
// and rather than 504 because there is no upstream: the request asked for,
// or was given, more time than it had; OpenAI's SDKs retry a 408. A 500
// message never shows internals; they go to the log. Unknown routes and
// wrong methods are the router's business.
package openai
