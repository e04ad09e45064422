package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestGenerateRequestsDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 7
	cfg.RandomInputLen, cfg.RandomOutputLen = 50, 20
	a := generateRequests(&cfg, streamMeasured, 10)
	b := generateRequests(&cfg, streamMeasured, 10)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different requests")
	}
	if w := generateRequests(&cfg, streamWarmup, 10); w[0].prompt == a[0].prompt {
		t.Error("warmup stream repeats the measured prompts")
	}
	cfg.Seed = 8
	if c := generateRequests(&cfg, streamMeasured, 10); c[0].prompt == a[0].prompt {
		t.Error("different seeds gave the same prompt")
	}
	// A prefix of the run is the same run: asking for more requests does
	// not change the first ones.
	cfg.Seed = 7
	if more := generateRequests(&cfg, streamMeasured, 20); !slices.Equal(more[:10], a) {
		t.Error("request i depends on the number of requests")
	}
}

func TestGenerateRequestsLengths(t *testing.T) {
	tests := []struct {
		name            string
		in, out, prefix int
		ratio           float64
		inLo, inHi      int // random part, in words
		outLo, outHi    int
	}{
		{"fixed", 32, 8, 0, 0, 32, 32, 8, 8},
		{"ratio", 100, 10, 0, 0.5, 50, 150, 5, 15},
		{"output at least one", 10, 1, 0, 0.9, 1, 19, 1, 1},
		{"with prefix", 10, 4, 6, 0, 10, 10, 4, 4},
		{"prefix only", 0, 4, 6, 0, 0, 0, 4, 4},
		{"never empty", 1, 4, 0, 0.99, 1, 1, 1, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.RandomInputLen, cfg.RandomOutputLen, cfg.SharedPrefixLen, cfg.RandomRangeRatio = tt.in, tt.out, tt.prefix, tt.ratio
			prefix := sharedPrefix(&cfg)
			if got := len(strings.Fields(prefix)); got != tt.prefix {
				t.Fatalf("prefix has %d words, want %d", got, tt.prefix)
			}
			sawLo, sawHi := false, false
			for _, r := range generateRequests(&cfg, streamMeasured, 400) {
				n := len(strings.Fields(r.prompt))
				if n != r.promptWords {
					t.Fatalf("prompt has %d words, promptWords says %d", n, r.promptWords)
				}
				random := n - tt.prefix
				if random < tt.inLo || random > tt.inHi {
					t.Errorf("random part %d words, want in [%d, %d]", random, tt.inLo, tt.inHi)
				}
				if r.maxTokens < tt.outLo || r.maxTokens > tt.outHi {
					t.Errorf("max tokens %d, want in [%d, %d]", r.maxTokens, tt.outLo, tt.outHi)
				}
				if !strings.HasPrefix(r.prompt, prefix) {
					t.Errorf("prompt %q does not start with the shared prefix %q", r.prompt, prefix)
				}
				sawLo = sawLo || random == tt.inLo
				sawHi = sawHi || random == tt.inHi
			}
			if !sawLo || !sawHi {
				t.Errorf("400 requests never reached a bound of [%d, %d] (lo %v, hi %v)", tt.inLo, tt.inHi, sawLo, sawHi)
			}
		})
	}
}

func TestArrivalOffsets(t *testing.T) {
	if offs := arrivalOffsets(1, 5, math.Inf(1)); slices.ContainsFunc(offs, func(v float64) bool { return v != 0 }) {
		t.Errorf("infinite rate: offsets %v, want all 0", offs)
	}
	const n, rate = 20000, 4.0
	offs := arrivalOffsets(1, n, rate)
	if offs[0] != 0 || !slices.IsSorted(offs) {
		t.Fatalf("offsets must start at 0 and not decrease: %v...", offs[:5])
	}
	if !slices.Equal(offs, arrivalOffsets(1, n, rate)) {
		t.Error("same seed gave different arrivals")
	}
	// The mean gap of exponential arrivals is 1/rate; 20000 samples put
	// the sample mean within a few percent.
	mean := offs[n-1] / (n - 1)
	if math.Abs(mean-1/rate) > 0.05/rate {
		t.Errorf("mean gap %v s, want about %v s", mean, 1/rate)
	}
}
