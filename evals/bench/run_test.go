package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmserve/llmserve/evals/bench/benchio"
)

// testConfig is a small run against url. The timeout is generous: tests
// must not depend on speed, it only stops a broken test from hanging.
func testConfig(url string) Config {
	cfg := DefaultConfig()
	cfg.BaseURL = url
	cfg.NumPrompts = 8
	cfg.MaxConcurrency = 2
	cfg.RandomInputLen = 12
	cfg.RandomOutputLen = 5
	cfg.Seed = 3
	cfg.Timeout = 30 * time.Second
	cfg.Detailed = true
	return cfg
}

func TestRun(t *testing.T) {
	tests := []struct {
		name      string
		server    fakeOptions
		endpoint  Endpoint
		completed int
		inSource  TokenSource
		outSource TokenSource
		totalOut  int
		chunks    int      // content chunks of each completed request
		textless  int      // completed requests without text
		errors    []string // expected error samples, "message xCount", any order
	}{
		{
			name:      "completions with usage",
			server:    fakeOptions{usage: true},
			endpoint:  EndpointCompletions,
			completed: 8, inSource: SourceUsage, outSource: SourceUsage, totalOut: 40, chunks: 5,
		},
		{
			name:      "chat without usage counts chunks",
			server:    fakeOptions{},
			endpoint:  EndpointChat,
			completed: 8, inSource: SourceWords, outSource: SourceChunks, totalOut: 40, chunks: 5,
		},
		{
			name:      "usage wins over chunk count",
			server:    fakeOptions{usage: true, tokensPerChunk: 2},
			endpoint:  EndpointChat,
			completed: 8, inSource: SourceUsage, outSource: SourceUsage, totalOut: 40, chunks: 3,
		},
		{
			name:      "multi-token chunks without usage",
			server:    fakeOptions{tokensPerChunk: 2},
			endpoint:  EndpointCompletions,
			completed: 8, inSource: SourceWords, outSource: SourceChunks, totalOut: 24, chunks: 3,
		},
		{
			name: "429 and 500 count as failed",
			server: fakeOptions{usage: true, status: func(n int) int {
				switch n % 4 {
				case 1:
					return http.StatusTooManyRequests
				case 3:
					return http.StatusInternalServerError
				}
				return 0
			}},
			endpoint:  EndpointCompletions,
			completed: 4, inSource: SourceUsage, outSource: SourceUsage, totalOut: 20, chunks: 5,
			errors: []string{"HTTP 429: fake failure 429 x2", "HTTP 500: fake failure 500 x2"},
		},
		{
			name: "error event mid-stream",
			server: fakeOptions{usage: true, errorAfter: func(n int) int {
				if n%3 == 0 {
					return 2
				}
				return -1
			}},
			endpoint:  EndpointChat,
			completed: 6, inSource: SourceUsage, outSource: SourceUsage, totalOut: 30, chunks: 5,
			errors: []string{"error event: fake engine error x2"},
		},
		{
			name:      "stream without content",
			server:    fakeOptions{noContent: true},
			endpoint:  EndpointCompletions,
			completed: 0, inSource: SourceNone, outSource: SourceNone, totalOut: 0,
			errors: []string{"stream ended without generated content x8"},
		},
		{
			// llama-server's stream for tokens that are not whole UTF-8
			// characters: only the finishing chunk, then usage.
			name:      "stream without text that finished with tokens",
			server:    fakeOptions{usage: true, noContent: true},
			endpoint:  EndpointCompletions,
			completed: 8, inSource: SourceUsage, outSource: SourceUsage, totalOut: 40, chunks: 1, textless: 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFake(t, tt.server)
			cfg := testConfig(f.url())
			cfg.Endpoint = tt.endpoint
			rep, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Completed != tt.completed || rep.Failed != cfg.NumPrompts-tt.completed {
				t.Errorf("completed/failed = %d/%d, want %d/%d", rep.Completed, rep.Failed, tt.completed, cfg.NumPrompts-tt.completed)
			}
			if rep.InputTokensSource != tt.inSource || rep.OutputTokensSource != tt.outSource {
				t.Errorf("sources = %q/%q, want %q/%q", rep.InputTokensSource, rep.OutputTokensSource, tt.inSource, tt.outSource)
			}
			if rep.TotalOutputTokens != tt.totalOut {
				t.Errorf("total output tokens = %d, want %d", rep.TotalOutputTokens, tt.totalOut)
			}
			if rep.ModelID != "fake-model" || f.modelsCalls.Load() != 1 {
				t.Errorf("model = %q after %d /models calls, want fake-model after 1", rep.ModelID, f.modelsCalls.Load())
			}

			// Per completed request: the server's prompt_tokens (words + 1
			// here) when it sent usage, else the word count; ITLs one fewer
			// than chunks.
			reqs := generateRequests(&cfg, streamMeasured, cfg.NumPrompts)
			wantIn := 0
			for i, r := range reqs {
				if rep.Errors[i] != "" {
					continue
				}
				in := r.promptWords
				if tt.inSource == SourceUsage {
					in++
				}
				if rep.InputLens[i] != in {
					t.Errorf("request %d: input len %d, want %d", i, rep.InputLens[i], in)
				}
				wantIn += in
				if len(rep.ITLs[i]) != tt.chunks-1 || rep.TTFTs[i] <= 0 {
					t.Errorf("request %d: %d ITLs and TTFT %v, want %d and > 0", i, len(rep.ITLs[i]), rep.TTFTs[i], tt.chunks-1)
				}
			}
			if rep.TotalInputTokens != wantIn {
				t.Errorf("total input tokens = %d, want %d", rep.TotalInputTokens, wantIn)
			}
			if rep.TextlessRequests != tt.textless {
				t.Errorf("textless requests = %d, want %d", rep.TextlessRequests, tt.textless)
			}
			if tt.completed > tt.textless && (rep.MeanTTFTMs <= 0 || rep.MeanE2ELMs < rep.MeanTTFTMs || rep.MeanTPOTMs <= 0 || rep.P99ITLMs <= 0) {
				t.Errorf("implausible latencies: ttft %v e2el %v tpot %v p99 itl %v", rep.MeanTTFTMs, rep.MeanE2ELMs, rep.MeanTPOTMs, rep.P99ITLMs)
			}

			var gotErrs []string
			for _, e := range rep.ErrorSamples {
				gotErrs = append(gotErrs, fmt.Sprintf("%s x%d", e.Message, e.Count))
			}
			slices.Sort(gotErrs)
			if !slices.Equal(gotErrs, tt.errors) {
				t.Errorf("error samples = %q, want %q", gotErrs, tt.errors)
			}

			checkRequestBodies(t, f.requests(), cfg, "fake-model")
		})
	}
}

// checkRequestBodies checks what the server received: the vLLM request shape.
func checkRequestBodies(t *testing.T, got []recordedRequest, cfg Config, model string) {
	t.Helper()
	if len(got) != cfg.NumPrompts+cfg.Warmup {
		t.Errorf("server got %d requests, want %d", len(got), cfg.NumPrompts+cfg.Warmup)
	}
	for _, r := range got {
		b := r.Body
		if r.Path != "/v1"+cfg.Endpoint.path() {
			t.Errorf("path %q, want /v1%s", r.Path, cfg.Endpoint.path())
		}
		so, _ := b["stream_options"].(map[string]any)
		if b["model"] != model || b["stream"] != true || so["include_usage"] != true ||
			b["temperature"] != cfg.Temperature || b["max_tokens"] != float64(cfg.RandomOutputLen) {
			t.Errorf("request body %v", b)
		}
		if cfg.IgnoreEOS != (b["ignore_eos"] == true) {
			t.Errorf("ignore_eos = %v, want %v", b["ignore_eos"], cfg.IgnoreEOS)
		}
		if cfg.Endpoint == EndpointChat {
			msgs, _ := b["messages"].([]any)
			if len(msgs) != 1 || b["max_completion_tokens"] != float64(cfg.RandomOutputLen) || b["prompt"] != nil {
				t.Errorf("chat body %v", b)
			}
		} else if _, ok := b["prompt"].(string); !ok || b["messages"] != nil {
			t.Errorf("completions body %v", b)
		}
	}
}

func TestRunRespectsMaxConcurrency(t *testing.T) {
	tests := []struct {
		name        string
		prompts     int
		concurrency int
		want        int
	}{
		{"three slots", 12, 3, 3},
		{"one slot", 5, 1, 1},
		{"no limit", 6, 0, 6},
		{"limit above prompts", 4, 16, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The gate holds the first requests until `want` are in flight, so
			// the maximum is reached whatever the scheduling; a client that
			// sent more would push it over.
			f := startFake(t, fakeOptions{usage: true, gate: tt.want})
			cfg := testConfig(f.url())
			cfg.NumPrompts, cfg.MaxConcurrency = tt.prompts, tt.concurrency
			rep, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Completed != tt.prompts {
				t.Fatalf("completed %d of %d; errors %v", rep.Completed, tt.prompts, rep.ErrorSamples)
			}
			if got := f.maxInFlight.Load(); got != int64(tt.want) {
				t.Errorf("max requests in flight at the server = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestRunRequestRate(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true})
	cfg := testConfig(f.url())
	cfg.NumPrompts, cfg.MaxConcurrency, cfg.RequestRate = 6, 0, 500
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 6 || float64(rep.RequestRate) != 500 || rep.MaxConcurrency != nil {
		t.Errorf("completed %d, rate %v, max concurrency %v", rep.Completed, rep.RequestRate, rep.MaxConcurrency)
	}
}

func TestRunTimeout(t *testing.T) {
	f := startFake(t, fakeOptions{hang: true})
	cfg := testConfig(f.url())
	cfg.NumPrompts, cfg.Timeout = 2, 100*time.Millisecond
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []benchio.ErrorSample{{Message: "timeout after 100ms", Count: 2}}
	if rep.Failed != 2 || !slices.Equal(rep.ErrorSamples, want) {
		t.Errorf("failed %d, samples %v, want 2, %v", rep.Failed, rep.ErrorSamples, want)
	}
}

func TestRunWarmup(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true})
	cfg := testConfig(f.url())
	cfg.NumPrompts, cfg.Warmup, cfg.SharedPrefixLen = 4, 3, 5
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 4 || rep.NumPrompts != 4 || rep.Warmup != 3 {
		t.Errorf("completed %d of %d after %d warmups, want 4 of 4 after 3", rep.Completed, rep.NumPrompts, rep.Warmup)
	}
	checkRequestBodies(t, f.requests(), cfg, "fake-model")

	// The first three requests the server saw are the warmup ones, which
	// are not among the measured prompts but share their prefix.
	var seen []string
	for _, r := range f.requests() {
		seen = append(seen, r.Body["prompt"].(string))
	}
	warm := map[string]bool{}
	for _, r := range generateRequests(&cfg, streamWarmup, 3) {
		warm[r.prompt] = true
	}
	measured := map[string]bool{}
	for _, r := range generateRequests(&cfg, streamMeasured, 4) {
		measured[r.prompt] = true
	}
	prefix := sharedPrefix(&cfg)
	for i, p := range seen {
		if !strings.HasPrefix(p, prefix) {
			t.Errorf("request %d lacks the shared prefix", i)
		}
		if (i < 3 && !warm[p]) || (i >= 3 && !measured[p]) {
			t.Errorf("request %d: prompt %.30q not from the expected set", i, p)
		}
	}
	if slices.ContainsFunc(slices.Collect(maps.Keys(warm)), func(p string) bool { return measured[p] }) {
		t.Error("a warmup prompt is also measured")
	}
}

func TestRunAllWarmupFailed(t *testing.T) {
	f := startFake(t, fakeOptions{status: func(int) int { return http.StatusServiceUnavailable }})
	cfg := testConfig(f.url())
	cfg.Warmup = 2
	_, err := Run(t.Context(), cfg)
	if !errors.Is(err, ErrAllWarmupFailed) || !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("err = %v, want ErrAllWarmupFailed with the first error", err)
	}
	if got := f.count.Load(); got != 2 {
		t.Errorf("server got %d requests, want only the 2 warmups", got)
	}
}

func TestRunCanceled(t *testing.T) {
	f := startFake(t, fakeOptions{hang: true})
	cfg := testConfig(f.url())
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-f.started
		cancel()
	}()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	cancel()
}

func TestRunExplicitModelAndAPIKey(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true})
	cfg := testConfig(f.url() + "/") // a trailing slash is fine
	cfg.Model, cfg.APIKey, cfg.IgnoreEOS, cfg.Temperature = "my-model", "sekrit", false, 0.7
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ModelID != "my-model" || f.modelsCalls.Load() != 0 {
		t.Errorf("model %q after %d /models calls, want my-model and none", rep.ModelID, f.modelsCalls.Load())
	}
	checkRequestBodies(t, f.requests(), cfg, "my-model")
	for _, r := range f.requests() {
		if r.Authorization != "Bearer sekrit" {
			t.Fatalf("Authorization = %q", r.Authorization)
		}
	}
}

func TestRunServerQuirks(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		model   string
		wantErr string // error from Run
		failure string // else: every request fails with this prefix
	}{
		{
			name: "models unauthorized",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":{"message":"bad key"}}`)
			},
			wantErr: "list models: HTTP 401: bad key",
		},
		{
			name: "models empty",
			handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, `{"data":[]}`)
			},
			wantErr: "lists no model",
		},
		{
			name:  "json instead of a stream",
			model: "m",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"choices":[{"text":"all at once"}]}`)
			},
			failure: "server answered with application/json",
		},
		{
			name:  "plain text 404",
			model: "m",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.NotFound(w, r)
			},
			failure: "HTTP 404: 404 page not found",
		},
		{
			name:  "stream cut without [DONE] still completes",
			model: "m",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\n")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			cfg := testConfig(srv.URL + "/v1")
			cfg.Model, cfg.NumPrompts = tt.model, 2
			rep, err := Run(t.Context(), cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.failure == "" {
				if rep.Completed != 2 || rep.TotalOutputTokens != 4 {
					t.Errorf("completed %d with %d tokens, want 2 with 4; errors %v", rep.Completed, rep.TotalOutputTokens, rep.ErrorSamples)
				}
				return
			}
			if rep.Failed != 2 || len(rep.ErrorSamples) != 1 || !strings.HasPrefix(rep.ErrorSamples[0].Message, tt.failure) {
				t.Errorf("failed %d, samples %v, want 2 failures %q", rep.Failed, rep.ErrorSamples, tt.failure)
			}
		})
	}
}

func TestRunUnreachableServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/v1"
	srv.Close()
	cfg := testConfig(url)
	cfg.Model = "m"
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != cfg.NumPrompts || rep.Completed != 0 || len(rep.ErrorSamples) == 0 {
		t.Errorf("failed %d, samples %v", rep.Failed, rep.ErrorSamples)
	}
}
