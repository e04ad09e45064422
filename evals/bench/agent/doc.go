// Package agent is the agent-session benchmark, `llmserve bench agent`
// and `llmserve bench agent table`.
//
// # What it owns
//
// The session transcripts (system prompt, tools, scripted turns) in three
// request shapes, the per-turn client, the decoding of Messages, Responses
// and chat streams into TTFT and token counts, the report and its table.
// It shares the SSE reader, the transport, the prompt vocabulary and the
// result files with `llmserve bench` through evals/bench/benchio, and
// imports nothing else of evals/bench. NewCommand returns the cobra command;
// cmd/llmserve adds it under `bench`.
//
// # Usage
//
//	cfg := agent.DefaultConfig()
//	cfg.BaseURL = "http://127.0.0.1:8080/v1"
//	rep, err := agent.Run(ctx, cfg, logger)
//	if err != nil { ... }
//	rep.WriteText(os.Stdout)
//
// # What it measures
//
// `llmserve bench agent` (Run, Config) measures what an agent
// such as Claude Code or Codex CLI does to a server: a long prefix of
// system prompt and tool definitions (PrefixWords words, a quarter of them
// the Tools tools' descriptions; 20,000 by default), then Turns turns
// (5), one at a time, each re-sending the whole transcript: turn 1 a user
// message; every later one adds the previous turn's tool call (scripted,
// the same for every server whatever the model generated), its result
// (ToolResultWords) and a new user message (UserWords), streamed, with
// OutputLen max tokens. It runs in each of three request shapes in turn:
// Messages (POST /messages: tool_use, then a user message holding the
// tool_result and the text), Responses (POST /responses: function_call and
// function_call_output items, store false) and chat (POST
// /chat/completions: tool_calls and a tool message). Every (seed, API,
// session) has a prefix of its own, so a session's first turn is cold even
// on a server that served an earlier one.
//
// Per turn it records the TTFT (sent → the first event that carries
// generated output: Messages' content_block_delta or tool_use block start,
// Responses' *.delta events, chat's content; a turn whose model stopped at
// once takes the end of generation instead, marked no_output), the E2EL,
// and the prompt and cached tokens as the server reports them: Messages'
// input_tokens + cache_read_input_tokens + cache_creation_input_tokens and
// cache_read_input_tokens, Responses' input_tokens and
// input_tokens_details.cached_tokens, chat's prompt_tokens and
// prompt_tokens_details.cached_tokens or, from llama-server, timings.cache_n
// (cache_source says which; -1 when none). The summary gives, per API, the
// median of each turn over the sessions, and turns 2.. pooled against turn
// 1 (later_over_first). `llmserve bench agent table` prints result files as
// Markdown: per server (label up to ':') and API, medians over the reps.
// scripts/bench-agent.sh runs llmserve and llama-server on one model this
// way, alternating.
package agent
