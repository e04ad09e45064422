#!/usr/bin/env bash
# Benchmarks V2 infer on a 784-256-128-10 MLP (random weights, written by
# `llmserve synth mlp`) at concurrency 1, 8 and 32, with adaptive batching
# off and on and 1 or 2 parallel workers: one server per configuration,
# one line per run. The JSON reports go to $OUT. See docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

BIN=${BIN:-bin/llmserve}
PORT=${PORT:-18090}
OUT=${OUT:-bench-results/tensor}
REQUESTS=${REQUESTS:-2000}       # measured requests per run
BATCH_TIME=${BATCH_TIME:-0.001}  # max_batch_time (s) when batching is on
BENCH_ARGS=${BENCH_ARGS:-}       # e.g. --binary
mkdir -p "$OUT"

model="$OUT/mlp.onnx"
[ -f "$model" ] || "$BIN" synth mlp --layers 784,256,128,10 --seed 1 --softmax --argmax --onnx "$model" >/dev/null

printf '%-9s %-7s %3s %10s %9s %9s %9s\n' batching workers c 'req/s' 'mean ms' 'p50 ms' 'p99 ms'
for workers in ${WORKERS:-1 2}; do
  for batching in off on; do
    args=(--max-batch-size 1)
    [ "$batching" = on ] && args=(--max-batch-size 32 --max-batch-time "$BATCH_TIME")
    "$BIN" serve --model "mlp=$model" --http-port "$PORT" --grpc-port 0 --log-level warn \
      --parallel-workers "$workers" "${args[@]}" &
    server=$!
    trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
    wait_up 100 "http://127.0.0.1:$PORT/v2/models/mlp/ready" || true
    for c in ${CONCURRENCY:-1 8 32}; do
      f="$OUT/batching-$batching-w$workers-c$c.json"
      # shellcheck disable=SC2086
      "$BIN" bench --backend v2-infer --base-url "http://127.0.0.1:$PORT" --model mlp --input-shape 784 \
        --num-prompts "$REQUESTS" --max-concurrency "$c" --warmup 100 --seed 1 -q --json $BENCH_ARGS \
        --label "batching-$batching:w$workers:c$c" > "$f"
      jq -r --arg b "$batching" --arg w "$workers" \
        '[$b, $w, .max_concurrency, (.request_throughput|floor), .mean_e2el_ms, .median_e2el_ms, .p99_e2el_ms, .failed] |
         "\(.[0])       \(.[1])       \(.[2])  \(.[3])  \(.[4]*1000|round/1000)  \(.[5]*1000|round/1000)  \(.[6]*1000|round/1000)  failed=\(.[7])"' "$f"
    done
    kill $server; wait $server 2>/dev/null || true
  done
done
