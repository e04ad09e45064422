// Package router is the scheduler of `llmserve head`: it keeps the set of
// workers (`llmserve worker`, service proto/workerpb), picks one for
// each request, and runs the request there through a Model that the
// public API layer (api/openai, api/v2) serves as it serves a local model.
//
// # Workers
//
// Router.SetWorkers, WatchDNS (a Kubernetes headless service, re-resolved
// periodically) and LWSWorkers (a LeaderWorkerSet group) give the
// addresses. For each worker two goroutines run: a monitor that polls Info
// and Stats every Options.CheckInterval, each call under
// Options.RPCTimeout (a worker is unhealthy after FailThreshold failed
// checks in a row, or at once when a Generate stream to it breaks, and
// healthy again on its next good check), and a follower of WatchKVEvents
// that keeps the set of block hashes the worker's prefix cache holds (a
// broken stream forgets them; the reconnect starts with a snapshot).
// Nothing waits on the network while holding the router's lock.
//
// A worker just added, or that failed a check, is checked again after
// Options.ProbeMin (100ms), doubling up to CheckInterval; one marked
// healthy wakes every waiting request at once. A request (or a migration)
// that finds no healthy worker waits for one (Router.waitFor) for
// Options.NoWorkerWait, within its deadline and context, asking the
// monitors of the workers not healthy to probe them meanwhile; then it
// fails with scheduler.ErrNoWorker (a 503 that says so; scheduler.ErrClosed
// is only the head's own shutdown). A request skips a worker that failed
// under it until that worker is healthy again. These checks, probes and
// waits run on Options.Clock (the real clock unless a test passes a
// clock.Fake); the RPC timeouts are on the real clock.
//
// Each worker's Info names its version, commit and llama.cpp commit (logged,
// and in llmserve_router_worker_info). A worker whose model (name and
// vocabulary digest) or reasoning parser is not the head's (the first
// healthy worker's), or whose llama.cpp commit differs from the healthy
// workers', is refused: never healthy, state "refused", the reason in
// WorkerState.Refused. Model.ReasoningParser is that parser
// (ModelOptions.ReasoningParser), so the API layer splits reasoning and
// builds Request.Thinking (the thinking budget) as on serve.
//
// # Scoring
//
// For a prompt, each healthy candidate's cached prefix is the number of
// the prompt's leading full blocks (kvcache.BlockHashes with the worker's
// block size and the request's cache salt) in its set. The cost is
// Dynamo's: OverlapWeight × the blocks the worker would compute, plus its
// load (waiting + running requests, the larger of its last Stats and the
// head's own count of requests on it), plus its KV usage (0..1). The
// lowest cost wins; ties go to the lower load, then round robin.
//
// A request with a routing key (scheduler.Request.RouteKey: the Responses
// API's prompt_cache_key) skips the scoring when the worker its key last
// went to is a candidate, so an agent's turns stay on one worker even
// before that worker's cache events reached the head; otherwise it is
// scored and the key follows the pick. The router remembers the last
// 4096 keys (routekey.go).
//
// # Prefill/decode
//
// Whole requests go to workers of role both or decode (prefill workers
// only when no other is healthy). When a healthy prefill worker exists,
// the decode worker is chosen first; if the prompt's part not cached there
// is at least Options.PDMinPrefillTokens (llm-d's threshold, default 256),
// the best prefill worker runs Prefill (n = 1 and no prompt logprobs
// only), its first token is delivered, and the decode worker gets the
// prompt plus that token with kv_source naming the prefill worker and
// transfer: it pulls the KV itself (a failed pull is recomputed there). If
// the prefill fails, the decode worker does everything. A thinking
// budget goes to both (the prefill's one token may be a forced
// </think>); the decode request's thinking.generated is 1.
//
// # Migration
//
// Model.Submit returns once each request's first output (or refusal)
// came back; a refusal is mapped to the scheduler error the API layer
// maps locally. The run then follows the Generate stream and keeps each
// choice's delivered tokens. When the stream breaks (UNAVAILABLE, EOF
// without a Final: the worker died), every unfinished choice is sent again
// (and so is a choice the worker ended with ERROR_CODE_CLOSED, shutting
// down),
// alone (n = 1, its own seed), to another healthy worker: the prompt plus
// the tokens already delivered, max_tokens and min_tokens reduced by them.
// The client's stream continues with no token lost or repeated. Greedy
// output is the same as without the migration; seeded sampling is not (the
// sampler's state is not carried over). A thinking budget
// (scheduler.Request.Thinking, sent as Request.thinking) spans the whole
// choice: the continuation's thinking.generated is the count of delivered
// tokens, from which the new worker's scheduler starts the thinking state;
// Usage.ReasoningTokens is the head's own count over the delivered tokens
// (scheduler.ThinkingCount), exact across migrations. Each request migrates at most
// Options.MaxMigrations times; then its unfinished choices end with an
// error (an SSE error event). llmserve_router_migrations_total counts
// migrations.
//
// # Embeddings (embed.go)
//
// Model also implements api/openai.Embedder and api/v2/infer.Embedder:
// the API layer tokenizes, truncates, normalizes and scores as over a
// local model, and Model.Embed sends the token ids to one worker's Embed
// RPC: the least loaded healthy worker of any role (no prefix scoring).
// When that worker is gone before it answers (a retryable failure, as for
// Generate), it is marked broken and the call goes once more to another
// worker; a refusal maps to the scheduler error the API layer maps
// locally. Pooling, Matryoshka dimensions, the longest input and the V2
// task are the workers' (ModelOptions, from Info); rerank pairs are
// formatted by ModelOptions.RerankTokens (models.VocabRerankTokens over
// the head's vocabulary) as the worker would format them.
//
// # Images and audio (media.go)
//
// Model also implements api/openai.MediaModel. ReadsMedia(kind) is true
// when a healthy worker's Info says its projector reads kind (with none
// healthy, the Info of the model the head serves). The API layer renders
// the chat prompt and resolves the items on the head; PrepareMedia sends
// them to one healthy worker of any role whose Info reads every kind
// among them, the least loaded (no prefix scoring, not counted in
// llmserve_router_requests_total), and retries once elsewhere when it is
// gone, as Embed does. A worker's INVALID_ARGUMENT naming an item comes
// back as the *media.Error it was (a 400 naming the part). The spans'
// rows come back with the prompt, and every Generate and Prefill of the
// request carries them (Request.media, encoded once per request): any
// worker of the model runs it, with or without a projector, and the P/D
// decode request and a migrated continuation carry the same spans (they
// cover the original prompt, to which the continuation only appends).
//
// # Where it lives
//
// DESIGN.md placed the router at scheduler/router, "the same job one level
// up". It sat there as an exception: a gRPC client of the workers with
// metrics of its own, importing the core that sits above the scheduler, so
// the linter's pure-core rule needed a hole for it and its imports pointed
// upward. The head is its own room (head/): above the core and the
// scheduler it uses, below cmd/ that starts it (issue 27, item 6). Its
// worker codec is there too (head/workercodec: every request, output,
// error and media span as it crosses the wire, each with its inverse),
// imported by this client and by the workers' server, api/worker.
package router
