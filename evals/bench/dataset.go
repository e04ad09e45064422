package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// Dataset names how the prompts of a run are made, with the values of vLLM's
// --dataset-name.
type Dataset string

const (
	// DatasetRandom: each prompt is Config.SharedPrefixLen shared words and
	// Config.RandomInputLen random ones, each request asks for
	// Config.RandomOutputLen tokens, both lengths widened by
	// Config.RandomRangeRatio (vLLM's "random").
	DatasetRandom Dataset = "random"
	// DatasetPrefixRepetition: each prompt is one of a few random prefixes
	// followed by a random suffix of its own, as Config.PrefixRepetition
	// describes (vLLM's "prefix_repetition").
	DatasetPrefixRepetition Dataset = "prefix_repetition"
	// DatasetMixed: a few clients send long prompts while the others send
	// short ones, as Config.Mixed describes (llmserve's; vLLM has no such
	// dataset).
	DatasetMixed Dataset = "mixed"
	// DatasetCustom: prompts read from a JSONL file, one {"prompt": ...}
	// object per line, taken in order and cycled, each request asking for
	// Config.Custom.OutputLen tokens (vLLM's "custom" with --dataset-path
	// and --custom-output-len). It measures what random words cannot, such
	// as speculative decoding on text that repeats its input.
	DatasetCustom Dataset = "custom"
)

// ParseDataset accepts vLLM's dataset names "random", "prefix_repetition"
// (also spelled "prefix-repetition") and "custom", and "mixed".
func ParseDataset(s string) (Dataset, error) {
	switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_") {
	case "random":
		return DatasetRandom, nil
	case "prefix_repetition":
		return DatasetPrefixRepetition, nil
	case "mixed":
		return DatasetMixed, nil
	case "custom":
		return DatasetCustom, nil
	}
	return "", fmt.Errorf("unknown dataset %q: use random, prefix_repetition, mixed or custom", s)
}

// PrefixRepetition describes the prefix_repetition dataset, with the meaning
// of vLLM's --prefix-repetition-* flags, lengths in words (about one token
// each) rather than tokens. Every prompt is one of NumPrefixes random
// prefixes of PrefixLen words, then SuffixLen random words of its own; every
// request asks for OutputLen tokens. It measures prefix caching with several
// prefixes competing for the cache, where the random dataset's
// SharedPrefixLen has one.
type PrefixRepetition struct {
	// PrefixLen is the length of each prefix, in words.
	PrefixLen int
	// SuffixLen is the length of the part after the prefix, in words,
	// drawn anew for every prompt.
	SuffixLen int
	// NumPrefixes is the number of distinct prefixes. A run needs at least
	// as many prompts.
	NumPrefixes int
	// OutputLen is the max_tokens of every request.
	OutputLen int
}

// DefaultPrefixRepetition returns vLLM's defaults for the dataset.
func DefaultPrefixRepetition() PrefixRepetition {
	return PrefixRepetition{PrefixLen: 256, SuffixLen: 256, NumPrefixes: 10, OutputLen: 128}
}

// validate reports each problem with add. numPrompts is the number of
// measured requests, which must give every prefix one.
func (p PrefixRepetition) validate(numPrompts int, add func(format string, args ...any)) {
	if p.PrefixLen < 0 || p.SuffixLen < 0 {
		add("prefix repetition prefix len %d and suffix len %d: must not be negative", p.PrefixLen, p.SuffixLen)
	} else if p.PrefixLen+p.SuffixLen < 1 {
		add("prefix repetition prefix len and suffix len are both 0: prompts would be empty")
	}
	if p.NumPrefixes < 1 {
		add("prefix repetition num prefixes %d: need at least 1", p.NumPrefixes)
	} else if numPrompts >= 1 && numPrompts < p.NumPrefixes {
		add("num prompts %d is below prefix repetition num prefixes %d: every prefix needs a prompt", numPrompts, p.NumPrefixes)
	}
	if p.OutputLen < 1 {
		add("prefix repetition output len %d: need at least 1 token", p.OutputLen)
	}
}

// repeatedPrefixes returns the NumPrefixes prefixes of cfg's
// prefix_repetition dataset. They depend only on the seed and the prefix
// count and length, so warmup and measured prompts share them.
func repeatedPrefixes(cfg *Config) []string {
	p := cfg.PrefixRepetition
	r := newRand(cfg.Seed, streamRepeatedPrefixes)
	prefixes := make([]string, p.NumPrefixes)
	for i := range prefixes {
		var b strings.Builder
		benchio.AppendWords(&b, r, p.PrefixLen)
		prefixes[i] = b.String()
	}
	return prefixes
}

// prefixRepetitionRequests returns n requests of the prefix_repetition
// dataset drawn from the given RNG stream. Prefix k serves requests
// k, k+NumPrefixes, k+2·NumPrefixes, ... of an ordered list, which is then
// shuffled: as in vLLM, each prefix gets n/NumPrefixes prompts spread at
// random over the run. Where NumPrefixes does not divide n, vLLM drops the
// remainder and sends fewer requests; here the first n mod NumPrefixes
// prefixes get one prompt more, so the run has exactly n. With n below
// NumPrefixes (a short warmup) only the first n prefixes are used.
func prefixRepetitionRequests(cfg *Config, stream uint64, n int) []request {
	p := cfg.PrefixRepetition
	prefixes := repeatedPrefixes(cfg)
	r := newRand(cfg.Seed, stream)

	owner := make([]int, n)
	for i := range owner {
		owner[i] = i % p.NumPrefixes
	}
	// Fisher–Yates with our own draws, so the order does not depend on the
	// Go release.
	for i := n - 1; i > 0; i-- {
		j := benchio.Intn(r, i+1)
		owner[i], owner[j] = owner[j], owner[i]
	}

	reqs := make([]request, n)
	for i := range reqs {
		prefix := prefixes[owner[i]]
		var b strings.Builder
		b.Grow(len(prefix) + 8*p.SuffixLen)
		b.WriteString(prefix)
		benchio.AppendWords(&b, r, p.SuffixLen)
		reqs[i] = request{prompt: b.String(), promptWords: p.PrefixLen + p.SuffixLen, maxTokens: p.OutputLen}
	}
	return reqs
}

// Custom describes the custom dataset: Prompts, read by LoadCustomPrompts
// from the file --dataset-path names, and the max_tokens of every request.
type Custom struct {
	Prompts   []string
	OutputLen int
}

// DefaultCustom returns vLLM's default output length for the dataset.
func DefaultCustom() Custom { return Custom{OutputLen: 256} }

func (c Custom) validate(add func(format string, args ...any)) {
	if len(c.Prompts) == 0 {
		add("custom dataset has no prompts: give --dataset-path, a JSONL file of {\"prompt\": ...} lines")
	}
	if c.OutputLen < 1 {
		add("custom output len %d: need at least 1", c.OutputLen)
	}
}

// LoadCustomPrompts reads a JSONL file of {"prompt": "..."} objects (vLLM's
// custom dataset format; other fields are ignored). A line that is not such
// an object, or an empty prompt, is an error naming the line.
func LoadCustomPrompts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset path: %w", err)
	}
	defer f.Close() //nolint:errcheck // read only
	var prompts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var row struct {
			Prompt *string `json:"prompt"`
		}
		if err := json.Unmarshal([]byte(text), &row); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if row.Prompt == nil || *row.Prompt == "" {
			return nil, fmt.Errorf("%s:%d: no \"prompt\" (or an empty one)", path, line)
		}
		prompts = append(prompts, *row.Prompt)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return prompts, nil
}

// customRequests returns n requests of the custom dataset: the prompts in
// file order, cycled. The warmup stream starts half way through the file so
// that its prompts differ from the first measured ones where the file has
// more than one.
func customRequests(cfg *Config, stream uint64, n int) []request {
	ps := cfg.Custom.Prompts
	start := 0
	if stream != streamMeasured {
		start = len(ps) / 2
	}
	reqs := make([]request, n)
	for i := range reqs {
		p := ps[(start+i)%len(ps)]
		reqs[i] = request{prompt: p, promptWords: len(strings.Fields(p)), maxTokens: cfg.Custom.OutputLen}
	}
	return reqs
}
