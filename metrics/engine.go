package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmserve/llmserve/core"
	"github.com/llmserve/llmserve/scheduler"
)

// Engine records one served model's engine metrics. It implements
// core.Observer.
type Engine struct {
	restarts         prometheus.Counter
	failures         prometheus.Counter
	kvEvents         *prometheus.CounterVec
	promptTokens     prometheus.Counter
	generationTokens prometheus.Counter
	decodedTokens    prometheus.Counter
	steps            prometheus.Counter
	ttft             prometheus.Observer
	e2e              prometheus.Observer
	tpot             prometheus.Observer
	stepDuration     prometheus.Observer
	iterationTokens  prometheus.Observer
	promptHist       prometheus.Observer
	genHist          prometheus.Observer
	pacedPrefill     prometheus.Observer
	promptChunks     prometheus.Observer
	success          *prometheus.CounterVec
}

// latencyBuckets follow vLLM's TTFT buckets, in seconds.
var latencyBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}

var tokenBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}

// pacedBuckets are powers of two, so that the usual thresholds (the
// default 512, 256, 1024, ...) are bucket bounds: a scrape tells whether
// any paced step went over them.
var pacedBuckets = prometheus.ExponentialBuckets(2, 2, 13) // 2 .. 8192

// chunkBuckets count the steps a prompt took.
var chunkBuckets = []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256}

// NewEngine registers the metrics of model on reg. stats returns the
// engine core's latest snapshot and ready its readiness; they are called at
// scrape time.
func NewEngine(reg prometheus.Registerer, model string, stats func() scheduler.Stats, ready func() bool) (*Engine, error) {
	labels := prometheus.Labels{"model_name": model}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	gauge := func(name, help string, f func(scheduler.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(stats()) })
	}
	counterFunc := func(name, help string, f func(scheduler.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(stats()) })
	}
	ttft := hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", latencyBuckets)
	e2e := hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", latencyBuckets)
	tpot := hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", latencyBuckets)
	stepDur := hist("llmserve_engine_step_duration_seconds", "Histogram of the duration of one engine step (one llama_decode and sampling).", latencyBuckets)
	iterTokens := hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine step.", tokenBuckets)
	promptHist := hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokenBuckets)
	genHist := hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokenBuckets)
	pacedPrefill := hist("llmserve_paced_prefill_tokens", "Histogram of the tokens long prompts (over --long-prefill-token-threshold) computed together in a step beside decoding requests: at most the threshold, less while the budget paced by measured step times is lower.", pacedBuckets)
	promptChunks := hist("llmserve_request_prefill_chunks", "Histogram of the steps a finished request's prompt was computed in: 1 unless the token budget or a long prompt's pacing split it, or a preemption made it compute again.", chunkBuckets)
	e := &Engine{
		restarts: counter("llmserve_engine_restarts_total", "Times the engine failed and was restarted with a fresh context (its requests ended with an error)."),
		failures: counter("llmserve_engine_sequence_failures_total", "Sequences the engine failed alone (their decode or sampling failed); the rest of their batch went on."),
		kvEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmserve_kv_cache_events_total", Help: "Prefix-cache block events (stored, removed), drained from the KV manager every step.", ConstLabels: labels,
		}, []string{"kind"}),
		promptTokens:     counter("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		generationTokens: counter("vllm:generation_tokens_total", "Number of generation tokens processed."),
		decodedTokens:    counter("llmserve_engine_decoded_tokens_total", "Tokens passed to llama_decode (prompt tokens found in the prefix cache are not)."),
		steps:            counter("llmserve_engine_steps_total", "Engine steps executed."),
		ttft:             ttft,
		e2e:              e2e,
		tpot:             tpot,
		stepDuration:     stepDur,
		iterationTokens:  iterTokens,
		promptHist:       promptHist,
		genHist:          genHist,
		pacedPrefill:     pacedPrefill,
		promptChunks:     promptChunks,
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: labels,
		}, []string{"finished_reason"}),
	}
	collectors := []prometheus.Collector{
		e.restarts, e.failures, e.kvEvents,
		e.promptTokens, e.generationTokens, e.decodedTokens, e.steps, ttft, e2e, tpot, stepDur, iterTokens, promptHist, genHist, pacedPrefill, promptChunks, e.success,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llmserve_model_ready", Help: "1 when the model serves requests, 0 while its engine restarts or after it stopped.", ConstLabels: labels}, func() float64 {
			if ready() {
				return 1
			}
			return 0
		}),
		gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func(s scheduler.Stats) float64 { return float64(s.Running) }),
		gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func(s scheduler.Stats) float64 { return float64(s.Waiting) }),
		gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func(s scheduler.Stats) float64 { return s.KV.Usage() }),
		gauge("llmserve_kv_cache_slots", "Sequences the KV cache is allocated for now (one KV stream each); it grows with the load.", func(s scheduler.Stats) float64 { return float64(s.KV.ActiveSlots) }),
		gauge("llmserve_kv_cache_max_slots", "Most sequences the KV cache can grow to (max-num-seqs).", func(s scheduler.Stats) float64 { return float64(s.KV.Slots) }),
		gauge("llmserve_kv_cache_slot_tokens", "Positions one KV slot holds.", func(s scheduler.Stats) float64 { return float64(s.KV.SlotTokens) }),
		gauge("llmserve_kv_cache_committed_bytes", "KV memory resident for the positions the running sequences hold (whole pages), as the engine counts it; with KV that is not paged (on a GPU), every slot's capacity.", func(s scheduler.Stats) float64 { return float64(s.EngineKV.Committed) }),
		gauge("llmserve_kv_cache_reserved_bytes", "Address space of every KV slot's full capacity (memory only where llmserve_kv_cache_paged is 0).", func(s scheduler.Stats) float64 { return float64(s.EngineKV.Reserved) }),
		gauge("llmserve_kv_cache_paged", "1 when KV memory is committed as positions are written and given back when a sequence ends.", func(s scheduler.Stats) float64 {
			if s.EngineKV.Paged {
				return 1
			}
			return 0
		}),
		gauge("llmserve_prefix_cache_blocks", "Blocks the prefix cache keeps in host memory.", func(s scheduler.Stats) float64 { return float64(s.KV.CachedBlocks) }),
		gauge("llmserve_prefix_cache_bytes", "Host memory the prefix cache's blocks take.", func(s scheduler.Stats) float64 { return float64(s.KV.CachedBytes) }),
		gauge("llmserve_prefix_cache_limit_bytes", "Host memory the prefix cache may take.", func(s scheduler.Stats) float64 { return float64(s.KV.CacheBytesLimit) }),
		counterFunc("llmserve_kv_cache_events_dropped_total", "Prefix-cache events dropped because the outbox was full.", func(s scheduler.Stats) float64 { return float64(s.KV.EventsDropped) }),
		counterFunc("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", func(s scheduler.Stats) float64 { return float64(s.KV.QueryTokens) }),
		counterFunc("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", func(s scheduler.Stats) float64 { return float64(s.KV.HitTokens) }),
		counterFunc("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", func(s scheduler.Stats) float64 { return float64(s.Preemptions) }),
		counterFunc("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts (a decode step of a sequence that carried draft tokens).", func(s scheduler.Stats) float64 { return float64(s.Spec.Drafts) }),
		counterFunc("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", func(s scheduler.Stats) float64 { return float64(s.Spec.DraftTokens) }),
		counterFunc("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", func(s scheduler.Stats) float64 { return float64(s.Spec.AcceptedTokens) }),
		&perPosition{desc: prometheus.NewDesc("vllm:spec_decode_num_accepted_tokens_per_pos_total", "Accepted tokens per draft position.", []string{"position"}, labels), stats: stats},
		counterFunc("llmserve_thinking_budget_ends_total", "Thinking sections ended by the reasoning budget (the end-of-thinking tokens forced).", func(s scheduler.Stats) float64 { return float64(s.ThinkingForced) }),
		counterFunc("llmserve_lora_adapter_switches_total", "Batches decoded with a LoRA adapter set: one per distinct adapter per step, each an evaluation of its own (llama.cpp applies adapters per context); divided by llmserve_engine_steps_total, the switches per step.", func(s scheduler.Stats) float64 { return float64(s.AdapterSwitches) }),
		counterFunc("llmserve_prefix_cache_evictions_total", "Cached blocks evicted to stay within the prefix cache's memory.", func(s scheduler.Stats) float64 { return float64(s.KV.Evictions) }),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// StepDone implements core.Observer.
func (e *Engine) StepDone(s core.StepInfo) {
	e.steps.Inc()
	e.failures.Add(float64(s.Failures))
	e.kvEvents.WithLabelValues("stored").Add(float64(s.BlocksStored))
	e.kvEvents.WithLabelValues("removed").Add(float64(s.BlocksRemoved))
	e.decodedTokens.Add(float64(s.Tokens))
	e.promptTokens.Add(float64(s.PrefillTokens))
	e.generationTokens.Add(float64(s.Generated))
	e.stepDuration.Observe(s.Duration.Seconds())
	e.iterationTokens.Observe(float64(s.Tokens))
	if s.Paced.Limit > 0 && s.Paced.Tokens > 0 {
		e.pacedPrefill.Observe(float64(s.Paced.Tokens))
	}
	// Each token sampled by a sequence that was already decoding waited one
	// step for it; with speculative decoding the step brought n tokens,
	// each 1/n of it.
	if s.DecodeSamples == nil {
		for range s.DecodeTokens {
			e.tpot.Observe(s.Duration.Seconds())
		}
	}
	for _, n := range s.DecodeSamples {
		for range n {
			e.tpot.Observe(s.Duration.Seconds() / float64(n))
		}
	}
}

// FirstToken implements core.Observer.
func (e *Engine) FirstToken(ttft time.Duration) { e.ttft.Observe(ttft.Seconds()) }

// EngineRestarted implements core.Observer.
func (e *Engine) EngineRestarted() { e.restarts.Inc() }

// RequestDone implements core.Observer.
func (e *Engine) RequestDone(r core.RequestInfo) {
	e.e2e.Observe(r.E2E.Seconds())
	e.promptHist.Observe(float64(r.Usage.PromptTokens))
	e.genHist.Observe(float64(r.Usage.CompletionTokens))
	if r.PromptChunks > 0 {
		e.promptChunks.Observe(float64(r.PromptChunks))
	}
	reason := string(r.Reason)
	if reason == "" {
		reason = "abort"
	}
	e.success.WithLabelValues(reason).Inc()
}

// perPosition exports vllm:spec_decode_num_accepted_tokens_per_pos_total,
// one series per draft position, read from the scheduler's snapshot at
// scrape time (positions are 0 .. num_speculative_tokens-1; none without
// speculative decoding).
type perPosition struct {
	desc  *prometheus.Desc
	stats func() scheduler.Stats
}

func (p *perPosition) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *perPosition) Collect(ch chan<- prometheus.Metric) {
	for i, n := range p.stats().Spec.AcceptedPerPos {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.CounterValue, float64(n), strconv.Itoa(i))
	}
}
