package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func fixedReport(detailed bool) *Report {
	cfg := DefaultConfig()
	cfg.Label = "base"
	cfg.Detailed = detailed
	finished := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	return newReport(&cfg, "fake-model", fixedTimeline(), time.Second, finished)
}

func TestWriteText(t *testing.T) {
	var buf bytes.Buffer
	if err := fixedReport(false).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// Lines as vLLM prints them: "{:<40} {:<10}" and "{:<40} {:<10.2f}".
	for _, want := range []string{
		"============ Serving Benchmark Result ============\n",
		"Successful requests:                     3         \n",
		"Failed requests:                         3         \n",
		"Retries on a new connection:             2         \n",
		"Benchmark duration (s):                  1.00      \n",
		"Total input tokens:                      30        \n",
		"Total generated tokens:                  6         \n",
		"Request throughput (req/s):              3.00      \n",
		"Output token throughput (tok/s):         6.00      \n",
		"Peak output token throughput (tok/s):    6.00      \n",
		"Peak concurrent requests:                3.00      \n",
		"Total Token throughput (tok/s):          36.00     \n",
		"---------------Time to First Token----------------\n",
		"Mean TTFT (ms):                          140.00    \n",
		"Median TTFT (ms):                        120.00    \n",
		"P99 TTFT (ms):                           198.40    \n",
		"-----Time per Output Token (excl. 1st token)------\n",
		"Mean TPOT (ms):                          55.00     \n",
		"---------------Inter-token Latency----------------\n",
		"P99 ITL (ms):                            99.00     \n",
		"----------------End-to-end Latency----------------\n",
		"Median E2EL (ms):                        230.00    \n",
		"Output tokens counted from:              server usage\n",
		"Dataset:                                 random: input 1024 words, output 128\n",
		"     2x HTTP 500: boom\n",
		"\n==================================================\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"Maximum request concurrency", "Request rate configured"} {
		if strings.Contains(out, absent) {
			t.Errorf("text report has %q, which is for limited runs only", absent)
		}
	}

	rep := fixedReport(false)
	c := 4
	rep.MaxConcurrency, rep.RequestRate = &c, 2.5
	buf.Reset()
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Maximum request concurrency:             4         \n",
		"Request rate configured (RPS):           2.50      \n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
}

// vllmKeys are the result-JSON keys of `vllm bench serve` that we produce.
var vllmKeys = []string{
	"date", "backend", "label", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency",
	"duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
	"request_throughput", "output_throughput", "total_token_throughput",
	"max_output_tokens_per_s", "max_concurrent_requests",
	"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
	"mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
	"mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms",
	"mean_e2el_ms", "median_e2el_ms", "std_e2el_ms", "p99_e2el_ms",
}

var detailedKeys = []string{"input_lens", "output_lens", "ttfts", "itls", "errors"}

func TestReportJSON(t *testing.T) {
	for _, detailed := range []bool{false, true} {
		b, err := json.Marshal(fixedReport(detailed))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range vllmKeys {
			if _, ok := m[k]; !ok {
				t.Errorf("JSON lacks vLLM key %q", k)
			}
		}
		for _, k := range detailedKeys {
			if _, ok := m[k]; ok != detailed {
				t.Errorf("detailed=%v: key %q present=%v", detailed, k, ok)
			}
		}
		if m["request_rate"] != "inf" || m["max_concurrency"] != nil || m["date"] != "20250304-050607" || m["backend"] != "openai" {
			t.Errorf("request_rate %v, max_concurrency %v, date %v, backend %v", m["request_rate"], m["max_concurrency"], m["date"], m["backend"])
		}
		if m["output_tokens_source"] != "usage" || m["p99_ttft_ms"] != 198.4 || m["completed"] != 3.0 {
			t.Errorf("output_tokens_source %v, p99_ttft_ms %v, completed %v", m["output_tokens_source"], m["p99_ttft_ms"], m["completed"])
		}
		if m["retries"] != 2.0 || m["dataset_name"] != "random" || m["random_input_len"] != 1024.0 {
			t.Errorf("retries %v, dataset_name %v, random_input_len %v", m["retries"], m["dataset_name"], m["random_input_len"])
		}
		if _, ok := m["prefix_repetition_num_prefixes"]; ok {
			t.Error("a random run reports prefix_repetition fields")
		}
	}
}

func TestRateJSON(t *testing.T) {
	for _, r := range []Rate{Rate(math.Inf(1)), 2.5, 10} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Rate
		if err := json.Unmarshal(b, &back); err != nil || back != r {
			t.Errorf("%v -> %s -> %v, %v", r, b, back, err)
		}
	}
}

func TestCenter(t *testing.T) {
	// Python: "{s:{c}^{n}}".format(s="abc", n=8, c="-") == "--abc---"
	if got := center("abc", 8, '-'); got != "--abc---" {
		t.Errorf("center = %q", got)
	}
	if got := center("toolong", 3, '-'); got != "toolong" {
		t.Errorf("center = %q", got)
	}
}

func TestWriteTextCountsEveryFailure(t *testing.T) {
	// Seven distinct messages: five are sampled, the other two still show.
	var results []result
	for i := range 7 {
		results = append(results, result{err: fmt.Sprintf("failure %d", i)})
	}
	results = append(results, result{chunks: chunksAt(10, 20), end: msd(20), promptWords: 3})
	cfg := DefaultConfig()
	rep := newReport(&cfg, "m", results, time.Second, time.Now())
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"Failed requests:                         7         \n",
		"     1x failure 0\n",
		"     1x failure 4\n",
		"     2x (other messages; --save-detailed keeps every one)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "failure 5") {
		t.Errorf("more than five messages sampled:\n%s", out)
	}
}

func TestWriteTextPrefixRepetition(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dataset = DatasetPrefixRepetition
	rep := newReport(&cfg, "m", fixedTimeline(), time.Second, time.Now())
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if want := "Dataset:                                 prefix_repetition: 10 prefixes of 256 words, suffixes of 256, output 128\n"; !strings.Contains(buf.String(), want) {
		t.Errorf("text report lacks %q:\n%s", want, buf.String())
	}
}
