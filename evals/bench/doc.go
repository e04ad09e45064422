// Package bench is llmserve's load generator: `llmserve bench`. It drives any
// OpenAI-compatible server (llmserve, vLLM, llama.cpp's llama-server,
// Ollama) through its base URL with streaming requests and reports the
// figures of `vllm bench serve`, computed the same way and written under the
// same JSON names, so a number from here and a number from vLLM's tool mean
// the same thing.
//
// # What it owns
//
// The workload (random prompts, lengths, arrival times), the HTTP client that
// sends it, the per-request timelines, the metric arithmetic, the report, and
// the plot of several reports (`llmserve bench plot`), the V2 infer
// benchmarks and `bench table`. What every benchmark shares (the SSE reader,
// OpenAI chunk decoding, the HTTP transport, the prompt vocabulary, result
// files, medians and error samples) is in evals/bench/benchio; the
// agent-session benchmark (`bench agent`) is evals/bench/agent.
// It knows nothing about llmserve's internals: it talks to the server only
// over HTTP, which is what makes it fair against other servers.
//
// # Usage
//
//	cfg := bench.DefaultConfig()
//	cfg.BaseURL = "http://127.0.0.1:8080/v1"
//	cfg.NumPrompts, cfg.MaxConcurrency = 200, 8
//	rep, err := bench.Run(ctx, cfg)
//	if err != nil { ... }
//	rep.WriteText(os.Stdout)        // vLLM's "Serving Benchmark Result" table
//	json.NewEncoder(f).Encode(rep)  // vLLM's result JSON names
//
// NewCommand returns the same as a cobra command with one flag per Config
// field (`llmserve bench --help`), and its subcommand `plot` (Plot).
//
// # The run
//
// Warmup requests (Config.Warmup, with prompts of their own) go first, all
// at once up to MaxConcurrency whatever the request rate, and are not
// measured; they also open the connections the run reuses. If all of them
// fail, Run stops with ErrAllWarmupFailed. Then
// NumPrompts requests are scheduled: request 0 at time zero and the others
// after exponential gaps of mean 1/RequestRate (a Poisson process; with an
// infinite rate, all at zero). A request whose time has come waits for one of
// MaxConcurrency slots; the clock of its TTFT starts when it is sent, not
// while it waits, as in vLLM. The benchmark duration runs from the first
// scheduled request to the last finished stream, warmup excluded.
//
// Every request is POST {base}/completions (a "prompt") or
// {base}/chat/completions (one user message) with "stream": true,
// "stream_options": {"include_usage": true}, "max_tokens" (and, for chat,
// "max_completion_tokens" too: vLLM reads that one, Ollama only max_tokens),
// "temperature" and, unless disabled, "ignore_eos": true. ignore_eos is a
// vLLM extension that llama.cpp's server also honours; it makes every request
// generate exactly max_tokens so runs are comparable. Servers that do not
// know it ignore it and may stop at an end-of-sequence token, making outputs
// shorter: check total_output_tokens against num_prompts × random_output_len.
//
// # Prompts
//
// Config.Dataset (--dataset-name) picks one of three of vLLM's datasets,
// or a mixed load of our own. "random" (the default): each prompt is SharedPrefixLen shared
// words and RandomInputLen random ones, asking for RandomOutputLen tokens.
// "prefix_repetition": Config.PrefixRepetition (--prefix-repetition-*,
// vLLM's flags and defaults) makes NumPrefixes random prefixes of PrefixLen
// words; each prompt is one of them followed by SuffixLen random words of
// its own, and asks for OutputLen tokens. Each prefix serves
// NumPrompts/NumPrefixes prompts (the first NumPrompts mod NumPrefixes one
// more, where vLLM drops the remainder), in a shuffled order, so a server
// with prefix caching must keep several prefixes at once. NumPrompts must be
// at least NumPrefixes. "mixed": Config.Mixed (--mixed-*) splits the
// MaxConcurrency clients in two lanes: LongClients send the LongPrompts
// long prompts (LongInputLen words), one after another, and the others the
// remaining NumPrompts − LongPrompts short ones (ShortInputLen words), each
// asking for OutputLen tokens. Each lane has its own slots, so a long
// request never holds a short one back and the number of each kind in
// flight stays fixed while both last; warmups are short. The report adds
// the long and short requests' metrics apart ("mixed_long",
// "mixed_short"). "custom" (vLLM's, --dataset-path and --custom-output-len):
// the prompts of a JSONL file of {"prompt": ...} lines, in file order and
// cycled (warmups start half way through the file), each asking for
// Custom.OutputLen tokens; it measures text random words cannot, such as a
// prompt that the answer repeats (speculative decoding). The flags of the
// dataset not selected are refused.
//
// Prompts are random words from a fixed built-in list of common English
// words, drawn with a PCG generator seeded by Config.Seed, so the same seed
// gives the same prompts, lengths and arrival times on every machine and Go
// release. The list's words are one token each (after a space) in the common
// BPE vocabularies, so a prompt of n words is about n tokens; we cannot
// tokenize for a foreign server, so input lengths are approximate. The chat
// endpoint adds the model's chat template on top. When the server returns
// usage, the report's input tokens are its prompt_tokens (else the word
// counts; input_tokens_source says which). With SharedPrefixLen, every prompt
// starts with the same words (vLLM's --random-prefix-len), which measures
// prefix caching; warmup prompts share it too, so the measured run starts with
// the prefix already cached, as a server in steady state would have it.
// Likewise prefix_repetition warmups use the measured prefixes (the first
// Warmup of them, when there are fewer warmups than prefixes) with suffixes
// of their own.
//
// # Metrics (vLLM's definitions)
//
// A "content chunk" is a streamed chunk whose choices carry generated
// output: non-empty "text" (completions), or delta "content",
// "reasoning_content", "reasoning" or "tool_calls" (chat). Its timestamp is
// taken when the event has been read from the body. For each request:
//
//   - TTFT: request sent → first content chunk.
//   - ITL: each gap between consecutive content chunks. Pooled over all
//     requests before the statistics are taken.
//   - E2EL: request sent → end of the stream ("data: [DONE]", or the end of
//     the body).
//   - output tokens: the server's usage.completion_tokens, or, when it sends
//     no usage (or 0), the number of content chunks (vLLM retokenizes the
//     text instead; we cannot). output_tokens_source says which was used.
//   - TPOT: (E2EL − TTFT) / (output tokens − 1); requests with one output
//     token have none.
//
// Over the completed requests, each latency is reported as mean, median,
// population standard deviation and 99th percentile in ms; percentiles are
// numpy's default, linear interpolation between closest ranks. Request
// throughput is completed/duration, output throughput total output
// tokens/duration, total token throughput (input+output)/duration. Peak
// output throughput and peak concurrent requests are vLLM's per-second
// buckets (counting content chunks) from the first request's send time.
//
// Where we differ from vLLM's client, and why: vLLM starts TTFT at any chunk
// with choices, so a chat server that sends its role-only chunk before
// prefill ends would look fast; we wait for content. vLLM stops the E2EL
// clock at the last chunk it parsed; we stop it at [DONE], which a server
// sends right after the last chunk, so the two differ by the server's final
// flush.
//
// # Failures
//
// A request fails on a transport error (after the one retry below), a
// timeout (Config.Timeout, per request, from sending to the end of the
// stream, a retry included), a non-200 status, a response that is not an
// event stream, an error event (data {"error":...}, or "event: error"), a
// body cut before its end (unexpected EOF), a chunk that is not JSON, or a
// stream with no content chunk. One exception: a stream whose text is empty
// but that finished (a finish_reason) with output tokens in its usage is
// completed, its TTFT the finishing chunk's arrival, and counted in
// "textless_requests". llama-server streams no text for tokens that end
// inside a UTF-8 character and drops them at the end, so a model that
// generates stray bytes (dummy weights do) gives such streams; failing
// them would leave their tokens out of the server's throughput but not
// their time (vLLM's client counts any chunk with choices as the first
// token, this one included). Failed requests count in "failed" and not in
// any other figure; the report keeps the first five distinct messages with
// their counts, and the text report counts the failures with other
// messages on a line of their own (--save-detailed keeps each request's
// error). Run itself fails only for a bad config, a failed model lookup, all
// warmup requests failing, or the caller's ctx ending.
//
// # Retries
//
// Some servers close a kept-alive connection right after a streamed
// response although they advertised keep-alive; llama.cpp's llama-server
// does. The transport has already put the connection back in its pool, the
// next request goes out on it and fails with EOF or a reset, and net/http
// does not replay a POST. Against llama-server that lost 12 of 64 to 58 of
// 256 requests. So a request whose attempt failed on a reused connection
// (httptrace's GotConnInfo.Reused) before the first byte of a response
// (GotFirstResponseByte) is sent once more, on a connection of its own that
// no other request shares. Nothing of a response arrived, so the server did
// not answer the first attempt. Nothing else is retried: not a failure on a
// new connection, not one after response bytes arrived (a stream broken
// off, an error status), not a timeout. The report's "retries" counts the
// measured requests sent twice; if the second attempt fails too, the request
// fails with "retry on a new connection: <error>". A request's clock starts
// at its first attempt, so the failed attempt (about one round trip) is
// in its TTFT and E2EL: it is part of what a client of that server waits.
//
// # SSE
//
// Requests are POSTs sent with net/http. Responses are split into events
// with github.com/r3labs/sse/v2's NewEventStreamReader; its Client only
// makes GET subscriptions, so only the reader is used, and the event fields
// are parsed by benchio.ParseEvent. One http.Client sends every first attempt:
// HTTP/1.1 with one connection per request in flight (as vLLM's aiohttp
// client), as many idle connections per host as there are concurrency slots,
// and compression off (a gzip reader would buffer the stream and skew every
// timestamp). A second one, the same without keep-alive, sends retries.
//
// # Comparing against a baseline in the same run
//
// Start both servers on the same machine with the same model file (say
// llmserve on :8080 and llama.cpp's llama-server on :8081), then benchmark
// them one after the other with identical workload flags, so they receive
// the same prompts, lengths and arrival times:
//
//	W="--num-prompts 200 --max-concurrency 8 --random-input-len 512 --random-output-len 128 --seed 1 --warmup 8"
//	llmserve bench $W --base-url http://127.0.0.1:8080/v1 --label llmserve  --output-file llmserve.json
//	llmserve bench $W --base-url http://127.0.0.1:8081/v1 --label llama.cpp --output-file llamacpp.json
//
// Never run them at the same time: they would share the cores. Check in both
// files that failed is 0, output_tokens_source is "usage" (or the same on
// both sides) and total_output_tokens is equal, which shows both honoured
// ignore_eos; retries above 0 says the server closes kept-alive
// connections (see Retries). Then compare output_throughput, the TTFT and
// TPOT rows. To place vLLM's own tool beside ours, give `vllm bench serve`
// the same lengths and concurrency: the figures share definitions, the
// prompts do not.
//
// # Watching the server
//
// Config.Monitor (--monitor-pid, --monitor-url) records what a client cannot
// see, for a server on the same machine, during the measured run only: its
// resident memory from /proc/PID/status (VmRSS at the start, sampled every
// --monitor-interval, and at the end after --monitor-settle; VmHWM, reset
// through /proc/PID/clear_refs at the start when allowed, as the peak), its
// peak of running sequences (vllm:num_requests_running or
// llamacpp:requests_processing from /metrics, else the slots whose
// is_processing is true in llama-server's /slots) and llmserve's
// llmserve_kv_cache_committed_bytes (start, peak, end) when exported. The
// figures go into the report as server_* and kv_committed_* fields, absent
// where unknown. A /metrics or /slots request is answered by llama-server
// between its evaluation steps, so a sample can wait a step; the peak of
// running sequences is of the samples taken.
//
// # Tables
//
// `llmserve bench table FILES|DIRS` prints result files as Markdown: per
// model, dataset and concurrency, one row per server (the label up to its
// first ':') with the medians over the reps of throughput, TTFT and ITL p50
// and p99, KV bytes, RSS and running sequences, and the --ref server's
// throughput divided by each other's rep by rep (paired by seed);
// `--format csv` prints one row per file instead. scripts/bench-kv.sh runs
// llmserve and both KV layouts of llama-server this way.
//
// # Agent sessions
//
// `llmserve bench agent` lives in package evals/bench/agent, which shares
// this package's plumbing through evals/bench/benchio and is added under
// `bench` by cmd/llmserve.
//
// # Plotting
//
// `llmserve bench plot -o out.svg a.json b.json ...` reads result files
// (--output-file) and draws one figure against max concurrency: output
// tokens/s by default, or any numeric field of the result JSON
// (--metric median_ttft_ms). The x axis is logarithmic, with a tick at each
// concurrency measured; the format follows the extension (.svg, .png, .pdf).
// Runs are grouped into lines by --series: "label" (default) takes the
// label up to its first ':' (label runs "llmserve:c8", "llama.cpp:c8", ...;
// a run without a label goes by its base URL), "base-url" the server, and
// "model" the model id. Runs of one line at the same concurrency are
// averaged. A run without --max-concurrency counts as num_prompts in flight
// if its rate was inf; with a finite rate it is refused, its concurrency
// being unknown. A sweep, with W as above less its --max-concurrency:
//
//	for c in 1 2 4 8 16; do
//	  llmserve bench $W --max-concurrency $c --base-url http://127.0.0.1:8080/v1 --label llmserve:c$c  --output-file llmserve-c$c.json
//	  llmserve bench $W --max-concurrency $c --base-url http://127.0.0.1:8081/v1 --label llama.cpp:c$c --output-file llamacpp-c$c.json
//	done
//	llmserve bench plot -o throughput.svg llmserve-c*.json llamacpp-c*.json
//
// The drawing is gonum.org/v1/plot's, the plotting library of the Go field:
// axes, log scale, legend and the SVG, PNG and PDF writers come with it.
// It adds about 10 MB to the binary (its fonts and image and PDF writers)
// and under a millisecond to start-up.
package bench
