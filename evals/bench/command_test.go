package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var wantFlags = []string{
	"base-url", "api-key", "endpoint", "model", "num-prompts", "max-concurrency", "request-rate",
	"random-input-len", "random-output-len", "random-range-ratio", "shared-prefix-len", "seed",
	"ignore-eos", "temperature", "warmup", "timeout", "label", "save-detailed", "json", "output-file", "quiet",
	"dataset-name", "prefix-repetition-prefix-len", "prefix-repetition-suffix-len",
	"prefix-repetition-num-prefixes", "prefix-repetition-output-len",
}

func TestCommandFlagsDocumented(t *testing.T) {
	cmd := NewCommand()
	var help bytes.Buffer
	cmd.SetOut(&help)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, name := range wantFlags {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			t.Errorf("flag --%s missing", name)
			continue
		}
		if f.Usage == "" || !strings.Contains(help.String(), "--"+name) {
			t.Errorf("flag --%s is not documented in --help", name)
		}
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Usage == "" {
			t.Errorf("flag --%s has no usage text", f.Name)
		}
	})
}

func TestCommandDefaults(t *testing.T) {
	cmd := NewCommand()
	for name, want := range map[string]string{
		"base-url":     "http://127.0.0.1:8080/v1",
		"endpoint":     "completions",
		"request-rate": "+Inf",
		"ignore-eos":   "true",
		"temperature":  "0",
		"num-prompts":  "1000",
		"dataset-name": "random",
		// vLLM's defaults for prefix_repetition.
		"prefix-repetition-prefix-len":   "256",
		"prefix-repetition-suffix-len":   "256",
		"prefix-repetition-num-prefixes": "10",
		"prefix-repetition-output-len":   "128",
	} {
		if got := cmd.Flags().Lookup(name).DefValue; got != want {
			t.Errorf("--%s default %q, want %q", name, got, want)
		}
	}
}

func TestCommandRun(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true})
	out := filepath.Join(t.TempDir(), "result.json")
	cmd := NewCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{
		"--base-url", f.url(), "--endpoint", "/v1/chat/completions", "--num-prompts", "4",
		"--max-concurrency", "2", "--random-input-len", "8", "--random-output-len", "3",
		"--random-prefix-len", "2", "--num-warmups", "1", // vLLM's names
		"--request-rate", "inf", "--json", "--output-file", out, "--label", "ours",
	})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, stdout.String())
	}
	if rep.Completed != 4 || rep.Endpoint != EndpointChat || rep.SharedPrefixLen != 2 || rep.Warmup != 1 || rep.Label != "ours" {
		t.Errorf("report %+v", rep)
	}
	if got := f.count.Load(); got != 5 {
		t.Errorf("server got %d requests, want 4 + 1 warmup", got)
	}
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var fromFile Report
	if err := json.Unmarshal(file, &fromFile); err != nil || fromFile.Completed != 4 {
		t.Errorf("output file: %v, %+v", err, fromFile)
	}
	if !strings.Contains(stderr.String(), "bench: starting") {
		t.Errorf("no progress on stderr: %q", stderr.String())
	}
}

func TestCommandTextAndQuiet(t *testing.T) {
	f := startFake(t, fakeOptions{})
	cmd := NewCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--base-url", f.url(), "--num-prompts", "2", "--random-input-len", "4", "--random-output-len", "2", "-q"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "Serving Benchmark Result") || !strings.Contains(stdout.String(), "content chunks (no usage from server)") {
		t.Errorf("text report:\n%s", stdout.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("-q still logged: %q", stderr.String())
	}
}

func TestCommandErrors(t *testing.T) {
	f := startFake(t, fakeOptions{status: func(int) int { return 500 }})
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad endpoint", []string{"--endpoint", "embeddings"}, "unknown endpoint"},
		{"bad config", []string{"--num-prompts", "0"}, "num prompts"},
		{"bad rate", []string{"--request-rate", "fast"}, "invalid argument"},
		{"positional args", []string{"extra"}, "unknown command"},
		{"bad dataset", []string{"--dataset-name", "sharegpt"}, "unknown dataset"},
		{"random flag with prefix_repetition", []string{"--dataset-name", "prefix_repetition", "--random-input-len", "8"},
			"--random-input-len applies to --dataset-name random, not prefix_repetition"},
		{"vLLM's prefix flag with prefix_repetition", []string{"--dataset-name", "prefix_repetition", "--random-prefix-len", "8"},
			"--shared-prefix-len applies to --dataset-name random"},
		{"prefix_repetition flag with random", []string{"--prefix-repetition-num-prefixes", "3"},
			"--prefix-repetition-num-prefixes applies to --dataset-name prefix_repetition, not random"},
		{"nothing completed", []string{"--base-url", f.url(), "--num-prompts", "2", "-q"}, "no request completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand()
			cmd.SetOut(new(bytes.Buffer))
			cmd.SetErr(new(bytes.Buffer))
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCommandPrefixRepetition(t *testing.T) {
	f := startFake(t, fakeOptions{usage: true})
	cmd := NewCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{
		"--base-url", f.url(), "--num-prompts", "12", "--max-concurrency", "3", "--num-warmups", "2", "--seed", "4",
		"--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "20",
		"--prefix-repetition-suffix-len", "5", "--prefix-repetition-num-prefixes", "3",
		"--prefix-repetition-output-len", "6", "--json", "-q",
	})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 12 || rep.TotalOutputTokens != 72 || rep.DatasetName != DatasetPrefixRepetition ||
		rep.PrefixRepetitionPrefixLen != 20 || rep.PrefixRepetitionSuffixLen != 5 ||
		rep.PrefixRepetitionNumPrefixes != 3 || rep.PrefixRepetitionOutputLen != 6 || rep.RandomInputLen != 0 {
		t.Errorf("report %+v", rep)
	}
	// What the server received: every prompt 25 words, starting with one of
	// three prefixes, all three used by the measured requests.
	seen := map[string]int{}
	for i, r := range f.requests() {
		words := strings.Fields(r.Body["prompt"].(string))
		if len(words) != 25 || r.Body["max_tokens"] != 6.0 {
			t.Errorf("request %d: %d words, max_tokens %v; want 25 and 6", i, len(words), r.Body["max_tokens"])
			continue
		}
		if i >= 2 { // after the warmups
			seen[strings.Join(words[:20], " ")]++
		}
	}
	if len(seen) != 3 {
		t.Errorf("measured prompts use %d distinct prefixes, want 3", len(seen))
	}
	for p, n := range seen {
		if n != 4 {
			t.Errorf("prefix %.20q... used by %d prompts, want 4", p, n)
		}
	}
}
