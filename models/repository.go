package models

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/clock"
	"github.com/llmserve/llmserve/models/runtime"
	tc "github.com/llmserve/llmserve/proto/tritonconfigpb"
	"github.com/llmserve/llmserve/scheduler"
)

// SettingsFile is the name of a model's settings file in its repository
// folder (MLServer's).
const SettingsFile = "model-settings.json"

// Model states in the repository index (Triton's names).
const (
	StateReady       = "READY"
	StateUnavailable = "UNAVAILABLE"
	StateLoading     = "LOADING"
	StateUnloading   = "UNLOADING"
)

// ErrNotInRepository is returned for a name that has no folder in the
// model repository.
var ErrNotInRepository = errors.New("models: no such model in the repository")

// ErrBusy is returned when a model is already being loaded or unloaded.
var ErrBusy = errors.New("models: the model is being loaded or unloaded")

// LoadError is a model that failed to load; Reason is what the index
// shows.
type LoadError struct {
	Name string
	Err  error
}

func (e *LoadError) Error() string { return fmt.Sprintf("failed to load model %q: %v", e.Name, e.Err) }
func (e *LoadError) Unwrap() error { return e.Err }

// ModelSettings is a model-settings.json: MLServer's names where they
// exist, and the LLM settings as GenerativeConfig has them. Every field is
// optional; an unknown key is an error naming it.
type ModelSettings struct {
	// Name is the model's name; it must be the folder's name when set.
	Name string `json:"name"`
	// Implementation is MLServer's runtime: "", "llmserve" or
	// "llama.cpp" for a model llmserve runs itself; anything else is a
	// custom runtime, a command line that llmserve runs with /bin/sh -c
	// in the model's folder and fronts (models/runtime), such as
	// "/usr/bin/python3 -m llmserve_runtime model:MyModel", or a Python
	// class path as MLServer writes it ("models.SumModel"), which
	// runtime.Command runs with runtimes/python.
	Implementation string `json:"implementation"`
	// Platform is a custom runtime's platform in its V2 metadata.
	Platform string `json:"platform"`
	// Inputs and Outputs are a custom runtime's V2 metadata (MLServer's
	// inputs and outputs); KServe V1 reads the inputs to turn instances
	// into tensors.
	Inputs  []runtime.TensorSpec `json:"inputs"`
	Outputs []runtime.TensorSpec `json:"outputs"`
	// MaxBatchSize is MLServer's adaptive batch size: for a tensor
	// model the most rows one run merges (<= 1: batching off); for an
	// LLM, max_num_seqs when that is not set.
	MaxBatchSize int `json:"max_batch_size"`
	// MaxBatchTime is MLServer's batching window in seconds: for a
	// tensor model how long a batch waits for more requests; an LLM's
	// batching is continuous, so it has no effect there.
	MaxBatchTime float64 `json:"max_batch_time"`
	// ParallelWorkers is MLServer's parallel_workers: for a tensor model
	// how many batches run at once (default 1); an LLM ignores it.
	ParallelWorkers int `json:"parallel_workers"`
	Parameters      struct {
		// URI is the model file, relative to the version folder (or
		// absolute); default: the one .gguf or .onnx file in it. A .onnx
		// file or a GGUF whose general.architecture is
		// "llmserve.graph" is a tensor model, any other GGUF an LLM.
		URI string `json:"uri"`
		// Version picks the version folder; default: the highest number.
		Version string `json:"version"`
		// Task is the model's V2 task: "generate" or "embed" (V2 infer
		// answers embeddings); default: the base configuration's.
		Task string `json:"task"`
		// Extra is MLServer's free-form settings for a custom runtime,
		// which reads them from the file (LLMSERVE_MODEL_SETTINGS).
		Extra map[string]any `json:"extra"`
		// ContentType is MLServer's default content type of the model's
		// requests; ContentTypes (llmserve's) the content types a custom
		// runtime's own codecs decode. A custom runtime's requests may
		// carry them besides the ones llmserve knows
		// (infer.CheckContentTypes).
		ContentType  string   `json:"content_type"`
		ContentTypes []string `json:"content_types"`
	} `json:"parameters"`

	MaxModelLen          int    `json:"max_model_len"`
	MaxNumSeqs           int    `json:"max_num_seqs"`
	KVInitialSeqs        int    `json:"kv_initial_seqs"`
	KVCacheMemoryBytes   int64  `json:"kv_cache_memory_bytes"`
	MaxNumBatchedTokens  int    `json:"max_num_batched_tokens"`
	MaxWaiting           int    `json:"max_waiting"`
	PrefixCacheBytes     *int64 `json:"prefix_cache_memory_bytes"`
	Pooling              string `json:"pooling"`
	MatryoshkaDimensions []int  `json:"matryoshka_dimensions"`
	// ChatTemplate is a file with a Jinja template, relative to the model
	// folder.
	ChatTemplate    string `json:"chat_template"`
	ReasoningParser string `json:"reasoning_parser"`
	KVCacheDtype    string `json:"kv_cache_dtype"`
	// RequestTimeout is a Go duration ("10m").
	RequestTimeout string `json:"request_timeout"`
	// LoRAAdapters are LoRA adapter GGUFs served with the model, each as
	// a model of its own; a relative path is in the model folder.
	// MaxLoRAs caps the adapters running at once.
	LoRAAdapters []LoRA `json:"lora_adapters"`
	MaxLoRAs     int    `json:"max_loras"`
	// SpeculativeConfig is vLLM's --speculative-config for the model.
	SpeculativeConfig *SpeculativeConfig `json:"speculative_config"`
	// MMProj is the model's multimodal projector GGUF (--mmproj); a
	// relative path is in the model folder.
	MMProj string `json:"mmproj"`
}

// SpeculativeConfig is vLLM's speculative_config: {"method": "ngram",
// "num_speculative_tokens": 5, "prompt_lookup_min": 2,
// "prompt_lookup_max": 5}, or {"method": "draft", "model":
// "draft.gguf", "num_speculative_tokens": 5} for a draft model (a
// "model" alone implies method "draft"; in model-settings.json a
// relative path is in the model's folder).
type SpeculativeConfig struct {
	Method               string `json:"method"`
	NumSpeculativeTokens int    `json:"num_speculative_tokens"`
	PromptLookupMin      int    `json:"prompt_lookup_min"`
	PromptLookupMax      int    `json:"prompt_lookup_max"`
	DisableByBatchSize   int    `json:"disable_by_batch_size"`
	Model                string `json:"model"`
}

// ParseSpeculativeConfig reads vLLM's --speculative-config JSON; unknown
// keys are errors that name them.
func ParseSpeculativeConfig(text string) (*SpeculativeConfig, error) {
	var c SpeculativeConfig
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("speculative config %q: %w", text, err)
	}
	return &c, nil
}

// Speculative is the scheduler's configuration for c, checked: its
// defaults filled in (scheduler.Speculative.WithDefaults) and out-of-range
// values refused with an error that names the key.
func (c *SpeculativeConfig) Speculative() (scheduler.Speculative, error) {
	sp := scheduler.Speculative{Method: c.Method, NumTokens: c.NumSpeculativeTokens, PromptLookupMin: c.PromptLookupMin, PromptLookupMax: c.PromptLookupMax, DisableByBatchSize: c.DisableByBatchSize, Model: c.Model}
	if c.Model != "" {
		if sp.Method != "" && sp.Method != scheduler.SpecDraft {
			return sp, fmt.Errorf("speculative model %q with method %q: a draft model goes with method %q", c.Model, sp.Method, scheduler.SpecDraft)
		}
		sp.Method = scheduler.SpecDraft
	}
	if sp.Method == "" && (sp.NumTokens != 0 || sp.PromptLookupMin != 0 || sp.PromptLookupMax != 0) {
		return sp, fmt.Errorf("speculative config without a method: set method to %q", scheduler.SpecNgram)
	}
	sp = sp.WithDefaults()
	return sp, sp.Validate()
}

// ReadSettings reads a model-settings.json; a missing file is the zero
// settings. Unknown keys and bad values are errors that name them.
func ReadSettings(path string) (*ModelSettings, error) {
	var s ModelSettings
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &s, nil
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	for i, t := range append(slices.Clone(s.Inputs), s.Outputs...) {
		if t.Name == "" {
			return nil, fmt.Errorf("%s: inputs and outputs need a name (entry %d has none)", filepath.Base(path), i)
		}
	}
	switch s.Parameters.Task {
	case "", "generate", "embed":
	default:
		return nil, fmt.Errorf("%s: parameters.task %q is not generate or embed", filepath.Base(path), s.Parameters.Task)
	}
	switch {
	case s.MaxBatchSize < 0:
		return nil, fmt.Errorf("%s: max_batch_size %d is negative", filepath.Base(path), s.MaxBatchSize)
	case s.MaxBatchTime < 0 || s.MaxBatchTime > 3600:
		return nil, fmt.Errorf("%s: max_batch_time %g is outside [0, 3600] seconds", filepath.Base(path), s.MaxBatchTime)
	case s.ParallelWorkers < 0:
		return nil, fmt.Errorf("%s: parallel_workers %d is negative", filepath.Base(path), s.ParallelWorkers)
	}
	for i, l := range s.LoRAAdapters {
		if l.Path == "" {
			return nil, fmt.Errorf("%s: lora_adapters entry %d has no path", filepath.Base(path), i)
		}
		if err := checkAdapterName(l.Name); err != nil {
			return nil, fmt.Errorf("%s: lora_adapters entry %d: %w", filepath.Base(path), i, err)
		}
	}
	if s.MaxLoRAs < 0 {
		return nil, fmt.Errorf("%s: max_loras %d is negative", filepath.Base(path), s.MaxLoRAs)
	}
	if s.RequestTimeout != "" {
		if d, err := time.ParseDuration(s.RequestTimeout); err != nil || d < 0 {
			return nil, fmt.Errorf("%s: request_timeout %q is not a duration such as 10m", filepath.Base(path), s.RequestTimeout)
		}
	}
	if s.SpeculativeConfig != nil {
		if _, err := s.SpeculativeConfig.Speculative(); err != nil {
			return nil, fmt.Errorf("%s: speculative_config: %w", filepath.Base(path), err)
		}
	}
	return &s, nil
}

// IsRuntime reports whether the settings name a custom runtime.
func (s *ModelSettings) IsRuntime() bool {
	switch s.Implementation {
	case "", "llmserve", "llama.cpp":
		return false
	}
	return true
}

// settingsKeys names the settings key behind each GenerativeConfig field,
// for errors found at load.
var settingsKeys = map[string]string{
	"MaxModelLen": "max_model_len", "MaxNumSeqs": "max_num_seqs", "KVMemoryBytes": "kv_cache_memory_bytes",
	"PrefixCacheBytes": "prefix_cache_memory_bytes", "Pooling": "pooling", "MatryoshkaDimensions": "matryoshka_dimensions",
	"ReasoningParser": "reasoning_parser", "Task": "parameters.task", "MaxLoRAs": "max_loras", "Speculative": "speculative_config",
	"MMProj":           "mmproj",
	"SpeculativeModel": "speculative_config.model",
}

// apply lays the settings over base.
func (s *ModelSettings) apply(base GenerativeConfig, modelDir string) (GenerativeConfig, error) {
	c := base
	set := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	set(&c.MaxNumSeqs, s.MaxBatchSize)
	set(&c.MaxNumSeqs, s.MaxNumSeqs)
	set(&c.MaxModelLen, s.MaxModelLen)
	set(&c.InitialSeqs, s.KVInitialSeqs)
	set(&c.MaxNumBatchedTokens, s.MaxNumBatchedTokens)
	set(&c.MaxWaiting, s.MaxWaiting)
	if s.KVCacheMemoryBytes != 0 {
		c.KVMemoryBytes = s.KVCacheMemoryBytes
	}
	if s.PrefixCacheBytes != nil {
		c.PrefixCacheBytes = *s.PrefixCacheBytes
	}
	if s.Pooling != "" {
		c.Pooling = s.Pooling
	}
	if s.MatryoshkaDimensions != nil {
		c.MatryoshkaDimensions = s.MatryoshkaDimensions
	}
	if s.ReasoningParser != "" {
		c.ReasoningParser = s.ReasoningParser
	}
	if s.KVCacheDtype != "" {
		c.KVType = s.KVCacheDtype
	}
	if s.RequestTimeout != "" {
		c.RequestTimeout, _ = time.ParseDuration(s.RequestTimeout)
	}
	if s.ChatTemplate != "" {
		b, err := os.ReadFile(filepath.Join(modelDir, s.ChatTemplate))
		if err != nil {
			return c, fmt.Errorf("chat_template: %w", err)
		}
		c.ChatTemplate = string(b)
	}
	if s.Parameters.Task != "" {
		c.Task = s.Parameters.Task
	}
	// Projectors are per model, like adapters.
	c.MMProj = ""
	if s.MMProj != "" {
		c.MMProj = s.MMProj
		if !filepath.IsAbs(c.MMProj) {
			c.MMProj = filepath.Join(modelDir, c.MMProj)
		}
	}
	// Adapters are per model: --lora's are for the model --model serves.
	c.LoRAs = nil
	if len(s.LoRAAdapters) > 0 {
		for _, l := range s.LoRAAdapters {
			if !filepath.IsAbs(l.Path) {
				l.Path = filepath.Join(modelDir, l.Path)
			}
			c.LoRAs = append(c.LoRAs, l)
		}
	}
	if s.MaxLoRAs != 0 {
		c.MaxLoRAs = s.MaxLoRAs
	}
	if s.SpeculativeConfig != nil {
		sp, err := s.SpeculativeConfig.Speculative()
		if err != nil {
			return c, fmt.Errorf("speculative_config: %w", err)
		}
		if sp.Model != "" && !filepath.IsAbs(sp.Model) {
			sp.Model = filepath.Join(modelDir, sp.Model)
		}
		c.Speculative = sp
	}
	return c, nil
}

// RepositoryConfig configures a Repository.
type RepositoryConfig struct {
	// Dir holds one folder per model.
	Dir string
	// Base is every model's configuration before its settings file.
	Base GenerativeConfig
	// TensorThreads is the CPU threads each tensor model computes with in
	// all, split between its parallel workers (TensorConfig.Threads; 0:
	// the default there).
	TensorThreads int
	// Strict makes the server ready only when every model in the
	// repository is (Triton's --strict-readiness).
	Strict bool
	// DrainTimeout bounds how long Unload waits for running requests
	// before it cuts them (default 5 minutes).
	DrainTimeout time.Duration
	// Clock times the drain (nil: clock.Real).
	Clock clock.Clock
	// RuntimeStartTimeout bounds how long a custom runtime's process may
	// take to answer that it is ready (0: models/runtime's default, 2
	// minutes).
	RuntimeStartTimeout time.Duration
	Logger              *slog.Logger
	// Registerer receives each loaded model's metrics, which unloading
	// removes; nil: none.
	Registerer prometheus.Registerer
	// OnUnload, when set, is called with a model's name and version once
	// that version is unloaded (or replaced by a reload of another
	// version), for what others keep per model version (the tensor
	// protocols' request counts, metrics.Infer).
	OnUnload func(name, version string)
}

// Repository is a model repository on disk (Triton's layout, MLServer's
// settings) whose models it loads into and unloads from a Registry at run
// time. It is safe for concurrent use.
type Repository struct {
	cfg RepositoryConfig
	reg *Registry
	log *slog.Logger

	mu      sync.Mutex
	entries map[string]*repoEntry // guarded by mu
}

type repoEntry struct {
	version, state, reason string
	// busy is set while a load or an unload runs; a second one is refused.
	busy    bool
	metrics *trackingRegisterer
}

// IndexEntry is one model of the repository index.
type IndexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// NewRepository opens the repository in cfg.Dir for reg and makes reg's
// readiness the repository's (see Ready). It loads nothing; LoadAll does.
func NewRepository(cfg RepositoryConfig, reg *Registry) (*Repository, error) {
	st, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", cfg.Dir)
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Minute
	}
	cfg.Clock = clock.Or(cfg.Clock)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Repository{cfg: cfg, reg: reg, log: log, entries: map[string]*repoEntry{}}
	reg.setReadiness(r.ready)
	if cfg.Registerer != nil {
		// One collector for every custom runtime's own metrics: a
		// runtime's metrics are unknown in advance (an unchecked
		// collector), and Prometheus cannot unregister those, so they are
		// not registered per model.
		if err := cfg.Registerer.Register(runtimeMetrics{reg}); err != nil {
			return nil, fmt.Errorf("custom runtime metrics: %w", err)
		}
	}
	return r, nil
}

// names lists the model folders.
func (r *Repository) names() []string {
	des, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		r.log.Error("reading the model repository", "dir", r.cfg.Dir, "err", err)
		return nil
	}
	var out []string
	for _, de := range des {
		if de.IsDir() && !strings.HasPrefix(de.Name(), ".") {
			out = append(out, de.Name())
		}
	}
	return out
}

// LoadAll loads every model in the repository; failures are logged and
// shown in the index, and the others load.
func (r *Repository) LoadAll(ctx context.Context) {
	for _, name := range r.names() {
		if err := r.Load(ctx, name); err != nil {
			r.log.Error("model failed to load", "model", name, "err", err)
		}
	}
}

// Index lists every model in the repository and every model it loaded,
// by name, with its state (READY, UNAVAILABLE, LOADING, UNLOADING) and,
// for one that failed or was unloaded, the reason. With readyOnly, only
// the ready ones.
func (r *Repository) Index(readyOnly bool) []IndexEntry {
	names := r.names()
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.entries {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]IndexEntry, 0, len(names))
	for _, n := range names {
		e := IndexEntry{Name: n}
		if en, ok := r.entries[n]; ok {
			e.Version, e.State, e.Reason = en.version, en.state, en.reason
			if e.State == StateReady {
				if g, ok := r.reg.lookup(n); ok && !g.Ready() {
					e.State, e.Reason = StateUnavailable, "the engine is restarting"
					if _, rt := g.(*runtime.Model); rt {
						e.State, e.Reason = StateUnavailable, "its runtime process is restarting"
					}
				}
			}
		}
		if readyOnly && e.State != StateReady {
			continue
		}
		out = append(out, e)
	}
	return out
}

// validName reports whether name can be a folder of the repository.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !strings.HasPrefix(name, ".")
}

// begin marks name busy with state, or fails if it is.
func (r *Repository) begin(name, state string) (*repoEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		e = &repoEntry{}
		r.entries[name] = e
	}
	if e.busy {
		what := strings.ToLower(e.state)
		if e.state == StateReady {
			what = "reloading"
		}
		return nil, fmt.Errorf("%w: %q is %s", ErrBusy, name, what)
	}
	e.state, e.reason, e.busy = state, "", true
	return e, nil
}

func (r *Repository) finish(e *repoEntry, state, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.state, e.reason, e.busy = state, reason, false
}

// Load loads the model in the folder name, or reloads it when it is
// loaded. A model that fails to load is a *LoadError; the other models
// keep serving. A first load that fails leaves the model UNAVAILABLE in
// the index with the reason. A reload builds the new model beside the one
// serving and swaps them in one step, so no request finds the name
// missing; when the new one fails, the old one keeps serving (READY, the
// reason naming the failed reload), as Triton does. Once swapped, the old
// model's requests finish (up to DrainTimeout) before it is freed; the
// two are in memory together until then.
func (r *Repository) Load(ctx context.Context, name string) error {
	dir := filepath.Join(r.cfg.Dir, name)
	if st, err := os.Stat(dir); !validName(name) || err != nil || !st.IsDir() {
		return fmt.Errorf("%w: %q (no folder %s)", ErrNotInRepository, name, dir)
	}
	old, reloading := r.reg.lookup(name)
	state := StateLoading
	if reloading {
		state = StateReady
	}
	e, err := r.begin(name, state)
	if err != nil {
		return err
	}
	oldVersion := e.version
	// A reload registers the new model's metrics only once the old
	// one's are gone: the two carry the same labels.
	tr := &trackingRegisterer{reg: r.cfg.Registerer, deferred: reloading}
	lc, err := r.config(name, dir)
	var m served
	if err == nil {
		m, err = r.build(lc, tr)
	}
	if err == nil {
		if reloading {
			err = r.reg.replace(name, m)
		} else {
			err = r.reg.add(m)
		}
		if err != nil {
			err = errors.Join(err, m.Close())
		}
	}
	if err != nil {
		tr.unregisterAll()
		if reloading {
			r.finish(e, StateReady, fmt.Sprintf("reload failed; version %s still serving: %v", oldVersion, err))
			r.log.Warn("model reload failed; the loaded version keeps serving", "model", name, "version", oldVersion, "err", err)
		} else {
			// The version it failed as, when its configuration said.
			if lc.version != "" {
				r.mu.Lock()
				e.version = lc.version
				r.mu.Unlock()
			}
			r.finish(e, StateUnavailable, err.Error())
		}
		return &LoadError{Name: name, Err: err}
	}
	if reloading {
		mark := r.reg.mark()
		r.drain(ctx, old, mark)
		if cerr := old.Close(); cerr != nil {
			r.log.Warn("closing the replaced model", "model", name, "version", oldVersion, "err", cerr)
		}
		if e.metrics != nil {
			e.metrics.unregisterAll()
		}
		if merr := tr.activate(); merr != nil {
			r.log.Warn("registering the reloaded model's metrics", "model", name, "err", merr)
		}
		if r.cfg.OnUnload != nil && oldVersion != lc.version {
			r.cfg.OnUnload(name, oldVersion)
		}
	}
	e.metrics = tr
	e.version = lc.version
	r.finish(e, StateReady, "")
	r.log.Info("model loaded from the repository", "model", name, "version", lc.version, "reload", reloading)
	return nil
}

// build loads the model lc describes, registering its metrics with reg,
// but does not serve it.
func (r *Repository) build(lc loadConfig, tr *trackingRegisterer) (served, error) {
	var reg prometheus.Registerer
	if r.cfg.Registerer != nil {
		reg = tr
	}
	switch {
	case lc.runtime != nil:
		lc.runtime.Logger = r.log
		return runtime.Start(*lc.runtime)
	case lc.tensor != nil:
		m, err := LoadTensor(*lc.tensor, r.log, reg)
		if err == nil && lc.triton != nil {
			if err = completeTensorConfig(lc.tensor.Triton, m.Inputs(), m.Outputs()); err != nil {
				err = errors.Join(err, m.Close())
				return nil, err
			}
		}
		return m, err
	}
	g, err := LoadGenerative(lc.gen, r.log, reg)
	var ce *ConfigError
	if errors.As(err, &ce) && settingsKeys[ce.Setting] != "" {
		if lc.triton != nil {
			err = fmt.Errorf("%s parameters[%s]: %s", ConfigFile, settingsKeys[ce.Setting], ce.Msg)
		} else {
			err = fmt.Errorf("%s %s: %s", SettingsFile, settingsKeys[ce.Setting], ce.Msg)
		}
	}
	return g, err
}

// loadConfig is how to load one model of the repository: gen for an
// LLM, tensor for a tensor model, or runtime for a custom runtime.
type loadConfig struct {
	version string
	gen     GenerativeConfig
	tensor  *TensorConfig
	runtime *runtime.Config
	// triton is the model's config.pbtxt, nil for a model-settings.json
	// folder.
	triton *tc.ModelConfig
}

// config reads the settings of the model in dir, finds its file and says
// which kind of model it is.
func (r *Repository) config(name, dir string) (loadConfig, error) {
	tcfg, err := ReadTritonConfig(dir)
	if err != nil {
		return loadConfig{}, err
	}
	if tcfg != nil {
		return r.tritonConfig(name, dir, tcfg)
	}
	s, err := ReadSettings(filepath.Join(dir, SettingsFile))
	if err != nil {
		return loadConfig{}, err
	}
	if s.Name != "" && s.Name != name {
		return loadConfig{}, fmt.Errorf("%s: name %q differs from the folder's name %q", SettingsFile, s.Name, name)
	}
	version := s.Parameters.Version
	if version == "" {
		version = highestVersion(dir)
	}
	if s.IsRuntime() {
		return r.runtimeConfig(name, dir, version, s), nil
	}
	vdir := dir
	if version != "" {
		vdir = filepath.Join(dir, version)
		if st, err := os.Stat(vdir); err != nil || !st.IsDir() {
			return loadConfig{}, fmt.Errorf("version %q has no folder %s", version, vdir)
		}
	} else {
		version = "1" // the model file is in the model folder itself
	}
	path := s.Parameters.URI
	switch {
	case path != "" && !filepath.IsAbs(path):
		path = filepath.Join(vdir, path)
	case path == "":
		g, _ := filepath.Glob(filepath.Join(vdir, "*.gguf"))
		o, _ := filepath.Glob(filepath.Join(vdir, "*.onnx"))
		if m := append(g, o...); len(m) != 1 {
			return loadConfig{}, fmt.Errorf("%s holds %d .gguf and %d .onnx files; want one, or name it in parameters.uri", vdir, len(g), len(o))
		} else {
			path = m[0]
		}
	}
	if !strings.EqualFold(filepath.Ext(path), ".onnx") {
		if err := checkGGUF(path, r.cfg.Dir); err != nil {
			return loadConfig{}, err
		}
	}
	if IsTensorFile(path) {
		return loadConfig{version: version, tensor: &TensorConfig{
			Name: name, Path: path, Version: version,
			MaxBatchSize:    s.MaxBatchSize,
			MaxBatchTime:    time.Duration(s.MaxBatchTime * float64(time.Second)),
			ParallelWorkers: s.ParallelWorkers,
			Threads:         r.cfg.TensorThreads,
		}}, nil
	}
	cfg, err := s.apply(r.cfg.Base, dir)
	if err != nil {
		return loadConfig{}, fmt.Errorf("%s: %w", SettingsFile, err)
	}
	cfg.Name, cfg.Path, cfg.Version = name, path, version
	return loadConfig{version: version, gen: cfg}, nil
}

// runtimeConfig is how to run the custom runtime of the model in dir.
func (r *Repository) runtimeConfig(name, dir, version string, s *ModelSettings) loadConfig {
	if version == "" {
		version = "1"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	var timeout time.Duration
	if s.RequestTimeout != "" {
		timeout, _ = time.ParseDuration(s.RequestTimeout)
	}
	if timeout == 0 {
		timeout = r.cfg.Base.RequestTimeout
	}
	return loadConfig{version: version, runtime: &runtime.Config{
		Name: name, Version: version, Dir: abs, Command: runtime.Command(s.Implementation),
		SettingsPath:   filepath.Join(abs, SettingsFile),
		Workers:        s.ParallelWorkers,
		MaxBatchSize:   s.MaxBatchSize,
		MaxBatchTime:   time.Duration(s.MaxBatchTime * float64(time.Second)),
		RequestTimeout: timeout,
		StartTimeout:   r.cfg.RuntimeStartTimeout,
		Inputs:         s.Inputs, Outputs: s.Outputs, Platform: s.Platform,
		ContentTypes: runtimeContentTypes(s),
	}}
}

// runtimeContentTypes are the content types a custom runtime's settings
// name: parameters.content_type and parameters.content_types.
func runtimeContentTypes(s *ModelSettings) []string {
	var out []string
	for _, ct := range append([]string{s.Parameters.ContentType}, s.Parameters.ContentTypes...) {
		if ct != "" && !slices.Contains(out, ct) {
			out = append(out, ct)
		}
	}
	return out
}

// checkGGUF says clearly what is wrong with a file that is not a GGUF
// model (llama.cpp only says that it failed); a truncated or corrupt GGUF
// is left for llama.cpp to refuse.
func checkGGUF(path, root string) error {
	name := path
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		name = rel
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read only
	var head [8]byte
	n, _ := io.ReadFull(f, head[:])
	switch {
	case n < 8:
		return fmt.Errorf("%s is not a GGUF file: it has only %d bytes (truncated?)", name, n)
	case string(head[:4]) != "GGUF":
		return fmt.Errorf("%s is not a GGUF file: it does not start with \"GGUF\" (truncated or corrupt?)", name)
	}
	if v := binary.LittleEndian.Uint32(head[4:]); v < 2 || v > 3 {
		return fmt.Errorf("%s has GGUF version %d; llama.cpp reads versions 2 and 3", name, v)
	}
	return nil
}

// highestVersion is the highest numbered folder in dir, "" if none.
func highestVersion(dir string) string {
	des, _ := os.ReadDir(dir)
	best := int64(-1)
	for _, de := range des {
		if n, err := strconv.ParseInt(de.Name(), 10, 64); err == nil && n >= 0 && de.IsDir() && n > best {
			best = n
		}
	}
	if best < 0 {
		return ""
	}
	return strconv.FormatInt(best, 10)
}

// Unload takes the model out of service: new requests find no model (404)
// at once, the running ones finish (up to DrainTimeout, after which they
// are cut), then its memory is freed. Unloading a model that is not
// loaded does nothing.
func (r *Repository) Unload(ctx context.Context, name string) error {
	g, ok := r.reg.lookup(name)
	if !ok {
		r.mu.Lock()
		_, known := r.entries[name]
		r.mu.Unlock()
		if !known && !slices.Contains(r.names(), name) {
			return fmt.Errorf("%w: %q", ErrNotInRepository, name)
		}
		return nil
	}
	e, err := r.begin(name, StateUnloading)
	if err != nil {
		return err
	}
	r.reg.remove(name)
	mark := r.reg.mark()
	r.drain(ctx, g, mark)
	err = g.Close()
	if e.metrics != nil {
		e.metrics.unregisterAll()
		e.metrics = nil
	}
	if r.cfg.OnUnload != nil {
		r.cfg.OnUnload(name, e.version)
	}
	r.finish(e, StateUnavailable, "unloaded")
	r.log.Info("model unloaded", "model", name)
	return err
}

// linger is how long Unload waits, once the model has no request left,
// for the handlers of requests that began before it left the registry to
// end (they may be writing its last tokens), before it frees it anyway.
const linger = 10 * time.Second

// drainPoll is how often a drain looks again: neither a model turning idle
// nor a request ending is signalled.
const drainPoll = 10 * time.Millisecond

// drain waits for the model's requests to finish and for the requests
// that began before mark (but ctx's own) to end, up to DrainTimeout, and stops the
// model's engine (cutting what still runs). It reads and waits on
// RepositoryConfig.Clock.
func (r *Repository) drain(ctx context.Context, g served, mark uint64) {
	clk := r.cfg.Clock
	var t clock.Timer
	pause := func() {
		if t == nil {
			t = clk.NewTimer(drainPoll)
		} else {
			t.Reset(drainPoll)
		}
		<-t.C()
	}
	deadline := clk.Now().Add(r.cfg.DrainTimeout)
	var idleSince time.Time
	for !r.reg.endedBefore(ctx, mark) && clk.Now().Before(deadline) {
		switch now := clk.Now(); {
		case !g.Idle():
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = now
		case now.Sub(idleSince) > linger:
			// Only requests on other models are left.
			deadline = now
		}
		pause()
	}
	if cut := g.Stop(); cut > 0 {
		r.log.Warn("unload cut running requests after the drain timeout", "model", g.Name(), "cut", cut)
		// Their handlers answer at once; let them.
		for end := clk.Now().Add(linger); !r.reg.endedBefore(ctx, mark) && clk.Now().Before(end); {
			pause()
		}
	}
}

// ready is the registry's readiness with a repository: strict, every
// model in the repository (and every other registered model) is ready;
// otherwise the server is up.
func (r *Repository) ready() bool {
	if !r.cfg.Strict {
		return true
	}
	for _, e := range r.Index(false) {
		if e.State != StateReady {
			return false
		}
	}
	for _, g := range r.reg.all() {
		if !g.Ready() {
			return false
		}
	}
	return true
}

// trackingRegisterer remembers what it registered so that unloading a
// model removes its metrics (a reload registers them again). A deferred
// one registers nothing until activate: a reloaded model's collectors
// carry the labels of the model still serving.
type trackingRegisterer struct {
	reg      prometheus.Registerer
	mu       sync.Mutex
	cs       []prometheus.Collector
	deferred bool
}

func (t *trackingRegisterer) Register(c prometheus.Collector) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.deferred {
		if err := t.reg.Register(c); err != nil {
			return err
		}
	}
	t.cs = append(t.cs, c)
	return nil
}

// activate registers what a deferred registerer holds.
func (t *trackingRegisterer) activate() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.deferred || t.reg == nil {
		return nil
	}
	t.deferred = false
	var errs []error
	kept := t.cs[:0]
	for _, c := range t.cs {
		if err := t.reg.Register(c); err != nil {
			errs = append(errs, err)
			continue
		}
		kept = append(kept, c)
	}
	t.cs = kept
	return errors.Join(errs...)
}

func (t *trackingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *trackingRegisterer) Unregister(c prometheus.Collector) bool { return t.reg.Unregister(c) }

func (t *trackingRegisterer) unregisterAll() {
	if t.reg == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.deferred {
		for _, c := range t.cs {
			t.reg.Unregister(c)
		}
	}
	t.cs = nil
}

// runtimeMetrics exposes the own metrics of every custom runtime model
// in the registry (runtime.Model.Collector), asked for at each scrape.
type runtimeMetrics struct{ reg *Registry }

// Describe describes nothing: the metrics are the runtimes' own.
func (runtimeMetrics) Describe(chan<- *prometheus.Desc) {}

func (c runtimeMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.reg.ListRuntimes() {
		m.Collector().Collect(ch)
	}
}
