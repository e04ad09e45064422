package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// Report is the result of one Run. Its JSON encoding is flat and uses the
// field names of vLLM's result file where vLLM has one, so existing scripts
// and dashboards read both; fields vLLM lacks are marked "llmserve".
type Report struct {
	// Date is when the run finished, local time, vLLM's "20060102-150405".
	Date string `json:"date"`
	// Label is Config.Label (vLLM's --label); omitted when empty.
	Label string `json:"label,omitempty"`
	// Backend is vLLM's name for the request shape: "openai"
	// (completions) or "openai-chat".
	Backend string `json:"backend"`
	// Endpoint is "completions" or "chat" (llmserve).
	Endpoint Endpoint `json:"endpoint"`
	// BaseURL is the server benchmarked (llmserve).
	BaseURL string `json:"base_url"`
	// ModelID is the model sent with every request.
	ModelID string `json:"model_id"`
	// NumPrompts is the number of measured requests.
	NumPrompts int `json:"num_prompts"`
	// RequestRate is the configured arrival rate; "inf" when unlimited.
	RequestRate Rate `json:"request_rate"`
	// Burstiness is always 1: arrivals are Poisson.
	Burstiness float64 `json:"burstiness"`
	// MaxConcurrency is the cap on requests in flight, null when none.
	MaxConcurrency *int `json:"max_concurrency"`

	Metrics

	// InputTokensSource says where TotalInputTokens came from: "usage"
	// (server-reported prompt_tokens), "words" (estimated from the prompt's
	// word count) or "mixed" (llmserve).
	InputTokensSource TokenSource `json:"input_tokens_source"`
	// OutputTokensSource says where TotalOutputTokens came from: "usage"
	// (server-reported completion_tokens), "chunks" (one per content
	// chunk) or "mixed" (llmserve).
	OutputTokensSource TokenSource `json:"output_tokens_source"`
	// ErrorSamples holds up to five distinct failure messages, in request
	// order, with their counts (llmserve). Failures with other messages
	// count only in Failed (and in Errors with Config.Detailed).
	ErrorSamples []benchio.ErrorSample `json:"error_samples,omitempty"`
	// Retries counts the measured requests, completed or failed, whose
	// first attempt failed on a reused connection before any response byte
	// and that were sent again on a new connection (llmserve). A nonzero
	// value means the server closes connections it advertised as
	// kept-alive.
	Retries int `json:"retries"`
	// TextlessRequests counts completed requests whose stream carried no
	// text, only a finishing chunk and usage with output tokens (a model
	// that generated, say, bytes that are not UTF-8, which llama-server
	// withholds); their TTFT is the finishing chunk's arrival (llmserve).
	TextlessRequests int `json:"textless_requests"`

	// The workload (llmserve; vLLM keeps these only in its arguments).
	// DatasetName is "random" or "prefix_repetition". The random_* fields
	// and shared_prefix_len are those of the random dataset, 0 for the
	// other; the prefix_repetition_* ones are present only for
	// prefix_repetition.
	DatasetName                 Dataset `json:"dataset_name"`
	RandomInputLen              int     `json:"random_input_len"`
	RandomOutputLen             int     `json:"random_output_len"`
	RandomRangeRatio            float64 `json:"random_range_ratio"`
	SharedPrefixLen             int     `json:"shared_prefix_len"`
	PrefixRepetitionPrefixLen   int     `json:"prefix_repetition_prefix_len,omitempty"`
	PrefixRepetitionSuffixLen   int     `json:"prefix_repetition_suffix_len,omitempty"`
	PrefixRepetitionNumPrefixes int     `json:"prefix_repetition_num_prefixes,omitempty"`
	PrefixRepetitionOutputLen   int     `json:"prefix_repetition_output_len,omitempty"`
	MixedLongClients            int     `json:"mixed_long_clients,omitempty"`
	MixedLongPrompts            int     `json:"mixed_long_prompts,omitempty"`
	MixedLongInputLen           int     `json:"mixed_long_input_len,omitempty"`
	MixedShortInputLen          int     `json:"mixed_short_input_len,omitempty"`
	MixedOutputLen              int     `json:"mixed_output_len,omitempty"`
	Seed                        int64   `json:"seed"`
	IgnoreEOS                   bool    `json:"ignore_eos"`
	Temperature                 float64 `json:"temperature"`
	Warmup                      int     `json:"num_warmups"`

	// MixedLong and MixedShort are the metrics of the mixed dataset's long
	// and short requests apart (llmserve), each over the whole run's
	// duration: what the short requests' TTFT and ITL were with the long
	// ones beside them. Absent for other datasets.
	MixedLong  *Metrics `json:"mixed_long,omitempty"`
	MixedShort *Metrics `json:"mixed_short,omitempty"`

	// ServerStats are the server's memory and running sequences, when
	// Config.Monitor watched it (llmserve).
	ServerStats

	// Per-request arrays, present only with Config.Detailed (vLLM's
	// --save-detailed), in request order; failed requests have 0 output,
	// 0 TTFT, no ITLs and their error. Times in seconds, as vLLM writes them.
	InputLens  []int       `json:"input_lens,omitempty"`
	OutputLens []int       `json:"output_lens,omitempty"`
	TTFTs      []float64   `json:"ttfts,omitempty"`
	ITLs       [][]float64 `json:"itls,omitempty"`
	Errors     []string    `json:"errors,omitempty"`
}

// Rate is a request rate in requests per second that encodes +Inf as the
// JSON string "inf", as vLLM writes it.
type Rate float64

// MarshalJSON implements json.Marshaler.
func (r Rate) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(r), 1) {
		return []byte(`"inf"`), nil
	}
	return strconv.AppendFloat(nil, float64(r), 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *Rate) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("request rate %s: %w", b, err)
	}
	*r = Rate(f)
	return nil
}

// newReport assembles the report of a run.
func newReport(cfg *Config, model string, results []result, duration time.Duration, finished time.Time) *Report {
	s := summarize(results, duration)
	rep := &Report{
		Date:               finished.Format("20060102-150405"),
		Label:              cfg.Label,
		Backend:            cfg.Endpoint.backend(),
		Endpoint:           cfg.Endpoint,
		BaseURL:            cfg.BaseURL,
		ModelID:            model,
		NumPrompts:         cfg.NumPrompts,
		RequestRate:        Rate(cfg.RequestRate),
		Burstiness:         1,
		Metrics:            s.Metrics,
		InputTokensSource:  s.inputSource,
		OutputTokensSource: s.outputSource,
		ErrorSamples:       s.errorSamples,
		Retries:            s.retries,
		TextlessRequests:   s.textless,
		Seed:               cfg.Seed,
		IgnoreEOS:          cfg.IgnoreEOS,
		Temperature:        cfg.Temperature,
		Warmup:             cfg.Warmup,
	}
	switch cfg.Dataset {
	case DatasetPrefixRepetition:
		p := cfg.PrefixRepetition
		rep.DatasetName = DatasetPrefixRepetition
		rep.PrefixRepetitionPrefixLen, rep.PrefixRepetitionSuffixLen = p.PrefixLen, p.SuffixLen
		rep.PrefixRepetitionNumPrefixes, rep.PrefixRepetitionOutputLen = p.NumPrefixes, p.OutputLen
	case DatasetMixed:
		m := cfg.Mixed
		rep.DatasetName = DatasetMixed
		rep.MixedLongClients, rep.MixedLongPrompts = m.LongClients, m.longPrompts()
		rep.MixedLongInputLen, rep.MixedShortInputLen, rep.MixedOutputLen = m.LongInputLen, m.ShortInputLen, m.OutputLen
		var long, short []result
		for i := range results {
			if results[i].long {
				long = append(long, results[i])
			} else {
				short = append(short, results[i])
			}
		}
		rep.MixedLong, rep.MixedShort = ptr(summarize(long, duration).Metrics), ptr(summarize(short, duration).Metrics)
	default:
		rep.DatasetName = DatasetRandom
		rep.RandomInputLen, rep.RandomOutputLen = cfg.RandomInputLen, cfg.RandomOutputLen
		rep.RandomRangeRatio, rep.SharedPrefixLen = cfg.RandomRangeRatio, cfg.SharedPrefixLen
	}
	if cfg.MaxConcurrency > 0 {
		c := cfg.MaxConcurrency
		rep.MaxConcurrency = &c
	}
	if cfg.Detailed {
		rep.InputLens, rep.OutputLens, rep.TTFTs, rep.ITLs, rep.Errors = s.inputLens, s.outputLens, s.ttfts, s.itls, s.errors
	}
	return rep
}

// WriteText writes the report as vLLM's "Serving Benchmark Result" table,
// with the same lines and formats, plus standard deviations and a last
// section saying where token counts came from and what failed.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	line := func(label string, value any) {
		switch v := value.(type) {
		case float64:
			fmt.Fprintf(bw, "%-40s %-10.2f\n", label, v)
		default:
			fmt.Fprintf(bw, "%-40s %-10v\n", label, v)
		}
	}
	header := func(title string, fill byte) { fmt.Fprintln(bw, center(title, 50, fill)) }

	header(" Serving Benchmark Result ", '=')
	line("Successful requests:", r.Completed)
	line("Failed requests:", r.Failed)
	line("Retries on a new connection:", r.Retries)
	if r.TextlessRequests > 0 {
		line("Completed without text:", r.TextlessRequests)
	}
	if r.MaxConcurrency != nil {
		line("Maximum request concurrency:", *r.MaxConcurrency)
	}
	if !math.IsInf(float64(r.RequestRate), 1) {
		line("Request rate configured (RPS):", float64(r.RequestRate))
	}
	line("Benchmark duration (s):", r.Duration)
	line("Total input tokens:", r.TotalInputTokens)
	line("Total generated tokens:", r.TotalOutputTokens)
	line("Request throughput (req/s):", r.RequestThroughput)
	line("Output token throughput (tok/s):", r.OutputThroughput)
	line("Peak output token throughput (tok/s):", r.MaxOutputTokensPerS)
	line("Peak concurrent requests:", float64(r.MaxConcurrentRequests))
	line("Total Token throughput (tok/s):", r.TotalTokenThroughput)

	metric := func(title, name string, mean, median, std, p99 float64) {
		header(title, '-')
		line("Mean "+name+" (ms):", mean)
		line("Median "+name+" (ms):", median)
		line("Std "+name+" (ms):", std)
		line("P99 "+name+" (ms):", p99)
	}
	metric("Time to First Token", "TTFT", r.MeanTTFTMs, r.MedianTTFTMs, r.StdTTFTMs, r.P99TTFTMs)
	metric("Time per Output Token (excl. 1st token)", "TPOT", r.MeanTPOTMs, r.MedianTPOTMs, r.StdTPOTMs, r.P99TPOTMs)
	metric("Inter-token Latency", "ITL", r.MeanITLMs, r.MedianITLMs, r.StdITLMs, r.P99ITLMs)
	metric("End-to-end Latency", "E2EL", r.MeanE2ELMs, r.MedianE2ELMs, r.StdE2ELMs, r.P99E2ELMs)
	if r.MixedLong != nil && r.MixedShort != nil {
		header("Long and short requests (mixed)", '-')
		for _, c := range []struct {
			name string
			m    *Metrics
		}{{"Long", r.MixedLong}, {"Short", r.MixedShort}} {
			line(c.name+" requests completed:", c.m.Completed)
			line(c.name+" output throughput (tok/s):", c.m.OutputThroughput)
			line(c.name+" median / P99 TTFT (ms):", fmt.Sprintf("%.2f / %.2f", c.m.MedianTTFTMs, c.m.P99TTFTMs))
			line(c.name+" median / P99 ITL (ms):", fmt.Sprintf("%.2f / %.2f", c.m.MedianITLMs, c.m.P99ITLMs))
		}
	}
	r.writeServerStats(line, header)

	header("Run", '-')
	line("Model:", r.ModelID)
	line("Dataset:", r.describeDataset())
	line("Endpoint:", strings.TrimSuffix(r.BaseURL, "/")+r.Endpoint.path())
	if r.Label != "" {
		line("Label:", r.Label)
	}
	line("Input tokens counted from:", describeSource(r.InputTokensSource))
	line("Output tokens counted from:", describeSource(r.OutputTokensSource))
	if len(r.ErrorSamples) > 0 || r.Failed > 0 {
		header("Errors", '-')
		sampled := 0
		for _, e := range r.ErrorSamples {
			fmt.Fprintf(bw, "%6dx %s\n", e.Count, e.Message)
			sampled += e.Count
		}
		if other := r.Failed - sampled; other > 0 {
			fmt.Fprintf(bw, "%6dx (other messages; --save-detailed keeps every one)\n", other)
		}
	}
	fmt.Fprintln(bw, strings.Repeat("=", 50))
	return bw.Flush()
}

// writeServerStats adds the monitor's figures to the text report, if any.
func (r *Report) writeServerStats(line func(string, any), header func(string, byte)) {
	st := r.ServerStats
	if st.PID == 0 && st.RunningSource == "" && st.MonitorSamples == 0 {
		return
	}
	header("Server", '-')
	mib := func(label string, b *int64) {
		if b != nil {
			line(label, float64(*b)/(1<<20))
		}
	}
	mib("RSS at start (MiB):", st.RSSStartBytes)
	mib("RSS peak, VmHWM since "+st.RSSPeakSince+" (MiB):", st.RSSPeakBytes)
	mib("RSS largest sample (MiB):", st.RSSMaxSampledBytes)
	mib("RSS at end (MiB):", st.RSSEndBytes)
	if st.RunningPeak != nil {
		line("Running sequences, peak ("+st.RunningSource+"):", *st.RunningPeak)
	}
	mib("KV committed at start (MiB):", st.KVCommittedStartBytes)
	mib("KV committed peak (MiB):", st.KVCommittedPeakBytes)
	mib("KV committed at end (MiB):", st.KVCommittedEndBytes)
}

// describeDataset says in a few words what the prompts were.
func (r *Report) describeDataset() string {
	switch r.DatasetName {
	case DatasetPrefixRepetition:
		return fmt.Sprintf("prefix_repetition: %d prefixes of %d words, suffixes of %d, output %d",
			r.PrefixRepetitionNumPrefixes, r.PrefixRepetitionPrefixLen, r.PrefixRepetitionSuffixLen, r.PrefixRepetitionOutputLen)
	case DatasetMixed:
		short := 0
		if r.MaxConcurrency != nil {
			short = *r.MaxConcurrency - r.MixedLongClients
		}
		return fmt.Sprintf("mixed: %d clients send %d prompts of %d words, %d send the rest of %d words, output %d",
			r.MixedLongClients, r.MixedLongPrompts, r.MixedLongInputLen, short, r.MixedShortInputLen, r.MixedOutputLen)
	}
	d := fmt.Sprintf("random: input %d words, output %d", r.RandomInputLen, r.RandomOutputLen)
	if r.SharedPrefixLen > 0 {
		d += fmt.Sprintf(", shared prefix %d words", r.SharedPrefixLen)
	}
	if r.RandomRangeRatio > 0 {
		d += fmt.Sprintf(", range ratio %g", r.RandomRangeRatio)
	}
	return d
}

func describeSource(s TokenSource) string {
	switch s {
	case SourceUsage:
		return "server usage"
	case SourceChunks:
		return "content chunks (no usage from server)"
	case SourceWords:
		return "prompt words (no usage from server)"
	case SourceMixed:
		return "server usage where sent, else estimate"
	}
	return string(s)
}

// center pads s with fill on both sides to width n, the extra character on
// the right, like Python's "{:c^n}".
func center(s string, n int, fill byte) string {
	pad := n - len(s)
	if pad <= 0 {
		return s
	}
	left := pad / 2
	return strings.Repeat(string(fill), left) + s + strings.Repeat(string(fill), pad-left)
}
