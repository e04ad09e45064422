package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/kvcache"
	"github.com/llmserve/llmserve/scheduler"
)

func TestEngineMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats := scheduler.Stats{Running: 3, Waiting: 2, Preemptions: 4, KV: kvcache.Stats{Slots: 4, SlotTokens: 10, HeldTokens: 20, QueryTokens: 100, HitTokens: 48}}
	ready := true
	e, err := NewEngine(reg, "m", func() scheduler.Stats { return stats }, func() bool { return ready })
	if err != nil {
		t.Fatal(err)
	}
	e.StepDone(core.StepInfo{Duration: time.Millisecond, Tokens: 20, PrefillTokens: 16, DecodeTokens: 4, Generated: 5, Failures: 1, BlocksStored: 3, BlocksRemoved: 1})
	e.FirstToken(30 * time.Millisecond)
	e.RequestDone(core.RequestInfo{E2E: time.Second, Usage: scheduler.Usage{PromptTokens: 16, CompletionTokens: 5}, Reason: scheduler.FinishStop})
	e.EngineRestarted()
	ready = false
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
# HELP llmserve_engine_restarts_total Times the engine failed and was restarted with a fresh context (its requests ended with an error).
# TYPE llmserve_engine_restarts_total counter
llmserve_engine_restarts_total{model_name="m"} 1
# HELP llmserve_engine_sequence_failures_total Sequences the engine failed alone (their decode or sampling failed); the rest of their batch went on.
# TYPE llmserve_engine_sequence_failures_total counter
llmserve_engine_sequence_failures_total{model_name="m"} 1
# HELP llmserve_kv_cache_events_total Prefix-cache block events (stored, removed), drained from the KV manager every step.
# TYPE llmserve_kv_cache_events_total counter
llmserve_kv_cache_events_total{kind="removed",model_name="m"} 1
llmserve_kv_cache_events_total{kind="stored",model_name="m"} 3
# HELP llmserve_model_ready 1 when the model serves requests, 0 while its engine restarts or after it stopped.
# TYPE llmserve_model_ready gauge
llmserve_model_ready{model_name="m"} 0
`
	names := []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits_total",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
		"llmserve_engine_restarts_total", "llmserve_engine_sequence_failures_total", "llmserve_kv_cache_events_total", "llmserve_model_ready"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "vllm:time_to_first_token_seconds"); n != 1 {
		t.Fatalf("ttft series: %d", n)
	}
	// A second model registers beside the first.
	if _, err := NewEngine(reg, "other", func() scheduler.Stats { return stats }, func() bool { return true }); err != nil {
		t.Fatalf("second model: %v", err)
	}
}

// Speculative decoding's counters carry vLLM's names, one series per
// draft position; the time per output token splits a step among the
// tokens a sequence got from it.
func TestSpecDecodeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats := scheduler.Stats{Spec: scheduler.SpecStats{Drafts: 4, DraftTokens: 12, AcceptedTokens: 7, AcceptedPerPos: []uint64{4, 2, 1}}}
	e, err := NewEngine(reg, "m", func() scheduler.Stats { return stats }, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	e.StepDone(core.StepInfo{Duration: 40 * time.Millisecond, Tokens: 6, DecodeTokens: 6, Generated: 5, DecodeSamples: []int{4, 1}})
	want := `
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts (a decode step of a sequence that carried draft tokens).
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{model_name="m"} 4
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{model_name="m"} 12
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 7
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0"} 4
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="1"} 2
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
		"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total"); err != nil {
		t.Fatal(err)
	}
	// 4 tokens of 10ms and one of 40ms.
	h := &dto.Metric{}
	if err := e.tpot.(prometheus.Histogram).Write(h); err != nil {
		t.Fatal(err)
	}
	if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 5 || sum < 0.0799 || sum > 0.0801 {
		t.Fatalf("tpot: %d observations summing to %g", n, sum)
	}
}

// Paced steps and the steps each prompt took are histograms whose buckets
// hold the usual thresholds: a step without paced long prompts and a
// request whose prompt was never computed are not observed.
func TestPacingMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := NewEngine(reg, "m", func() scheduler.Stats { return scheduler.Stats{} }, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	e.StepDone(core.StepInfo{Tokens: 9, DecodeTokens: 9})
	e.StepDone(core.StepInfo{Tokens: 520, PrefillTokens: 512, DecodeTokens: 8, Paced: scheduler.Pacing{Limit: 512, Tokens: 512}})
	e.StepDone(core.StepInfo{Tokens: 156, PrefillTokens: 148, DecodeTokens: 8, Paced: scheduler.Pacing{Limit: 512, Tokens: 148}})
	e.RequestDone(core.RequestInfo{PromptChunks: 2})
	e.RequestDone(core.RequestInfo{PromptChunks: 1})
	e.RequestDone(core.RequestInfo{Reason: scheduler.FinishAbort})
	want := `
# HELP llmserve_paced_prefill_tokens Histogram of the tokens long prompts (over --long-prefill-token-threshold) computed together in a step beside decoding requests: at most the threshold, less while the budget paced by measured step times is lower.
# TYPE llmserve_paced_prefill_tokens histogram
llmserve_paced_prefill_tokens_bucket{model_name="m",le="2"} 0
llmserve_paced_prefill_tokens_bucket{model_name="m",le="4"} 0
llmserve_paced_prefill_tokens_bucket{model_name="m",le="8"} 0
llmserve_paced_prefill_tokens_bucket{model_name="m",le="16"} 0
llmserve_paced_prefill_tokens_bucket{model_name="m",le="32"} 0
llmserve_paced_prefill_tokens_bucket{model_name="m",le="64"} 0
llmserve_paced_prefill_tokens_bucket{model_name="m",le="128"} 0
llmserve_paced_prefill_tokens_bucket{model_name="m",le="256"} 1
llmserve_paced_prefill_tokens_bucket{model_name="m",le="512"} 2
llmserve_paced_prefill_tokens_bucket{model_name="m",le="1024"} 2
llmserve_paced_prefill_tokens_bucket{model_name="m",le="2048"} 2
llmserve_paced_prefill_tokens_bucket{model_name="m",le="4096"} 2
llmserve_paced_prefill_tokens_bucket{model_name="m",le="8192"} 2
llmserve_paced_prefill_tokens_bucket{model_name="m",le="+Inf"} 2
llmserve_paced_prefill_tokens_sum{model_name="m"} 660
llmserve_paced_prefill_tokens_count{model_name="m"} 2
# HELP llmserve_request_prefill_chunks Histogram of the steps a finished request's prompt was computed in: 1 unless the token budget or a long prompt's pacing split it, or a preemption made it compute again.
# TYPE llmserve_request_prefill_chunks histogram
llmserve_request_prefill_chunks_bucket{model_name="m",le="1"} 1
llmserve_request_prefill_chunks_bucket{model_name="m",le="2"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="3"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="4"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="6"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="8"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="12"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="16"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="24"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="32"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="64"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="128"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="256"} 2
llmserve_request_prefill_chunks_bucket{model_name="m",le="+Inf"} 2
llmserve_request_prefill_chunks_sum{model_name="m"} 3
llmserve_request_prefill_chunks_count{model_name="m"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmserve_paced_prefill_tokens", "llmserve_request_prefill_chunks"); err != nil {
		t.Fatal(err)
	}
}
