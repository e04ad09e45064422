package bench

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"time"
)

// Endpoint selects the OpenAI route the benchmark drives.
type Endpoint string

const (
	// EndpointCompletions posts to {base}/completions with a "prompt".
	// vLLM calls this backend "openai".
	EndpointCompletions Endpoint = "completions"
	// EndpointChat posts to {base}/chat/completions with one user message.
	// vLLM calls this backend "openai-chat".
	EndpointChat Endpoint = "chat"
)

// ParseEndpoint accepts "completions" and "chat", and also the API paths
// that vLLM's --endpoint takes ("/v1/completions", "/v1/chat/completions").
func ParseEndpoint(s string) (Endpoint, error) {
	switch strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "/") {
	case "completions", "completion", "/v1/completions", "/completions":
		return EndpointCompletions, nil
	case "chat", "chat/completions", "/v1/chat/completions", "/chat/completions":
		return EndpointChat, nil
	}
	return "", fmt.Errorf("unknown endpoint %q: use completions or chat", s)
}

// path is the route under the base URL.
func (e Endpoint) path() string {
	if e == EndpointChat {
		return "/chat/completions"
	}
	return "/completions"
}

// backend is the name vLLM's benchmark uses for the same request shape; it is
// written to the result JSON so the files line up with vLLM's.
func (e Endpoint) backend() string {
	if e == EndpointChat {
		return "openai-chat"
	}
	return "openai"
}

// Config describes one benchmark run. Build it with DefaultConfig, change
// what you need and call Validate (Run calls it too).
type Config struct {
	// BaseURL is the OpenAI API root, including the version segment, e.g.
	// http://127.0.0.1:8080/v1. Routes are appended to it (/models,
	// /completions, /chat/completions).
	BaseURL string
	// APIKey, if set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Endpoint selects /completions or /chat/completions.
	Endpoint Endpoint
	// Model is sent as "model". Empty means: ask GET {BaseURL}/models and
	// use the first id.
	Model string
	// NumPrompts is the number of measured requests.
	NumPrompts int
	// MaxConcurrency caps the requests in flight. 0 means no cap (vLLM's
	// default): with an infinite RequestRate every request is sent at once.
	MaxConcurrency int
	// RequestRate is the mean arrival rate in requests per second; arrivals
	// are a Poisson process (exponential gaps). +Inf sends every request at
	// time zero and lets MaxConcurrency alone pace the run.
	RequestRate float64
	// Dataset selects how prompts are made: DatasetRandom (the default; ""
	// means it too) reads the Random* fields and SharedPrefixLen,
	// DatasetPrefixRepetition reads PrefixRepetition, DatasetMixed reads
	// Mixed, DatasetCustom reads Custom.
	Dataset Dataset
	// RandomInputLen is the target length, in words (about one token each),
	// of the random part of each prompt.
	RandomInputLen int
	// RandomOutputLen is the max_tokens of each request.
	RandomOutputLen int
	// RandomRangeRatio widens both lengths to a uniform integer range
	// [floor(L*(1-r)), floor(L*(1+r))], as vLLM's random dataset does.
	// 0 <= r < 1; output lengths are at least 1.
	RandomRangeRatio float64
	// SharedPrefixLen is the length, in words, of a prefix that every prompt
	// (warmup included) starts with. 0 disables it. The random part follows
	// it, so a prompt is SharedPrefixLen + RandomInputLen words long (vLLM's
	// --random-prefix-len).
	SharedPrefixLen int
	// PrefixRepetition describes the prefix_repetition dataset.
	PrefixRepetition PrefixRepetition
	// Mixed describes the mixed dataset.
	Mixed Mixed
	// Custom describes the custom dataset (prompts from a file).
	Custom Custom
	// Seed makes prompts, lengths and arrival times reproducible.
	Seed int64
	// IgnoreEOS sends "ignore_eos": true (a vLLM and llama.cpp extension) so
	// every request generates exactly max_tokens. Servers that do not know
	// the field ignore it and may stop early.
	IgnoreEOS bool
	// Temperature is the sampling temperature sent with each request.
	Temperature float64
	// ImageURLs are attached to every chat request, before its text, as
	// OpenAI image_url parts (data: URLs made from files by --image), so
	// a multimodal server encodes them with each prompt.
	ImageURLs []string
	// Warmup is the number of requests sent, and waited for, before the
	// measured run. Their prompts differ from the measured ones.
	Warmup int
	// Timeout bounds each request, from sending it to the end of its stream.
	Timeout time.Duration
	// Label is copied into the report to tell runs apart (vLLM's --label).
	Label string
	// Detailed adds per-request arrays (input_lens, output_lens, ttfts,
	// itls, errors) to the report, as vLLM's --save-detailed does.
	Detailed bool
	// Monitor, when set, watches the server's memory and running sequences
	// during the measured run (Report's ServerStats).
	Monitor Monitor
	// Logger receives progress messages. Nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults of `vllm bench serve` for the random
// dataset, against a local llmserve.
func DefaultConfig() Config {
	return Config{
		BaseURL:          "http://127.0.0.1:8080/v1",
		Endpoint:         EndpointCompletions,
		Dataset:          DatasetRandom,
		PrefixRepetition: DefaultPrefixRepetition(),
		Mixed:            DefaultMixed(),
		Custom:           DefaultCustom(),
		NumPrompts:       1000,
		RequestRate:      math.Inf(1),
		RandomInputLen:   1024,
		RandomOutputLen:  128,
		IgnoreEOS:        true,
		Timeout:          10 * time.Minute,
	}
}

// Validate reports every problem with c, each saying what to change.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("base URL %q: want http(s)://host[:port]/v1", c.BaseURL)
	}
	if c.Endpoint != EndpointCompletions && c.Endpoint != EndpointChat {
		add("endpoint %q: use completions or chat", c.Endpoint)
	}
	if c.NumPrompts < 1 {
		add("num prompts %d: need at least 1", c.NumPrompts)
	}
	if c.MaxConcurrency < 0 {
		add("max concurrency %d: use 0 for no limit or a positive number", c.MaxConcurrency)
	}
	if math.IsNaN(c.RequestRate) || c.RequestRate <= 0 {
		add("request rate %v: use a positive number of requests per second, or inf", c.RequestRate)
	}
	switch c.Dataset {
	case DatasetRandom, "":
		c.validateRandom(add)
	case DatasetPrefixRepetition, DatasetMixed, DatasetCustom:
		switch c.Dataset {
		case DatasetMixed:
			c.Mixed.validate(c.NumPrompts, c.MaxConcurrency, add)
		case DatasetCustom:
			c.Custom.validate(add)
		default:
			c.PrefixRepetition.validate(c.NumPrompts, add)
		}
		if c.SharedPrefixLen != 0 || c.RandomRangeRatio != 0 {
			add("shared prefix len %d and random range ratio %v apply to the random dataset only: set them to 0 with %s",
				c.SharedPrefixLen, c.RandomRangeRatio, c.Dataset)
		}
	default:
		add("dataset %q: use random, prefix_repetition, mixed or custom", c.Dataset)
	}
	if len(c.ImageURLs) > 0 && c.Endpoint != EndpointChat {
		add("images go in chat messages: use --endpoint chat with --image")
	}
	if math.IsNaN(c.Temperature) || c.Temperature < 0 {
		add("temperature %v: must not be negative", c.Temperature)
	}
	if c.Warmup < 0 {
		add("warmup %d: must not be negative", c.Warmup)
	}
	if c.Timeout <= 0 {
		add("timeout %v: must be positive", c.Timeout)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid bench config: %w", errors.Join(errs...))
	}
	return nil
}

// validateRandom checks the fields of the random dataset.
func (c *Config) validateRandom(add func(format string, args ...any)) {
	if c.RandomInputLen < 0 {
		add("random input len %d: must not be negative", c.RandomInputLen)
	}
	if c.SharedPrefixLen < 0 {
		add("shared prefix len %d: must not be negative", c.SharedPrefixLen)
	}
	if c.RandomInputLen >= 0 && c.SharedPrefixLen >= 0 && c.RandomInputLen+c.SharedPrefixLen < 1 {
		add("random input len and shared prefix len are both 0: prompts would be empty")
	}
	if c.RandomOutputLen < 1 {
		add("random output len %d: need at least 1 token", c.RandomOutputLen)
	}
	if math.IsNaN(c.RandomRangeRatio) || c.RandomRangeRatio < 0 || c.RandomRangeRatio >= 1 {
		add("random range ratio %v: must be in [0, 1)", c.RandomRangeRatio)
	}
}

// concurrency is the effective number of request slots.
func (c *Config) concurrency() int {
	if c.MaxConcurrency == 0 {
		return max(c.NumPrompts, c.Warmup, 1)
	}
	return c.MaxConcurrency
}
