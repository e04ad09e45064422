//go:build cgo

package llamacpp

/*
#include "bridge.h"

// LLAMA_COMMIT is defined in the build info that the ollama module
// compiles with llama.cpp.
extern const char * LLAMA_COMMIT;
*/
import "C"

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/ollama/ollama/llama"
)

var (
	initOnce sync.Once

	logMu  sync.Mutex
	logger = slog.Default() // guarded by logMu
	logBuf strings.Builder  // guarded by logMu: a line in progress
	// captured collects error lines while captureErrors is active; nil
	// otherwise. Guarded by logMu.
	captured *[]string
)

// captureErrors starts collecting the error lines llama.cpp logs; the
// function it returns stops and returns them. One capture at a time.
func captureErrors() func() []string {
	lines := []string{}
	logMu.Lock()
	captured = &lines
	logMu.Unlock()
	return func() []string {
		logMu.Lock()
		defer logMu.Unlock()
		captured = nil
		return lines
	}
}

// SetLogger routes llama.cpp and ggml messages at or above level to l. It
// may be called before or after the first Load.
func SetLogger(l *slog.Logger, level slog.Level) {
	ensureInit()
	logMu.Lock()
	logger = l
	logMu.Unlock()
	C.llmserve_log_install(C.int(ggmlLevel(level)))
}

// LlamaCommit is the llama.cpp commit the binary was built with.
func LlamaCommit() string { return C.GoString(C.LLAMA_COMMIT) }

// Init loads the ggml backends once, for this package's models and for
// packages that run ggml graphs of their own (tensorgraph): the CPU backend
// is compiled in, GPU backends are shared libraries found through
// OLLAMA_LIBRARY_PATH or <exe>/../lib/ollama.
func Init() { ensureInit() }

func ensureInit() {
	initOnce.Do(func() {
		llama.BackendInit()
		C.llmserve_log_install(C.int(ggmlLevel(slog.LevelWarn)))
	})
}

func ggmlLevel(l slog.Level) int {
	switch {
	case l <= slog.LevelDebug:
		return C.GGML_LOG_LEVEL_DEBUG
	case l <= slog.LevelInfo:
		return C.GGML_LOG_LEVEL_INFO
	case l <= slog.LevelWarn:
		return C.GGML_LOG_LEVEL_WARN
	default:
		return C.GGML_LOG_LEVEL_ERROR
	}
}

//export llmserveLog
func llmserveLog(level C.int, text *C.char) {
	s := C.GoString(text)
	logMu.Lock()
	defer logMu.Unlock()
	logBuf.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		return
	}
	line := strings.TrimRight(logBuf.String(), "\n")
	logBuf.Reset()
	var lvl slog.Level
	switch level {
	case C.GGML_LOG_LEVEL_DEBUG:
		lvl = slog.LevelDebug
	case C.GGML_LOG_LEVEL_INFO:
		lvl = slog.LevelInfo
	case C.GGML_LOG_LEVEL_WARN:
		lvl = slog.LevelWarn
	default:
		lvl = slog.LevelError
		if captured != nil {
			*captured = append(*captured, line)
		}
	}
	logger.Log(context.Background(), lvl, "llama.cpp", "line", line)
}
