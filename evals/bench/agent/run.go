package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// Turn is one measured turn of a session.
type Turn struct {
	// Turn is 1-based.
	Turn int `json:"turn"`
	// TTFTMs: request sent → first event carrying generated output, or,
	// for a turn that generated none (the model stopped at once), → the
	// event that ended generation (NoOutput).
	TTFTMs float64 `json:"ttft_ms"`
	// E2ELMs: request sent → end of the stream.
	E2ELMs   float64 `json:"e2el_ms"`
	NoOutput bool    `json:"no_output,omitempty"`
	// InputTokens is the whole prompt as the server counted it (Messages:
	// input + cache read + cache creation tokens); 0 when not reported.
	InputTokens int `json:"input_tokens"`
	// CachedTokens are the prompt tokens the server took from its cache,
	// -1 when it did not say; CacheSource says where the figure came from
	// ("usage", "timings": llama-server's timings.cache_n).
	CachedTokens int    `json:"cached_tokens"`
	CacheSource  string `json:"cache_source,omitempty"`
	OutputTokens int    `json:"output_tokens"`
	// Error is why the turn failed; the session stops there.
	Error string `json:"error,omitempty"`
}

// Session is one session of one API.
type Session struct {
	API     API    `json:"api"`
	Session int    `json:"session"`
	Turns   []Turn `json:"turns"`
}

// ok reports whether every turn of the session completed.
func (s *Session) ok(turns int) bool {
	return len(s.Turns) == turns && s.Turns[len(s.Turns)-1].Error == ""
}

// Summary sums up one API's sessions: medians over the completed ones.
type Summary struct {
	API       API `json:"api"`
	Completed int `json:"completed_sessions"`
	Failed    int `json:"failed_sessions"`
	// TTFTMs[k] is the median TTFT of turn k+1.
	TTFTMs []float64 `json:"median_ttft_ms_by_turn"`
	// InputTokens and CachedTokens are turn k+1's, median; cached -1 when
	// the server reported nothing.
	InputTokens  []float64 `json:"median_input_tokens_by_turn"`
	CachedTokens []float64 `json:"median_cached_tokens_by_turn"`
	// LaterTTFTMs is the median TTFT of turns 2..Turns pooled, and
	// LaterOverFirst its ratio to turn 1's median (0 with one turn).
	LaterTTFTMs    float64 `json:"median_later_ttft_ms"`
	LaterOverFirst float64 `json:"later_over_first"`
	// Errors holds up to five distinct turn failures with their counts.
	Errors []benchio.ErrorSample `json:"error_samples,omitempty"`
}

// Report is the result of Run.
type Report struct {
	Date            string    `json:"date"`
	Label           string    `json:"label,omitempty"`
	BaseURL         string    `json:"base_url"`
	ModelID         string    `json:"model_id"`
	PrefixWords     int       `json:"prefix_len"`
	Tools           int       `json:"tools"`
	Turns           int       `json:"turns"`
	UserWords       int       `json:"user_len"`
	ToolResultWords int       `json:"tool_result_len"`
	OutputLen       int       `json:"output_len"`
	Seed            int64     `json:"seed"`
	Summaries       []Summary `json:"summaries"`
	Sessions        []Session `json:"sessions"`
}

// agentClient sends one session's turns.
type agentClient struct {
	http   *http.Client
	cfg    *Config
	model  string
	logger *slog.Logger
}

// Run runs cfg's sessions, API by API, one turn at a time, and sums
// them up. Each turn goes out on a new connection (no keep-alive: one
// request at a time, and llama-server closes kept-alive connections after
// a stream anyway), so nothing of one turn waits on another. It fails only
// for a bad config, a failed model lookup or ctx ending; failed turns are in
// the report.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	c := &agentClient{http: &http.Client{Transport: benchio.NewTransport(1, false)}, cfg: &cfg, model: cfg.Model, logger: logger}
	if c.model == "" {
		m, err := benchio.FirstModel(ctx, c.http, base, cfg.APIKey, cfg.Timeout)
		if err != nil {
			return nil, err
		}
		c.model = m
	}
	rep := &Report{
		Label: cfg.Label, BaseURL: cfg.BaseURL, ModelID: c.model, PrefixWords: cfg.PrefixWords, Tools: cfg.Tools,
		Turns: cfg.Turns, UserWords: cfg.UserWords, ToolResultWords: cfg.ToolResultWords, OutputLen: cfg.OutputLen, Seed: cfg.Seed,
	}
	for i, api := range cfg.APIs {
		for n := range cfg.Sessions {
			t := newTranscript(&cfg, i, n)
			sess := Session{API: api, Session: n}
			for k := range cfg.Turns {
				turn := c.turn(ctx, base, api, &t, k)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				sess.Turns = append(sess.Turns, turn)
				logger.Info("turn", "api", api, "session", n, "turn", k+1, "ttft_ms", fmt.Sprintf("%.1f", turn.TTFTMs),
					"input_tokens", turn.InputTokens, "cached_tokens", turn.CachedTokens, "error", turn.Error)
				if turn.Error != "" {
					break
				}
			}
			rep.Sessions = append(rep.Sessions, sess)
		}
		rep.Summaries = append(rep.Summaries, summarizeAgent(api, rep.Sessions, cfg.Turns))
	}
	rep.Date = time.Now().Format("20060102-150405")
	return rep, nil
}

// turn sends turn k of t and reads its stream.
func (c *agentClient) turn(ctx context.Context, base string, api API, t *transcript, k int) Turn {
	res := Turn{Turn: k + 1, CachedTokens: -1}
	payload, err := t.body(api, c.model, k, c.cfg.OutputLen)
	if err != nil {
		res.Error = fmt.Sprintf("encode request: %v", err)
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+api.path(), strings.NewReader(string(payload)))
	if err != nil {
		res.Error = fmt.Sprintf("build request: %v", err)
		return res
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if api == Messages {
		hreq.Header.Set("anthropic-version", "2023-06-01")
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
		hreq.Header.Set("x-api-key", c.cfg.APIKey)
	}

	start := time.Now()
	resp, err := c.http.Do(hreq)
	if err != nil {
		res.Error = c.describe(err)
		return res
	}
	defer resp.Body.Close()
	u := agentUsage{cached: -1}
	first, finished := time.Duration(-1), time.Duration(-1)
	end, failure := benchio.ReadStream(ctx, resp, start, c.describe, func(ev benchio.Event, at time.Duration) (bool, string) {
		e := decodeAgentEvent(api, ev, &u)
		if e.failure != "" {
			return false, e.failure
		}
		if e.output && first < 0 {
			first = at
		}
		if e.finish && finished < 0 {
			finished = at
		}
		return e.done, ""
	})
	if failure != "" {
		res.Error = failure
		return res
	}
	res.E2ELMs = benchio.Millis(end)
	switch {
	case first >= 0:
		res.TTFTMs = benchio.Millis(first)
	case finished >= 0:
		res.TTFTMs, res.NoOutput = benchio.Millis(finished), true
	default:
		res.Error = "stream ended without output or a finish"
		return res
	}
	res.InputTokens, res.CachedTokens, res.CacheSource, res.OutputTokens = u.input, u.cached, u.cacheSource, u.output
	return res
}

func (c *agentClient) describe(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("timeout after %v", c.cfg.Timeout)
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return benchio.OrUnknown(err.Error())
}

// summarizeAgent sums up api's sessions among all.
func summarizeAgent(api API, all []Session, turns int) Summary {
	s := Summary{API: api, TTFTMs: make([]float64, turns), InputTokens: make([]float64, turns), CachedTokens: make([]float64, turns)}
	var done []Session
	for _, sess := range all {
		if sess.API != api {
			continue
		}
		if sess.ok(turns) {
			done = append(done, sess)
			continue
		}
		s.Failed++
		if n := len(sess.Turns); n > 0 {
			s.Errors = benchio.AddErrorSample(s.Errors, sess.Turns[n-1].Error)
		}
	}
	s.Completed = len(done)
	if len(done) == 0 {
		return s
	}
	var later []float64
	for k := range turns {
		var ttft, in, cached []float64
		for _, sess := range done {
			t := sess.Turns[k]
			ttft = append(ttft, t.TTFTMs)
			in = append(in, float64(t.InputTokens))
			cached = append(cached, float64(t.CachedTokens))
			if k > 0 {
				later = append(later, t.TTFTMs)
			}
		}
		s.TTFTMs[k], s.InputTokens[k], s.CachedTokens[k] = benchio.Median(ttft), benchio.Median(in), benchio.Median(cached)
	}
	if len(later) > 0 {
		s.LaterTTFTMs = benchio.Median(later)
		if s.TTFTMs[0] > 0 {
			s.LaterOverFirst = s.LaterTTFTMs / s.TTFTMs[0]
		}
	}
	return s
}

// WriteText writes each API's turns as a table: the median TTFT, input and
// cached tokens of each turn, and each turn's TTFT against turn 1's.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Agent sessions against %s (model %s)", r.BaseURL, r.ModelID)
	if r.Label != "" {
		fmt.Fprintf(&b, ", %s", r.Label)
	}
	fmt.Fprintf(&b, "\nprefix %d words (system + %d tools), %d turns, %d-word user messages, %d-word tool results, max %d output tokens, seed %d\n",
		r.PrefixWords, r.Tools, r.Turns, r.UserWords, r.ToolResultWords, r.OutputLen, r.Seed)
	for _, s := range r.Summaries {
		fmt.Fprintf(&b, "\n%s: %d sessions completed, %d failed\n", s.API, s.Completed, s.Failed)
		for _, e := range s.Errors {
			fmt.Fprintf(&b, "  error (%dx): %s\n", e.Count, e.Message)
		}
		if s.Completed == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %-5s %12s %12s %12s %10s\n", "turn", "input tok", "cached tok", "TTFT ms", "vs turn 1")
		for k := range s.TTFTMs {
			cached := "n/a"
			if s.CachedTokens[k] >= 0 {
				cached = fmt.Sprintf("%.0f", s.CachedTokens[k])
			}
			ratio := 1.0
			if s.TTFTMs[0] > 0 {
				ratio = s.TTFTMs[k] / s.TTFTMs[0]
			}
			fmt.Fprintf(&b, "  %-5d %12.0f %12s %12.1f %10.3f\n", k+1, s.InputTokens[k], cached, s.TTFTMs[k], ratio)
		}
		if len(s.TTFTMs) > 1 {
			fmt.Fprintf(&b, "  turns 2-%d: median TTFT %.1f ms, %.3f of turn 1's\n", len(s.TTFTMs), s.LaterTTFTMs, s.LaterOverFirst)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
