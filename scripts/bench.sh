#!/usr/bin/env bash
# Benchmarks the embedded model at concurrency 1, 4, 16 and 64 against a
# server started here, and prints one line per run. The full reports go to
# bench-results/. See docs/BENCHMARKS.md for how to read them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

BIN=${BIN:-bin/llmserve}
PORT=${PORT:-18080}
OUT=${OUT:-bench-results}
INPUT_LEN=${INPUT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-128}
SERVE_ARGS=${SERVE_ARGS:-}
mkdir -p "$OUT"

# shellcheck disable=SC2086
"$BIN" serve --http-port "$PORT" --grpc-port 0 --log-level warn $SERVE_ARGS &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
wait_up 100 "http://127.0.0.1:$PORT/health" || true

for c in ${CONCURRENCY:-1 4 16 64}; do
  n=$(( c * 4 < 32 ? 32 : c * 4 ))
  "$BIN" bench --base-url "http://127.0.0.1:$PORT/v1" --max-concurrency "$c" --num-prompts "$n" \
    --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" --seed 1 --warmup 4 \
    --label "c$c" --output-file "$OUT/c$c.json" -q > "$OUT/c$c.txt"
  printf 'concurrency %-3s %s\n' "$c" "$(grep -E 'Output token throughput' "$OUT/c$c.txt" | tr -s ' ')"
done
