package models

import "log/slog"

// RSSFactor bounds the process's resident memory: at most RSSFactor × the
// caps (weights + KV cache + prefix cache), the Go runtime, llama.cpp's
// compute buffers and the code included, once the caps are large enough
// (about 1 GiB together) for those to fit in the margin. `make soak`
// checks it.
const RSSFactor = 1.15

// logMemoryCaps says at start-up what the model's memory caps add up to:
// the weights, the KV cache at its largest (max-num-seqs streams), and the
// prefix cache's host memory (off the Go heap, so the collector does not
// double it).
func logMemoryCaps(log *slog.Logger, weights, kv, prefix int64) {
	total := weights + kv + prefix
	log.Info("memory caps",
		"weights", formatBytes(weights), "kv_cache", formatBytes(kv), "prefix_cache", formatBytes(prefix),
		"total", formatBytes(total), "total_bytes", total,
		"expected_rss_at_most", formatBytes(int64(float64(total)*RSSFactor)))
}
