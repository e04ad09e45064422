#!/usr/bin/env bash
# Measures what an idle prefix cache costs a running sequence: decode speed
# at concurrency 1 on a fresh server (empty cache) and on one whose prefix
# cache was first filled with at least FILL_FACTOR × max-model-len tokens of
# unrelated prompts. Each run starts a fresh server per case and alternates
# which case goes first; prints a table of medians and writes every run's
# JSON to OUT.
#
#   MODEL=/path/to/model.gguf [MAX_MODEL_LEN=2048] [RUNS=3] [FILL_FACTOR=8] \
#     [INPUT_LEN=128] [OUTPUT_LEN=64] [LLMSERVE_ARGS=...] \
#     [OUT=bench-results/idle-cache] scripts/bench-idle-cache.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

: "${MODEL:?set MODEL to a GGUF file}"
BIN=${BIN:-bin/llmserve}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-2048}
RUNS=${RUNS:-3}
FILL_FACTOR=${FILL_FACTOR:-8}
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-64}
LLMSERVE_ARGS=${LLMSERVE_ARGS:-}
OUT=${OUT:-bench-results/idle-cache}
PORT=${PORT:-18092}
BASE="http://127.0.0.1:$PORT"
NAME=$(basename "$MODEL" .gguf)
mkdir -p "$OUT"

server=""
stop() { stop_listener; }
trap stop EXIT

start() {
  # shellcheck disable=SC2086
  "$BIN" serve --model "$MODEL" --http-port "$PORT" --grpc-port 0 --log-level warn \
    --max-model-len "$MAX_MODEL_LEN" $LLMSERVE_ARGS >"$OUT/llmserve.log" 2>&1 &
  server=$!
  up_or_exit llmserve "$OUT/llmserve.log" 600 "$BASE/health"
}

metric() { # name: the value of one gauge or counter of /metrics
  curl -sf "$BASE/metrics" | awk -v n="$1" 'index($0, n"{") == 1 { print $2 }'
}

# fill sends unrelated prompts (their own seed) of about a quarter of
# max-model-len words until the prefix cache holds FILL_FACTOR ×
# max-model-len tokens (16-token blocks).
fill() { # run
  local want=$((FILL_FACTOR * MAX_MODEL_LEN / 16)) round=0 blocks
  while :; do
    blocks=$(metric llmserve_prefix_cache_blocks)
    [ "${blocks%.*}" -ge "$want" ] && break
    round=$((round + 1))
    [ "$round" -gt 20 ] && { echo "the prefix cache stopped growing at $blocks blocks" >&2; exit 1; }
    "$BIN" bench --base-url "$BASE/v1" --model "$NAME" --max-concurrency 4 --num-prompts 16 \
      --seed $((1000 + 100 * $1 + round)) --random-input-len $((MAX_MODEL_LEN / 4)) --random-output-len 1 -q >/dev/null
  done
  echo "$blocks"
}

measure() { # case run
  "$BIN" bench --base-url "$BASE/v1" --model "$NAME" --max-concurrency 1 --num-prompts 16 \
    --seed "$2" --warmup 2 --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" \
    --label "$1:run$2" --output-file "$OUT/$1-run$2.json" -q >/dev/null
}

for run in $(seq "$RUNS"); do
  rotated "$run" empty full
  for c in "${order[@]}"; do
    start
    if [ "$c" = full ]; then
      blocks=$(fill "$run")
      echo "run $run: prefix cache holds $blocks blocks ($(metric llmserve_prefix_cache_bytes) bytes) before measuring" >&2
    fi
    measure "$c" "$run"
    stop
  done
done

jq -rs '
  def median: sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  def r2: . * 100 | round / 100;
  map({c: (.label | split(":")[0]), tps: .output_throughput, tpot: .median_tpot_ms, itl: .median_itl_ms, failed: (.failed // 0)})
  | group_by(.c) | map({c: .[0].c, tps: (map(.tps) | median), tpot: (map(.tpot) | median), itl: (map(.itl) | median), failed: (map(.failed) | add), n: length})
  | (["| prefix cache | runs | output tok/s | TPOT p50 ms | ITL p50 ms | failed |", "|---|---:|---:|---:|---:|---:|"]
     + map("| \(.c) | \(.n) | \(.tps | r2) | \(.tpot | r2) | \(.itl | r2) | \(.failed) |")
     + ["", "full / empty TPOT: \((map(select(.c == "full"))[0].tpot) / (map(select(.c == "empty"))[0].tpot) | r2)"])
  | .[]' "$OUT"/*-run*.json | tee "$OUT/summary.md"
