// Package webui is the chat playground served at "/": one HTML page, a
// style sheet and a script (static/), plain files embedded in the binary
// with //go:embed. There is no build step and nothing is loaded from
// elsewhere, so the page works on a server with no internet access.
//
// # What it owns
//
// The files and how they are served: each with its content type set here
// (not guessed from the host's mime tables), an ETag, "Cache-Control:
// no-cache" (browsers revalidate, so a new server's page never runs an old
// script), and on the page a Content-Security-Policy that allows only the
// page's own files and requests to its own origin. Handler serves "/" and
// Prefix+name ("/ui/app.js", "/ui/style.css"); any other path goes to the
// notFound handler the caller gives, so unknown paths answer as everywhere
// else on the server. The router (package api) mounts it outside the API
// key check: the page is public, and its API calls carry the key the user
// types, if any.
//
// # The page
//
// It uses only the server's OpenAI API, with URLs relative to the page (so
// it works behind a proxy that adds a path prefix):
//
//   - the model picker is filled from GET v1/models;
//   - sending a message streams POST v1/chat/completions with "stream":
//     true and "stream_options": {"include_usage": true}; the SSE stream is
//     read from fetch's ReadableStream and the text shown as it arrives;
//     an error answer (non-200) or a data: {"error": ...} event shows its
//     message;
//   - the stop button (or Escape) aborts the request; the server cancels
//     the sequence when the client goes away;
//   - the settings are temperature, top_p, max_tokens, seed, the system
//     prompt, extra request fields as a JSON object (top_k, ignore_eos,
//     any of the server's parameters), and the API key, sent as
//     "Authorization: Bearer <key>"; empty fields are left out, so the
//     server's defaults apply;
//   - the readout shows completion tokens (from usage, or counted chunks
//     while streaming) over the time since the request was sent, and the
//     time to the first token.
//
// The conversation is kept in the page only (a reload starts a new one);
// the transcript shows exactly the turns that the next request sends. A
// message that got no answer at all (an error, or stopped before the first
// token) leaves the transcript and its text goes back into the message box;
// a partial answer (stopped, or ended by an error event) stays.
//
// # Stable hooks
//
// Tests and users' scripts may rely on these element ids: model,
// reload-models, transcript, error, prompt, send, stop, clear, tps, status,
// temperature, top-p, max-tokens, seed, system, extra, api-key. Each turn in
// #transcript is a .msg element with data-role user or assistant and its
// text in a .content child. body[data-state] is loading, idle, streaming,
// done, stopped or error. #tps carries data-tokens, data-chunks, data-rate,
// data-final and, once usage arrived, data-prompt-tokens.
//
// The end-to-end test (tests/webui_test.go) drives the page in headless
// Chromium.
package webui
