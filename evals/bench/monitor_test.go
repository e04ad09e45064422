package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseGauges(t *testing.T) {
	text := `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 3
vllm:num_requests_running{engine="0",model_name="b {odd} name"} 2
vllm:num_requests_running_other 99
llmserve_kv_cache_committed_bytes{model_name="a"} 1.048576e+06 1700000000000
llamacpp:requests_processing 7
bad_line{
vllm:num_requests_waiting 5
`
	got := parseGauges([]byte(text), gaugeRunningVLLM, gaugeKVCommitted, gaugeRunningLlama, "absent")
	want := map[string]float64{gaugeRunningVLLM: 5, gaugeKVCommitted: 1 << 20, gaugeRunningLlama: 7}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestCountProcessingSlots(t *testing.T) {
	n, err := countProcessingSlots([]byte(`[{"id":0,"is_processing":true,"params":{}},{"id":1,"is_processing":false},{"id":2,"is_processing":true}]`))
	if err != nil || n != 2 {
		t.Errorf("got %d, %v; want 2", n, err)
	}
	if _, err := countProcessingSlots([]byte(`{"error":"slots endpoint is disabled"}`)); err == nil {
		t.Error("an object was read as slots")
	}
}

func TestParseProcStatus(t *testing.T) {
	m, err := parseProcStatus([]byte("Name:\tllama-server\nVmPeak:\t 9000 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	if err != nil || m.rss != 1<<20 || m.hwm != 2<<20 {
		t.Errorf("got %+v, %v; want rss 1 MiB, hwm 2 MiB", m, err)
	}
	if _, err := parseProcStatus([]byte("Name:\tkthreadd\n")); err == nil {
		t.Error("a status without VmRSS was read")
	}
}

// TestRunMonitor watches the test process itself (its memory is real) and
// a fake server's gauges. The fake reports the most requests it has had in
// flight, so the end sample sees the peak whatever the sampling missed.
func TestRunMonitor(t *testing.T) {
	metrics := func(f *fakeServer) string {
		return fmt.Sprintf("vllm:num_requests_running{model_name=\"fake\"} %d\nllmserve_kv_cache_committed_bytes{model_name=\"fake\"} %d\n",
			f.maxInFlight.Load(), 1000*f.count.Load())
	}
	f := startFake(t, fakeOptions{usage: true, gate: 3, metrics: metrics})
	cfg := DefaultConfig()
	cfg.BaseURL, cfg.NumPrompts, cfg.MaxConcurrency, cfg.RandomInputLen, cfg.RandomOutputLen = f.url(), 6, 3, 4, 2
	cfg.Monitor = Monitor{PID: os.Getpid(), URL: f.srv.URL, Interval: time.Millisecond, Settle: time.Millisecond}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := rep.ServerStats
	if st.PID != os.Getpid() || st.RSSStartBytes == nil || st.RSSPeakBytes == nil || st.RSSEndBytes == nil ||
		st.RSSMaxSampledBytes == nil || *st.RSSEndBytes <= 0 || *st.RSSPeakBytes < *st.RSSEndBytes {
		t.Errorf("memory figures %+v", st)
	}
	if st.RSSPeakSince != "run" && st.RSSPeakSince != "process start" {
		t.Errorf("peak since %q", st.RSSPeakSince)
	}
	if st.RunningPeak == nil || *st.RunningPeak != 3 || st.RunningSource != gaugeRunningVLLM {
		t.Errorf("running peak %v from %q, want 3 from %s", st.RunningPeak, st.RunningSource, gaugeRunningVLLM)
	}
	if st.KVCommittedStartBytes == nil || *st.KVCommittedStartBytes != 0 || st.KVCommittedEndBytes == nil ||
		*st.KVCommittedEndBytes != 6000 || st.KVCommittedPeakBytes == nil || *st.KVCommittedPeakBytes != 6000 {
		t.Errorf("KV figures start %v peak %v end %v, want 0, 6000, 6000", st.KVCommittedStartBytes, st.KVCommittedPeakBytes, st.KVCommittedEndBytes)
	}
	if st.MonitorSamples < 2 {
		t.Errorf("%d samples, want the start and end ones at least", st.MonitorSamples)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Running sequences, peak (vllm:num_requests_running):", "KV committed peak (MiB):", "RSS at end (MiB):"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
}

// TestRunMonitorSlots is llama-server without --metrics: no /metrics, the
// running count from /slots, and no KV figures.
func TestRunMonitorSlots(t *testing.T) {
	slots := func(*fakeServer) string {
		return `[{"id":0,"is_processing":true},{"id":1,"is_processing":true},{"id":2,"is_processing":false}]`
	}
	f := startFake(t, fakeOptions{usage: true, slots: slots})
	cfg := DefaultConfig()
	cfg.BaseURL, cfg.NumPrompts, cfg.RandomInputLen, cfg.RandomOutputLen = f.url(), 2, 4, 2
	cfg.Monitor = Monitor{URL: f.srv.URL, Interval: time.Millisecond}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := rep.ServerStats
	if st.RunningPeak == nil || *st.RunningPeak != 2 || st.RunningSource != sourceSlots || st.KVCommittedPeakBytes != nil || st.RSSPeakBytes != nil {
		t.Errorf("stats %+v", st)
	}
}

func TestRunMonitorFailsEarly(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true})
	for _, m := range []Monitor{
		{URL: f.srv.URL}, // neither /metrics nor /slots
		{PID: 1 << 30},   // no such process
	} {
		cfg := DefaultConfig()
		cfg.BaseURL, cfg.NumPrompts, cfg.RandomInputLen, cfg.RandomOutputLen = f.url(), 1, 4, 2
		cfg.Monitor = m
		if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "monitor") {
			t.Errorf("monitor %+v: %v, want a monitor error", m, err)
		}
	}
}
