package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func mixedConfig() Config {
	cfg := DefaultConfig()
	cfg.Dataset = DatasetMixed
	cfg.Seed = 3
	cfg.NumPrompts, cfg.MaxConcurrency = 10, 4
	cfg.Mixed = Mixed{LongClients: 1, LongPrompts: 2, LongInputLen: 40, ShortInputLen: 5, OutputLen: 3}
	return cfg
}

func TestMixedRequests(t *testing.T) {
	cfg := mixedConfig()
	reqs := generateRequests(&cfg, streamMeasured, 10)
	for i, r := range reqs {
		want, long := 5, i < 2
		if long {
			want = 40
		}
		if got := len(strings.Fields(r.prompt)); got != want || r.promptWords != want || r.long != long || r.maxTokens != 3 {
			t.Errorf("request %d: %d words (promptWords %d), long %v, max_tokens %d; want %d words, long %v, 3",
				i, got, r.promptWords, r.long, r.maxTokens, want, long)
		}
	}
	if again := generateRequests(&cfg, streamMeasured, 10); !slices.Equal(again, reqs) {
		t.Error("same seed gave different requests")
	}
	if more := generateRequests(&cfg, streamMeasured, 14); !slices.Equal(more[:10], reqs) {
		t.Error("request i depends on the number of requests")
	}
	// Warmups are short: a long warmup would cost as much as the run.
	for i, r := range generateRequests(&cfg, streamWarmup, 4) {
		if r.long || r.promptWords != 5 {
			t.Errorf("warmup %d: long %v, %d words; want short", i, r.long, r.promptWords)
		}
	}
	// LongPrompts 0 means one per long client.
	cfg.Mixed.LongPrompts, cfg.Mixed.LongClients = 0, 3
	n := 0
	for _, r := range generateRequests(&cfg, streamMeasured, 10) {
		if r.long {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d long requests with LongPrompts 0 and 3 long clients, want 3", n)
	}
}

func TestLanes(t *testing.T) {
	cfg := mixedConfig()
	reqs := generateRequests(&cfg, streamMeasured, 10)
	got := lanes(&cfg, reqs)
	want := []lane{{clients: 1, reqs: []int{0, 1}}, {clients: 3, reqs: []int{2, 3, 4, 5, 6, 7, 8, 9}}}
	if len(got) != 2 || got[0].clients != want[0].clients || !slices.Equal(got[0].reqs, want[0].reqs) ||
		got[1].clients != want[1].clients || !slices.Equal(got[1].reqs, want[1].reqs) {
		t.Errorf("lanes %+v, want %+v", got, want)
	}
	// Warmups have no long request: one lane, of the short clients.
	if w := lanes(&cfg, generateRequests(&cfg, streamWarmup, 3)); len(w) != 1 || w[0].clients != 3 || len(w[0].reqs) != 3 {
		t.Errorf("warmup lanes %+v, want one of 3 clients and 3 requests", w)
	}
	cfg = DefaultConfig()
	cfg.MaxConcurrency = 5
	if r := lanes(&cfg, make([]request, 7)); len(r) != 1 || r[0].clients != 5 || len(r[0].reqs) != 7 {
		t.Errorf("random dataset lanes %+v, want one of 5 clients", r)
	}
}

func TestValidateMixed(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // substring of the error; "" for valid
	}{
		{"valid", func(*Config) {}, ""},
		{"default load", func(c *Config) { c.Mixed = DefaultMixed(); c.MaxConcurrency = 32 }, ""},
		{"no cap", func(c *Config) { c.MaxConcurrency = 0 }, "needs a --max-concurrency above the long clients"},
		{"no short clients", func(c *Config) { c.MaxConcurrency = 1 }, "needs a --max-concurrency above the long clients"},
		{"no long clients", func(c *Config) { c.Mixed.LongClients = 0 }, "mixed long clients 0"},
		{"only long prompts", func(c *Config) { c.NumPrompts = 2 }, "needs more than its 2 long prompts"},
		{"negative long prompts", func(c *Config) { c.Mixed.LongPrompts = -1 }, "must not be negative"},
		{"empty prompts", func(c *Config) { c.Mixed.ShortInputLen = 0 }, "need at least 1 word each"},
		{"no output", func(c *Config) { c.Mixed.OutputLen = 0 }, "mixed output len 0"},
		{"random flags", func(c *Config) { c.SharedPrefixLen = 4 }, "apply to the random dataset only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mixedConfig()
			tc.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestRunMixed checks the lanes on the wire: the long client sends its two
// long requests one after the other, and the short clients keep sending
// while the long requests are held (each waits until every short one is
// done, which would never happen if a long request held a short one back).
func TestRunMixed(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true, longWords: 40, longWaitsForShort: 10}) // 2 warmups and 8 measured
	cfg := mixedConfig()
	cfg.BaseURL = f.url()
	cfg.Warmup = 2
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 10 || rep.Failed != 0 || rep.DatasetName != DatasetMixed {
		t.Fatalf("completed %d, failed %d, dataset %q; want 10, 0, mixed", rep.Completed, rep.Failed, rep.DatasetName)
	}
	if got := f.maxLongInFlight.Load(); got != 1 {
		t.Errorf("%d long requests in flight at once, want 1 (one long client)", got)
	}
	if got := f.maxInFlight.Load(); got > 4 {
		t.Errorf("%d requests in flight at once, over the 4 clients", got)
	}
	if rep.MixedLong == nil || rep.MixedShort == nil || rep.MixedLong.Completed != 2 || rep.MixedShort.Completed != 8 ||
		rep.MixedLong.TotalOutputTokens != 6 || rep.MixedShort.TotalOutputTokens != 24 {
		t.Errorf("per-class metrics long %+v short %+v", rep.MixedLong, rep.MixedShort)
	}
	if rep.MixedLongClients != 1 || rep.MixedLongPrompts != 2 || rep.MixedLongInputLen != 40 || rep.MixedShortInputLen != 5 || rep.MixedOutputLen != 3 {
		t.Errorf("workload fields %+v", rep)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mixed: 1 clients send 2 prompts of 40 words, 3 send the rest of 5 words, output 3", "Short median / P99 ITL (ms):"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

func TestCommandMixed(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true})
	cmd := NewCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{
		"--base-url", f.url(), "--num-prompts", "6", "--max-concurrency", "3", "--seed", "2",
		"--dataset-name", "mixed", "--mixed-long-clients", "1", "--mixed-long-input-len", "30",
		"--mixed-short-input-len", "4", "--mixed-output-len", "2", "--json", "-q",
	})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 6 || rep.MixedLongPrompts != 1 || rep.MixedLong.Completed != 1 || rep.RandomInputLen != 0 {
		t.Errorf("report %+v", rep)
	}
	words := map[int]int{}
	for _, r := range f.requests() {
		words[len(strings.Fields(r.Body["prompt"].(string)))]++
	}
	if words[30] != 1 || words[4] != 5 {
		t.Errorf("prompt lengths sent %v, want one of 30 words and five of 4", words)
	}

	// A flag of another dataset is refused.
	cmd = NewCommand()
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--base-url", f.url(), "--mixed-long-clients", "2"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "applies to --dataset-name mixed") {
		t.Errorf("--mixed-long-clients with the random dataset: %v", err)
	}
}
