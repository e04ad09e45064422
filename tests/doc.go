// Package tests holds end-to-end tests: the real embedded model served by
// the real router on a loopback HTTP server, driven by HTTP, by the
// go-openai client, and through the chat page in headless Chromium
// (webui_test.go, which fails, not skips, without a chromium binary; `make
// test` installs it). They assert what a user sees (exact greedy tokens,
// usage, errors, metrics), not internals.
package tests
