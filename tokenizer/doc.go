// Package tokenizer turns text into tokens and tokens back into text the way
// a streaming server needs it: an incremental decoder that never emits half a
// UTF-8 character, a stop-string matcher that holds back text that may still
// become a stop string, and chat templates rendered from the model's own
// Jinja template.
//
// # What it owns, and what it must not do
//
// The vocabulary itself lives in the model runtime (llama.cpp); this package
// reaches it through the small Vocab interface and adds no cgo, so it builds
// and tests without a C toolchain (tokenizertest has a fake Vocab for other
// packages' tests). It holds no per-request state except in the values it
// hands out: a Tokenizer is shared by every request of a model and is safe
// for concurrent use; a Decoder and a StopMatcher belong to one sequence and
// are not. It does no I/O, starts no goroutines, reads no clock except
// through strftime_now in a template (ChatOptions.Now pins it), and never
// panics on model or client input: every failure is an error.
//
// # Using it
//
// One Tokenizer per loaded model:
//
//	tk, err := tokenizer.New(vocab, ggufChatTemplate) // "" selects the fallback
//	prompt, err := tk.ApplyChatTemplate(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
//	ids, err := tk.Encode(prompt, false) // the template already wrote BOS if the model wants it
//
// Per generated sequence, after each step, outside the engine loop:
//
//	dec := tk.NewDecoder()
//	stop := tokenizer.NewStopMatcher(req.Stop)
//	for each new token tok {
//		if slices.Contains(stopTokens, tok) { break } // stopTokens = tk.StopTokens(), once
//		emit, matched, stopped := stop.Push(dec.Add(tok))
//		send(emit)
//		if stopped { finish(matched) }
//	}
//	// generation ended without a stop string: release what is held
//	emit, matched, stopped := stop.Push(dec.Flush())
//	send(emit)
//	if !stopped { send(stop.Flush()) }
//
// Logprob listings use TokenText, which shows a byte-fallback token that is
// not UTF-8 on its own as "bytes:\xe2", as vLLM does.
//
// # Why the decoder and the stop matcher are written here
//
// No Go library does either job. The Decoder keeps at most the three bytes
// of an unfinished character between calls, so each token costs only its own
// bytes (no re-decoding of the sequence so far, unlike the
// "decode everything, diff with the last result" approach); its output,
// concatenated, is exactly what Decode gives for the whole sequence, invalid
// bytes included (one U+FFFD per maximal ill-formed subsequence, as Hugging
// Face tokenizers and Python produce). FuzzDecoder checks that.
//
// The StopMatcher holds back only the longest suffix of the text that is
// still a prefix of some stop string, so a client never sees a stop string
// or the start of one that then completes, and sees everything else at once.
// When several stops are present the one completed first wins (then the
// longest); see StopMatcher. FuzzStopMatcher checks it against a one-shot
// reference on the whole text, for every way of cutting the text into
// pushes.
//
// # Chat templates
//
// ApplyChatTemplate renders the model's Hugging Face chat template
// (tokenizer.chat_template in the GGUF) the way transformers'
// apply_chat_template does, and so the way vLLM does: Jinja with
// trim_blocks and lstrip_blocks on, the variables messages,
// add_generation_prompt, bos_token and eos_token (the text of the
// vocabulary's BOS and EOS), tools and documents (ChatOptions.Tools and
// Documents, None when not given), the functions raise_exception(msg)
// (rendering fails with an error wrapping ErrChatTemplate that contains
// msg) and strftime_now(format), and ChatOptions.Kwargs (vLLM's
// chat_template_kwargs, such as enable_thinking).
//
// Messages are shaped as vLLM hands them to templates: ordered dicts with
// role and content, then, when set, tool_calls (each {id, type,
// function: {name, arguments}}, arguments parsed from the OpenAI JSON
// string into a dict, since templates iterate or |tojson it),
// reasoning_content, tool_call_id and name. Tools, documents and JSON
// kwargs keep the key order the client sent. ContinueFinalMessage cuts the
// rendered text right after the final message's content, as transformers
// does, so the model continues it. A client's own template
// (Tokenizer.ParseChatTemplate) renders under the same limits as the
// model's: the source at most MaxChatTemplateBytes, and per render 2^18
// loop iterations, macro calls 100 deep, strings and output 16 MiB, no
// recursive loops, integer arguments of filters and methods at most 65536,
// and the result of the filters and methods that multiply their input
// (replace, join, indent, format, expandtabs, tojson) sized before they
// run; a template past them gets an error, never a hang, a stack overflow
// or an allocation that kills the process (chat_limits.go,
// chat_statements.go, chat_growth.go).
//
// A model without a template (such as the default model, stories260K) gets
// FallbackChatTemplate: ChatML, byte for byte what llama.cpp's server
// produces for such models ("<|im_start|>{role}\n{content}<|im_end|>\n" per
// message, "<|im_start|>assistant\n" to prompt a reply).
//
// The engine is github.com/nikolalohinski/gonja/v2, the maintained pure-Go
// Jinja2 implementation; no other maintained Go Jinja engine was found
// that does better (the alternatives are Django-style engines or bindings
// to Python or C++), so this package adapts gonja where it differs from
// Python's Jinja2, through its extension points and two passes of its own,
// each pinned by tests against Python (testdata/chat):
//
//   - None and undefined are two values, as in Python: gonja's nil is
//     Jinja's undefined, and None (tools=None, JSON null, dict.get of a
//     missing key, the literals none and None) is a value of its own that
//     is defined, false, prints "None", is "none", cannot be iterated, and
//     tojson writes as null; tojson refuses undefined (chat_values.go,
//     chat_statements.go for loops).
//   - After parsing, the syntax tree is rewritten so that a + b, a * b,
//     a % b, a ** b, a ~ b and x[key] (all but string-literal keys) call
//     Python-exact functions: adding undefined or a string to a dict is an
//     error (Python's UndefinedError and TypeError, which some templates
//     rely on to refuse a conversation), ints stay ints, '%s' % x formats,
//     dict literals index by integer keys, strings index by character and
//     |safe strings escape what is added to them as markupsafe does
//     (chat_ast.go). The whole template is parsed inside a statement of
//     our own ({% pyroot %}) whose parser does the rewrite.
//   - Python string methods with Python's defaults (strip() and split()
//     with no argument work on all whitespace, split's maxsplit, replace's
//     count), lists with Python indexing (x[-1] of a one-element list),
//     dicts that keep insertion order for items(), get() and |tojson,
//     string filters that take undefined as "", map/select/reject as
//     generators (|tojson refuses them, as json.dumps does), no
//     list.append (Python's sandbox refuses it), and transformers' |tojson
//     (json.dumps, not HTML-escaped): chat_pycompat.go and chat_env.go.
//   - Conditional expressions inside parentheses or arguments, and method
//     calls on a parenthesised expression, which gonja's parser cannot read:
//     rewritten before parsing into equivalent forms it can (chat_syntax.go).
//   - range as a list (gonja's leaks a goroutine when a loop breaks), and no
//     include, import or extends: a template cannot read files.
//
// All 39 real templates in testdata/chat/templates render byte-identically
// to Python (or are refused by both) on every test conversation: plain,
// system prompts, multi-turn, tools, tool calls and results (parallel
// too), reasoning_content, text parts, documents, kwargs,
// add_generation_prompt false and continue_final_message; the lists of
// known differences in the golden tests are empty. A template is part of
// the model and trusted like its weights; message content is always data,
// never template code.
//
// # Reasoning
//
// A ReasoningParser (deepseek_r1 or qwen3, vLLM's names) splits a
// generated sequence into reasoning (between <think> and </think>) and
// content, incrementally for streaming: it holds back only a suffix that
// may still become a tag, as the StopMatcher does, so neither tags nor
// reasoning reach the content. Whether the output starts inside the
// reasoning also depends on how the prompt ends (R1 and QwQ templates open
// <think> in the prompt; some close it to switch thinking off).
// FuzzReasoningParser checks any cutting of the text against a one-shot
// reference.
//
// # Tool calls
//
// A ToolCallParser turns a model's answer into OpenAI tool calls (ToolCall,
// arguments as JSON text written as vLLM writes it), one syntax per model
// family: hermes (<tool_call>{json}</tool_call>: Hermes, Qwen 2.5/3, QwQ),
// llama3_json (the answer is {"name", "parameters"}, optionally after
// <|python_tag|>), mistral ([TOOL_CALLS][...] and [TOOL_CALLS]name[ARGS]
// {...}), qwen3_coder and seed_oss (<function=...><parameter=...>), glm45,
// kimi_k2, deepseek_v3 (R1 too), deepseek_v31, minimax_m2, granite,
// firefunction_v2 and functionary_v3_1. ToolCallParserFor picks one from
// the markers a chat template writes calls with (every template in
// testdata/chat with a call syntax gets the right one). For streaming,
// Push passes content through as it comes and holds back a suffix that
// may become the family's marker and everything after the marker, so call
// text never reaches the content; Flush parses the calls (text that does
// not parse is returned as content, as vLLM does). The API does not use
// it yet.
package tokenizer
