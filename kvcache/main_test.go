package kvcache

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/llmserve/llmserve/hostmem"
)

func TestMain(m *testing.M) {
	// Every cached entry and kept transfer gets its own mapping, made
	// inaccessible when freed: a read of freed KV faults.
	arenaOptions = hostmem.Options{Guard: true}
	goleak.VerifyTestMain(m)
}
