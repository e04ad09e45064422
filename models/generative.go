package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/engine"
	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models/stories260k"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// BlockSize is the prefix cache's block size in tokens.
const BlockSize = 16

// GenerativeConfig says how to load and serve one generative model. Zero
// values mean the documented defaults; every setting is checked at load
// and a bad one is a *ConfigError naming it.
type GenerativeConfig struct {
	// Name is the id clients use; default: the file's base name, or
	// "stories260K" for the embedded model.
	Name string
	// Path is the GGUF file; "" serves the embedded stories260K.
	Path string
	// Version is the version the V2 protocol serves the model as; ""
	// means "1". The model repository sets it from the version folder.
	Version string
	// Triton is the model's Triton configuration when the model
	// repository loaded it from a config.pbtxt (TritonConfig reports it),
	// else nil.
	Triton *tc.ModelConfig
	// Task is the model's V2 task: TaskGenerate ("" too) or TaskEmbed,
	// whose V2 infer answers embeddings.
	Task string
	// CacheDir is where the embedded model is written for llama.cpp to
	// map; "" means the user cache dir.
	CacheDir string
	// ChatTemplate, when set, replaces the model's Jinja chat template.
	ChatTemplate string
	// ReasoningParser, when set (one of tokenizer.ReasoningParsers), splits
	// chat answers into reasoning_content and content.
	ReasoningParser string

	// Engine placement and threads.
	GPULayers      int
	MainGPU        int
	SplitMode      string
	NoMmap         bool
	Mlock          bool
	Threads        int  // default 1
	BatchThreads   int  // default Threads
	Poll           int  // ggml's polling level, 0..100
	PauseEachStep  bool // ggml's threads sleep after every step, not only when idle
	FlashAttention string
	// KVType is the KV cache element type (f16, f32, bf16, q8_0, q4_0).
	KVType string

	// MaxModelLen caps prompt plus output per sequence; 0 means the
	// model's training context length, which it may not exceed.
	MaxModelLen int
	// MaxNumSeqs is the most sequences running at once (default 1). Each
	// has a KV stream of MaxModelLen positions: address space only, when
	// the KV memory is paged (in host memory), whose pages are committed
	// as its positions are written.
	MaxNumSeqs int
	// InitialSeqs is how many KV streams are allocated at start-up (0:
	// MaxNumSeqs). The KV memory grows to MaxNumSeqs streams when requests
	// wait for one, and shrinks back after a minute without work. KV on a
	// GPU (GPULayers != 0) ignores it: all MaxNumSeqs streams are allocated
	// at start-up and never resized (see size).
	InitialSeqs int
	// KVMemoryBytes, when > 0, caps the KV memory. Paged KV (in host
	// memory, GPULayers 0): the positions all running sequences hold
	// together, admitted and preempted by tokens in use. KV on a GPU:
	// MaxNumSeqs streams of MaxModelLen positions; MaxNumSeqs is lowered to
	// fit, with a warning.
	KVMemoryBytes int64
	// MaxNumBatchedTokens and MaxWaiting bound the scheduler (default 2048
	// and 512; the former is raised to MaxNumSeqs if below).
	MaxNumBatchedTokens int
	MaxWaiting          int
	// LongPrefillTokens makes prompts with more than this many tokens to
	// compute long: while other sequences decode, long prompts compute
	// only what keeps a step near three decode steps (vLLM's
	// long_prefill_token_threshold, paced by measured step times); 0 turns
	// it off.
	LongPrefillTokens int
	// PrefixCacheBytes is the host memory for cached prefixes; 0 turns
	// prefix caching off.
	PrefixCacheBytes int64
	// Speculative turns on speculative decoding (vLLM's
	// --speculative-config): Method "ngram" proposes draft tokens by
	// prompt lookup; method "draft" with a draft model's GGUF (Model)
	// proposes them with that model, loaded beside the target with the
	// same GPU settings and the target's vocabulary (engine/llamacpp,
	// draft.go); zero counts take scheduler.Speculative.WithDefaults. An
	// error about the draft model's file is a ConfigError for
	// "SpeculativeModel".
	Speculative scheduler.Speculative
	// RequestTimeout, when positive, is every request's deadline.
	RequestTimeout time.Duration

	// Pooling is how embeddings pool a sequence: "mean", "cls", "last",
	// "rank" (a reranker's classifier head) or "none" (no embeddings); ""
	// means the GGUF's {arch}.pooling_type, or "last" when it has none, as
	// vLLM pools decoder models.
	Pooling string
	// MatryoshkaDimensions lists the output sizes the model was trained to
	// be truncated to (Matryoshka representation learning); embedding
	// requests may ask for one of them with "dimensions". Empty: none.
	MatryoshkaDimensions []int

	// LoRAs are LoRA adapters served with the model, each as a model of
	// its own (models/lora.go). LoRARuntime lets adapters be loaded at
	// run time (Registry.LoadAdapter) even when LoRAs is empty. Either
	// builds the engine's contexts for adapters (engine/llamacpp, "LoRA
	// adapters"). MaxLoRAs caps the adapters running at once
	// (scheduler.Config.MaxLoRAs; 0: no cap).
	LoRAs       []LoRA
	LoRARuntime bool
	MaxLoRAs    int

	// MMProj is a multimodal projector GGUF (llama.cpp's --mmproj): with
	// it, chat prompts may carry images (and audio, when the projector
	// encodes it). MaxImagePixels bounds an image's width × height (0:
	// DefaultMaxImagePixels); MediaCacheBytes bounds the cache of encoded
	// items (0: DefaultMediaCacheBytes). See models/media.go.
	MMProj          string
	MaxImagePixels  int
	MediaCacheBytes int64

	// WrapExecutor, when set, wraps each executor the model's engine core
	// starts (at load, and again after an executor failure), given the
	// model's vocabulary. No flag or settings file sets it: it is for Go
	// programs that embed the runtime, such as end-to-end tests that put
	// an engine double (enginetest.Scripted) under a real model.
	WrapExecutor func(engine.Executor, tokenizer.Vocab) engine.Executor
}

// The V2 tasks of GenerativeConfig.Task.
const (
	TaskGenerate = "generate"
	TaskEmbed    = "embed"
)

// ConfigError is a setting that cannot work with the model. Setting is the
// GenerativeConfig field.
type ConfigError struct {
	Setting string
	Msg     string
}

func (e *ConfigError) Error() string { return e.Setting + ": " + e.Msg }

// Generative is a loaded generative model being served.
type Generative struct {
	name    string
	created int64
	maxLen  int
	timeout time.Duration
	info    llamacpp.Info
	pooling string
	mrl     []int
	// reasoning is the reasoning parser's name, "" for none.
	reasoning string
	version   string
	task      string
	triton    *tc.ModelConfig

	model *llamacpp.Model
	draft *llamacpp.Model // the draft model, or nil
	path  string
	tok   *tokenizer.Tokenizer
	core  *core.EngineCore

	// lora is set when the contexts are built for LoRA adapters; adapters
	// are the served ones by name, guarded by adaptersMu.
	lora       bool
	adaptersMu sync.Mutex
	adapters   map[string]*Adapter

	// proj is the multimodal projector, nil without one.
	proj *projector

	stop    context.CancelFunc
	stopped chan struct{}
	runErr  error // set before stopped closes
	log     *slog.Logger
}

// LoadGenerative loads a model, starts its engine core and registers its
// metrics on reg (which may be nil).
func LoadGenerative(cfg GenerativeConfig, log *slog.Logger, reg prometheus.Registerer) (_ *Generative, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := cfg.Path
	name := cfg.Name
	if path == "" {
		if path, err = stories260k.File(cfg.CacheDir); err != nil {
			return nil, err
		}
		if name == "" {
			name = stories260k.Name
		}
	}
	if name == "" {
		name = baseName(path)
	}
	version, task := cfg.Version, cfg.Task
	if version == "" {
		version = "1"
	}
	switch task {
	case "":
		task = TaskGenerate
	case TaskGenerate, TaskEmbed:
	default:
		return nil, &ConfigError{"Task", fmt.Sprintf("%q is not %s or %s", task, TaskGenerate, TaskEmbed)}
	}
	if cfg.ReasoningParser != "" && !slices.Contains(tokenizer.ReasoningParsers(), cfg.ReasoningParser) {
		return nil, &ConfigError{"ReasoningParser", fmt.Sprintf("%q is not one of %s", cfg.ReasoningParser, strings.Join(tokenizer.ReasoningParsers(), ", "))}
	}
	spec := cfg.Speculative.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, &ConfigError{"Speculative", err.Error()}
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	start := time.Now()
	m, err := llamacpp.Load(path, llamacpp.ModelParams{
		GPULayers: cfg.GPULayers, MainGPU: cfg.MainGPU, SplitMode: cfg.SplitMode, NoMmap: cfg.NoMmap, Mlock: cfg.Mlock,
	})
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.Close())
		}
	}()
	info := m.Info()
	draft, err := loadDraft(spec, path, cfg, m)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	defer func() {
		if err != nil && draft != nil {
			err = errors.Join(err, draft.Close())
		}
	}()
	// A draft model keeps a KV stream per slot beside the target's, as
	// many positions as the target's: the KV memory cap and the sizes
	// count both.
	kvInfo := info
	if draft != nil {
		kvInfo.KVBytesPerToken += draft.Info().KVBytesPerToken
	}
	sz, err := size(cfg, kvInfo)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	if sz.lowered {
		log.Warn("max_num_seqs lowered to fit the KV memory cap: raise --kv-cache-memory or lower --max-model-len for more",
			"model", name, "asked", cfg.MaxNumSeqs, "max_num_seqs", sz.maxSeqs, "kv_memory_cap", cfg.KVMemoryBytes)
	}
	if sz.paged && sz.capacityTokens > 0 && sz.capacityTokens < sz.maxLen {
		log.Warn("the KV memory cap holds fewer tokens than max_model_len: longer sequences end (finish_reason length) and longer prompts are refused; raise --kv-cache-memory for more",
			"model", name, "kv_memory_cap", formatBytes(cfg.KVMemoryBytes), "tokens", sz.capacityTokens, "max_model_len", sz.maxLen)
	}
	tmpl := cfg.ChatTemplate
	if tmpl == "" {
		tmpl = info.ChatTemplate
	}
	tok, err := tokenizer.New(m, tmpl)
	if err != nil {
		return nil, fmt.Errorf("load model %q: chat template: %w", name, err)
	}
	pooling, err := resolvePooling(cfg, m)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	if task == TaskEmbed && (pooling == "none" || pooling == "rank") {
		return nil, fmt.Errorf("load model %q: %w", name, &ConfigError{"Task", fmt.Sprintf("embed needs embedding pooling (mean, cls or last), but the pooling is %s", pooling)})
	}
	for _, d := range cfg.MatryoshkaDimensions {
		if d < 1 || d > info.NEmbd {
			return nil, fmt.Errorf("load model %q: %w", name, &ConfigError{"MatryoshkaDimensions", fmt.Sprintf("%d is outside [1, %d] (the model's embedding size)", d, info.NEmbd)})
		}
	}
	g := &Generative{
		name: name, created: time.Now().Unix(), maxLen: sz.maxLen, timeout: cfg.RequestTimeout, info: info, reasoning: cfg.ReasoningParser,
		version: version, task: task, triton: cfg.Triton, pooling: pooling, mrl: slices.Clone(cfg.MatryoshkaDimensions),
		model: m, draft: draft, path: path, tok: tok, stopped: make(chan struct{}), log: log.With("model", name),
		lora: len(cfg.LoRAs) > 0 || cfg.LoRARuntime, adapters: make(map[string]*Adapter),
	}
	if cfg.MaxLoRAs < 0 {
		return nil, &ConfigError{"MaxLoRAs", fmt.Sprintf("%d is negative", cfg.MaxLoRAs)}
	}
	if g.proj, err = loadProjector(cfg, m); err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	for _, l := range cfg.LoRAs {
		if _, err := g.loadAdapter(l); err != nil {
			g.closeAdapters()
			g.closeProjector()
			return nil, fmt.Errorf("load model %q: %w", name, err)
		}
	}
	defer func() {
		if err != nil {
			g.closeAdapters()
			g.closeProjector()
		}
	}()
	ctxParams := llamacpp.ContextParams{
		Slots:          sz.maxSeqs,
		SlotTokens:     sz.maxLen,
		Threads:        max(cfg.Threads, 1),
		BatchThreads:   cfg.BatchThreads,
		Poll:           cfg.Poll,
		PauseEachStep:  cfg.PauseEachStep,
		FlashAttention: cfg.FlashAttention,
		KVType:         cfg.KVType,
		Pooling:        pooling,
		EmbedTokens:    sz.maxLen,
		LoRA:           g.lora,
		Draft:          draft,
	}
	var obs core.Observer
	var ec *core.EngineCore
	if reg != nil {
		em, err := metrics.NewEngine(reg, name, func() scheduler.Stats { return ec.Stats() }, func() bool { return ec.Ready() })
		if err != nil {
			return nil, fmt.Errorf("load model %q: metrics: %w", name, err)
		}
		obs = em
		if g.proj != nil {
			if err := metrics.NewMediaCache(reg, name, g.MediaCacheStats); err != nil {
				return nil, fmt.Errorf("load model %q: metrics: %w", name, err)
			}
		}
		if g.lora {
			if _, err := metrics.NewLoRA(reg, name, func() scheduler.Stats { return ec.Stats() }); err != nil {
				return nil, fmt.Errorf("load model %q: metrics: %w", name, err)
			}
		}
	}
	ec, err = core.New(core.Config{
		Scheduler: scheduler.Config{
			MaxNumSeqs: sz.maxSeqs, MaxNumBatchedTokens: sz.batchTokens, MaxWaiting: sz.maxWaiting, MaxModelLen: sz.maxLen,
			KVCapacityTokens: sz.capacityTokens, LongPrefillTokens: max(cfg.LongPrefillTokens, 0), MaxLoRAs: cfg.MaxLoRAs,
			Speculative: spec,
		},
		KV: kvcache.Config{
			BlockSize: BlockSize, Slots: sz.maxSeqs, InitialSlots: sz.initialSeqs, SlotTokens: sz.maxLen,
			CapacityTokens: sz.capacityTokens, CacheBytes: cfg.PrefixCacheBytes,
		},
		NewExecutor: func(slots int) (engine.Executor, error) {
			p := ctxParams
			p.Slots = slots
			x, err := llamacpp.NewContext(m, p)
			if err != nil || cfg.WrapExecutor == nil {
				return x, err
			}
			return cfg.WrapExecutor(x, m), nil
		},
		Logger:   g.log,
		Observer: obs,
	})
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	g.core = ec
	runCtx, stop := context.WithCancel(context.Background())
	g.stop = stop
	go func() {
		defer close(g.stopped)
		g.runErr = ec.Run(runCtx)
		if g.runErr != nil {
			g.log.Error("engine stopped", "err", g.runErr)
		}
	}()
	<-ec.Started()
	if !ec.Ready() {
		<-g.stopped
		return nil, fmt.Errorf("load model %q: %w", name, g.runErr)
	}
	kvDesc := describeKV(sz, cfg, kvInfo)
	if mem := ec.Stats().EngineKV; sz.paged && !mem.Paged {
		g.log.Warn("the KV memory is not paged: every KV stream commits its full capacity", "kv_streams", sz.initialSeqs,
			"committed", formatBytes(mem.Committed))
	}
	g.log.Info("model loaded",
		"path", path, "arch", info.Architecture, "params", info.NParams, "n_ctx_train", info.NCtxTrain,
		"max_model_len", sz.maxLen, "max_num_seqs", sz.maxSeqs, "max_num_batched_tokens", sz.batchTokens,
		"kv_cache", kvDesc,
		"prefix_cache", formatBytes(cfg.PrefixCacheBytes), "pooling", pooling, "threads", ctxParams.Threads, "flash_attn", cfg.FlashAttention,
		"chat_template", templateSource(cfg.ChatTemplate, info.ChatTemplate), "took", time.Since(start).Round(time.Millisecond))
	logMemoryCaps(g.log, int64(info.Size), kvCapBytes(sz, cfg, kvInfo), cfg.PrefixCacheBytes)
	return g, nil
}

// resolvePooling picks the embedding pooling: the setting, else the
// GGUF's, else last.
func resolvePooling(cfg GenerativeConfig, m *llamacpp.Model) (string, error) {
	declared := ""
	if v := m.Meta(m.Info().Architecture + ".pooling_type"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			declared = llamacpp.PoolingName(n)
		}
	}
	switch cfg.Pooling {
	case "mean", "cls", "last", "none":
		return cfg.Pooling, nil
	case "rank":
		// Rank pooling runs the model's classifier head; llama.cpp aborts
		// the process on a model without one.
		if declared != "rank" {
			return "", &ConfigError{"Pooling", "rank needs a reranker (cross-encoder) model whose GGUF declares rank pooling; this one does not"}
		}
		return "rank", nil
	case "":
	default:
		return "", &ConfigError{"Pooling", fmt.Sprintf("%q is not a pooling (want mean, cls, last, rank or none)", cfg.Pooling)}
	}
	if declared != "" && declared != "none" {
		return declared, nil
	}
	return "last", nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// kvBytesPerToken estimates one position's KV in every layer.
func kvBytesPerToken(info llamacpp.Info, kvType string) int {
	f16 := info.KVBytesPerToken
	switch kvType {
	case "f32":
		return 2 * f16
	case "q8_0":
		return f16 * 34 / 64
	case "q4_0":
		return f16 * 18 / 64
	}
	return f16
}

func kvTypeName(t string) string {
	if t == "" {
		return "f16"
	}
	return t
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func templateSource(override, model string) string {
	switch {
	case override != "":
		return "override"
	case model != "":
		return "model"
	default:
		return "fallback (ChatML)"
	}
}

type sizing struct {
	maxLen, maxSeqs, initialSeqs, batchTokens, maxWaiting int
	lowered                                               bool
	// paged: the KV memory is in host memory, where the binding commits a
	// stream's pages as positions are written. capacityTokens is then the
	// positions the KV memory cap holds (0: no cap).
	paged          bool
	capacityTokens int
}

// kvCapBytes is the most the KV memory may take: the tokens the cap holds
// (paged), or every stream's capacity (not paged, or paged without a cap).
func kvCapBytes(sz sizing, cfg GenerativeConfig, info llamacpp.Info) int64 {
	perTok := int64(kvBytesPerToken(info, cfg.KVType))
	if sz.paged && sz.capacityTokens > 0 {
		return int64(sz.capacityTokens) * perTok
	}
	return int64(sz.maxSeqs) * int64(roundUp(sz.maxLen, 256)) * perTok
}

// describeKV says what the KV memory holds, for the start-up log.
func describeKV(sz sizing, cfg GenerativeConfig, info llamacpp.Info) string {
	perTok := int64(kvBytesPerToken(info, cfg.KVType))
	if !sz.paged {
		perSeq := int64(roundUp(sz.maxLen, 256)) * perTok
		return fmt.Sprintf("not paged: %d sequences × %d positions, allocated at start-up and never resized (%s, %s)",
			sz.maxSeqs, roundUp(sz.maxLen, 256), formatBytes(int64(sz.maxSeqs)*perSeq), kvTypeName(cfg.KVType))
	}
	if sz.capacityTokens == 0 {
		return fmt.Sprintf("paged, no cap: memory follows the tokens in use (%s per token, %s); up to %d sequences of up to %d tokens",
			formatBytes(perTok), kvTypeName(cfg.KVType), sz.maxSeqs, sz.maxLen)
	}
	return fmt.Sprintf("paged: memory follows the tokens in use, up to %d tokens in %s (%s per token, %s): %d sequences of %d tokens, or one of %d",
		sz.capacityTokens, formatBytes(cfg.KVMemoryBytes), formatBytes(perTok), kvTypeName(cfg.KVType),
		sz.maxSeqs, sz.capacityTokens/sz.maxSeqs, min(sz.capacityTokens, sz.maxLen))
}

// size derives the engine and scheduler sizes from the configuration and
// the model.
func size(cfg GenerativeConfig, info llamacpp.Info) (sizing, error) {
	var s sizing
	s.maxLen = cfg.MaxModelLen
	switch {
	case s.maxLen < 0:
		return s, &ConfigError{"MaxModelLen", fmt.Sprintf("%d is negative", s.maxLen)}
	case s.maxLen == 0:
		s.maxLen = info.NCtxTrain
	case s.maxLen > info.NCtxTrain:
		return s, &ConfigError{"MaxModelLen", fmt.Sprintf("%d exceeds the model's trained context length of %d tokens", s.maxLen, info.NCtxTrain)}
	}
	if s.maxLen < 2 {
		return s, &ConfigError{"MaxModelLen", fmt.Sprintf("%d leaves no room to generate; it must be at least 2", s.maxLen)}
	}
	s.maxSeqs = max(cfg.MaxNumSeqs, 1)
	if s.maxSeqs > llamacpp.MaxSlots {
		return s, &ConfigError{"MaxNumSeqs", fmt.Sprintf("%d exceeds %d", s.maxSeqs, llamacpp.MaxSlots)}
	}
	// KV in host memory is paged by the binding (engine/llamacpp's
	// kvmem.go): a stream costs what its positions hold, and the cap bounds
	// the tokens in use. KV on a GPU is not: the cap bounds streams.
	s.paged = cfg.GPULayers == 0
	if perTok := int64(kvBytesPerToken(info, cfg.KVType)); s.paged && cfg.KVMemoryBytes > 0 && perTok > 0 {
		s.capacityTokens = int(cfg.KVMemoryBytes/perTok) / BlockSize * BlockSize
		if s.capacityTokens < 2*BlockSize {
			return s, &ConfigError{"KVMemoryBytes", fmt.Sprintf("%s holds %d tokens of KV (%s each); at least %d are needed", formatBytes(cfg.KVMemoryBytes), s.capacityTokens, formatBytes(perTok), 2*BlockSize)}
		}
	}
	if per := int64(roundUp(s.maxLen, 256)) * int64(kvBytesPerToken(info, cfg.KVType)); !s.paged && cfg.KVMemoryBytes > 0 && per > 0 {
		fit := cfg.KVMemoryBytes / per
		if fit < 1 {
			return s, &ConfigError{"KVMemoryBytes", fmt.Sprintf("%s cannot hold one sequence of %d tokens (%s)", formatBytes(cfg.KVMemoryBytes), s.maxLen, formatBytes(per))}
		}
		if int64(s.maxSeqs) > fit {
			s.maxSeqs, s.lowered = int(fit), true
		}
	}
	s.initialSeqs = s.maxSeqs
	// KV on a GPU is allocated whole at start-up and never resized: a
	// resize builds a second llama.cpp context and frees the first, and
	// with the CUDA backend llama_free of the old context crashed (SIGSEGV,
	// NVIDIA H200, CUDA 13.0, docs/BENCHMARKS.md "CUDA"). The cap already
	// bounds what it commits (MaxNumSeqs × MaxModelLen positions).
	if cfg.InitialSeqs > 0 && s.paged {
		s.initialSeqs = min(cfg.InitialSeqs, s.maxSeqs)
	}
	s.batchTokens = cfg.MaxNumBatchedTokens
	if s.batchTokens <= 0 {
		s.batchTokens = 2048
	}
	s.batchTokens = max(s.batchTokens, s.maxSeqs)
	s.maxWaiting = cfg.MaxWaiting
	if s.maxWaiting <= 0 {
		s.maxWaiting = 512
	}
	if cfg.PrefixCacheBytes < 0 {
		return s, &ConfigError{"PrefixCacheBytes", fmt.Sprintf("%d is negative", cfg.PrefixCacheBytes)}
	}
	return s, nil
}

// Name is the id clients use.
func (g *Generative) Name() string { return g.name }

// Version is the version the V2 protocol serves the model as.
func (g *Generative) Version() string { return g.version }

// TritonConfig is the model's Triton configuration (its config.pbtxt), nil
// when it was not loaded from one. The caller must not modify it.
func (g *Generative) TritonConfig() *tc.ModelConfig { return g.triton }

// Task is the model's V2 task, TaskGenerate or TaskEmbed.
func (g *Generative) Task() string { return g.task }

// Created is the Unix time the model was loaded.
func (g *Generative) Created() int64 { return g.created }

// MaxModelLen is the most tokens one sequence may hold.
func (g *Generative) MaxModelLen() int { return g.maxLen }

// ReasoningParser names the parser that splits chat answers into
// reasoning and content ("" for none); the OpenAI API uses it.
func (g *Generative) ReasoningParser() string { return g.reasoning }

// RequestTimeout is the deadline the server gives every request, or 0.
func (g *Generative) RequestTimeout() time.Duration { return g.timeout }

// Info describes the loaded model.
func (g *Generative) Info() llamacpp.Info { return g.info }

// Tokenizer returns the model's tokenizer.
func (g *Generative) Tokenizer() *tokenizer.Tokenizer { return g.tok }

// CheckGrammar reports whether the engine can use the GBNF grammar g
// (api/openai.GrammarChecker): llamacpp.Model.CheckGrammar.
func (g *Generative) CheckGrammar(gbnf string) error { return g.model.CheckGrammar(gbnf) }

// Path is the GGUF file the model was loaded from.
func (g *Generative) Path() string { return g.path }

// Core is the model's engine core, for what goes beyond Submit (KV
// transfer, cache events: api/worker).
func (g *Generative) Core() *core.EngineCore { return g.core }

// Stats returns the engine core's latest snapshot.
func (g *Generative) Stats() scheduler.Stats { return g.core.Stats() }

// Restarts is the number of times the engine failed and was restarted.
func (g *Generative) Restarts() uint64 { return g.core.Restarts() }

// Ready reports whether the model accepts requests.
func (g *Generative) Ready() bool { return g.core.Ready() }

// Idle reports whether the model has no request running or waiting.
func (g *Generative) Idle() bool { return g.core.Stats().Requests == 0 && g.core.Queued() == 0 }

// Pooling is how embeddings pool a sequence ("none": the model does not
// embed).
func (g *Generative) Pooling() string { return g.pooling }

// MatryoshkaDimensions lists the sizes embeddings may be truncated to.
func (g *Generative) MatryoshkaDimensions() []int { return g.mrl }

// MaxEmbedTokens is the longest input Embed takes.
func (g *Generative) MaxEmbedTokens() int { return g.maxLen }

// RerankTokens formats the pair (query, document) for a reranker (rank
// pooling) as llama.cpp's server does: through the GGUF's rerank template
// if it has one, else [BOS] query [EOS] [SEP] document [EOS] with the
// special tokens the vocabulary adds. Embed on the result returns the
// classifier's outputs for the pair.
func (g *Generative) RerankTokens(query, document string) ([]int32, error) {
	f := rerankFormat{
		template: g.info.RerankTemplate,
		addBOS:   g.info.AddBOS, addEOS: g.info.AddEOS, addSEP: g.info.AddSEP,
		bos: g.model.BOS(), eos: g.model.EOS(), sep: g.model.SEP(),
	}
	return f.tokens(g.model, query, document)
}

// Embed returns one pooled, unnormalized vector per input; see
// core.EngineCore.Embed.
func (g *Generative) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	return g.core.Embed(ctx, inputs)
}

// Submit starts generation; see core.EngineCore.Submit.
func (g *Generative) Submit(ctx context.Context, reqs []*scheduler.Request) ([]*core.Stream, error) {
	return g.core.Submit(ctx, reqs)
}

// Stop ends the requests still running (scheduler.ErrClosed) and stops the
// engine core; it returns how many requests it cut. Close after it frees
// the model.
func (g *Generative) Stop() int64 {
	g.stop()
	<-g.stopped
	return g.core.Cut()
}

// Close stops the engine core (ending live requests with
// scheduler.ErrClosed) and frees the model.
func (g *Generative) Close() error {
	g.Stop()
	g.closeAdapters()
	g.closeProjector()
	err := g.model.Close()
	if g.draft != nil {
		err = errors.Join(err, g.draft.Close())
	}
	return err
}

// loadDraft loads the draft model of method "draft" (nil for any other)
// with the target's GPU settings and checks that it has the target's
// vocabulary. Its errors are ConfigErrors for "SpeculativeModel" that
// name both files.
func loadDraft(spec scheduler.Speculative, target string, cfg GenerativeConfig, m *llamacpp.Model) (*llamacpp.Model, error) {
	if spec.Method != scheduler.SpecDraft {
		return nil, nil
	}
	bad := func(format string, a ...any) error {
		return &ConfigError{"SpeculativeModel", fmt.Sprintf("draft model %s: ", spec.Model) + fmt.Sprintf(format, a...)}
	}
	if fi, err := os.Stat(spec.Model); err != nil {
		return nil, bad("%v", err)
	} else if fi.IsDir() {
		return nil, bad("a folder, not a GGUF file")
	}
	if err := checkGGUF(spec.Model, ""); err != nil {
		return nil, bad("%v", err)
	}
	d, err := llamacpp.Load(spec.Model, llamacpp.ModelParams{
		GPULayers: cfg.GPULayers, MainGPU: cfg.MainGPU, SplitMode: cfg.SplitMode, NoMmap: cfg.NoMmap, Mlock: cfg.Mlock,
	})
	if err != nil {
		return nil, bad("%v", err)
	}
	if err := llamacpp.CheckDraftVocab(m, d); err != nil {
		return nil, errors.Join(bad("its vocabulary is not that of the model %s: %v", target, err), d.Close())
	}
	return d, nil
}

// closeProjector frees the projector, if any.
func (g *Generative) closeProjector() {
	if g.proj != nil {
		g.proj.p.Close()
	}
}

// ErrNotServed is returned for a model the registry does not hold.
var ErrNotServed = errors.New("models: no such model")
