// Package openaitest fakes what the chat-family protocols (api/openai,
// api/anthropic, api/responses) and api/catalog run on, for their tests
// only: no production package imports it (a depguard rule in .golangci.yml
// says so).
//
// It provides:
//
//   - a fake vocabulary (Vocab, Token, Tokens, NewTokenizer): a greedy
//     tokenizertest vocabulary whose pieces split words so that stop strings
//     and multi-token words cross token boundaries, with ChatML's
//     <|im_start|> and <|im_end|> (the end-of-generation token IMEnd);
//   - Model, an openai.Model whose Submit checks a request as the engine
//     core does and replays a script of output batches (HelloScript by
//     default), recording the requests, cancellations and StopChoice calls;
//     ReasoningModel and MediaModel add a reasoning parser and a multimodal
//     projector to it;
//   - Backend, a registry of models;
//   - Do and GateWriter, which run one request in-process and, with
//     Model.Gate set, push a script's batches one per SSE event written, so
//     that streams are never coalesced and golden files are deterministic;
//   - golden file helpers (CheckGolden with the -update flag, IndentJSON)
//     and the deterministic request id, clock and seed (RequestID, Now,
//     Seed) the golden files were written with.
//
// The package does not import api/openai, so that package's own
// (in-package) tests can use it: Backend is generic, and
// openaitest.NewBackend[openai.Model](models...) satisfies openai.Backend.
// Model satisfies openai.Model through its methods alone.
package openaitest
