package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// ErrAllWarmupFailed is returned by Run when every warmup request failed:
// the server or the configuration is wrong, and measuring would only count
// failures.
var ErrAllWarmupFailed = errors.New("every warmup request failed")

// Run validates cfg, sends the warmup requests, then the measured ones, and
// returns the report of the measured run. Failed requests are counted in the
// report, not returned as errors. Run returns an error when the
// configuration is invalid, the model cannot be found, every warmup request
// failed, or ctx ends before the run does (the partial run is discarded).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	slots := cfg.concurrency()
	pooled, fresh := benchio.NewTransport(slots, true), benchio.NewTransport(slots, false)
	defer pooled.CloseIdleConnections()
	defer fresh.CloseIdleConnections()

	base := strings.TrimSuffix(cfg.BaseURL, "/")
	s := &session{
		client: &http.Client{Transport: pooled},
		fresh:  &http.Client{Transport: fresh},
		cfg:    &cfg,
		url:    base + cfg.Endpoint.path(),
		model:  cfg.Model,
	}
	if s.model == "" {
		m, err := benchio.FirstModel(ctx, s.client, base, s.cfg.APIKey, s.cfg.Timeout)
		if err != nil {
			return nil, err
		}
		s.model = m
		log.Info("bench: model from server", "model", m)
	}

	if cfg.Warmup > 0 {
		log.Info("bench: warming up", "requests", cfg.Warmup)
		warm := s.runAll(ctx, generateRequests(&cfg, streamWarmup, cfg.Warmup), nil, time.Now(), nil)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bench warmup: %w", err)
		}
		failed, retried, first := 0, 0, ""
		for i := range warm {
			if warm[i].retried {
				retried++
			}
			if !warm[i].ok() {
				if failed == 0 {
					first = warm[i].err
				}
				failed++
			}
		}
		if failed == len(warm) {
			return nil, fmt.Errorf("bench %s: %w; first error: %s", s.url, ErrAllWarmupFailed, first)
		}
		if failed > 0 {
			log.Warn("bench: some warmup requests failed", "failed", failed, "of", len(warm), "first_error", first)
		}
		if retried > 0 {
			log.Warn("bench: the server closed kept-alive connections; requests were retried on new ones",
				"warmup_retries", retried, "of", len(warm))
		}
	}

	reqs := generateRequests(&cfg, streamMeasured, cfg.NumPrompts)
	offsets := arrivalOffsets(cfg.Seed, cfg.NumPrompts, cfg.RequestRate)
	log.Info("bench: starting", "url", s.url, "model", s.model, "requests", cfg.NumPrompts,
		"max_concurrency", cfg.MaxConcurrency, "request_rate", cfg.RequestRate)

	var done atomic.Int64
	progress := func() {
		n := int(done.Add(1))
		if tenth := max(cfg.NumPrompts/10, 1); n%tenth == 0 || n == cfg.NumPrompts {
			log.Info("bench: progress", "done", n, "of", cfg.NumPrompts)
		}
	}
	var watch *watcher
	if cfg.Monitor.enabled() {
		w, err := startWatcher(ctx, cfg.Monitor)
		if err != nil {
			return nil, err
		}
		watch = w
	}
	start := time.Now()
	results := s.runAll(ctx, reqs, offsets, start, progress)
	duration := time.Since(start)
	var stats ServerStats
	if watch != nil {
		stats = watch.finish(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench run: %w", err)
	}
	rep := newReport(&cfg, s.model, results, duration, time.Now())
	rep.ServerStats = stats
	if rep.Failed > 0 {
		log.Warn("bench: some requests failed", "failed", rep.Failed, "of", cfg.NumPrompts, "first_error", rep.ErrorSamples[0].Message)
	}
	if rep.Retries > 0 {
		log.Warn("bench: the server closed kept-alive connections; requests were retried on new ones",
			"retries", rep.Retries, "of", cfg.NumPrompts)
	}
	return rep, nil
}

// runAll sends reqs, request i not before t0 + offsets[i] seconds (offsets
// may be nil: all at once), and waits for all of them. The requests go out
// in lanes (see lanes): each lane sends its own requests in order with at
// most its number of clients in flight, independently of the other lanes;
// every dataset but mixed has one lane of cfg.concurrency() clients.
// Arrivals follow their schedule, not the previous request: a request held
// back by the concurrency cap goes out as soon as a slot of its lane frees,
// and later ones keep their own times, as in vLLM. A request whose slot is
// taken has not been sent, so the wait is not part of its TTFT. onDone, if
// set, runs after each request. When ctx ends, no more requests are sent;
// the results of unsent ones are zero.
func (s *session) runAll(ctx context.Context, reqs []request, offsets []float64, t0 time.Time, onDone func()) []result {
	results := make([]result, len(reqs))
	var wg sync.WaitGroup
	for _, l := range lanes(s.cfg, reqs) {
		wg.Go(func() { s.runLane(ctx, l, reqs, offsets, t0, onDone, results) })
	}
	wg.Wait()
	return results
}

// runLane sends the requests of one lane for runAll and waits for them,
// writing each one's result at its index.
func (s *session) runLane(ctx context.Context, l lane, reqs []request, offsets []float64, t0 time.Time, onDone func(), results []result) {
	slots := make(chan struct{}, l.clients)
	var wg sync.WaitGroup
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

dispatch:
	for _, i := range l.reqs {
		if offsets != nil && offsets[i] > 0 {
			at := t0.Add(time.Duration(offsets[i] * float64(time.Second)))
			if wait := time.Until(at); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					break dispatch
				}
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break dispatch
		}
		wg.Go(func() {
			defer func() { <-slots }()
			results[i] = s.do(ctx, reqs[i], t0)
			results[i].long = reqs[i].long
			if onDone != nil {
				onDone()
			}
		})
	}
	wg.Wait()
}
