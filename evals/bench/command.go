package bench

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// vllmFlagNames maps the names `vllm bench serve` uses to ours, so that a
// vLLM command line works here unchanged where the meaning is the same.
var vllmFlagNames = map[string]string{
	"random-prefix-len": "shared-prefix-len",
	"num-warmups":       "warmup",
}

// NewCommand returns the `bench` subcommand. It writes the text report to
// stdout (or the JSON one with --json), progress to stderr, and fails when
// no request completed.
func NewCommand() *cobra.Command {
	cfg := DefaultConfig()
	var (
		endpoint    = string(cfg.Endpoint)
		dataset     = string(cfg.Dataset)
		datasetPath string
		asJSON      bool
		outputFile  string
		quiet       bool
		backend     = "openai"
		v2          V2Config
		images      []string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark an OpenAI-compatible server (vllm bench serve metrics)",
		Long: `Send streaming requests with random prompts to an OpenAI-compatible server
(llmserve, vLLM, llama.cpp's llama-server, Ollama, ...) and report throughput,
TTFT, TPOT, ITL and end-to-end latency with the definitions of
"vllm bench serve", so the figures compare with vLLM's.

Two of vLLM's synthetic datasets are built in (--dataset-name): random
(--random-* and --shared-prefix-len) and prefix_repetition
(--prefix-repetition-*: a few random prefixes, each prompt one of them plus
a random suffix of its own) and custom (--dataset-path: prompts from a JSONL
file of {"prompt": ...} lines, --custom-output-len tokens each); and mixed (--mixed-*: a few clients send long
prompts while the other --max-concurrency clients send short ones).

With --monitor-pid and --monitor-url (a server on this machine) the report
also has the server's resident memory (start, peak, end), its peak of
running sequences and, from llmserve, its committed KV bytes.

A request that fails on a reused keep-alive connection before any byte of a
response (servers such as llama-server close connections after a stream)
is retried once on a new connection; the report counts these retries.

Prompts are random words from a fixed list, about one token per word for
common tokenizers; input lengths are approximate, and the report uses the
prompt_tokens the server returns when it returns usage. Output lengths come
from the server's usage (stream_options.include_usage) or, failing that, from
counting content chunks; the report says which.

To compare with a baseline, run the same command (same --seed and workload
flags) against each server on the same machine, one after the other, and
compare the JSON files:

  llmserve bench --base-url http://127.0.0.1:8080/v1 --label llmserve --output-file llmserve.json
  llmserve bench --base-url http://127.0.0.1:8081/v1 --label llama.cpp --output-file llamacpp.json

"llmserve bench plot" draws such files against max concurrency.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch backend {
			case "openai":
				for _, name := range v2OnlyFlags {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s applies to --backend v2-infer and v2-grpc", name)
					}
				}
			case "v2-infer", "v2-grpc":
				return runV2(cmd, backend, cfg, v2, asJSON, outputFile, quiet)
			default:
				return fmt.Errorf("--backend %q: want openai, v2-infer or v2-grpc", backend)
			}
			ep, err := ParseEndpoint(endpoint)
			if err != nil {
				return err
			}
			cfg.Endpoint = ep
			for _, path := range images {
				u, err := imageDataURL(path)
				if err != nil {
					return fmt.Errorf("--image: %w", err)
				}
				cfg.ImageURLs = append(cfg.ImageURLs, u)
			}
			if cfg.Dataset, err = ParseDataset(dataset); err != nil {
				return err
			}
			if err := checkDatasetFlags(cmd.Flags(), cfg.Dataset); err != nil {
				return err
			}
			if cfg.Dataset == DatasetCustom && datasetPath != "" {
				if cfg.Custom.Prompts, err = LoadCustomPrompts(datasetPath); err != nil {
					return err
				}
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if !quiet {
				cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()

			rep, err := Run(ctx, cfg)
			if err != nil {
				return err
			}
			return writeReport(cmd, rep, rep.Completed, asJSON, outputFile)
		},
	}

	f := cmd.Flags()
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if ours, ok := vllmFlagNames[name]; ok {
			name = ours
		}
		return pflag.NormalizedName(name)
	})
	f.StringVar(&backend, "backend", backend, "what to benchmark: openai (streaming completions or chat), v2-infer (POST /v2/models/{model}/infer of a tensor model with random FP32 rows; --model, --input-*, --rows, --binary, --num-prompts, --max-concurrency, --warmup, --seed, --timeout, --label apply) or v2-grpc (the same as ModelInfer calls over the V2 gRPC service; --base-url is its host:port, --binary sends raw_input_contents)")
	f.StringVar(&v2.InputName, "input-name", "", "v2-infer, v2-grpc: the input to send (default: the model's first input, from its metadata)")
	f.Int64SliceVar(&v2.InputShape, "input-shape", nil, "v2-infer, v2-grpc: the input's shape without the batch dimension, e.g. 784 (default: from the model's metadata)")
	f.IntVar(&v2.Rows, "rows", 1, "v2-infer, v2-grpc: rows (batch size) per request")
	f.BoolVar(&v2.Binary, "binary", false, "v2-infer: send the input as binary tensor data (and ask for binary outputs) instead of JSON; v2-grpc: in raw_input_contents instead of typed contents")
	f.StringVar(&cfg.BaseURL, "base-url", cfg.BaseURL, "OpenAI API root of the server, including /v1 (v2-infer: the server's root; v2-grpc: its gRPC host:port)")
	f.StringVar(&cfg.APIKey, "api-key", "", "API key, sent as \"Authorization: Bearer <key>\" (optional)")
	f.StringVar(&endpoint, "endpoint", endpoint, "route to benchmark: completions (POST /completions) or chat (POST /chat/completions); vLLM's paths /v1/completions and /v1/chat/completions are accepted too")
	f.StringVar(&cfg.Model, "model", "", "model name to send (default: the first id from GET <base-url>/models)")
	f.IntVar(&cfg.NumPrompts, "num-prompts", cfg.NumPrompts, "number of measured requests")
	f.IntVar(&cfg.MaxConcurrency, "max-concurrency", cfg.MaxConcurrency, "maximum requests in flight; 0 means no limit (vLLM's default)")
	f.Float64Var(&cfg.RequestRate, "request-rate", cfg.RequestRate, "mean request arrival rate in requests/s, Poisson arrivals; inf sends all requests at once (paced by --max-concurrency only)")
	f.StringVar(&dataset, "dataset-name", dataset, "how prompts are made: random (random words; the --random-* flags and --shared-prefix-len), prefix_repetition (a few shared prefixes, each prompt one of them plus a suffix of its own; the --prefix-repetition-* flags) or mixed (long prompts from --mixed-long-clients clients, short ones from the rest; the --mixed-* flags)")
	f.IntVar(&cfg.RandomInputLen, "random-input-len", cfg.RandomInputLen, "input length of the random part of each prompt, in words (about one token each; approximate, the server's prompt_tokens are reported)")
	f.IntVar(&cfg.RandomOutputLen, "random-output-len", cfg.RandomOutputLen, "output length of each request, sent as max_tokens")
	f.Float64Var(&cfg.RandomRangeRatio, "random-range-ratio", cfg.RandomRangeRatio, "sample input and output lengths uniformly from [L*(1-r), L*(1+r)], 0 <= r < 1 (vLLM semantics)")
	f.IntVar(&cfg.SharedPrefixLen, "shared-prefix-len", cfg.SharedPrefixLen, "words of a prefix common to every prompt, before the random part, to measure prefix caching (vLLM: --random-prefix-len)")
	f.IntVar(&cfg.PrefixRepetition.PrefixLen, "prefix-repetition-prefix-len", cfg.PrefixRepetition.PrefixLen, "prefix_repetition: words in each prefix (about one token each)")
	f.IntVar(&cfg.PrefixRepetition.SuffixLen, "prefix-repetition-suffix-len", cfg.PrefixRepetition.SuffixLen, "prefix_repetition: random words after the prefix, drawn anew for every prompt")
	f.IntVar(&cfg.PrefixRepetition.NumPrefixes, "prefix-repetition-num-prefixes", cfg.PrefixRepetition.NumPrefixes, "prefix_repetition: number of distinct prefixes, each used by num-prompts/num-prefixes prompts in random order")
	f.IntVar(&cfg.PrefixRepetition.OutputLen, "prefix-repetition-output-len", cfg.PrefixRepetition.OutputLen, "prefix_repetition: output length of each request, sent as max_tokens")
	f.IntVar(&cfg.Mixed.LongClients, "mixed-long-clients", cfg.Mixed.LongClients, "mixed: clients that send the long prompts; the other --max-concurrency clients send short ones")
	f.IntVar(&cfg.Mixed.LongPrompts, "mixed-long-prompts", cfg.Mixed.LongPrompts, "mixed: long requests among --num-prompts (0: one per long client); the rest are short, and warmups are short")
	f.IntVar(&cfg.Mixed.LongInputLen, "mixed-long-input-len", cfg.Mixed.LongInputLen, "mixed: words in each long prompt (about one token each)")
	f.IntVar(&cfg.Mixed.ShortInputLen, "mixed-short-input-len", cfg.Mixed.ShortInputLen, "mixed: words in each short prompt")
	f.IntVar(&cfg.Mixed.OutputLen, "mixed-output-len", cfg.Mixed.OutputLen, "mixed: output length of every request, sent as max_tokens")
	f.StringVar(&datasetPath, "dataset-path", "", "custom: a JSONL file of {\"prompt\": ...} lines (vLLM's custom dataset), taken in order and cycled")
	f.IntVar(&cfg.Custom.OutputLen, "custom-output-len", cfg.Custom.OutputLen, "custom: output length of every request, sent as max_tokens")
	f.IntVar(&cfg.Monitor.PID, "monitor-pid", 0, "server process on this machine whose memory to record during the measured run: VmRSS sampled, VmHWM (reset at the start when allowed) and VmRSS at the end, from /proc/PID/status")
	f.StringVar(&cfg.Monitor.URL, "monitor-url", "", "server root (http://host:port) whose /metrics to sample during the measured run: running sequences (vllm:num_requests_running, llamacpp:requests_processing, else llama-server's /slots) and llmserve_kv_cache_committed_bytes")
	f.DurationVar(&cfg.Monitor.Interval, "monitor-interval", 500*time.Millisecond, "time between monitor samples")
	f.DurationVar(&cfg.Monitor.Settle, "monitor-settle", 0, "wait this long after the last stream before taking the end figures (RSS, KV bytes)")
	f.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed for prompts, lengths and arrival times")
	f.StringArrayVar(&images, "image", nil, "attach this PNG, JPEG or WebP file to every chat request, before its text, as an image_url data URL (repeatable; needs --endpoint chat and a multimodal model)")
	f.BoolVar(&cfg.IgnoreEOS, "ignore-eos", cfg.IgnoreEOS, "send \"ignore_eos\": true so every request generates exactly max_tokens (vLLM and llama.cpp honour it; servers that do not know it ignore it and may stop early; --ignore-eos=false leaves it out)")
	f.Float64Var(&cfg.Temperature, "temperature", cfg.Temperature, "sampling temperature")
	f.IntVar(&cfg.Warmup, "warmup", cfg.Warmup, "requests sent and awaited before the measured run, not counted (vLLM: --num-warmups)")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "limit for each request, from sending it to the end of its stream; a request over it fails")
	f.StringVar(&cfg.Label, "label", "", "label stored in the report, to tell runs apart")
	f.BoolVar(&cfg.Detailed, "save-detailed", false, "add per-request arrays (input_lens, output_lens, ttfts, itls, errors) to the JSON report")
	f.BoolVar(&asJSON, "json", false, "write the report to stdout as JSON instead of a table")
	f.StringVar(&outputFile, "output-file", "", "also write the JSON report to this file (vLLM's field names)")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not log progress to stderr")
	cmd.AddCommand(newPlotCommand(), newTableCommand())
	return cmd
}

// v2OnlyFlags are the flags of --backend v2-infer and v2-grpc alone.
var v2OnlyFlags = []string{"input-name", "input-shape", "rows", "binary"}

// openaiOnlyFlags are the flags --backend v2-infer and v2-grpc do not use.
var openaiOnlyFlags = []string{"endpoint", "request-rate", "dataset-name", "random-input-len", "random-output-len", "random-range-ratio",
	"shared-prefix-len", "prefix-repetition-prefix-len", "prefix-repetition-suffix-len", "prefix-repetition-num-prefixes",
	"prefix-repetition-output-len", "mixed-long-clients", "mixed-long-prompts", "mixed-long-input-len", "mixed-short-input-len",
	"mixed-output-len", "dataset-path", "custom-output-len", "monitor-pid", "monitor-url", "monitor-interval", "monitor-settle", "ignore-eos", "temperature", "save-detailed"}

// runV2 runs `bench --backend v2-infer` or `v2-grpc`.
func runV2(cmd *cobra.Command, backend string, cfg Config, v2 V2Config, asJSON bool, outputFile string, quiet bool) error {
	for _, name := range openaiOnlyFlags {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not apply to --backend %s", name, backend)
		}
	}
	v2.BaseURL, v2.APIKey, v2.Model, v2.Label = cfg.BaseURL, cfg.APIKey, cfg.Model, cfg.Label
	v2.NumRequests, v2.Concurrency, v2.Warmup, v2.Seed, v2.Timeout = cfg.NumPrompts, cfg.MaxConcurrency, cfg.Warmup, uint64(cfg.Seed), cfg.Timeout
	if v2.Concurrency == 0 {
		v2.Concurrency = v2.NumRequests // no cap: all at once, as the openai backend
	}
	if !quiet {
		v2.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	run := RunV2Infer
	if backend == "v2-grpc" {
		run = RunV2GRPC
	}
	rep, err := run(ctx, v2)
	if err != nil {
		return err
	}
	return writeReport(cmd, rep, rep.Completed, asJSON, outputFile)
}

// writeReport writes a run's report (either backend's) to outputFile as
// JSON when asked, then to stdout as text or JSON; a run in which no
// request completed is an error.
func writeReport(cmd *cobra.Command, rep interface{ WriteText(io.Writer) error }, completed int, asJSON bool, outputFile string) error {
	if outputFile != "" {
		if err := benchio.WriteJSONFile(outputFile, rep); err != nil {
			return err
		}
	}
	if err := benchio.PrintReport(cmd.OutOrStdout(), rep, asJSON); err != nil {
		return err
	}
	if completed == 0 {
		return errors.New("bench: no request completed")
	}
	return nil
}

// datasetFlags lists, for each dataset, the flags that describe it alone.
var datasetFlags = []struct {
	dataset Dataset
	flags   []string
}{
	{DatasetRandom, []string{"random-input-len", "random-output-len", "random-range-ratio", "shared-prefix-len"}},
	{DatasetPrefixRepetition, []string{"prefix-repetition-prefix-len", "prefix-repetition-suffix-len",
		"prefix-repetition-num-prefixes", "prefix-repetition-output-len"}},
	{DatasetMixed, []string{"mixed-long-clients", "mixed-long-prompts", "mixed-long-input-len", "mixed-short-input-len", "mixed-output-len"}},
	{DatasetCustom, []string{"dataset-path", "custom-output-len"}},
}

// checkDatasetFlags rejects a flag given for a dataset other than the one
// selected: it would be ignored, and the run would not be the one asked for.
func checkDatasetFlags(f *pflag.FlagSet, selected Dataset) error {
	for _, d := range datasetFlags {
		if d.dataset == selected {
			continue
		}
		for _, name := range d.flags {
			if f.Changed(name) {
				return fmt.Errorf("--%s applies to --dataset-name %s, not %s", name, d.dataset, selected)
			}
		}
	}
	return nil
}

// imageDataURL reads an image file into a data: URL of its type.
func imageDataURL(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	typ := http.DetectContentType(b)
	switch typ {
	case "image/png", "image/jpeg", "image/webp":
	default:
		return "", fmt.Errorf("%s is %s, not a PNG, JPEG or WebP image", path, typ)
	}
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}
