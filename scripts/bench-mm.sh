#!/usr/bin/env bash
# Benchmarks image chat: llmserve with --mmproj against llama.cpp's
# llama-server with --mmproj (both KV layouts: -kvu, one unified cache;
# per slot, the default), on stories260K with idefics3's image tokens
# added and the tiny synthesized projector (llmserve synth mmproj, seed 1:
# a 64-pixel image gives a tile and the whole image, 32 positions). Every
# request is a chat message with the same PNG and random words, asking for
# OUTPUT tokens at temperature 0 with ignore_eos, at concurrency 1 and 8;
# the servers alternate REPS times. One line per run; the JSON reports go
# to $OUT. See docs/BENCHMARKS.md, "Images in chat".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

BIN=${BIN:-bin/llmserve}
LLAMA_SERVER=${LLAMA_SERVER:?LLAMA_SERVER must name llama.cpp\'s llama-server binary}
BASE=${BASE:-../shared/models/stories260K-f32.gguf}
PORT=${PORT:-18195}
OUT=${OUT:-bench-results/mm}
REPS=${REPS:-3}
OUTPUT=${OUTPUT:-64}
IMAGE=${IMAGE:-evals/synth/testdata/mmproj/gradient-64.png}
SERVERS=${SERVERS:-llmserve llama-server llama-server-slot}
mkdir -p "$OUT"
MODEL="$OUT/stories260K-img.gguf" MMPROJ="$OUT/mmproj-tiny.gguf"
"$BIN" synth mmproj --base "$BASE" --base-out "$MODEL" -o "$MMPROJ" >/dev/null
CHATML="$OUT/chatml.jinja"
printf '%s' "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}" > "$CHATML"

server=
stop() { stop_next_port 1; }
trap stop EXIT

start() { # start SERVER
  case "$1" in
    llmserve) "$BIN" serve --model "stories260K=$MODEL" --mmproj "$MMPROJ" --chat-template "$CHATML" \
      --http-port "$PORT" --grpc-port 0 --log-level warn & ;;
    llama-server) "$LLAMA_SERVER" -m "$MODEL" --mmproj "$MMPROJ" -a stories260K --chat-template chatml \
      --port "$PORT" -np 16 -kvu -t 2 -c 8192 --log-disable & ;;
    llama-server-slot) "$LLAMA_SERVER" -m "$MODEL" --mmproj "$MMPROJ" -a stories260K --chat-template chatml \
      --port "$PORT" -np 16 -t 2 -c 8192 --log-disable & ;;
  esac
  server=$!
  up_or_exit "bench-mm: $1" "" 300 "http://127.0.0.1:$PORT/v1/models" "http://127.0.0.1:$PORT/health"
}

printf '%-4s %-18s %2s %9s %9s %9s %9s %7s\n' rep server c 'tok/s' 'TTFT ms' 'TPOT ms' 'p99 ITL' failed
for rep in $(seq "$REPS"); do
  for srv in $SERVERS; do
    start "$srv"
    for c in ${CONCURRENCY:-1 8}; do
      n=$((c == 1 ? 8 : 32))
      f="$OUT/$srv-c$c-rep$rep.json"
      "$BIN" bench --base-url "http://127.0.0.1:$PORT/v1" --model stories260K --endpoint chat --image "$IMAGE" \
        --dataset-name random --random-input-len 32 --random-output-len "$OUTPUT" \
        --num-prompts "$n" --max-concurrency "$c" --warmup 2 --seed "$rep" --temperature 0 --ignore-eos \
        -q --json --label "$srv:c$c:rep$rep" > "$f"
      jq -r --arg r "$rep" --arg s "$srv" \
        '"\($r)    \($s)  \(.max_concurrency)  \(.output_throughput|floor)  \(.median_ttft_ms*100|round/100)  \(.mean_tpot_ms*100|round/100)  \(.p99_itl_ms*100|round/100)  \(.failed)"' "$f"
    done
    stop
  done
done
