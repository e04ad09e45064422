package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestServePprof: --pprof-addr serves Go's profiles on its own listener
// until stopped; empty, it serves nothing; an address that cannot be
// listened on is an error naming the flag.
func TestServePprof(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	stop, err := servePprof(addr, log)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET /debug/pprof/cmdline: HTTP %d, %q", resp.StatusCode, body)
	}
	stop()
	http.DefaultClient.CloseIdleConnections()

	off, err := servePprof("", log)
	if err != nil {
		t.Fatal(err)
	}
	off()
	if _, err := servePprof("127.0.0.1:99999", log); err == nil || !strings.Contains(err.Error(), "--pprof-addr") {
		t.Fatalf("a bad address: %v", err)
	}
}
