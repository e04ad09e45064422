package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/api"
	"github.com/llmserve/llmserve/models"
)

var modelDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llmserve-tests-")
	if err != nil {
		panic(err)
	}
	modelDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			// Idle keep-alive connections of http.DefaultTransport end on
			// their own; only report leaks of our own code.
			if strings.Contains(err.Error(), "llmserve") {
				slog.Error("leaked goroutines", "err", err)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// server is the real stack on loopback: model, scheduler loop, router.
type server struct {
	URL      string
	model    *models.Generative
	reg      *prometheus.Registry
	registry *models.Registry
}

// startServer serves cfg, and the models of more beside it, on loopback
// with the serve command's defaults for what a config leaves zero: up to 64
// sequences, KV for 4 at first (growing with the load), the prefix cache on
// (a negative PrefixCacheBytes turns it off), one ggml thread. s.model is
// cfg's model.
func startServer(t *testing.T, cfg models.GenerativeConfig, more ...models.GenerativeConfig) *server {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	registry := models.NewRegistry()
	t.Cleanup(func() { registry.Close() })
	for _, cfg := range append([]models.GenerativeConfig{cfg}, more...) {
		cfg.CacheDir = modelDir
		if cfg.MaxNumSeqs == 0 {
			cfg.MaxNumSeqs = 64
		}
		if cfg.InitialSeqs == 0 {
			cfg.InitialSeqs = 4 // as `llmserve serve`: the KV grows with the load
		}
		if cfg.MaxWaiting == 0 {
			cfg.MaxWaiting = 512
		}
		if cfg.Threads == 0 {
			cfg.Threads = 1
		}
		switch {
		case cfg.PrefixCacheBytes == 0:
			cfg.PrefixCacheBytes = 256 << 20
		case cfg.PrefixCacheBytes < 0:
			cfg.PrefixCacheBytes = 0
		}
		g, err := models.LoadGenerative(cfg, log, reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := registry.Add(g); err != nil {
			t.Fatal(errors.Join(err, g.Close()))
		}
	}
	h, err := api.NewHandler(api.Options{Registry: registry, Logger: log, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close) // before the registry closes: cleanups run last first
	return &server{URL: srv.URL, model: registry.List()[0], reg: reg, registry: registry}
}

// metric returns the value of a counter or gauge (summed over labels).
func (s *server) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				sum += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				sum += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// waitMetric polls until cond holds for the metric or the deadline passes.
func (s *server) waitMetric(t *testing.T, name string, cond func(float64) bool) float64 {
	t.Helper()
	var v float64
	if !poll(t, 5*time.Second, 2*time.Millisecond, func() bool { v = s.metric(t, name); return cond(v) }) {
		t.Fatalf("metric %s = %v never met the condition", name, v)
	}
	return v
}

// post sends a JSON body and decodes the JSON answer into out (if not nil).
func (s *server) post(t *testing.T, path string, body any, out any) (int, http.Header) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return s.postRaw(t, path, b, out)
}

func (s *server) postRaw(t *testing.T, path string, body []byte, out any) (int, http.Header) {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("decode %s answer %q: %v", path, raw, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// sseEvents reads a whole SSE stream and returns the data payloads, [DONE]
// included.
func (s *server) stream(t *testing.T, ctx context.Context, path string, body any) []string {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, raw)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	return events
}
