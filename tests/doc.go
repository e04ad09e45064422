// Package tests holds end-to-end tests: the real embedded model served by
// the real router on a loopback HTTP server, driven by HTTP and by the
// go-openai client. They assert what a user sees (exact greedy tokens,
// usage, errors, metrics), not internals.
package tests
