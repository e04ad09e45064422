package bench

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// request is one generated request of the workload.
type request struct {
	// prompt is the text sent as "prompt" or as the user message.
	prompt string
	// promptWords is the number of words in prompt: the input length used
	// when the server reports no prompt_tokens.
	promptWords int
	// maxTokens is the requested output length.
	maxTokens int
	// long marks a long request of the mixed dataset, sent by its long
	// clients.
	long bool
}

// RNG streams: one per purpose, so that changing one part of the workload
// (say, the warmup count) leaves the others unchanged.
const (
	streamMeasured = 1
	streamWarmup   = 2
	streamArrivals = 3
	streamPrefix   = 4
	// streamRepeatedPrefixes draws the prefixes of the prefix_repetition
	// dataset.
	streamRepeatedPrefixes = 5
)

// newRand returns the deterministic generator for one stream of a seed. Only
// Uint64 is called on it, whose output PCG defines exactly, so the workload
// does not depend on the Go release.
func newRand(seed int64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

// uniform returns a float in [0, 1) with 53 random bits.
func uniform(r *rand.Rand) float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// lengthRange is vLLM's random-dataset range for a nominal length:
// [floor(l*(1-ratio)), floor(l*(1+ratio))].
func lengthRange(l int, ratio float64) (lo, hi int) {
	return int(float64(l) * (1 - ratio)), int(float64(l) * (1 + ratio))
}

// sharedPrefix returns the prefix common to every prompt of cfg ("" if none).
// It depends only on the seed and its length.
func sharedPrefix(cfg *Config) string {
	var b strings.Builder
	benchio.AppendWords(&b, newRand(cfg.Seed, streamPrefix), cfg.SharedPrefixLen)
	return b.String()
}

// generateRequests returns n requests of cfg's dataset drawn from the given
// RNG stream.
func generateRequests(cfg *Config, stream uint64, n int) []request {
	switch cfg.Dataset {
	case DatasetPrefixRepetition:
		return prefixRepetitionRequests(cfg, stream, n)
	case DatasetMixed:
		return mixedRequests(cfg, stream, n, stream == streamMeasured)
	case DatasetCustom:
		return customRequests(cfg, stream, n)
	}
	return randomRequests(cfg, stream, n)
}

// randomRequests returns n requests of the random dataset drawn from the
// given RNG stream. Request i does not depend on n.
func randomRequests(cfg *Config, stream uint64, n int) []request {
	r := newRand(cfg.Seed, stream)
	prefix := sharedPrefix(cfg)
	inLo, inHi := lengthRange(cfg.RandomInputLen, cfg.RandomRangeRatio)
	outLo, outHi := lengthRange(cfg.RandomOutputLen, cfg.RandomRangeRatio)
	outLo = max(outLo, 1)
	outHi = max(outHi, outLo)

	reqs := make([]request, n)
	for i := range reqs {
		in := inLo + benchio.Intn(r, inHi-inLo+1)
		out := outLo + benchio.Intn(r, outHi-outLo+1)
		// A prompt is never empty: some servers reject that.
		in = max(in, 1-cfg.SharedPrefixLen)
		var b strings.Builder
		b.Grow(len(prefix) + 8*in)
		b.WriteString(prefix)
		benchio.AppendWords(&b, r, in)
		reqs[i] = request{prompt: b.String(), promptWords: cfg.SharedPrefixLen + in, maxTokens: out}
	}
	return reqs
}

// arrivalOffsets returns, for n requests at the given mean rate (requests per
// second), the send time of each as seconds from the start: request 0 at 0,
// then exponential gaps (a Poisson process, vLLM's burstiness 1). An
// infinite rate gives all zeros.
func arrivalOffsets(seed int64, n int, rate float64) []float64 {
	offs := make([]float64, n)
	if math.IsInf(rate, 1) {
		return offs
	}
	r := newRand(seed, streamArrivals)
	t := 0.0
	for i := 1; i < n; i++ {
		t += -math.Log(1-uniform(r)) / rate
		offs[i] = t
	}
	return offs
}
