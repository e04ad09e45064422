package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/engine/llamacpp"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/metrics"
	"github.com/llmserve/llmserve/models/stories260k"
	"github.com/llmserve/llmserve/scheduler"
	"github.com/llmserve/llmserve/tokenizer"
)

// BlockSize is the KV block size in tokens.
const BlockSize = 16

// GenerativeConfig says how to load and serve one generative model.
type GenerativeConfig struct {
	// Name is the id clients use; default: the file's base name, or
	// "stories260K" for the embedded model.
	Name string
	// Path is the GGUF file; "" serves the embedded stories260K.
	Path string
	// CacheDir is where the embedded model is written for llama.cpp to
	// map; "" means the user cache dir.
	CacheDir string
	// ChatTemplate, when set, replaces the model's Jinja chat template.
	ChatTemplate string

	// Engine placement and threads.
	GPULayers      int
	MainGPU        int
	SplitMode      string
	NoMmap         bool
	Mlock          bool
	Threads        int
	BatchThreads   int
	FlashAttention string
	// KVType is the KV cache element type (f16, f32, bf16, q8_0, q4_0).
	KVType string
	// BatchInvariant makes a greedy request's output independent of what
	// else runs (flash attention off; see flashAttention).
	BatchInvariant bool

	// MaxModelLen caps prompt plus output per sequence; 0 means the
	// model's training context length.
	MaxModelLen int
	// KVTokens is the total KV capacity shared by all sequences; 0 sizes
	// it to MaxNumSeqs*MaxModelLen, capped by KVMemoryBytes.
	KVTokens      int
	KVMemoryBytes int64
	// MaxNumSeqs, MaxNumBatchedTokens and MaxWaiting bound the scheduler
	// (0: 1, 2048 and 512).
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	MaxWaiting          int
	// NoPrefixCaching turns off the prefix cache.
	NoPrefixCaching bool
	// PrefixCacheTokens caps the idle KV kept for prefix reuse; 0 means
	// MaxModelLen tokens (one full-length prefix), < 0 no cap. Every query
	// scans every occupied cell of the unified KV, so idle cache slows every
	// step (kvcache/doc.go, docs/BENCHMARKS.md).
	PrefixCacheTokens int
	// RequestTimeout, when positive, is every request's deadline.
	RequestTimeout time.Duration
}

// Generative is a loaded generative model being served.
type Generative struct {
	name    string
	created int64
	maxLen  int
	timeout time.Duration
	kvTok   int
	info    llamacpp.Info

	model *llamacpp.Model
	ctx   *llamacpp.Context
	tok   *tokenizer.Tokenizer
	loop  *scheduler.Loop

	stop    context.CancelFunc
	stopped chan struct{}
	log     *slog.Logger
}

// LoadGenerative loads a model, starts its scheduler loop and registers its
// metrics on reg (which may be nil).
func LoadGenerative(cfg GenerativeConfig, log *slog.Logger, reg prometheus.Registerer) (_ *Generative, err error) {
	if log == nil {
		log = slog.Default()
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
			m.Close()
		}
	}()
	info := m.Info()
	sz, err := size(cfg, info)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	tmpl := cfg.ChatTemplate
	if tmpl == "" {
		tmpl = info.ChatTemplate
	}
	fa, err := flashAttention(cfg.FlashAttention, cfg.BatchInvariant)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	tok, err := tokenizer.New(m, tmpl)
	if err != nil {
		return nil, fmt.Errorf("load model %q: chat template: %w", name, err)
	}
	lctx, err := llamacpp.NewContext(m, llamacpp.ContextParams{
		KVTokens:       sz.kvTokens,
		Slots:          sz.maxSeqs + sz.holders,
		BatchTokens:    sz.batchTokens,
		Threads:        cfg.Threads,
		BatchThreads:   cfg.BatchThreads,
		FlashAttention: fa,
		KVType:         cfg.KVType,
	})
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	defer func() {
		if err != nil {
			lctx.Close()
		}
	}()
	kv, err := kvcache.New(kvcache.Config{
		BlockSize: BlockSize, NumBlocks: lctx.KVTokens() / BlockSize,
		RunSlots: sz.maxSeqs, HolderSlots: sz.holders, MaxSeqLen: sz.maxLen,
		MaxCachedBlocks: cachedBlocks(cfg.PrefixCacheTokens, sz.maxLen),
	})
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	sched, err := scheduler.New(scheduler.Config{
		MaxNumSeqs: sz.maxSeqs, MaxNumBatchedTokens: sz.batchTokens, MaxWaiting: sz.maxWaiting, MaxModelLen: sz.maxLen,
	}, kv)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", name, err)
	}
	g := &Generative{
		name: name, created: time.Now().Unix(), maxLen: sz.maxLen, timeout: cfg.RequestTimeout, kvTok: lctx.KVTokens(), info: info,
		model: m, ctx: lctx, tok: tok, stopped: make(chan struct{}), log: log.With("model", name),
	}
	var obs scheduler.Observer
	var loop *scheduler.Loop
	if reg != nil {
		em, err := metrics.NewEngine(reg, name, func() scheduler.Stats { return loop.Stats() })
		if err != nil {
			return nil, fmt.Errorf("load model %q: metrics: %w", name, err)
		}
		obs = em
	}
	loop = scheduler.NewLoop(sched, lctx, scheduler.LoopConfig{Logger: g.log, Observer: obs})
	g.loop = loop
	runCtx, stop := context.WithCancel(context.Background())
	g.stop = stop
	go func() {
		defer close(g.stopped)
		if err := loop.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			g.log.Error("scheduler loop stopped", "err", err)
		}
	}()
	g.log.Info("model loaded",
		"path", path, "arch", info.Architecture, "params", info.NParams, "n_ctx_train", info.NCtxTrain,
		"max_model_len", sz.maxLen, "kv_tokens", lctx.KVTokens(), "max_num_seqs", sz.maxSeqs,
		"max_num_batched_tokens", sz.batchTokens, "prefix_cache_slots", sz.holders,
		"flash_attn", fa, "prefix_cache_tokens", cachedBlocks(cfg.PrefixCacheTokens, sz.maxLen)*BlockSize,
		"chat_template", templateSource(cfg.ChatTemplate, info.ChatTemplate), "took", time.Since(start).Round(time.Millisecond))
	return g, nil
}

// flashAttention resolves the flash-attention setting. Batch-invariant mode
// needs it off: ggml's CPU flash-attention kernel accumulates V in half
// precision in KV-cell order, and in a unified KV cache a sequence's cells
// are not in position order once other sequences have come and gone, so
// greedy output would depend on the server's history and load (logit noise
// ~1e-3, enough to flip near ties). The plain path (matrix products and a
// softmax summed in double) keeps that noise near 1e-6, at a large cost in
// throughput at high concurrency (docs/BENCHMARKS.md).
func flashAttention(setting string, batchInvariant bool) (string, error) {
	if !batchInvariant {
		return setting, nil
	}
	if setting == "on" {
		return "", errors.New("flash attention on contradicts batch-invariant mode")
	}
	return "off", nil
}

// cachedBlocks turns the prefix-cache budget into blocks (see
// GenerativeConfig.PrefixCacheTokens).
func cachedBlocks(tokens, maxLen int) int {
	switch {
	case tokens < 0:
		return 0 // no cap
	case tokens == 0:
		tokens = maxLen
	}
	return max(tokens/BlockSize, 1)
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
	maxLen, kvTokens, maxSeqs, holders, batchTokens, maxWaiting int
}

// size derives the engine and scheduler sizes from the configuration and
// the model.
func size(cfg GenerativeConfig, info llamacpp.Info) (sizing, error) {
	var s sizing
	s.maxLen = cfg.MaxModelLen
	if s.maxLen <= 0 {
		s.maxLen = info.NCtxTrain
	}
	if s.maxLen < 2 {
		return s, fmt.Errorf("max model length %d < 2", s.maxLen)
	}
	s.maxSeqs = max(cfg.MaxNumSeqs, 1)
	if s.maxSeqs > llamacpp.MaxSlots {
		return s, fmt.Errorf("max_num_seqs %d exceeds %d", s.maxSeqs, llamacpp.MaxSlots)
	}
	if !cfg.NoPrefixCaching {
		s.holders = llamacpp.MaxSlots - s.maxSeqs
	}
	s.batchTokens = cfg.MaxNumBatchedTokens
	if s.batchTokens <= 0 {
		s.batchTokens = 2048
	}
	// Submit counts a request as waiting until it first runs, so a bound of
	// 0 would refuse everything: 0 means the CLI's default.
	s.maxWaiting = cfg.MaxWaiting
	if s.maxWaiting <= 0 {
		s.maxWaiting = 512
	}
	s.kvTokens = cfg.KVTokens
	if s.kvTokens <= 0 {
		s.kvTokens = s.maxSeqs * s.maxLen
		if cfg.KVMemoryBytes > 0 && info.KVBytesPerToken > 0 {
			s.kvTokens = min(s.kvTokens, int(cfg.KVMemoryBytes/int64(info.KVBytesPerToken)))
		}
		s.kvTokens = max(s.kvTokens, s.maxLen)
	}
	if s.kvTokens < s.maxLen {
		return s, fmt.Errorf("KV capacity of %d tokens is below the max model length %d; one sequence could never finish", s.kvTokens, s.maxLen)
	}
	return s, nil
}

// Name is the id clients use.
func (g *Generative) Name() string { return g.name }

// Created is the Unix time the model was loaded.
func (g *Generative) Created() int64 { return g.created }

// MaxModelLen is the most tokens one sequence may hold.
func (g *Generative) MaxModelLen() int { return g.maxLen }

// KVTokens is the KV capacity in tokens.
func (g *Generative) KVTokens() int { return g.kvTok }

// Info describes the loaded model.
func (g *Generative) Info() llamacpp.Info { return g.info }

// Tokenizer returns the model's tokenizer.
func (g *Generative) Tokenizer() *tokenizer.Tokenizer { return g.tok }

// Stats returns the scheduler's latest snapshot.
func (g *Generative) Stats() scheduler.Stats { return g.loop.Stats() }

// Ready reports whether the model accepts requests.
func (g *Generative) Ready() bool {
	select {
	case <-g.stopped:
		return false
	default:
		return true
	}
}

// Submit starts generation; see scheduler.Loop.Submit.
func (g *Generative) Submit(ctx context.Context, req *scheduler.Request) (*scheduler.Stream, error) {
	now := time.Now()
	if req.Arrival.IsZero() {
		req.Arrival = now
	}
	if req.Deadline.IsZero() && g.timeout > 0 {
		req.Deadline = now.Add(g.timeout)
	}
	return g.loop.Submit(ctx, req)
}

// Close stops the loop (ending live requests with scheduler.ErrClosed) and
// frees the engine.
func (g *Generative) Close() error {
	g.stop()
	<-g.stopped
	return errors.Join(g.ctx.Close(), g.model.Close())
}
