package worker

import (
	"log/slog"
	"os"
	"testing"

	"github.com/llmserve/llmserve/engine/llamacpp"
)

func TestMain(m *testing.M) {
	llamacpp.SetLogger(slog.New(slog.DiscardHandler), slog.LevelError)
	os.Exit(m.Run())
}
