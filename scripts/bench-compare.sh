#!/usr/bin/env bash
# Measures llmserve and llama.cpp's llama-server side by side on one model
# with `llmserve bench`, one server at a time, alternating which goes first,
# RUNS times; prints a table of medians and the llmserve/llama-server
# ratios, and writes every run's JSON and a plot to OUT.
#
#   LLAMA_SERVER=/path/to/llama-server MODEL=/path/to/model.gguf \
#     [CONCURRENCY="1 4 16 64"] [RUNS=3] [INPUT_LEN=32] [OUTPUT_LEN=64] \
#     [PREFIX="prefix-len suffix-len num-prefixes"] \
#     [LLAMA_ARGS="-np 16 -kvu -t 2 -c 8192"] [LLMSERVE_ARGS=...] \
#     [OUT=bench-results/compare] scripts/bench-compare.sh
#
# llama-server is not built here: build it from a llama.cpp checkout at the
# vendored commit (docs/BENCHMARKS.md says how). With PREFIX set, the
# workload is `bench --dataset-name prefix_repetition` (OUTPUT_LEN tokens
# out); otherwise random prompts of INPUT_LEN words. Every request
# generates exactly OUTPUT_LEN tokens (ignore_eos).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

: "${LLAMA_SERVER:?set LLAMA_SERVER to a llama-server binary}"
: "${MODEL:?set MODEL to a GGUF file}"
BIN=${BIN:-bin/llmserve}
CONCURRENCY=${CONCURRENCY:-1 4 16 64}
RUNS=${RUNS:-3}
INPUT_LEN=${INPUT_LEN:-32}
OUTPUT_LEN=${OUTPUT_LEN:-64}
PREFIX=${PREFIX:-}
LLAMA_ARGS=${LLAMA_ARGS:--np 16 -kvu -t 2 -c 8192}
LLMSERVE_ARGS=${LLMSERVE_ARGS:-}
OUT=${OUT:-bench-results/compare}
# Each server has a port of its own: llama-server's closed connections
# linger in the kernel and keep its port from being bound for a minute.
LLAMA_PORT=${LLAMA_PORT:-18090}
LLMSERVE_PORT=${LLMSERVE_PORT:-18091}
PORT=
mkdir -p "$OUT"

server=""
stop() { stop_listener; }
trap stop EXIT

start() { # name
  case $1 in
  llama-server) PORT=$LLAMA_PORT ;;
  llmserve) PORT=$LLMSERVE_PORT ;;
  esac
  case $1 in
  llama-server)
    # shellcheck disable=SC2086
    "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" $LLAMA_ARGS >"$OUT/llama-server.log" 2>&1 &
    ;;
  llmserve)
    # shellcheck disable=SC2086
    "$BIN" serve --model "$MODEL" --http-port "$PORT" --grpc-port 0 --log-level warn $LLMSERVE_ARGS >"$OUT/llmserve.log" 2>&1 &
    ;;
  esac
  server=$!
  up_or_exit "$1" "$OUT/$1.log" 600 "http://127.0.0.1:$PORT/health"
}

workload=(--random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN")
if [ -n "$PREFIX" ]; then
  read -r plen slen nprefix <<<"$PREFIX"
  workload=(--dataset-name prefix_repetition --prefix-repetition-prefix-len "$plen"
    --prefix-repetition-suffix-len "$slen" --prefix-repetition-num-prefixes "$nprefix"
    --prefix-repetition-output-len "$OUTPUT_LEN")
fi

for run in $(seq "$RUNS"); do
  rotated "$run" llama-server llmserve
  for name in "${order[@]}"; do
    start "$name"
    for c in $CONCURRENCY; do
      n=$((c * 4 < 16 ? 16 : c * 4))
      "$BIN" bench --base-url "http://127.0.0.1:$PORT/v1" --model "$(basename "$MODEL" .gguf)" \
        --max-concurrency "$c" --num-prompts "$n" --seed "$run" --warmup 4 "${workload[@]}" \
        --label "$name:c$c:run$run" --output-file "$OUT/$name-c$c-run$run.json" -q >/dev/null
    done
    stop
  done
done

"$BIN" bench plot -o "$OUT/throughput.svg" --title "$(basename "$MODEL"): output tokens/s" "$OUT"/*-run*.json
"$BIN" bench plot -o "$OUT/ttft.svg" --metric median_ttft_ms --title "$(basename "$MODEL"): median TTFT (ms)" "$OUT"/*-run*.json

# Medians over the runs, per server and concurrency, and the ratios.
jq -rs '
  def median: sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  def r1: . * 10 | round / 10;
  map({server: (.label | split(":")[0]), c: .max_concurrency, tps: .output_throughput,
       ttft: .median_ttft_ms, itl: .median_itl_ms, p99itl: .p99_itl_ms, failed: (.failed // 0), textless: (.textless_requests // 0)})
  | group_by(.c) | map({c: .[0].c,
      l: [.[] | select(.server == "llama-server")], m: [.[] | select(.server == "llmserve")]})
  | ["| c | llama-server tok/s | llmserve tok/s | ratio | llama-server TTFT p50 ms | llmserve TTFT p50 ms | ratio | llmserve ITL p50 / p99 ms | failed (l / m) | textless (l / m) |",
     "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    + map("| \(.c) | \(.l | map(.tps) | median | r1) | \(.m | map(.tps) | median | r1) | \((.m | map(.tps) | median) / (.l | map(.tps) | median) * 100 | round / 100) | \(.l | map(.ttft) | median | r1) | \(.m | map(.ttft) | median | r1) | \((.m | map(.ttft) | median) / (.l | map(.ttft) | median) * 100 | round / 100) | \(.m | map(.itl) | median | r1) / \(.m | map(.p99itl) | median | r1) | \(.l | map(.failed) | add) / \(.m | map(.failed) | add) | \(.l | map(.textless) | add) / \(.m | map(.textless) | add) |")
  | .[]' "$OUT"/*-run*.json | tee "$OUT/summary.md"
