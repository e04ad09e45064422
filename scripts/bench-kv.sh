#!/usr/bin/env bash
# Measures llmserve and llama.cpp's llama-server in both of its KV layouts
# (per-slot, and one unified pool with -kvu) side by side on one model with
# `llmserve bench`, and records for every run, besides throughput and
# latencies, each server's resident memory (at the start of the measured
# run, its peak VmHWM, at the end), its peak of running sequences and
# llmserve's committed KV bytes (`bench --monitor-pid --monitor-url`).
# Each server is started fresh for every run and concurrency (so its peak
# memory is that run's), one at a time, the order rotated from rep to rep.
# Writes every run's JSON, a CSV of all of them (results.csv), the Markdown
# table of medians with per-rep ratios (table.md, `llmserve bench table`),
# the server command lines and the machine (setup.txt) to OUT.
#
#   LLAMA_SERVER=/path/to/llama-server MODEL=/path/to/model.gguf \
#     [SERVERS="llmserve llama-slots llama-kvu"] [CONCURRENCY=16] [RUNS=3] \
#     [DATASET=random] [INPUT_LEN=128] [OUTPUT_LEN=64] [NUM_PROMPTS=max(16,4c)] \
#     [LLMSERVE_ARGS=] [LLAMA_NP=c] [LLAMA_THREADS=2] [LLAMA_ARGS=] \
#     [LLAMA_SLOTS_CTX=...] [LLAMA_KVU_CTX=...] [OUT=bench-results/kv] \
#     scripts/bench-kv.sh
#
# DATASET=mixed is `bench --dataset-name mixed`: LONG_CLIENTS (4) of the c
# clients send LONG_PROMPTS (default LONG_CLIENTS) prompts of LONG_INPUT_LEN
# (6000) words, the others NUM_PROMPTS minus those of INPUT_LEN words; every
# request generates OUTPUT_LEN tokens (ignore_eos).
#
# llmserve runs with its defaults (plus LLMSERVE_ARGS). llama-server runs
# with its defaults except -np LLAMA_NP (default: c, one slot per client),
# -t LLAMA_THREADS and -c: per slot (llama-slots) each slot holds c/np cells,
# so -c defaults to np × the longest request rounded up to 256 cells
# (prompt words + OUTPUT_LEN + 16, one token per word); unified (llama-kvu,
# -kvu) the pool must hold every request in flight at once, so -c defaults to
# the sum over the clients, rounded up to 256 (for random prompts, the same
# as per slot). Override with LLAMA_SLOTS_CTX / LLAMA_KVU_CTX, e.g. for a
# vocabulary that splits the words into several tokens.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh
. scripts/lib/setup.sh

: "${MODEL:?set MODEL to a GGUF file}"
BIN=${BIN:-bin/llmserve}
SERVERS=${SERVERS:-llmserve llama-slots llama-kvu}
CONCURRENCY=${CONCURRENCY:-16}
RUNS=${RUNS:-3}
DATASET=${DATASET:-random}
INPUT_LEN=${INPUT_LEN:-128}
OUTPUT_LEN=${OUTPUT_LEN:-64}
LONG_CLIENTS=${LONG_CLIENTS:-4}
LONG_PROMPTS=${LONG_PROMPTS:-0}
LONG_INPUT_LEN=${LONG_INPUT_LEN:-6000}
NUM_PROMPTS=${NUM_PROMPTS:-}
WARMUP=${WARMUP:-4}
SETTLE=${SETTLE:-2s}
LLMSERVE_ARGS=${LLMSERVE_ARGS:-}
LLAMA_THREADS=${LLAMA_THREADS:-2}
LLAMA_ARGS=${LLAMA_ARGS:-}
OUT=${OUT:-bench-results/kv}
BASE_PORT=${BASE_PORT:-18190}
case " $SERVERS " in *" llama-"*) : "${LLAMA_SERVER:?set LLAMA_SERVER to a llama-server binary}" ;; esac
mkdir -p "$OUT"

round256() { echo $(( ($1 + 255) / 256 * 256 )); }

# ctx_for LAYOUT C: llama-server's -c for a layout at concurrency C.
ctx_for() {
  local layout=$1 c=$2 np=${LLAMA_NP:-$2} longest short_seq long_seq
  short_seq=$((INPUT_LEN + OUTPUT_LEN + 16))
  long_seq=$((LONG_INPUT_LEN + OUTPUT_LEN + 16))
  longest=$short_seq
  [ "$DATASET" = mixed ] && longest=$long_seq
  case $layout in
  slots) echo "${LLAMA_SLOTS_CTX:-$((np * $(round256 "$longest")))}" ;;
  kvu)
    if [ "$DATASET" = mixed ]; then
      echo "${LLAMA_KVU_CTX:-$(round256 $((LONG_CLIENTS * long_seq + (c - LONG_CLIENTS) * short_seq)))}"
    else
      echo "${LLAMA_KVU_CTX:-$((np * $(round256 "$longest")))}"
    fi
    ;;
  esac
}

# server_cmd NAME C PORT: the command line that starts server NAME.
server_cmd() {
  local name=$1 c=$2 port=$3
  case $name in
  llmserve) echo "$BIN serve --model $MODEL --http-port $port --grpc-port 0 --log-level warn $LLMSERVE_ARGS" ;;
  llama-slots) echo "$LLAMA_SERVER -m $MODEL --host 127.0.0.1 --port $port -t $LLAMA_THREADS -np ${LLAMA_NP:-$c} -c $(ctx_for slots "$c") $LLAMA_ARGS" ;;
  llama-kvu) echo "$LLAMA_SERVER -m $MODEL --host 127.0.0.1 --port $port -t $LLAMA_THREADS -np ${LLAMA_NP:-$c} -c $(ctx_for kvu "$c") -kvu $LLAMA_ARGS" ;;
  *) echo "unknown server $name: use llmserve, llama-slots or llama-kvu" >&2; return 1 ;;
  esac
}

PORT= server=
trap stop_port EXIT

# start NAME C LOG: starts server NAME for concurrency C and sets PORT and
# SERVER_PID (the process listening on PORT).
start() {
  PORT=$(server_port "$1")
  start_line "$3" "$(server_cmd "$1" "$2" "$PORT")"
  # up to 5 min: a 1B model and GiBs of KV load slowly on a busy machine
  up_or_exit "$1" "$3" 3000 "http://127.0.0.1:$PORT/health"
  SERVER_PID=$(ss -ltnpH "sport = :$PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
  SERVER_PID=${SERVER_PID:-$server}
}

{
  describe_setup
  echo "workload: DATASET=$DATASET INPUT_LEN=$INPUT_LEN OUTPUT_LEN=$OUTPUT_LEN LONG_CLIENTS=$LONG_CLIENTS LONG_PROMPTS=$LONG_PROMPTS LONG_INPUT_LEN=$LONG_INPUT_LEN NUM_PROMPTS=${NUM_PROMPTS:-max(16,4c)} WARMUP=$WARMUP RUNS=$RUNS"
  for c in $CONCURRENCY; do
    for name in $SERVERS; do echo "c=$c $name: $(server_cmd "$name" "$c" PORT)"; done
  done
} | tee "$OUT/setup.txt"

for run in $(seq "$RUNS"); do
  # shellcheck disable=SC2086
  rotated "$run" $SERVERS
  for c in $CONCURRENCY; do
    n=${NUM_PROMPTS:-$((c * 4 < 16 ? 16 : c * 4))}
    if [ "$DATASET" = mixed ]; then
      workload=(--dataset-name mixed --mixed-long-clients "$LONG_CLIENTS" --mixed-long-prompts "$LONG_PROMPTS"
        --mixed-long-input-len "$LONG_INPUT_LEN" --mixed-short-input-len "$INPUT_LEN" --mixed-output-len "$OUTPUT_LEN")
    else
      workload=(--random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN")
    fi
    for name in "${order[@]}"; do
      t0=$(date +%s)
      start "$name" "$c" "$OUT/$name-c$c-run$run.log"
      "$BIN" bench --base-url "http://127.0.0.1:$PORT/v1" --model "$(basename "$MODEL" .gguf)" \
        --max-concurrency "$c" --num-prompts "$n" --seed "$run" --warmup "$WARMUP" "${workload[@]}" \
        --monitor-pid "$SERVER_PID" --monitor-url "http://127.0.0.1:$PORT" --monitor-settle "$SETTLE" \
        --label "$name:c$c:run$run" --output-file "$OUT/$name-c$c-run$run.json" -q >"$OUT/$name-c$c-run$run.txt"
      stop_port
      t1=$(date +%s)
      printf '%s c=%s run %s: %s s, %s\n' "$name" "$c" "$run" $((t1 - t0)) \
        "$(grep -E 'Output token throughput' "$OUT/$name-c$c-run$run.txt" | tr -s ' ')" | tee -a "$OUT/timing.txt"
    done
  done
done

"$BIN" bench table --format csv "$OUT"/*-run*.json >"$OUT/results.csv"
"$BIN" bench table "$OUT"/*-run*.json | tee "$OUT/table.md"
