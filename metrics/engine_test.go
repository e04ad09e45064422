package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/scheduler"
)

func TestEngineMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats := scheduler.Stats{Running: 3, Waiting: 2, Preemptions: 4, KV: kvcache.Stats{Blocks: 10, UsedBlocks: 5, QueryTokens: 100, HitTokens: 48}}
	e, err := NewEngine(reg, "m", func() scheduler.Stats { return stats })
	if err != nil {
		t.Fatal(err)
	}
	e.StepDone(scheduler.StepInfo{Duration: time.Millisecond, Tokens: 20, PrefillTokens: 16, DecodeTokens: 4, Generated: 5})
	e.FirstToken(30 * time.Millisecond)
	e.RequestDone(scheduler.RequestInfo{E2E: time.Second, Usage: scheduler.Usage{PromptTokens: 16, CompletionTokens: 5}, Reason: scheduler.FinishStop})
	want := `
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 2
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.5
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} 48
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} 16
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m"} 5
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{finished_reason="stop",model_name="m"} 1
`
	names := []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits_total",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "vllm:time_to_first_token_seconds"); n != 1 {
		t.Fatalf("ttft series: %d", n)
	}
	// A second model registers beside the first.
	if _, err := NewEngine(reg, "other", func() scheduler.Stats { return stats }); err != nil {
		t.Fatalf("second model: %v", err)
	}
}
