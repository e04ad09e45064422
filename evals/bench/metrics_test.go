package bench

import (
	"math"
	"testing"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

const eps = 1e-9

func near(a, b float64) bool { return math.Abs(a-b) <= eps*math.Max(1, math.Abs(b)) }

func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func chunksAt(ms ...float64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, v := range ms {
		out[i] = msd(v)
	}
	return out
}

// Values checked against numpy.percentile (default "linear" method).
func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		data []float64 // sorted
		p    float64
		want float64
	}{
		{"empty", nil, 99, 0},
		{"single", []float64{5}, 99, 5},
		{"two p99", []float64{10, 20}, 99, 19.9},
		{"four p0", []float64{1, 2, 3, 4}, 0, 1},
		{"four p25", []float64{1, 2, 3, 4}, 25, 1.75},
		{"four p50", []float64{1, 2, 3, 4}, 50, 2.5},
		{"four p99", []float64{1, 2, 3, 4}, 99, 3.97},
		{"four p100", []float64{1, 2, 3, 4}, 100, 4},
		{"five p40", []float64{15, 20, 35, 40, 50}, 40, 29},
		{"ties", []float64{7, 7, 7}, 99, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.data, tt.p); !near(got, tt.want) {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.data, tt.p, got, tt.want)
			}
		})
	}
}

func TestDescribeSample(t *testing.T) {
	tests := []struct {
		name                   string
		xs                     []float64
		mean, median, std, p99 float64
	}{
		{"empty", nil, 0, 0, 0, 0},
		{"one", []float64{3}, 3, 3, 0, 3},
		// numpy: mean 140, median 120, std 43.2049..., percentile 99 -> 198.4
		{"unsorted", []float64{100, 200, 120}, 140, 120, math.Sqrt(5600.0 / 3), 198.4},
		{"even count", []float64{4, 1, 3, 2}, 2.5, 2.5, math.Sqrt(1.25), 3.97},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, median, std, p99 := describeSample(tt.xs)
			if !near(mean, tt.mean) || !near(median, tt.median) || !near(std, tt.std) || !near(p99, tt.p99) {
				t.Errorf("describeSample(%v) = %v %v %v %v, want %v %v %v %v",
					tt.xs, mean, median, std, p99, tt.mean, tt.median, tt.std, tt.p99)
			}
		})
	}
	xs := []float64{3, 1, 2}
	describeSample(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("describeSample reordered its input: %v", xs)
	}
}

// fixedTimeline is a run worked out by hand (times in ms):
//
//	A sent   0: content at 100, 150, 250, [DONE] at 260; usage 10 in / 3 out
//	B sent  50: content at 200, 230, [DONE] at 230;      usage 12 in / 2 out
//	C sent 100: content at 120, [DONE] at 125;           usage  8 in / 1 out
//	D, E failed with the same message; F failed otherwise.
func fixedTimeline() []result {
	return []result{
		{sent: msd(0), chunks: chunksAt(100, 150, 250), end: msd(260), promptWords: 9, usage: &benchio.Usage{PromptTokens: 10, CompletionTokens: 3}},
		{sent: msd(50), chunks: chunksAt(200, 230), end: msd(230), promptWords: 9, usage: &benchio.Usage{PromptTokens: 12, CompletionTokens: 2}, retried: true},
		{sent: msd(100), chunks: chunksAt(120), end: msd(125), promptWords: 9, usage: &benchio.Usage{PromptTokens: 8, CompletionTokens: 1}},
		{sent: msd(10), promptWords: 9, err: "HTTP 500: boom"},
		{sent: msd(20), promptWords: 7, err: "HTTP 500: boom"},
		{sent: msd(30), promptWords: 7, err: "timeout after 1s", retried: true},
	}
}

func TestSummarizeFixedTimeline(t *testing.T) {
	s := summarize(fixedTimeline(), time.Second)
	ints := []struct {
		name      string
		got, want int
	}{
		{"completed", s.Completed, 3},
		{"failed", s.Failed, 3},
		{"total input", s.TotalInputTokens, 30},
		{"total output", s.TotalOutputTokens, 6},
		{"max concurrent", s.MaxConcurrentRequests, 3},
		{"retries", s.retries, 2}, // one completed, one failed
	}
	for _, c := range ints {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	floats := []struct {
		name      string
		got, want float64
	}{
		{"duration", s.Duration, 1},
		{"request throughput", s.RequestThroughput, 3},
		{"output throughput", s.OutputThroughput, 6},
		{"total token throughput", s.TotalTokenThroughput, 36},
		{"max output tokens/s", s.MaxOutputTokensPerS, 6},
		// TTFT 100, 200, 120.
		{"mean ttft", s.MeanTTFTMs, 140},
		{"median ttft", s.MedianTTFTMs, 120},
		{"std ttft", s.StdTTFTMs, math.Sqrt(5600.0 / 3)},
		{"p99 ttft", s.P99TTFTMs, 198.4},
		// TPOT: A (260-100)/2 = 80, B (230-200)/1 = 30; C has one token.
		{"mean tpot", s.MeanTPOTMs, 55},
		{"median tpot", s.MedianTPOTMs, 55},
		{"std tpot", s.StdTPOTMs, 25},
		{"p99 tpot", s.P99TPOTMs, 79.5},
		// ITL: A 50, 100; B 30.
		{"mean itl", s.MeanITLMs, 60},
		{"median itl", s.MedianITLMs, 50},
		{"std itl", s.StdITLMs, math.Sqrt(2600.0 / 3)},
		{"p99 itl", s.P99ITLMs, 99},
		// E2EL 260, 230, 125.
		{"mean e2el", s.MeanE2ELMs, 205},
		{"median e2el", s.MedianE2ELMs, 230},
		{"std e2el", s.StdE2ELMs, math.Sqrt(10050.0 / 3)},
		{"p99 e2el", s.P99E2ELMs, 259.4},
	}
	for _, c := range floats {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.inputSource != SourceUsage || s.outputSource != SourceUsage {
		t.Errorf("sources = %q, %q, want usage, usage", s.inputSource, s.outputSource)
	}
	wantErrs := []benchio.ErrorSample{{Message: "HTTP 500: boom", Count: 2}, {Message: "timeout after 1s", Count: 1}}
	if len(s.errorSamples) != len(wantErrs) {
		t.Fatalf("error samples = %v, want %v", s.errorSamples, wantErrs)
	}
	for i := range wantErrs {
		if s.errorSamples[i] != wantErrs[i] {
			t.Errorf("error sample %d = %v, want %v", i, s.errorSamples[i], wantErrs[i])
		}
	}
	// Detailed arrays, vLLM style: every request, zeros for failures.
	wantIn := []int{10, 12, 8, 9, 7, 7}
	wantOut := []int{3, 2, 1, 0, 0, 0}
	for i := range wantIn {
		if s.inputLens[i] != wantIn[i] || s.outputLens[i] != wantOut[i] {
			t.Errorf("request %d lens = %d/%d, want %d/%d", i, s.inputLens[i], s.outputLens[i], wantIn[i], wantOut[i])
		}
	}
	if !near(s.ttfts[1], 0.2) || s.ttfts[3] != 0 || len(s.itls[0]) != 2 || !near(s.itls[0][1], 0.1) || s.itls[3] == nil || len(s.itls[3]) != 0 {
		t.Errorf("detailed ttfts %v itls %v", s.ttfts, s.itls)
	}
	if s.errors[0] != "" || s.errors[5] != "timeout after 1s" {
		t.Errorf("detailed errors %q", s.errors)
	}
}

func TestSummarizeTokenSources(t *testing.T) {
	withUsage := result{chunks: chunksAt(10, 20), end: msd(20), promptWords: 5, usage: &benchio.Usage{PromptTokens: 6, CompletionTokens: 4}}
	noUsage := result{chunks: chunksAt(10, 20, 30), end: msd(30), promptWords: 5}
	zeroUsage := result{chunks: chunksAt(10), end: msd(10), promptWords: 5, usage: &benchio.Usage{}}
	failed := result{promptWords: 5, err: "x"}
	tests := []struct {
		name            string
		results         []result
		in, out         TokenSource
		totalIn, totOut int
	}{
		{"all usage", []result{withUsage, withUsage}, SourceUsage, SourceUsage, 12, 8},
		{"no usage counts chunks and words", []result{noUsage, noUsage}, SourceWords, SourceChunks, 10, 6},
		{"zero usage falls back", []result{zeroUsage}, SourceWords, SourceChunks, 5, 1},
		{"mixed", []result{withUsage, noUsage}, SourceMixed, SourceMixed, 11, 7},
		{"failures do not count", []result{withUsage, failed}, SourceUsage, SourceUsage, 6, 4},
		{"nothing completed", []result{failed}, SourceNone, SourceNone, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := summarize(tt.results, time.Second)
			if s.inputSource != tt.in || s.outputSource != tt.out {
				t.Errorf("sources = %q/%q, want %q/%q", s.inputSource, s.outputSource, tt.in, tt.out)
			}
			if s.TotalInputTokens != tt.totalIn || s.TotalOutputTokens != tt.totOut {
				t.Errorf("totals = %d/%d, want %d/%d", s.TotalInputTokens, s.TotalOutputTokens, tt.totalIn, tt.totOut)
			}
		})
	}
}

func TestSummarizeEmptyAndZeroDuration(t *testing.T) {
	s := summarize([]result{{err: "x"}}, 0)
	if s.RequestThroughput != 0 || s.OutputThroughput != 0 || s.MeanTTFTMs != 0 || s.MaxOutputTokensPerS != 0 {
		t.Errorf("want zeros for a run with nothing completed, got %+v", s.Metrics)
	}
}

func TestPeaks(t *testing.T) {
	sec := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	results := []result{
		// Active in seconds 0-1; chunks at 0.5, 1.2, 1.4.
		{sent: 0, chunks: []time.Duration{sec(0.5), sec(1.2), sec(1.4)}, end: sec(1.5)},
		// Active in seconds 1-2; chunks at 1.3, 2.1.
		{sent: sec(1.1), chunks: []time.Duration{sec(0.2), sec(1.0)}, end: sec(1.0)},
		// Failed requests are ignored.
		{sent: sec(1.0), err: "x"},
	}
	tokens, active := peaks(results)
	if tokens != 3 || active != 2 {
		t.Errorf("peaks = %v tokens/s, %d requests, want 3, 2", tokens, active)
	}
}
