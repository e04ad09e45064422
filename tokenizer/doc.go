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
// trim_blocks and lstrip_blocks on, the variables messages (role, content,
// and name when set), add_generation_prompt, bos_token and eos_token (the
// text of the vocabulary's BOS and EOS), tools and documents (none), the
// functions raise_exception(msg) (rendering fails with an error wrapping
// ErrChatTemplate that contains msg) and strftime_now(format), and
// ChatOptions.Kwargs for model switches such as enable_thinking.
//
// A model without a template (such as the default model, stories260K) gets
// FallbackChatTemplate: ChatML, byte for byte what llama.cpp's server
// produces for such models ("<|im_start|>{role}\n{content}<|im_end|>\n" per
// message, "<|im_start|>assistant\n" to prompt a reply).
//
// The engine is github.com/nikolalohinski/gonja/v2, the maintained pure-Go
// Jinja2 implementation. Templates are parsed once, in New, and rendered
// concurrently without locks. Where gonja differs from Python's Jinja2 in
// ways real templates hit, this package adapts it through its extension
// points, each pinned by a test against Python (testdata/chat):
//
//   - Python string methods with Python's defaults (strip() and split()
//     with no argument work on all whitespace, split's maxsplit, replace's
//     count), lists with Python indexing (x[-1] of a one-element list),
//     dicts that keep insertion order for items() and |tojson, and
//     transformers' |tojson (json.dumps, not HTML-escaped): chat_pycompat.go
//     and chat_env.go.
//   - Conditional expressions inside parentheses or arguments, and method
//     calls on a parenthesised expression, which gonja's parser cannot read:
//     rewritten before parsing into equivalent forms it can (chat_syntax.go).
//   - range as a list (gonja's leaks a goroutine when a loop breaks), and no
//     include, import or extends: a template cannot read files.
//
// What still differs is listed, with reasons, in the golden tests
// (knownTemplateDifferences, knownSnippetDifferences): chiefly, gonja has a
// single nil for Python's None and Jinja's undefined, and cannot index dict
// literals with integer keys. Of the 39 real templates in
// testdata/chat/templates, 34 render byte-identically to Python on every
// test conversation, including Llama 3.x, Qwen 2.5/3, QwQ, Mistral,
// Gemma 2, Phi-3.5, DeepSeek R1/V3.1, Granite, Kimi K2, GLM 4.6 and
// gpt-oss; the others are tool-calling variants that Python itself refuses
// to render without tools, and ByteDance Seed-OSS.
//
// A template is part of the model and trusted like its weights: rendering
// is bounded only by what the template does. Message content is always
// data, never template code.
package tokenizer
