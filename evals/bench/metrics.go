package bench

import (
	"math"
	"slices"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// Metrics are the figures of vLLM's serving benchmark, under the names its
// result JSON uses. Latencies are in milliseconds, the duration in seconds.
// Only completed requests enter the token counts and latency statistics;
// statistics over an empty set are 0, as numpy gives for vLLM's `x or 0`.
type Metrics struct {
	// Duration is the wall time of the measured run, from the first request
	// scheduled to the last stream finished, in seconds.
	Duration float64 `json:"duration"`
	// Completed and Failed count the measured requests.
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// TotalInputTokens sums the prompt lengths of completed requests (see
	// Report.InputTokensSource for where each length came from).
	TotalInputTokens int `json:"total_input_tokens"`
	// TotalOutputTokens sums the output lengths of completed requests (see
	// Report.OutputTokensSource).
	TotalOutputTokens int `json:"total_output_tokens"`
	// RequestThroughput is Completed / Duration.
	RequestThroughput float64 `json:"request_throughput"`
	// OutputThroughput is TotalOutputTokens / Duration.
	OutputThroughput float64 `json:"output_throughput"`
	// TotalTokenThroughput is (TotalInputTokens + TotalOutputTokens) / Duration.
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	// MaxOutputTokensPerS is the largest number of content chunks received
	// in one whole second of the run (seconds counted from the first
	// completed request's send time), as vLLM computes it.
	MaxOutputTokensPerS float64 `json:"max_output_tokens_per_s"`
	// MaxConcurrentRequests is the largest number of completed requests
	// active at some moment of one such second (vLLM's definition): requests
	// that follow each other within a second all count, so it can exceed
	// the concurrency limit.
	MaxConcurrentRequests int `json:"max_concurrent_requests"`

	// TTFT: request sent -> first chunk carrying generated content.
	MeanTTFTMs   float64 `json:"mean_ttft_ms"`
	MedianTTFTMs float64 `json:"median_ttft_ms"`
	StdTTFTMs    float64 `json:"std_ttft_ms"`
	P99TTFTMs    float64 `json:"p99_ttft_ms"`
	// TPOT, per request: (E2EL - TTFT) / (output tokens - 1); requests with
	// at most one output token are left out.
	MeanTPOTMs   float64 `json:"mean_tpot_ms"`
	MedianTPOTMs float64 `json:"median_tpot_ms"`
	StdTPOTMs    float64 `json:"std_tpot_ms"`
	P99TPOTMs    float64 `json:"p99_tpot_ms"`
	// ITL: every gap between consecutive content chunks, pooled over all
	// completed requests.
	MeanITLMs   float64 `json:"mean_itl_ms"`
	MedianITLMs float64 `json:"median_itl_ms"`
	StdITLMs    float64 `json:"std_itl_ms"`
	P99ITLMs    float64 `json:"p99_itl_ms"`
	// E2EL: request sent -> end of its stream.
	MeanE2ELMs   float64 `json:"mean_e2el_ms"`
	MedianE2ELMs float64 `json:"median_e2el_ms"`
	StdE2ELMs    float64 `json:"std_e2el_ms"`
	P99E2ELMs    float64 `json:"p99_e2el_ms"`
}

// TokenSource says where token counts came from.
type TokenSource string

const (
	// SourceUsage: the server's streamed usage object, for every completed
	// request.
	SourceUsage TokenSource = "usage"
	// SourceChunks: output tokens counted as content chunks, for every
	// completed request (the server sent no usage).
	SourceChunks TokenSource = "chunks"
	// SourceWords: input tokens estimated as prompt words, for every
	// completed request (the server sent no usage).
	SourceWords TokenSource = "words"
	// SourceMixed: some requests had usage and some did not.
	SourceMixed TokenSource = "mixed"
	// SourceNone: no request completed.
	SourceNone TokenSource = "none"
)

// summary is everything the report derives from the request timelines.
type summary struct {
	Metrics
	inputSource, outputSource TokenSource
	errorSamples              []benchio.ErrorSample
	// retries counts requests, completed or failed, that were sent a
	// second time on a new connection.
	retries int
	// textless counts completed requests whose output had no text.
	textless int
	// Per-request values in request order (vLLM's detailed arrays): 0 / nil
	// / "" where a request failed.
	inputLens, outputLens []int
	ttfts                 []float64   // seconds
	itls                  [][]float64 // seconds
	errors                []string
}

// summarize computes the metrics of a run that lasted duration from its
// request timelines. It is pure: the tests feed it fixed timelines.
func summarize(results []result, duration time.Duration) summary {
	var s summary
	n := len(results)
	s.inputLens = make([]int, n)
	s.outputLens = make([]int, n)
	s.ttfts = make([]float64, n)
	s.itls = make([][]float64, n)
	s.errors = make([]string, n)

	var ttfts, tpots, itls, e2els []float64 // ms
	var inUsage, outUsage int
	for i := range results {
		r := &results[i]
		in, _ := r.inputTokens()
		s.inputLens[i] = in
		if r.retried {
			s.retries++
		}
		if !r.ok() {
			s.Failed++
			s.itls[i] = []float64{}
			s.errors[i] = r.err
			s.errorSamples = benchio.AddErrorSample(s.errorSamples, r.err)
			continue
		}
		s.Completed++
		if r.textless {
			s.textless++
		}
		out, outFromUsage := r.outputTokens()
		_, inFromUsage := r.inputTokens()
		if outFromUsage {
			outUsage++
		}
		if inFromUsage {
			inUsage++
		}
		s.outputLens[i] = out
		s.TotalInputTokens += in
		s.TotalOutputTokens += out

		ttft := r.chunks[0]
		ttfts = append(ttfts, benchio.Millis(ttft))
		e2els = append(e2els, benchio.Millis(r.end))
		if out > 1 {
			tpots = append(tpots, benchio.Millis(r.end-ttft)/float64(out-1))
		}
		s.ttfts[i] = ttft.Seconds()
		s.itls[i] = make([]float64, 0, len(r.chunks)-1)
		for j := 1; j < len(r.chunks); j++ {
			gap := r.chunks[j] - r.chunks[j-1]
			itls = append(itls, benchio.Millis(gap))
			s.itls[i] = append(s.itls[i], gap.Seconds())
		}
	}
	s.inputSource = source(inUsage, s.Completed, SourceWords)
	s.outputSource = source(outUsage, s.Completed, SourceChunks)

	s.Duration = duration.Seconds()
	if s.Duration > 0 {
		s.RequestThroughput = float64(s.Completed) / s.Duration
		s.OutputThroughput = float64(s.TotalOutputTokens) / s.Duration
		s.TotalTokenThroughput = float64(s.TotalInputTokens+s.TotalOutputTokens) / s.Duration
	}
	s.MaxOutputTokensPerS, s.MaxConcurrentRequests = peaks(results)

	s.MeanTTFTMs, s.MedianTTFTMs, s.StdTTFTMs, s.P99TTFTMs = describeSample(ttfts)
	s.MeanTPOTMs, s.MedianTPOTMs, s.StdTPOTMs, s.P99TPOTMs = describeSample(tpots)
	s.MeanITLMs, s.MedianITLMs, s.StdITLMs, s.P99ITLMs = describeSample(itls)
	s.MeanE2ELMs, s.MedianE2ELMs, s.StdE2ELMs, s.P99E2ELMs = describeSample(e2els)
	return s
}

func source(withUsage, completed int, fallback TokenSource) TokenSource {
	switch {
	case completed == 0:
		return SourceNone
	case withUsage == completed:
		return SourceUsage
	case withUsage == 0:
		return fallback
	}
	return SourceMixed
}

// peaks computes vLLM's max_output_tokens_per_s and max_concurrent_requests
// over the completed requests: whole-second buckets from the earliest send
// time; each content chunk counts in the bucket it arrived in, each request
// in every bucket from its send to its end.
func peaks(results []result) (maxTokens float64, maxConcurrent int) {
	first := true
	var minStart, maxEnd time.Duration
	for i := range results {
		r := &results[i]
		if !r.ok() {
			continue
		}
		if first || r.sent < minStart {
			minStart = r.sent
		}
		if first || r.sent+r.end > maxEnd {
			maxEnd = r.sent + r.end
		}
		first = false
	}
	if first {
		return 0, 0
	}
	buckets := int(math.Ceil((maxEnd - minStart).Seconds())) + 1
	tokens := make([]int, buckets)
	active := make([]int, buckets)
	bucket := func(t time.Duration) int { return int((t - minStart).Seconds()) }
	for i := range results {
		r := &results[i]
		if !r.ok() {
			continue
		}
		for _, c := range r.chunks {
			if b := bucket(r.sent + c); b >= 0 && b < buckets {
				tokens[b]++
			}
		}
		for b := bucket(r.sent); b <= bucket(r.sent+r.end) && b < buckets; b++ {
			active[b]++
		}
	}
	return float64(slices.Max(tokens)), slices.Max(active)
}

// describeSample returns mean, median, population standard deviation and
// 99th percentile of xs (numpy's mean, median, std, percentile), or zeros
// for an empty sample.
func describeSample(xs []float64) (mean, median, std, p99 float64) {
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	var sum float64
	for _, x := range sorted {
		sum += x
	}
	mean = sum / float64(len(sorted))
	var sq float64
	for _, x := range sorted {
		sq += (x - mean) * (x - mean)
	}
	std = math.Sqrt(sq / float64(len(sorted)))
	return mean, percentile(sorted, 50), std, percentile(sorted, 99)
}

// percentile returns the p-th percentile (0 <= p <= 100) of sorted data by
// linear interpolation between the closest ranks, numpy's default method:
// rank = p/100 * (n-1), value = x[floor] + (x[ceil]-x[floor]) * frac(rank).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	if lo < 0 {
		lo = 0
	}
	if hi >= len(sorted) {
		hi = len(sorted) - 1
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*(rank-float64(lo))
}
