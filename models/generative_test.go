package models

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/engine/llamacpp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// SmolLM2-135M's shape: 30 layers, 3 KV heads of 64 dimensions.
var smol = llamacpp.Info{NCtxTrain: 8192, NEmbd: 576, NLayer: 30, NHead: 9, NHeadKV: 3, KVBytesPerToken: 2 * 30 * 3 * 64 * 2}

func TestSize(t *testing.T) {
	tests := []struct {
		name string
		cfg  GenerativeConfig
		want sizing
	}{
		{"defaults", GenerativeConfig{}, sizing{maxLen: 8192, maxSeqs: 1, initialSeqs: 1, batchTokens: 2048, maxWaiting: 512, paged: true}},
		{"as asked", GenerativeConfig{MaxModelLen: 2048, MaxNumSeqs: 16, InitialSeqs: 4, MaxNumBatchedTokens: 512, MaxWaiting: 9},
			sizing{maxLen: 2048, maxSeqs: 16, initialSeqs: 4, batchTokens: 512, maxWaiting: 9, paged: true}},
		// Paged KV: 1 GiB holds 46,603 positions of 23,040 bytes (46,592 in
		// whole blocks), and max_num_seqs stays as asked.
		{"paged: the cap bounds tokens", GenerativeConfig{MaxNumSeqs: 64, KVMemoryBytes: 1 << 30},
			sizing{maxLen: 8192, maxSeqs: 64, initialSeqs: 64, batchTokens: 2048, maxWaiting: 512, paged: true, capacityTokens: 46592}},
		{"paged: q8_0 KV holds more", GenerativeConfig{MaxNumSeqs: 64, InitialSeqs: 4, KVMemoryBytes: 1 << 30, KVType: "q8_0"},
			sizing{maxLen: 8192, maxSeqs: 64, initialSeqs: 4, batchTokens: 2048, maxWaiting: 512, paged: true, capacityTokens: 87712}},
		// KV on a GPU is not paged: 2048 positions of 23,040 bytes are 45 MiB
		// a sequence, and 1 GiB holds 22.
		{"GPU: lowered to the KV cap, allocated whole", GenerativeConfig{GPULayers: -1, MaxModelLen: 2048, MaxNumSeqs: 64, InitialSeqs: 4, KVMemoryBytes: 1 << 30},
			sizing{maxLen: 2048, maxSeqs: 22, initialSeqs: 22, batchTokens: 2048, maxWaiting: 512, lowered: true}},
		{"batch raised to the sequences", GenerativeConfig{MaxModelLen: 256, MaxNumSeqs: 100, MaxNumBatchedTokens: 10},
			sizing{maxLen: 256, maxSeqs: 100, initialSeqs: 100, batchTokens: 100, maxWaiting: 512, paged: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := size(tt.cfg, smol)
			if err != nil || got != tt.want {
				t.Fatalf("size = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestSizeRefuses(t *testing.T) {
	tests := []struct {
		cfg     GenerativeConfig
		setting string
		msg     string
	}{
		{GenerativeConfig{MaxModelLen: 100000}, "MaxModelLen", "exceeds the model's trained context length of 8192"},
		{GenerativeConfig{MaxModelLen: -1}, "MaxModelLen", "negative"},
		{GenerativeConfig{MaxModelLen: 1}, "MaxModelLen", "at least 2"},
		{GenerativeConfig{MaxNumSeqs: 300}, "MaxNumSeqs", "exceeds 255"},
		{GenerativeConfig{GPULayers: -1, KVMemoryBytes: 1 << 20}, "KVMemoryBytes", "cannot hold one sequence of 8192 tokens"},
		{GenerativeConfig{KVMemoryBytes: 512 << 10}, "KVMemoryBytes", "holds 16 tokens of KV"},
		{GenerativeConfig{PrefixCacheBytes: -1}, "PrefixCacheBytes", "negative"},
	}
	for _, tt := range tests {
		_, err := size(tt.cfg, smol)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Setting != tt.setting || !strings.Contains(ce.Msg, tt.msg) {
			t.Errorf("size(%+v) = %v; want a ConfigError for %s mentioning %q", tt.cfg, err, tt.setting, tt.msg)
		}
	}
}

func TestRegistryDrain(t *testing.T) {
	r := NewRegistry()
	if r.Ready() {
		t.Fatal("an empty registry is ready")
	}
	r.Drain()
	if r.Ready() || r.Stop() != 0 {
		t.Fatal("a draining registry is ready, or stopped requests it never had")
	}
}

// Rank pooling runs a classifier head that only rerankers have; llama.cpp
// aborts on a model without one, so it is refused at load.
func TestRankPoolingNeedsAReranker(t *testing.T) {
	_, err := LoadGenerative(GenerativeConfig{CacheDir: t.TempDir(), Pooling: "rank"}, nil, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Setting != "Pooling" {
		t.Fatalf("err = %v, want a ConfigError for Pooling", err)
	}
	if _, err := LoadGenerative(GenerativeConfig{CacheDir: t.TempDir(), Pooling: "max"}, nil, nil); !errors.As(err, &ce) || ce.Setting != "Pooling" {
		t.Fatalf("pooling max: err = %v", err)
	}
}
