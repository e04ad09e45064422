package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/llmserve/llmserve/api"
	"github.com/llmserve/llmserve/api/openai"
	"github.com/llmserve/llmserve/api/responses/store"
	"github.com/llmserve/llmserve/api/tritonv1"
	v2 "github.com/llmserve/llmserve/api/v2"
	v2grpc "github.com/llmserve/llmserve/api/v2/grpc"
	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models"
	"github.com/llmserve/llmserve/proto/tritonpb"
	"github.com/llmserve/llmserve/proto/workerpb"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// serveFlags are the serve command's settings. Every flag can also come
// from LLMSERVE_<NAME> (upper case, dashes as underscores); a flag on the
// command line wins.
type serveFlags struct {
	// LoRA adapters (issue 20): --lora NAME=PATH (repeatable), --max-loras,
	// --enable-lora-runtime-updates.
	loras             []string
	maxLoRAs          int
	loraRuntimeUpdate bool
	// Multimodal projectors (issue 20): --mmproj [NAME=]PATH (repeatable),
	// --max-image-pixels, --media-cache-memory.
	mmprojs        []string
	maxImagePixels int
	mediaCacheMem  string

	host             string
	httpPort         int
	grpcPort         int
	metricsPort      int
	metricsEndpoint  string
	pprofAddr        string
	models           []string
	modelName        string
	modelDir         string
	modelRepository  string
	task             string
	strictReadiness  bool
	chatTemplate     string
	reasoningParser  string
	cacheDir         string
	maxModelLen      int
	maxNumSeqs       int
	initialSeqs      int
	maxBatched       int
	maxWaiting       int
	kvMemory         string
	noPrefixCaching  bool
	prefixCacheMem   string
	kvType           string
	threads          int
	maxBatchSize     int
	maxBatchTime     float64
	parallelWorkers  int
	tensorThreads    int
	batchThreads     int
	poll             int
	threadsSleep     string
	flashAttn        string
	gpuLayers        int
	longPrefill      int
	mainGPU          int
	splitMode        string
	noMmap           bool
	mlock            bool
	requestTimeout   time.Duration
	shutdownTimeout  time.Duration
	apiKeys          []string
	apiKeyFile       string
	allowedOrigins   []string
	allowedMethods   []string
	allowedHeaders   []string
	allowCredentials bool
	pooling          string
	matryoshka       []int
	maxBodyBytes     int64
	// The Responses API's store of responses (api/responses/store).
	responsesStoreSize int
	responsesStoreDir  string
	logFormat          string
	logLevel           string
	llamaLogLevel      string
	kvLease            time.Duration
	media              mediaFlags
	// Speculative decoding (vLLM's flags).
	specMethod, specConfig, specModel string
	specTokens, lookupMin, lookupMax  int
	specDisableBatch                  int
	// fs is the flag set, to tell a flag given as 0 from one not given.
	fs *pflag.FlagSet
}

// defaultThreads gives ggml every core. Measured on two cores, one thread
// halves decode throughput and doubles TTFT, while the HTTP side (which
// sleeps between tokens) does not starve when ggml uses both
// (docs/BENCHMARKS.md).
func defaultThreads() int { return runtime.NumCPU() }

func newServeCommand() *cobra.Command {
	return serveFamily(&cobra.Command{
		Use:   "serve",
		Short: "Serve models over HTTP (OpenAI API) and gRPC",
		Long: `Serve GGUF models through llama.cpp with continuous batching and a
prefix-sharing paged KV cache.

With no --model, serves the embedded stories260K model. Every flag can also be
set with an environment variable LLMSERVE_<FLAG> (for example
LLMSERVE_MAX_NUM_SEQS=32); a flag given on the command line wins. KServe's
conventional arguments (--model_name, --model_dir, --http_port, --grpc_port)
are accepted as KServe passes them: underscores and dashes are the same.`,
	}, func(ctx context.Context, f *serveFlags) error { return serve(ctx, f, nil) })
}

// serveFamily completes cmd (its Use and texts set) as serve, worker and head
// are: it takes no arguments and serve's flags, and it runs run with them
// once the LLMSERVE_<FLAG> variables are applied to every flag it has (the
// caller may add its own).
func serveFamily(cmd *cobra.Command, run func(context.Context, *serveFlags) error) *cobra.Command {
	f := &serveFlags{}
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := applyEnv(cmd.Flags()); err != nil {
			return err
		}
		return run(cmd.Context(), f)
	}
	addServeFlags(cmd.Flags(), f)
	return cmd
}

// addServeFlags defines serve's flags on fl (serve and worker share them).
func addServeFlags(fl *pflag.FlagSet, f *serveFlags) {
	fl.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	fl.StringVar(&f.host, "host", "127.0.0.1", "address to listen on (0.0.0.0 or \"\" for every interface)")
	fl.IntVar(&f.httpPort, "http-port", 8080, "HTTP port (OpenAI API, health, metrics)")
	fl.IntVar(&f.metricsPort, "metrics-port", 0, "serve the Prometheus metrics on this port of their own, and not on the HTTP port (MLServer's metrics_port); 0: on the HTTP port")
	fl.StringVar(&f.metricsEndpoint, "metrics-endpoint", "/metrics", "path of the Prometheus metrics (MLServer's metrics_endpoint)")
	fl.StringVar(&f.pprofAddr, "pprof-addr", "", "serve Go's CPU, heap and goroutine profiles (net/http/pprof, /debug/pprof/) on this address of their own, e.g. 127.0.0.1:6060; empty: off")
	fl.IntVar(&f.grpcPort, "grpc-port", 8081, "gRPC port (Open Inference Protocol V2, Triton v1's GRPCService, grpc.health.v1, reflection); 0 disables gRPC")
	fl.StringArrayVar(&f.models, "model", nil, "model to serve as NAME=PATH or PATH (repeatable): a .gguf LLM, or a tensor model (.onnx, or a GGUF whose general.architecture is llmserve.graph); default: the embedded stories260K")
	fl.StringVar(&f.modelName, "model-name", "", "name clients use for the model (KServe's --model_name); with one model only")
	fl.StringVar(&f.modelDir, "model-dir", "", "directory holding one model file to serve, .gguf or .onnx (KServe's --model_dir, e.g. /mnt/models)")
	fl.StringVar(&f.modelRepository, "model-repository", "", "model repository: one folder per model, numbered version folders with a .gguf or .onnx, and an optional model-settings.json (MLServer's settings) or config.pbtxt (Triton's); every model is loaded at start and can be loaded and unloaded through /v2/repository")
	fl.StringVar(&f.task, "task", "generate", "what the models do over V2 infer (vLLM's --task): generate (text_input → text_output) or embed (text_input → embedding FP32 [n, dim]); a repository model's parameters.task overrides it")
	fl.BoolVar(&f.strictReadiness, "strict-readiness", false, "with --model-repository: the server is ready only when every model in the repository is (Triton's); without it, ready when the server is up")
	fl.StringVar(&f.chatTemplate, "chat-template", "", "file with a Jinja chat template that replaces the model's own")
	fl.StringVar(&f.reasoningParser, "reasoning-parser", "", "return the text between <think> and </think> as reasoning_content: "+strings.Join(tokenizer.ReasoningParsers(), " or ")+" (vLLM's names)")
	fl.IntVar(&f.maxBatchSize, "max-batch-size", 32, "tensor models given with --model (.onnx, graph GGUF): dynamic batching merges the requests that queue while the model is busy, up to this many rows per run (MLServer's max_batch_size); a request that finds the model idle runs at once; 0 or 1: off")
	fl.Float64Var(&f.maxBatchTime, "max-batch-time", 0, "tensor models given with --model: the most seconds a batch waits for requests on their way while a worker is free (MLServer's max_batch_time, Triton's max_queue_delay_microseconds); 0: none")
	fl.IntVar(&f.parallelWorkers, "parallel-workers", 1, "tensor models given with --model: batches run at once, --threads split between them (MLServer's parallel_workers)")
	fl.IntVar(&f.tensorThreads, "tensor-threads", 0, "CPU threads each tensor model computes with, split between its parallel workers; 0: one per worker (best for small models: add --parallel-workers rather than threads)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "where the embedded model is written for llama.cpp to map (default: the user cache dir)")
	fl.IntVar(&f.maxModelLen, "max-model-len", 0, "most tokens (prompt + output) per sequence; 0: the model's context length")
	fl.IntVar(&f.maxNumSeqs, "max-num-seqs", 64, fmt.Sprintf("most sequences running at once (the continuous batch), 1 to %d; each has a KV stream of max-model-len positions, whose memory follows the tokens it holds", llamacpp.MaxSlots))
	fl.IntVar(&f.initialSeqs, "kv-initial-seqs", 4, "sequences the KV cache holds at start-up; it grows up to --max-num-seqs when requests wait, and shrinks back after a minute idle (KV in host memory only: KV on a GPU holds --max-num-seqs from the start)")
	fl.IntVar(&f.maxBatched, "max-num-batched-tokens", 2048, "most tokens computed in one step (at least max-num-seqs); longer prompts are prefilled in chunks")
	fl.IntVar(&f.longPrefill, "long-prefill-token-threshold", 512, "a prompt of more tokens than this is long: while other requests decode, long prompts compute in chunks of at most this many tokens, smaller as paced by measured step times, so that streams keep their token rate (about 3× their usual inter-token latency at most); 0: off")
	fl.IntVar(&f.maxWaiting, "max-waiting", 512, "most requests waiting to start; more get 429 with Retry-After")
	fl.StringVar(&f.kvMemory, "kv-cache-memory", "auto", "cap on the KV memory of the tokens in use by running sequences (e.g. 512MiB, 4GiB; 0: no cap; auto: a quarter of the machine's memory, or of the container's limit, at least 1GiB); with --n-gpu-layers the KV is not paged and the cap bounds max-num-seqs × max-model-len positions (auto: 1GiB)")
	fl.BoolVar(&f.noPrefixCaching, "no-enable-prefix-caching", false, "disable reuse of KV blocks across requests with a common prefix")
	fl.StringVar(&f.prefixCacheMem, "prefix-cache-memory", "1GiB", "host memory for cached prefixes (idle KV blocks, evicted least recently used first)")
	fl.StringVar(&f.kvType, "kv-cache-dtype", "f16", "KV cache element type: f16, f32, bf16, q8_0 or q4_0")
	fl.IntVar(&f.threads, "threads", defaultThreads(), "ggml threads for decoding (default: all cores)")
	fl.IntVar(&f.batchThreads, "threads-batch", 0, "ggml threads for prompt processing; 0: same as --threads")
	fl.IntVar(&f.poll, "poll", 50, "how long ggml's threads spin for the next evaluation, 0 (sleep at once) to 100")
	fl.StringVar(&f.threadsSleep, "threads-sleep", "step", "when ggml's threads stop polling for work: after every step (step) or only when the server is idle (idle)")
	fl.StringVar(&f.flashAttn, "flash-attn", "auto", "flash attention: auto (llama.cpp decides; on for CPU), on or off")
	fl.IntVar(&f.gpuLayers, "n-gpu-layers", 0, "layers to offload to GPUs (-1: all); needs a GPU backend library")
	fl.IntVar(&f.mainGPU, "main-gpu", 0, "GPU used when the model is not split")
	fl.StringVar(&f.splitMode, "split-mode", "layer", "how to split across GPUs: none, layer or row")
	fl.BoolVar(&f.noMmap, "no-mmap", false, "read the model into memory instead of mapping it")
	fl.BoolVar(&f.mlock, "mlock", false, "lock the model in RAM")
	fl.DurationVar(&f.requestTimeout, "request-timeout", 0, "deadline for every request (e.g. 10m); 0: none")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to let running requests finish on SIGTERM")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-grace", 30*time.Second, "the same as --shutdown-timeout (the drain time the Kubernetes manifests set)")
	fl.StringArrayVar(&f.loras, "lora", nil, "serve a LoRA adapter GGUF (as llama.cpp's convert_lora_to_gguf.py writes it) for the first --model as NAME=PATH (repeatable); it is listed in /v1/models with parent = the model, and a request's model = NAME uses it")
	fl.StringArrayVar(&f.mmprojs, "mmproj", nil, "multimodal projector GGUF (llama.cpp's --mmproj: a CLIP vision or audio encoder) for the first --model as PATH, or for the model called NAME as NAME=PATH (repeatable); chat requests to it may carry image_url and input_audio parts")
	fl.IntVar(&f.maxImagePixels, "max-image-pixels", 0, fmt.Sprintf("largest image (width × height) a request may carry; larger is a 400 (default %d)", models.DefaultMaxImagePixels))
	fl.StringVar(&f.mediaCacheMem, "media-cache-memory", "", fmt.Sprintf("memory for encoded images and audio kept for reuse, keyed by their bytes, e.g. 512MiB (default %dMiB)", models.DefaultMediaCacheBytes>>20))
	fl.IntVar(&f.maxLoRAs, "max-loras", 0, "most distinct LoRA adapters running at once (vLLM's --max-loras); requests of others wait, oldest first; 0: no cap")
	fl.BoolVar(&f.loraRuntimeUpdate, "enable-lora-runtime-updates", false, "serve vLLM's POST /v1/load_lora_adapter and /v1/unload_lora_adapter (and build the engine for adapters even without --lora)")
	fl.StringArrayVar(&f.apiKeys, "api-key", nil, "require this key as a Bearer token on every inference route (repeatable; health and metrics stay open)")
	fl.StringVar(&f.apiKeyFile, "api-key-file", "", "file with API keys, one per line (blank lines and lines starting with # ignored)")
	fl.StringSliceVar(&f.allowedOrigins, "allowed-origins", nil, "origins browsers may call the API from (comma-separated or repeated; \"*\" for any); default: none")
	fl.StringSliceVar(&f.allowedMethods, "allowed-methods", nil, "HTTP methods allowed cross-origin (default: all)")
	fl.StringSliceVar(&f.allowedHeaders, "allowed-headers", nil, "request headers allowed cross-origin (default: all)")
	fl.BoolVar(&f.allowCredentials, "allow-credentials", false, "allow cross-origin requests with credentials")
	fl.Int64Var(&f.maxBodyBytes, "max-body-bytes", 0, "largest request body, and gRPC message; 0: each protocol's default (OpenAI and KServe V1 16 MiB; V2, Triton v1 and gRPC 64 MiB)")
	fl.IntVar(&f.responsesStoreSize, "responses-store-size", store.DefaultSize, "most stored responses (POST /v1/responses with store) kept; the least recently used goes first")
	fl.StringVar(&f.responsesStoreDir, "responses-store-dir", "", "directory of the file (bbolt) that keeps stored responses across restarts; default: memory only")
	fl.StringVar(&f.pooling, "pooling", "", "how embeddings pool a sequence: mean, cls, last, rank or none (no embeddings); default: the GGUF's pooling type, else last")
	fl.IntSliceVar(&f.matryoshka, "matryoshka-dimensions", nil, "embedding sizes the model was trained to be cut to (Matryoshka); lets requests set dimensions")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.llamaLogLevel, "llama-log-level", "warn", "level of llama.cpp's own messages: debug, info, warn or error")
	fl.StringVar(&f.specMethod, "speculative", "", "speculative decoding method for every LLM: ngram (prompt lookup: draft tokens continue the latest earlier occurrence of the last tokens) or draft (a draft model proposes them: --speculative-model); drafts are verified in the same step: greedy output unchanged, seeded sampling exactly distributed; default: off")
	fl.StringVar(&f.specConfig, "speculative-config", "", `vLLM's speculative config as JSON, e.g. {"method":"ngram","num_speculative_tokens":5,"prompt_lookup_min":2,"prompt_lookup_max":5} or {"method":"draft","model":"/models/draft.gguf","num_speculative_tokens":5}; the flags below override its keys`)
	fl.IntVar(&f.specTokens, "num-speculative-tokens", 0, fmt.Sprintf("most draft tokens per sequence and step, 1 to %d (default %d)", scheduler.MaxSpeculativeTokens, scheduler.DefaultSpeculativeTokens))
	fl.IntVar(&f.lookupMin, "prompt-lookup-min", 0, fmt.Sprintf("shortest n-gram prompt lookup matches (default: --prompt-lookup-max, or %d)", scheduler.DefaultPromptLookup))
	fl.IntVar(&f.specDisableBatch, "speculative-disable-by-batch-size", 0, "no drafts in a step that decodes more sequences than this (vLLM's disable_by_batch_size; default: drafts at every batch size)")
	fl.IntVar(&f.lookupMax, "prompt-lookup-max", 0, fmt.Sprintf("longest n-gram prompt lookup matches, at most %d (default: --prompt-lookup-min, or %d)", scheduler.MaxPromptLookup, scheduler.DefaultPromptLookup))
	fl.StringVar(&f.specModel, "speculative-model", "", "draft model GGUF for speculative decoding (method draft, implied): a small model with the served model's vocabulary, loaded beside it with the same GPU settings, proposes --num-speculative-tokens greedy draft tokens per sequence and step; its KV counts against --kv-cache-memory")
	f.fs = fl
	fl.DurationVar(&f.kvLease, "kv-transfer-lease", 30*time.Second, "how long a prefill's KV waits for a remote decode to pull it (kv_transfer_params do_remote_decode, the worker service's Prefill) before it is freed")
	addMediaFlags(fl, &f.media)
}

// settings are the flags, checked and converted, ready to load models with.
type settings struct {
	log, llamaLog  slog.Level
	kvMem, prefMem int64
	mediaMem       int64
	specs          [][2]string
	tmpl           string
	apiKeys        []string
	spec           scheduler.Speculative
}

// flagCheck is one start-up check of flags: when failed holds, err says
// which flag and what it takes.
type flagCheck struct {
	failed bool
	err    error
}

// firstFailed returns the error of the first check that failed (a later
// one may only restate it), nil when none did.
func firstFailed(checks ...flagCheck) error {
	for _, c := range checks {
		if c.failed {
			return c.err
		}
	}
	return nil
}

// validate checks every flag at start-up; an error names the flag and says
// what it takes.
func (f *serveFlags) validate() (*settings, error) {
	bad := func(flag string, format string, args ...any) error {
		return fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...))
	}
	oneOf := func(flag, v string, allowed ...string) error {
		if slices.Contains(allowed, v) {
			return nil
		}
		return bad(flag, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
	checks := []error{
		oneOf("log-format", f.logFormat, "text", "json"),
		oneOf("flash-attn", f.flashAttn, "auto", "on", "off"),
		oneOf("kv-cache-dtype", f.kvType, "f16", "f32", "bf16", "q8_0", "q4_0"),
		oneOf("split-mode", f.splitMode, "none", "layer", "row"),
		oneOf("threads-sleep", f.threadsSleep, "step", "idle"),
		oneOf("task", f.task, models.TaskGenerate, models.TaskEmbed),
	}
	if f.reasoningParser != "" {
		checks = append(checks, oneOf("reasoning-parser", f.reasoningParser, tokenizer.ReasoningParsers()...))
	}
	// The range checks: only the first that fails is reported, as a later
	// one may only restate it (max-num-batched-tokens against max-num-seqs).
	checks = append(checks, firstFailed(
		flagCheck{f.httpPort < 1 || f.httpPort > 65535, bad("http-port", "%d is not a TCP port (1 to 65535)", f.httpPort)},
		flagCheck{f.grpcPort < 0 || f.grpcPort > 65535, bad("grpc-port", "%d is not a TCP port (1 to 65535, or 0 to disable gRPC)", f.grpcPort)},
		flagCheck{f.grpcPort != 0 && f.grpcPort == f.httpPort, bad("grpc-port", "%d is also the HTTP port", f.grpcPort)},
		flagCheck{f.metricsPort < 0 || f.metricsPort > 65535, bad("metrics-port", "%d is not a TCP port (1 to 65535, or 0 to serve the metrics on the HTTP port)", f.metricsPort)},
		flagCheck{f.metricsPort != 0 && f.metricsPort == f.httpPort, bad("metrics-port", "%d is also the HTTP port (--http-port); leave --metrics-port 0 to serve the metrics there", f.metricsPort)},
		flagCheck{f.metricsPort != 0 && f.metricsPort == f.grpcPort, bad("metrics-port", "%d is also the gRPC port (--grpc-port)", f.metricsPort)},
		flagCheck{!strings.HasPrefix(f.metricsEndpoint, "/") || strings.ContainsAny(f.metricsEndpoint, " {}?#"), bad("metrics-endpoint", "%q is not a URL path: it must start with / and hold no spaces, braces, ? or #", f.metricsEndpoint)},
		flagCheck{f.maxLoRAs < 0, bad("max-loras", "%d is negative (0 means no cap)", f.maxLoRAs)},
		flagCheck{f.maxImagePixels < 0, bad("max-image-pixels", "%d is negative", f.maxImagePixels)},
		flagCheck{f.maxNumSeqs < 1 || f.maxNumSeqs > llamacpp.MaxSlots, bad("max-num-seqs", "%d is outside 1 to %d", f.maxNumSeqs, llamacpp.MaxSlots)},
		flagCheck{f.initialSeqs < 1, bad("kv-initial-seqs", "%d: at least 1", f.initialSeqs)},
		flagCheck{f.maxModelLen < 0, bad("max-model-len", "%d is negative (0 means the model's context length)", f.maxModelLen)},
		flagCheck{f.maxBatched < f.maxNumSeqs, bad("max-num-batched-tokens", "%d is below --max-num-seqs %d: every running sequence needs a token per step", f.maxBatched, f.maxNumSeqs)},
		flagCheck{f.longPrefill < 0, bad("long-prefill-token-threshold", "%d: at least 0 (0 turns it off)", f.longPrefill)},
		flagCheck{f.maxWaiting < 1, bad("max-waiting", "%d: at least one request must be able to wait", f.maxWaiting)},
		flagCheck{f.threads < 1, bad("threads", "%d: at least 1", f.threads)},
		flagCheck{f.maxBatchSize < 0, bad("max-batch-size", "%d is negative (0 or 1: no adaptive batching)", f.maxBatchSize)},
		flagCheck{f.maxBatchTime < 0 || f.maxBatchTime > 3600, bad("max-batch-time", "%g is outside 0 to 3600 seconds", f.maxBatchTime)},
		flagCheck{f.tensorThreads < 0, bad("tensor-threads", "%d is negative (0: the default)", f.tensorThreads)},
		flagCheck{f.parallelWorkers < 1, bad("parallel-workers", "%d: at least 1", f.parallelWorkers)},
		flagCheck{f.batchThreads < 0, bad("threads-batch", "%d is negative (0 means --threads)", f.batchThreads)},
		flagCheck{f.poll < 0 || f.poll > 100, bad("poll", "%d is outside 0 to 100", f.poll)},
		flagCheck{f.kvLease <= 0 || f.kvLease > 10*time.Minute, bad("kv-transfer-lease", "%s is outside (0, 10m]", f.kvLease)},
		flagCheck{f.requestTimeout < 0, bad("request-timeout", "%s is negative", f.requestTimeout)},
		flagCheck{f.shutdownTimeout < 0, bad("shutdown-timeout", "%s is negative", f.shutdownTimeout)},
		flagCheck{f.maxBodyBytes < 0, bad("max-body-bytes", "%d is negative (0 means each protocol's default)", f.maxBodyBytes)},
		flagCheck{f.responsesStoreSize < 1, bad("responses-store-size", "%d: at least 1 response must be kept", f.responsesStoreSize)},
		flagCheck{f.gpuLayers < -1, bad("n-gpu-layers", "%d: use -1 for all layers", f.gpuLayers)},
	))
	checks = append(checks, f.media.validate())
	if f.strictReadiness && f.modelRepository == "" {
		checks = append(checks, bad("strict-readiness", "needs --model-repository (without a repository the server is ready only when every model is)"))
	}
	if err := errors.Join(checks...); err != nil {
		return nil, err
	}
	var s settings
	var err error
	if s.log, err = parseLevel(f.logLevel); err != nil {
		return nil, bad("log-level", "%v", err)
	}
	if s.llamaLog, err = parseLevel(f.llamaLogLevel); err != nil {
		return nil, bad("llama-log-level", "%v", err)
	}
	if s.kvMem, err = parseKVMemory(f.kvMemory, f.gpuLayers != 0, hostMemory()); err != nil {
		return nil, bad("kv-cache-memory", "%v", err)
	}
	if s.prefMem, err = parseBytes(f.prefixCacheMem); err != nil {
		return nil, bad("prefix-cache-memory", "%v", err)
	}
	if f.noPrefixCaching {
		s.prefMem = 0
	}
	if f.mediaCacheMem != "" {
		if s.mediaMem, err = parseBytes(f.mediaCacheMem); err != nil {
			return nil, bad("media-cache-memory", "%v", err)
		}
	}
	if s.specs, err = modelSpecs(f); err != nil {
		return nil, err
	}
	if s.spec, err = f.speculative(); err != nil {
		return nil, err
	}
	if f.chatTemplate != "" {
		b, err := os.ReadFile(f.chatTemplate)
		if err != nil {
			return nil, bad("chat-template", "%v", err)
		}
		s.tmpl = string(b)
	}
	s.apiKeys = f.apiKeys
	if f.apiKeyFile != "" {
		b, err := os.ReadFile(f.apiKeyFile)
		if err != nil {
			return nil, bad("api-key-file", "%v", err)
		}
		for line := range strings.Lines(string(b)) {
			if k := strings.TrimSpace(line); k != "" && !strings.HasPrefix(k, "#") {
				s.apiKeys = append(s.apiKeys, k)
			}
		}
		if len(s.apiKeys) == len(f.apiKeys) {
			return nil, bad("api-key-file", "%s holds no key", f.apiKeyFile)
		}
	}
	for _, k := range s.apiKeys {
		if strings.TrimSpace(k) == "" || strings.ContainsAny(k, " \t\r\n") {
			return nil, bad("api-key", "a key must be non-empty and hold no whitespace")
		}
	}
	return &s, nil
}

// speculative reads the speculative decoding flags: --speculative-config
// first, the single flags over its keys. An error names the flag to fix.
func (f *serveFlags) speculative() (scheduler.Speculative, error) {
	var sc models.SpeculativeConfig
	if f.specConfig != "" {
		c, err := models.ParseSpeculativeConfig(f.specConfig)
		if err != nil {
			return scheduler.Speculative{}, fmt.Errorf("--speculative-config: %w", err)
		}
		sc = *c
	}
	changed := func(name string) bool { return f.fs != nil && f.fs.Changed(name) }
	if f.specMethod != "" {
		if sc.Method != "" && sc.Method != f.specMethod {
			return scheduler.Speculative{}, fmt.Errorf("--speculative: %q contradicts --speculative-config's method %q", f.specMethod, sc.Method)
		}
		sc.Method = f.specMethod
	}
	if f.specModel != "" {
		sc.Model = f.specModel
	}
	// A flag given names itself in the error; else the config's key does.
	flag := "--speculative-config"
	for _, x := range []struct {
		name string
		v    int
		dst  *int
	}{{"num-speculative-tokens", f.specTokens, &sc.NumSpeculativeTokens}, {"prompt-lookup-min", f.lookupMin, &sc.PromptLookupMin}, {"prompt-lookup-max", f.lookupMax, &sc.PromptLookupMax},
		{"speculative-disable-by-batch-size", f.specDisableBatch, &sc.DisableByBatchSize}} {
		if !changed(x.name) {
			continue
		}
		if x.v < 1 {
			return scheduler.Speculative{}, fmt.Errorf("--%s: %d: at least 1", x.name, x.v)
		}
		*x.dst = x.v
		if sc.Method == "" && sc.Model == "" {
			return scheduler.Speculative{}, fmt.Errorf("--%s needs --speculative ngram or --speculative-model", x.name)
		}
		if strings.HasPrefix(x.name, "prompt-lookup") && (sc.Model != "" || sc.Method == scheduler.SpecDraft) {
			return scheduler.Speculative{}, fmt.Errorf("--%s is for --speculative ngram, not a draft model", x.name)
		}
	}
	if sc.Method == "" && sc.Model == "" && f.specConfig == "" {
		return scheduler.Speculative{}, nil
	}
	sp, err := sc.Speculative()
	if err != nil {
		switch msg := err.Error(); {
		case strings.Contains(msg, "num_speculative_tokens") && changed("num-speculative-tokens"):
			flag = "--num-speculative-tokens"
		case strings.Contains(msg, "prompt_lookup_max") && changed("prompt-lookup-max"):
			flag = "--prompt-lookup-max"
		case strings.Contains(msg, "disable_by_batch_size") && changed("speculative-disable-by-batch-size"):
			flag = "--speculative-disable-by-batch-size"
		case strings.Contains(msg, "prompt_lookup_min") && changed("prompt-lookup-min"):
			flag = "--prompt-lookup-min"
		case f.specModel != "":
			flag = "--speculative-model"
		case strings.Contains(msg, "method") && f.specMethod != "":
			flag = "--speculative"
		}
		return sp, fmt.Errorf("%s: %w", flag, err)
	}
	return sp, nil
}

// configFlags names the flag behind each models.GenerativeConfig setting,
// for errors found once the model is known.
var configFlags = map[string]string{
	"MaxModelLen":          "--max-model-len",
	"MaxNumSeqs":           "--max-num-seqs",
	"KVMemoryBytes":        "--kv-cache-memory",
	"PrefixCacheBytes":     "--prefix-cache-memory",
	"Pooling":              "--pooling",
	"MatryoshkaDimensions": "--matryoshka-dimensions",
	"ReasoningParser":      "--reasoning-parser",
	"Task":                 "--task",
	"MaxLoRAs":             "--max-loras",
	"MMProj":               "--mmproj",
	"MaxImagePixels":       "--max-image-pixels",
	"MediaCacheBytes":      "--media-cache-memory",
	"Speculative":          "--speculative",
	"SpeculativeModel":     "--speculative-model",
}

// applyEnv sets every flag not given on the command line from
// LLMSERVE_<NAME>.
// flagAliases pairs flags that set the same value: the environment never
// overrides one given on the command line through the other.
var flagAliases = map[string]string{"shutdown-grace": "shutdown-timeout", "shutdown-timeout": "shutdown-grace"}

func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if err != nil || fl.Changed || (flagAliases[fl.Name] != "" && fs.Changed(flagAliases[fl.Name])) {
			return
		}
		key := "LLMSERVE_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok {
			if e := fs.Set(fl.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", key, v, e)
			}
		}
	})
	return err
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func newLogger(format, level string) (*slog.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// parseBytes reads sizes like 512MiB, 2GiB, 1e9 or 1000000.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	t := strings.TrimSpace(s)
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mul
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (KiB, MiB, GiB, KB, MB, GB)", s)
	}
	return int64(v * float64(mul)), nil
}

// parseMMProj reads the --mmproj flags: PATH (the first LLM's projector,
// key "") or NAME=PATH for the model --model NAME=... names.
func parseMMProj(flags []string, specs [][2]string) (map[string]string, error) {
	out := make(map[string]string, len(flags))
	for _, fl := range flags {
		name, path, ok := strings.Cut(fl, "=")
		if !ok {
			name, path = "", fl
		}
		if path == "" {
			return nil, fmt.Errorf("--mmproj %q: the path is empty", fl)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--mmproj %q: a second projector for the same model", fl)
		}
		if name != "" && !slices.ContainsFunc(specs, func(s [2]string) bool { return s[0] == name }) {
			return nil, fmt.Errorf("--mmproj %q: no --model is called %q", fl, name)
		}
		out[name] = path
	}
	return out, nil
}

// modelSpecs turns --model, --model-name and --model-dir into (name, path)
// pairs; an empty path is the embedded model.
func modelSpecs(f *serveFlags) ([][2]string, error) {
	var specs [][2]string
	for _, m := range f.models {
		name, path, ok := strings.Cut(m, "=")
		if !ok {
			name, path = "", m
		}
		if path == "" {
			return nil, fmt.Errorf("--model %q: the path is empty", m)
		}
		specs = append(specs, [2]string{name, path})
	}
	if f.modelDir != "" {
		path, err := findModelFile(f.modelDir)
		if err != nil {
			return nil, err
		}
		specs = append(specs, [2]string{"", path})
	}
	if len(specs) == 0 && f.modelRepository == "" {
		specs = append(specs, [2]string{"", ""})
	}
	if f.modelName != "" {
		if len(specs) != 1 {
			return nil, fmt.Errorf("--model-name names one model, but %d are configured", len(specs))
		}
		specs[0][0] = f.modelName
	}
	seen := map[string]bool{}
	for _, sp := range specs {
		name := sp[0]
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(sp[1]), filepath.Ext(sp[1]))
		}
		if sp[1] == "" && sp[0] == "" {
			name = "stories260K"
		}
		if seen[name] {
			return nil, fmt.Errorf("--model: two models are named %q; name them apart with NAME=PATH", name)
		}
		seen[name] = true
	}
	return specs, nil
}

// findModelFile returns the one model file in dir (KServe mounts the
// storage URI's content there): a .gguf (an LLM or a graph) or an .onnx
// (a tensor model), as the ServingRuntime's supported formats say.
func findModelFile(dir string) (string, error) {
	var matches []string
	for _, pattern := range []string{"*.gguf", "*.onnx"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return "", err
		}
		matches = append(matches, m...)
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("--model-dir %s: no .gguf or .onnx file in it", dir)
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("--model-dir %s: %d model files (%s); pass one with --model", dir, len(matches), strings.Join(matches, ", "))
}

func serve(ctx context.Context, f *serveFlags, wf *workerFlags) (err error) {
	set, err := f.validate()
	if err != nil {
		return err
	}
	if err := wf.validate(f); err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	llamacpp.SetLogger(log, set.llamaLog)
	log.Info("llmserve", "version", versionString(), "commit", vcsRevision(), "llama.cpp", llamacpp.LlamaCommit())

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registry := models.NewRegistry()
	defer func() {
		if cerr := registry.Close(); cerr != nil {
			log.Error("closing models", "err", cerr)
		}
	}()
	base := models.GenerativeConfig{
		CacheDir: f.cacheDir, ChatTemplate: set.tmpl, ReasoningParser: f.reasoningParser,
		GPULayers: f.gpuLayers, MainGPU: f.mainGPU, SplitMode: f.splitMode, NoMmap: f.noMmap, Mlock: f.mlock,
		Threads: f.threads, BatchThreads: f.batchThreads, Poll: f.poll, PauseEachStep: f.threadsSleep == "step", FlashAttention: f.flashAttn, KVType: f.kvType,
		MaxModelLen: f.maxModelLen, MaxNumSeqs: f.maxNumSeqs, InitialSeqs: f.initialSeqs, KVMemoryBytes: set.kvMem, LongPrefillTokens: f.longPrefill,
		MaxNumBatchedTokens: f.maxBatched, MaxWaiting: f.maxWaiting, PrefixCacheBytes: set.prefMem,
		RequestTimeout: f.requestTimeout, Pooling: f.pooling, MatryoshkaDimensions: f.matryoshka, Task: f.task,
		LoRARuntime: f.loraRuntimeUpdate, MaxLoRAs: f.maxLoRAs,
		Speculative: set.spec, MaxImagePixels: f.maxImagePixels, MediaCacheBytes: set.mediaMem,
	}
	mmprojs, err := parseMMProj(f.mmprojs, set.specs)
	if err != nil {
		return err
	}
	firstLLM := true
	loras := make([]models.LoRA, 0, len(f.loras))
	for _, l := range f.loras {
		lr, err := models.ParseLoRA(l)
		if err != nil {
			return fmt.Errorf("--lora: %w", err)
		}
		loras = append(loras, lr)
	}
	for _, s := range set.specs {
		if s[1] != "" && models.IsTensorFile(s[1]) {
			t, err := models.LoadTensor(models.TensorConfig{
				Name: s[0], Path: s[1], MaxBatchSize: f.maxBatchSize, ParallelWorkers: f.parallelWorkers, Threads: f.tensorThreads,
				MaxBatchTime: time.Duration(f.maxBatchTime * float64(time.Second)),
			}, log, reg)
			if err != nil {
				return err
			}
			if err := registry.AddTensor(t); err != nil {
				return errors.Join(fmt.Errorf("--model: %w", err), t.Close())
			}
			continue
		}
		cfg := base
		cfg.Name, cfg.Path = s[0], s[1]
		cfg.LoRAs, loras = loras, nil // the first LLM's
		cfg.MMProj = mmprojs[cfg.Name]
		if p, ok := mmprojs[""]; ok && firstLLM {
			cfg.MMProj = p
		}
		firstLLM = false
		g, err := models.LoadGenerative(cfg, log, reg)
		var ce *models.ConfigError
		if errors.As(err, &ce) && configFlags[ce.Setting] != "" {
			flag := configFlags[ce.Setting]
			if ce.Setting == "SpeculativeModel" && f.specModel == "" {
				flag = "--speculative-config" // its "model"
			}
			return fmt.Errorf("%s: %s", flag, ce.Msg)
		}
		var ae *models.AdapterError
		if errors.As(err, &ae) {
			return fmt.Errorf("--lora %s=%s: %w", ae.Name, ae.Path, ae.Err)
		}
		if err != nil {
			return err
		}
		if err := registry.Add(g); err != nil {
			return errors.Join(fmt.Errorf("--model: %w", err), g.Close())
		}
	}
	if len(loras) > 0 {
		return errors.New("--lora: no LLM is served (--model) to apply the adapters to")
	}

	// The tensor protocols' request counts (MLServer's counters, Triton
	// v1's statistics); an unloaded model's are dropped.
	inferStats, err := metrics.NewInfer(reg)
	if err != nil {
		return err
	}
	var repo *models.Repository
	if f.modelRepository != "" {
		if repo, err = models.NewRepository(models.RepositoryConfig{
			Dir: f.modelRepository, Base: base, TensorThreads: f.tensorThreads, Strict: f.strictReadiness, Logger: log, Registerer: reg,
			OnUnload: inferStats.Forget,
		}, registry); err != nil {
			return fmt.Errorf("--model-repository: %w", err)
		}
		repo.LoadAll(ctx)
	}
	workerSrv, err := newWorkerService(wf, f, registry, set.apiKeys, log, reg)
	if err != nil {
		return err
	}
	var kvTransfer openai.KVTransfer
	if f.grpcPort > 0 && repo == nil && len(set.specs) == 1 {
		kvTransfer = workerSrv
	}
	respStore, closeStore, err := openResponseStore(f, log)
	if err != nil {
		return err
	}
	defer closeStore()
	opts := apiOptions(f, set, registry, respStore, inferStats, reg, log)
	opts.KVTransfer, opts.Repository, opts.LoRARuntimeUpdates = kvTransfer, repo, f.loraRuntimeUpdate
	// --api-key covers the gRPC inference and worker services too.
	pub, err := openPublic(f, opts, workerpb.Worker_ServiceDesc.ServiceName)
	if err != nil {
		return err
	}
	defer pub.close()
	if pub.grpc != nil {
		v2grpc.Register(pub.grpc, api.V2Backend(registry), v2grpc.Options{Logger: log, Repository: api.V2Repository(repo), Infer: inferStats})
		tritonv1.Register(pub.grpc, api.V2Backend(registry), tritonv1.Options{Logger: log, Infer: inferStats, Repository: api.V2Repository(repo)})
	}
	// The internal worker service: on serve's gRPC server (so that a peer
	// pulls KV through vLLM's kv_transfer_params), and on --worker-port for
	// `llmserve worker`.
	if pub.grpc != nil {
		workerSrv.Register(pub.grpc)
	}
	grpcSrvs := []*grpc.Server{pub.grpc}
	var workerLn net.Listener
	if wf != nil {
		if workerLn, err = net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(wf.port))); err != nil {
			pub.closeListeners()
			return fmt.Errorf("--worker-port: %w", err)
		}
		unaryAuth, streamAuth := v2grpc.AuthInterceptors(set.apiKeys, workerpb.Worker_ServiceDesc.ServiceName)
		ws := grpc.NewServer(grpc.MaxRecvMsgSize(workerMaxMessage), grpc.ChainUnaryInterceptor(unaryAuth), grpc.ChainStreamInterceptor(streamAuth))
		hs := health.NewServer()
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(ws, hs)
		workerSrv.Register(ws)
		defer hs.Shutdown()
		grpcSrvs = append(grpcSrvs, ws)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 3)
	var workerAttrs []any
	if workerLn != nil {
		go func() { errc <- grpcSrvs[len(grpcSrvs)-1].Serve(workerLn) }()
		workerAttrs = []any{"worker", workerLn.Addr().String(), "role", wf.role}
	}
	pub.serve(errc, log, workerAttrs...)

	if err := awaitStop(ctx, log, errc, f.shutdownTimeout); err != nil {
		return err
	}
	// Event watches (a head's) would hold GracefulStop for the whole grace.
	workerSrv.Close()
	return shutdown(log, pub.srv, pub.inflight, grpcSrvs, registry, f.shutdownTimeout)
}

// stopper is what shutdown drains and then stops: serve's registry of
// models, or the head's remote model.
type stopper interface {
	// Drain turns readiness off; running requests go on.
	Drain()
	// Stop ends the requests still running, with an error the client
	// sees, and returns how many.
	Stop() int64
}

// inflight counts the requests being handled, so that shutdown can wait
// for the handlers of cut requests to write their endings.
type inflight struct {
	next   http.Handler
	active atomic.Int64
	idle   chan struct{} // cap 1: "active reached 0"
}

func newInflight(next http.Handler) *inflight {
	return &inflight{next: next, idle: make(chan struct{}, 1)}
}

func (h *inflight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.active.Add(1)
	defer func() {
		if h.active.Add(-1) == 0 {
			select {
			case h.idle <- struct{}{}:
			default:
			}
		}
	}()
	h.next.ServeHTTP(w, r)
}

// wait returns when no request is being handled, or when ctx ends.
func (h *inflight) wait(ctx context.Context) {
	for h.active.Load() > 0 {
		select {
		case <-h.idle:
		case <-ctx.Done():
			return
		}
	}
}

// shutdown stops accepting requests and lets the running ones finish
// within grace. Then it stops the models: every request still running ends
// as the client sees it (a streamed answer with an error event and [DONE],
// a plain one with a 503; a gRPC call with UNAVAILABLE, a request on a
// ModelStreamInfer stream with an in-band error), and shutdown returns an
// error saying how many were cut, so that the process exits non-zero.
func shutdown(log *slog.Logger, srv *http.Server, inflight *inflight, grpcSrvs []*grpc.Server, registry stopper, grace time.Duration) error {
	registry.Drain()
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// gRPC calls finish like HTTP requests: within the grace period, after
	// which the models' Stop ends them (UNAVAILABLE, or an in-band error
	// on a stream) and they count as cut.
	grpcSrvs = slices.DeleteFunc(slices.Clone(grpcSrvs), func(g *grpc.Server) bool { return g == nil })
	grpcDone := make(chan struct{})
	go func() {
		for _, g := range grpcSrvs {
			g.GracefulStop()
		}
		close(grpcDone)
	}()
	if err := srv.Shutdown(graceCtx); err == nil {
		select {
		case <-grpcDone:
			return nil
		case <-graceCtx.Done():
		}
	}
	cut := registry.Stop()
	log.Warn("grace period over: ending the requests still running", "cut", cut)
	// The handlers of the cut requests now write their endings: wait for
	// them (a few seconds at most); then let net/http flush what they wrote
	// (a connection that never sent a request keeps Shutdown waiting, so
	// briefly), and close every connection.
	endCtx, cancelEnd := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelEnd()
	inflight.wait(endCtx)
	select {
	case <-grpcDone:
	case <-endCtx.Done():
		for _, g := range grpcSrvs {
			g.Stop()
		}
	}
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelFlush()
	if srv.Shutdown(flushCtx) != nil {
		srv.Close()
	}
	if cut > 0 {
		return fmt.Errorf("shutdown: %d request(s) were still running after the %s grace period and were ended with an error", cut, grace)
	}
	return nil
}

// public is what serve and head serve their clients on: the HTTP API on
// --http-port (inflight counts its requests for the shutdown), the public
// gRPC server on --grpc-port unless it is 0 (grpc and grpcLn nil then),
// and the metrics server on --metrics-port.
type public struct {
	httpLn, grpcLn net.Listener
	srv            *http.Server
	inflight       *inflight
	// grpc is newPublicGRPC's server; the caller registers the protocols
	// on it before serve.
	grpc *grpc.Server
	// stops end the metrics server and the health service's watches.
	stops []func()
}

// openPublic builds the HTTP API from opts and opens the public ports
// for it and for the gRPC server (newPublicGRPC: its calls counted in
// opts.Registerer, opts.APIKeys required by the inference services and
// authServices), and starts the metrics server and the --pprof-addr
// profiles server; when one fails it closes what it opened.
func openPublic(f *serveFlags, opts api.Options, authServices ...string) (*public, error) {
	handler, err := api.NewHandler(opts)
	if err != nil {
		return nil, err
	}
	gm, err := metrics.NewGRPCServer(opts.Registerer)
	if err != nil {
		return nil, err
	}
	httpLn, grpcLn, err := listenPublic(f)
	if err != nil {
		return nil, err
	}
	p := &public{httpLn: httpLn, grpcLn: grpcLn, inflight: newInflight(handler)}
	stopMetrics, err := serveMetrics(f, opts.Gatherer, opts.Logger)
	if err != nil {
		p.closeListeners()
		return nil, err
	}
	p.stops = append(p.stops, stopMetrics)
	stopPprof, err := servePprof(f.pprofAddr, opts.Logger)
	if err != nil {
		p.close()
		p.closeListeners()
		return nil, err
	}
	p.stops = append(p.stops, stopPprof)
	p.srv = &http.Server{Handler: p.inflight, ReadHeaderTimeout: 30 * time.Second}
	if grpcLn != nil {
		var stopHealth func()
		p.grpc, stopHealth = newPublicGRPC(opts.Registry, gm, grpcMaxMessage(f), opts.APIKeys, authServices...)
		p.stops = append(p.stops, stopHealth)
	}
	return p, nil
}

// close stops the metrics server and the health watches.
func (p *public) close() {
	for _, stop := range slices.Backward(p.stops) {
		stop()
	}
}

// closeListeners closes the public ports of a process that fails before
// it serves them.
func (p *public) closeListeners() {
	p.httpLn.Close()
	if p.grpcLn != nil {
		p.grpcLn.Close()
	}
}

// serve serves HTTP, and gRPC when its port is open, each server's end
// going to errc, and logs the addresses (with attrs, the caller's other
// ports).
func (p *public) serve(errc chan<- error, log *slog.Logger, attrs ...any) {
	go func() { errc <- p.srv.Serve(p.httpLn) }()
	addrs := []any{"http", p.httpLn.Addr().String()}
	if p.grpcLn != nil {
		go func() { errc <- p.grpc.Serve(p.grpcLn) }()
		addrs = append(addrs, "grpc", p.grpcLn.Addr().String())
	}
	log.Info("serving", append(addrs, attrs...)...)
}

// awaitStop waits for ctx (a signal: the caller shuts down gracefully,
// within grace) or the first server to end; that one's error is returned
// unless it is http.ErrServerClosed.
func awaitStop(ctx context.Context, log *slog.Logger, errc <-chan error, grace time.Duration) error {
	select {
	case <-ctx.Done():
		log.Info("shutting down: no new requests; letting running ones finish", "grace", grace)
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// listenPublic opens the public ports: --http-port and, unless it is 0,
// --grpc-port (grpcLn nil then).
func listenPublic(f *serveFlags) (httpLn, grpcLn net.Listener, err error) {
	httpLn, err = net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.httpPort)))
	if err != nil {
		return nil, nil, fmt.Errorf("--http-port: %w", err)
	}
	if f.grpcPort > 0 {
		if grpcLn, err = net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.grpcPort))); err != nil {
			httpLn.Close()
			return nil, nil, fmt.Errorf("--grpc-port: %w", err)
		}
	}
	return httpLn, grpcLn, nil
}

// serveMetrics serves the metrics on --metrics-port (at
// --metrics-endpoint) when it is set, as MLServer's metrics server; stop
// closes it. Without it the HTTP port serves them (api.Options).
func serveMetrics(f *serveFlags, g prometheus.Gatherer, log *slog.Logger) (stop func(), err error) {
	if f.metricsPort == 0 {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.metricsPort)))
	if err != nil {
		return nil, fmt.Errorf("--metrics-port: %w", err)
	}
	srv := &http.Server{Handler: api.MetricsHandler(g, f.metricsEndpoint), ReadHeaderTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "path", f.metricsEndpoint)
	return func() { _ = srv.Close() }, nil
}

// newPublicGRPC returns the public gRPC server, as serve and head share
// it: every call counted in gm (MLServer's grpc_server_* metrics, refused
// ones included), calls tracked by registry (unloading a model waits for
// them), API keys required by the inference services (V2's, Triton v1's)
// and authServices, grpc.health.v1 serving, and messages received up to
// maxMsg bytes (grpcMaxMessage; grpc-go's own default is 4 MiB), calls
// served by a pool of stream workers and large raw tensors read in place
// (v2grpc.ServerCodec); stopHealth ends the health service's watches.
func newPublicGRPC(registry *models.Registry, gm *grpcprom.ServerMetrics, maxMsg int, apiKeys []string, authServices ...string) (srv *grpc.Server, stopHealth func()) {
	authServices = append([]string{tritonpb.GRPCService_ServiceDesc.ServiceName}, authServices...)
	unaryAuth, streamAuth := v2grpc.AuthInterceptors(apiKeys, authServices...)
	unaryTrack, streamTrack := api.GRPCTracking(registry)
	srv = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMsg),
		// Calls run on a few long-lived goroutines (more are started when
		// all are busy) instead of one new goroutine each, whose stack
		// then grows through the interceptors and the handler: stack
		// copying was 9 % of the server's CPU for one-row calls at c=1.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		v2grpc.ServerCodec(), // a large request's raw tensors are read in place
		grpc.ChainUnaryInterceptor(gm.UnaryServerInterceptor(), unaryTrack, unaryAuth),
		grpc.ChainStreamInterceptor(gm.StreamServerInterceptor(), streamTrack, streamAuth))
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	return srv, hs.Shutdown
}

// workerMaxMessage is the largest message the worker port takes, and a
// head takes from its workers: a head's Generate request carries its
// prompt's encoded images and audio (rows × n_embd float32s each: tens of
// MiB for a large image of a large model) and PrepareMedia the client's
// files, far past grpc-go's 4 MiB default.
const workerMaxMessage = 1 << 30

// grpcMaxMessage is the largest gRPC message the public server takes:
// --max-body-bytes when set, else the V2 REST body limit (64 MiB), so
// that a tensor the REST route takes is not refused over gRPC by
// grpc-go's 4 MiB default.
func grpcMaxMessage(f *serveFlags) int {
	if f.maxBodyBytes > 0 {
		return int(min(f.maxBodyBytes, math.MaxInt32))
	}
	return v2.DefaultMaxBodyBytes
}

// openResponseStore opens the Responses API's store as the flags say: in
// memory, or in --responses-store-dir to survive restarts. The process
// that serves HTTP (serve, or head) owns it.
func openResponseStore(f *serveFlags, log *slog.Logger) (st *store.Store, closeStore func(), err error) {
	st, err = store.Open(store.Config{Size: f.responsesStoreSize, Dir: f.responsesStoreDir})
	if err != nil {
		return nil, nil, fmt.Errorf("--responses-store-dir: %w", err)
	}
	return st, func() {
		if err := st.Close(); err != nil {
			log.Error("close the responses store", "err", err)
		}
	}, nil
}

// apiOptions are the api.Options that serve and head share: what the
// flags say about the public HTTP API, and the registry (serve's models,
// or the head's requests in flight), the Responses store and the
// metrics that both pass in.
func apiOptions(f *serveFlags, set *settings, registry *models.Registry, st *store.Store, infer *metrics.Infer, reg *prometheus.Registry, log *slog.Logger) api.Options {
	return api.Options{
		Registry: registry, ResponseStore: st, Infer: infer, Logger: log, Registerer: reg, Gatherer: reg,
		MetricsPath: f.metricsEndpoint, NoMetricsRoute: f.metricsPort != 0,
		APIKeys: set.apiKeys, MaxBodyBytes: f.maxBodyBytes, Media: f.media.options(),
		CORS: api.CORSOptions{
			AllowedOrigins: f.allowedOrigins, AllowedMethods: f.allowedMethods,
			AllowedHeaders: f.allowedHeaders, AllowCredentials: f.allowCredentials,
		},
	}
}
