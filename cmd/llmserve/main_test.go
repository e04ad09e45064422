package main

import (
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: every
// server a test starts must be stopped. Idle keep-alive connections of the
// default HTTP client end when they are closed here.
func TestMain(m *testing.M) {
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("leaked goroutines: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
