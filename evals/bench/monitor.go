package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Monitor says how Run watches the server it measures, for what a client
// cannot see: the server's memory and how many sequences it runs at once.
// The zero value watches nothing. Only a server on the same machine can
// give its PID.
type Monitor struct {
	// PID is the server's process id. When set, Run reads
	// /proc/PID/status: VmRSS every Interval, and VmHWM, the peak resident
	// set, which it first resets (writing 5 to /proc/PID/clear_refs, which
	// needs the right to write there) so that the peak is the measured
	// run's, warmup excluded.
	PID int
	// URL is the server's root, such as http://127.0.0.1:8080. When set, Run
	// reads GET URL/metrics every Interval: the running sequences from
	// vllm:num_requests_running (llmserve, vLLM) or
	// llamacpp:requests_processing (llama-server with --metrics), and the
	// committed KV bytes from llmserve_kv_cache_committed_bytes when the
	// server exports it. With no running gauge there, it reads GET
	// URL/slots instead (llama-server, on by default) and counts the slots
	// whose is_processing is true.
	URL string
	// Interval is the time between samples; 0 means 500 ms.
	Interval time.Duration
	// Settle is how long Run waits after the last stream has ended before
	// it takes the end figures (memory a server frees when a sequence ends
	// may go back a step later).
	Settle time.Duration
}

func (m Monitor) enabled() bool { return m.PID > 0 || m.URL != "" }

func (m Monitor) interval() time.Duration {
	if m.Interval <= 0 {
		return 500 * time.Millisecond
	}
	return m.Interval
}

// ServerStats are the figures a Monitor took of the server during the
// measured run (llmserve; vLLM's tool has none). Each is absent (null in
// the JSON) when it could not be read: no PID, no URL, or a server that
// does not export the gauge.
type ServerStats struct {
	// PID is the process watched.
	PID int `json:"server_pid,omitempty"`
	// RSSStartBytes is the server's VmRSS when the measured run began.
	RSSStartBytes *int64 `json:"server_rss_start_bytes,omitempty"`
	// RSSPeakBytes is the server's VmHWM (peak resident set) after the
	// run: since the run began when it could be reset, else since the
	// process started (RSSPeakSince says which).
	RSSPeakBytes *int64 `json:"server_rss_peak_bytes,omitempty"`
	// RSSPeakSince is "run" or "process start".
	RSSPeakSince string `json:"server_rss_peak_since,omitempty"`
	// RSSMaxSampledBytes is the largest VmRSS sampled during the run.
	RSSMaxSampledBytes *int64 `json:"server_rss_max_sampled_bytes,omitempty"`
	// RSSEndBytes is the server's VmRSS Monitor.Settle after the last
	// stream ended.
	RSSEndBytes *int64 `json:"server_rss_end_bytes,omitempty"`
	// RunningPeak is the largest number of running sequences sampled.
	RunningPeak *int `json:"server_running_peak,omitempty"`
	// RunningSource names where RunningPeak was read:
	// "vllm:num_requests_running", "llamacpp:requests_processing" or
	// "/slots".
	RunningSource string `json:"server_running_source,omitempty"`
	// KVCommittedBytes*: llmserve_kv_cache_committed_bytes when the run
	// began, its largest sample, and Monitor.Settle after the end.
	KVCommittedStartBytes *int64 `json:"kv_committed_start_bytes,omitempty"`
	KVCommittedPeakBytes  *int64 `json:"kv_committed_peak_bytes,omitempty"`
	KVCommittedEndBytes   *int64 `json:"kv_committed_end_bytes,omitempty"`
	// MonitorSamples counts the gauge samples (metrics or slots) taken.
	MonitorSamples int `json:"monitor_samples,omitempty"`
}

// Gauge names the monitor reads from /metrics.
const (
	gaugeRunningVLLM  = "vllm:num_requests_running"
	gaugeRunningLlama = "llamacpp:requests_processing"
	gaugeKVCommitted  = "llmserve_kv_cache_committed_bytes"
	sourceSlots       = "/slots"
)

// watcher samples one server for Run; start it before the measured run and
// finish it after.
type watcher struct {
	cfg    Monitor
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	stats ServerStats // guarded by mu
}

// startWatcher takes the start figures, resets the peak RSS and starts
// sampling. It fails when the PID cannot be read or the URL answers with
// neither a running gauge nor /slots.
func startWatcher(ctx context.Context, cfg Monitor) (*watcher, error) {
	w := &watcher{cfg: cfg, client: &http.Client{Transport: &http.Transport{DisableCompression: true}}}
	w.stats.PID = cfg.PID
	if cfg.PID > 0 {
		mem, err := readProcMemory(cfg.PID)
		if err != nil {
			return nil, fmt.Errorf("monitor: %w", err)
		}
		w.stats.RSSStartBytes, w.stats.RSSMaxSampledBytes = ptr(mem.rss), ptr(mem.rss)
		w.stats.RSSPeakSince = "process start"
		if os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", cfg.PID), []byte("5"), 0) == nil {
			w.stats.RSSPeakSince = "run"
		}
	}
	if cfg.URL != "" {
		g, err := w.readGauges(ctx)
		if err != nil {
			return nil, fmt.Errorf("monitor: %w", err)
		}
		w.stats.RunningSource = g.runningSource
		w.stats.KVCommittedStartBytes = g.kv
		w.addGauges(g)
	}
	ctx, w.cancel = context.WithCancel(ctx)
	if cfg.PID > 0 {
		w.wg.Go(func() { w.loop(ctx, w.sampleMemory) })
	}
	if cfg.URL != "" {
		w.wg.Go(func() { w.loop(ctx, w.sampleGauges) })
	}
	return w, nil
}

// finish stops sampling, waits Monitor.Settle (or until ctx ends) and
// takes the end figures.
func (w *watcher) finish(ctx context.Context) ServerStats {
	w.cancel()
	w.wg.Wait()
	if w.cfg.Settle > 0 {
		t := time.NewTimer(w.cfg.Settle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if w.cfg.PID > 0 {
		if mem, err := readProcMemory(w.cfg.PID); err == nil {
			w.mu.Lock()
			w.stats.RSSEndBytes, w.stats.RSSPeakBytes = ptr(mem.rss), ptr(mem.hwm)
			w.mu.Unlock()
		}
	}
	if w.cfg.URL != "" {
		if g, err := w.readGauges(ctx); err == nil {
			w.addGauges(g)
			w.mu.Lock()
			w.stats.KVCommittedEndBytes = g.kv
			w.mu.Unlock()
		}
	}
	w.client.CloseIdleConnections()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// loop calls sample every interval until ctx ends.
func (w *watcher) loop(ctx context.Context, sample func(context.Context)) {
	t := time.NewTicker(w.cfg.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sample(ctx)
		}
	}
}

func (w *watcher) sampleMemory(context.Context) {
	mem, err := readProcMemory(w.cfg.PID)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stats.RSSMaxSampledBytes == nil || mem.rss > *w.stats.RSSMaxSampledBytes {
		w.stats.RSSMaxSampledBytes = ptr(mem.rss)
	}
}

func (w *watcher) sampleGauges(ctx context.Context) {
	// A server may answer between evaluation steps only (llama-server
	// does), so a sample can take as long as a step: the next one waits.
	if g, err := w.readGauges(ctx); err == nil {
		w.addGauges(g)
	}
}

// addGauges folds one sample into the peaks.
func (w *watcher) addGauges(g gaugeSample) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.MonitorSamples++
	if g.running != nil && (w.stats.RunningPeak == nil || *g.running > *w.stats.RunningPeak) {
		w.stats.RunningPeak = g.running
	}
	if g.kv != nil && (w.stats.KVCommittedPeakBytes == nil || *g.kv > *w.stats.KVCommittedPeakBytes) {
		w.stats.KVCommittedPeakBytes = g.kv
	}
}

// gaugeSample is one reading of the server's gauges; nil where absent.
type gaugeSample struct {
	running       *int
	runningSource string
	kv            *int64
}

// readGauges reads /metrics and, when it has no running gauge, /slots.
func (w *watcher) readGauges(ctx context.Context) (gaugeSample, error) {
	var g gaugeSample
	base := strings.TrimSuffix(w.cfg.URL, "/")
	body, metricsErr := w.get(ctx, base+"/metrics")
	if metricsErr == nil {
		vals := parseGauges(body, gaugeRunningVLLM, gaugeRunningLlama, gaugeKVCommitted)
		for _, name := range []string{gaugeRunningVLLM, gaugeRunningLlama} {
			if v, ok := vals[name]; ok {
				g.running, g.runningSource = ptr(int(v)), name
				break
			}
		}
		if v, ok := vals[gaugeKVCommitted]; ok {
			g.kv = ptr(int64(v))
		}
		if g.running != nil {
			return g, nil
		}
	}
	body, err := w.get(ctx, base+"/slots")
	if err != nil {
		if metricsErr != nil {
			return g, fmt.Errorf("server %s: no running gauge in /metrics (%w) and no /slots (%w)", base, metricsErr, err)
		}
		return g, fmt.Errorf("server %s: no %s or %s in /metrics, and no /slots (%w)", base, gaugeRunningVLLM, gaugeRunningLlama, err)
	}
	n, err := countProcessingSlots(body)
	if err != nil {
		return g, fmt.Errorf("server %s /slots: %w", base, err)
	}
	g.running, g.runningSource = ptr(n), sourceSlots
	return g, nil
}

// get returns the body of a GET that answered 200.
func (w *watcher) get(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// parseGauges returns the value of each named metric in a Prometheus text
// exposition, summed over its label sets (a server with several models
// exports one series per model). Names absent from the text are absent
// from the map; lines it cannot read are skipped.
func parseGauges(text []byte, names ...string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if !slices.Contains(names, name) {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				continue
			}
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out
}

// countProcessingSlots counts the entries of llama-server's /slots array
// whose is_processing is true.
func countProcessingSlots(body []byte) (int, error) {
	var slots []struct {
		IsProcessing bool `json:"is_processing"`
	}
	if err := json.Unmarshal(body, &slots); err != nil {
		return 0, fmt.Errorf("not a JSON array of slots: %w", err)
	}
	n := 0
	for _, s := range slots {
		if s.IsProcessing {
			n++
		}
	}
	return n, nil
}

// procMemory is what /proc/PID/status says of a process's memory, in bytes.
type procMemory struct{ rss, hwm int64 }

func readProcMemory(pid int) (procMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, err
	}
	return parseProcStatus(b)
}

// parseProcStatus reads VmRSS and VmHWM (in kB) from a /proc/PID/status.
func parseProcStatus(b []byte) (procMemory, error) {
	var m procMemory
	var seen int
	for line := range strings.SplitSeq(string(b), "\n") {
		var dst *int64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			dst = &m.rss
		case strings.HasPrefix(line, "VmHWM:"):
			dst = &m.hwm
		default:
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		*dst = kb << 10
		seen++
	}
	if seen < 2 {
		return m, fmt.Errorf("no VmRSS and VmHWM in /proc status (a kernel thread, or a process that exited)")
	}
	return m, nil
}

func ptr[T any](v T) *T { return &v }
