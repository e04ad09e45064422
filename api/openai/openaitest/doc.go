// Package openaitest fakes what the chat-family protocols (api/openai,
// api/anthropic, api/responses) and api/catalog run on, for their tests
// only: no production package imports it (the fakes-only-in-tests depguard
// rule in .golangci.yml).
//
// It provides:
//
//   - a fake vocabulary (Vocab, Token, Tokens, NewTokenizer): a greedy
//     tokenizertest vocabulary whose Pieces split words so that stop
//     strings and multi-token words cross token boundaries, with ChatML's
//     <|im_start|> and <|im_end|> (IMEnd, which ends generation);
//   - Model, an openai.Model whose Submit checks each request as the
//     engine core does and replays a Script of output batches, recording
//     the requests, cancellations and StopChoice calls; ReasoningModel adds
//     a reasoning parser, MediaModel a multimodal projector (with sample
//     files PNG, JPEG, ... as sniffing sees them);
//   - scripts: HelloScript (the default), TextScript, StreamScript,
//     LogprobScript, OutsScript and ThinkScript, with Out, Logprob and Alt
//     to write outputs;
//   - Backend, a fixed list of models;
//   - Do and GateWriter, which run one request in-process and, with
//     Model.Gate set, let the model push its next batch only after the
//     handler wrote the last one's SSE events, so that batches are never
//     coalesced and golden streams are deterministic;
//   - golden files: CheckGolden (rewritten with the -update flag this
//     package defines) and IndentJSON, and the request id, clock and seed
//     the golden files were written with (RequestID, Now, Seed).
//
// It does not import api/openai, so that package's own in-package tests
// can use it: Model satisfies openai.Model by its methods alone, and
// Backend is generic: NewBackend[openai.Model](models...) is an
// openai.Backend.
//
// A test sets a Model's exported fields before its first request (see
// TestOpenAIRoutes):
//
//	m := openaitest.NewModel(t)
//	m.Script = openaitest.TextScript("Hello", " world")
//	r := chi.NewRouter()
//	openai.Mount(r, openaitest.NewBackend[openai.Model](m), openai.Options{RequestID: openaitest.RequestID})
//	rec := openaitest.Do(t, r, m, http.MethodPost, "/v1/chat/completions", body)
//	reqs := m.Requests() // what reached the model
package openaitest
