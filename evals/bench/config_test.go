package bench

import (
	"math"
	"strings"
	"testing"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; "" means valid
	}{
		{"finite rate", func(c *Config) { c.RequestRate = 2.5 }, ""},
		{"unlimited concurrency", func(c *Config) { c.MaxConcurrency = 0 }, ""},
		{"prefix only", func(c *Config) { c.RandomInputLen, c.SharedPrefixLen = 0, 10 }, ""},
		{"https", func(c *Config) { c.BaseURL = "https://example.com/v1" }, ""},
		{"no scheme", func(c *Config) { c.BaseURL = "127.0.0.1:8080/v1" }, "base URL"},
		{"bad endpoint", func(c *Config) { c.Endpoint = "embeddings" }, "endpoint"},
		{"no prompts", func(c *Config) { c.NumPrompts = 0 }, "num prompts"},
		{"negative concurrency", func(c *Config) { c.MaxConcurrency = -1 }, "max concurrency"},
		{"zero rate", func(c *Config) { c.RequestRate = 0 }, "request rate"},
		{"nan rate", func(c *Config) { c.RequestRate = math.NaN() }, "request rate"},
		{"empty prompts", func(c *Config) { c.RandomInputLen = 0 }, "prompts would be empty"},
		{"no output", func(c *Config) { c.RandomOutputLen = 0 }, "random output len"},
		{"ratio one", func(c *Config) { c.RandomRangeRatio = 1 }, "random range ratio"},
		{"negative ratio", func(c *Config) { c.RandomRangeRatio = -0.1 }, "random range ratio"},
		{"negative prefix", func(c *Config) { c.SharedPrefixLen = -1 }, "shared prefix len"},
		{"negative temperature", func(c *Config) { c.Temperature = -1 }, "temperature"},
		{"negative warmup", func(c *Config) { c.Warmup = -1 }, "warmup"},
		{"no timeout", func(c *Config) { c.Timeout = 0 }, "timeout"},
		{"unknown dataset", func(c *Config) { c.Dataset = "sharegpt" }, "dataset"},
		{"empty dataset is random", func(c *Config) { c.Dataset = "" }, ""},
		{"prefix repetition", func(c *Config) { c.Dataset = DatasetPrefixRepetition }, ""},
		{"prefix repetition ignores random lengths", func(c *Config) {
			c.Dataset, c.RandomInputLen, c.RandomOutputLen = DatasetPrefixRepetition, 0, 0
		}, ""},
		{"prefix repetition without suffix", func(c *Config) {
			c.Dataset, c.PrefixRepetition.SuffixLen = DatasetPrefixRepetition, 0
		}, ""},
		{"prefix repetition empty prompts", func(c *Config) {
			c.Dataset, c.PrefixRepetition.PrefixLen, c.PrefixRepetition.SuffixLen = DatasetPrefixRepetition, 0, 0
		}, "prompts would be empty"},
		{"prefix repetition negative len", func(c *Config) {
			c.Dataset, c.PrefixRepetition.PrefixLen = DatasetPrefixRepetition, -1
		}, "must not be negative"},
		{"prefix repetition no prefixes", func(c *Config) {
			c.Dataset, c.PrefixRepetition.NumPrefixes = DatasetPrefixRepetition, 0
		}, "num prefixes"},
		{"prefix repetition fewer prompts than prefixes", func(c *Config) {
			c.Dataset, c.NumPrompts = DatasetPrefixRepetition, 9
		}, "every prefix needs a prompt"},
		{"prefix repetition no output", func(c *Config) {
			c.Dataset, c.PrefixRepetition.OutputLen = DatasetPrefixRepetition, 0
		}, "output len"},
		{"prefix repetition with a shared prefix", func(c *Config) {
			c.Dataset, c.SharedPrefixLen = DatasetPrefixRepetition, 4
		}, "random dataset only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestValidateReportsAllProblems(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NumPrompts, cfg.Timeout = 0, 0
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "num prompts") || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("error = %v, want both problems", err)
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in   string
		want Endpoint
	}{
		{"completions", EndpointCompletions},
		{"/v1/completions", EndpointCompletions},
		{"chat", EndpointChat},
		{"Chat", EndpointChat},
		{"/v1/chat/completions", EndpointChat},
		{"embeddings", ""},
	}
	for _, tt := range tests {
		got, err := ParseEndpoint(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("ParseEndpoint(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDataset(t *testing.T) {
	tests := []struct {
		in   string
		want Dataset
	}{
		{"random", DatasetRandom},
		{"prefix_repetition", DatasetPrefixRepetition},
		{"prefix-repetition", DatasetPrefixRepetition},
		{" Prefix_Repetition ", DatasetPrefixRepetition},
		{"sharegpt", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := ParseDataset(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("ParseDataset(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestChatBodyImages checks that --image puts each image before the text
// as an image_url part, and that images need the chat route.
func TestChatBodyImages(t *testing.T) {
	s := &session{cfg: &Config{Endpoint: EndpointChat, ImageURLs: []string{"data:image/png;base64,AA=="}}, model: "m"}
	b, err := s.body(request{prompt: "hi", maxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := `"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}},{"type":"text","text":"hi"}]}]`
	if !strings.Contains(string(b), want) {
		t.Errorf("body %s\nwant it to hold %s", b, want)
	}
	cfg := DefaultConfig()
	cfg.ImageURLs = []string{"data:image/png;base64,AA=="}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--endpoint chat") {
		t.Errorf("images on the completions route: %v", err)
	}
}
