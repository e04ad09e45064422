package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func prefixRepetitionConfig(seed int64, prefixLen, suffixLen, numPrefixes int) Config {
	cfg := DefaultConfig()
	cfg.Dataset, cfg.Seed = DatasetPrefixRepetition, seed
	cfg.PrefixRepetition = PrefixRepetition{PrefixLen: prefixLen, SuffixLen: suffixLen, NumPrefixes: numPrefixes, OutputLen: 7}
	return cfg
}

// commonWords is the number of leading words all of ps share.
func commonWords(ps []string) int {
	split := make([][]string, len(ps))
	for i, p := range ps {
		split[i] = strings.Fields(p)
	}
	for n := 0; ; n++ {
		for _, ws := range split {
			if n >= len(ws) || ws[n] != split[0][n] {
				return n
			}
		}
	}
}

func TestPrefixRepetitionRequests(t *testing.T) {
	tests := []struct {
		name                           string
		prefixLen, suffixLen, prefixes int
		n                              int
	}{
		{"vLLM-like", 32, 16, 10, 100},
		{"remainder", 8, 8, 3, 10},
		{"one prefix", 12, 4, 1, 6},
		{"as many prefixes as prompts", 6, 6, 5, 5},
		{"no suffix", 10, 0, 4, 8},
		{"no prefix", 0, 9, 2, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := prefixRepetitionConfig(11, tt.prefixLen, tt.suffixLen, tt.prefixes)
			prefixes := repeatedPrefixes(&cfg)
			reqs := generateRequests(&cfg, streamMeasured, tt.n)
			if len(prefixes) != tt.prefixes || len(reqs) != tt.n {
				t.Fatalf("%d prefixes and %d requests, want %d and %d", len(prefixes), len(reqs), tt.prefixes, tt.n)
			}
			groups := make([][]string, tt.prefixes)
			for i, r := range reqs {
				words := strings.Fields(r.prompt)
				if len(words) != tt.prefixLen+tt.suffixLen || r.promptWords != len(words) || r.maxTokens != 7 {
					t.Fatalf("request %d: %d words (promptWords %d), max tokens %d; want %d words, 7 tokens",
						i, len(words), r.promptWords, r.maxTokens, tt.prefixLen+tt.suffixLen)
				}
				k := slices.IndexFunc(prefixes, func(p string) bool {
					return strings.Join(words[:tt.prefixLen], " ") == p
				})
				if k < 0 {
					t.Fatalf("request %d: prompt %.40q starts with none of the prefixes", i, r.prompt)
				}
				groups[k] = append(groups[k], r.prompt)
			}
			if tt.prefixLen == 0 {
				return // every prompt "has" the one empty prefix
			}
			// Each prefix serves n/prefixes prompts, the first n%prefixes one
			// more, and they share exactly the prefix: the suffixes differ
			// from their first word on.
			for k, g := range groups {
				want := tt.n / tt.prefixes
				if k < tt.n%tt.prefixes {
					want++
				}
				if len(g) != want {
					t.Errorf("prefix %d serves %d prompts, want %d", k, len(g), want)
				}
				if len(g) > 1 && tt.suffixLen > 0 {
					if got := commonWords(g); got != tt.prefixLen {
						t.Errorf("prompts of prefix %d share %d leading words, want exactly the prefix's %d", k, got, tt.prefixLen)
					}
				}
			}
			// Distinct prefixes: no two share the whole prefix.
			for i := range prefixes {
				for j := range i {
					if commonWords([]string{prefixes[i], prefixes[j]}) >= tt.prefixLen {
						t.Errorf("prefixes %d and %d are equal", i, j)
					}
				}
			}
		})
	}
}

func TestPrefixRepetitionDeterministic(t *testing.T) {
	cfg := prefixRepetitionConfig(5, 16, 8, 4)
	a := generateRequests(&cfg, streamMeasured, 20)
	if b := generateRequests(&cfg, streamMeasured, 20); !slices.Equal(a, b) {
		t.Error("same seed gave different requests")
	}
	// Warmup prompts use the same prefixes with suffixes of their own.
	prefixes := repeatedPrefixes(&cfg)
	for _, w := range generateRequests(&cfg, streamWarmup, 4) {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(w.prompt, p+" ") }) {
			t.Errorf("warmup prompt %.40q lacks the measured prefixes", w.prompt)
		}
		if slices.ContainsFunc(a, func(r request) bool { return r.prompt == w.prompt }) {
			t.Errorf("warmup prompt %.40q is also measured", w.prompt)
		}
	}
	other := prefixRepetitionConfig(6, 16, 8, 4)
	if c := generateRequests(&other, streamMeasured, 20); c[0].prompt == a[0].prompt {
		t.Error("different seeds gave the same prompt")
	}
}

func TestLoadCustomPrompts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.jsonl", "{\"prompt\": \"one two\", \"output_tokens\": 3}\n\n{\"prompt\": \"three\"}\n")
	got, err := LoadCustomPrompts(good)
	if err != nil || !slices.Equal(got, []string{"one two", "three"}) {
		t.Fatalf("LoadCustomPrompts = %q, %v", got, err)
	}
	for name, text := range map[string]string{
		"notjson.jsonl":  "{\"prompt\": \"a\"}\nnot json\n",
		"noprompt.jsonl": "{\"text\": \"a\"}\n",
		"empty.jsonl":    "\n",
	} {
		if _, err := LoadCustomPrompts(write(name, text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cfg := DefaultConfig()
	cfg.Dataset, cfg.Custom.Prompts, cfg.Custom.OutputLen = DatasetCustom, got, 7
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reqs := generateRequests(&cfg, streamMeasured, 3)
	if reqs[0].prompt != "one two" || reqs[1].prompt != "three" || reqs[2].prompt != "one two" || reqs[0].maxTokens != 7 || reqs[0].promptWords != 2 {
		t.Errorf("requests = %+v", reqs)
	}
	cfg.Custom.Prompts = nil
	if err := cfg.Validate(); err == nil {
		t.Error("custom dataset without prompts validated")
	}
}
