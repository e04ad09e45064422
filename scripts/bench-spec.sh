#!/usr/bin/env bash
# Benchmarks speculative decoding on stories260K (a real model, so the
# acceptance is real): llmserve without and with n-gram speculation
# (--speculative ngram, and the same with no drafts in steps of more than
# 4 decodes: --speculative-disable-by-batch-size 4), and llama.cpp's
# llmserve with the model as its own draft model (--speculative-model),
# and llama-server without and with its own speculative decoding
# (--model-draft; at the vendored commit llama-server has no n-gram mode,
# so its draft is the only one it can take), in both of its KV layouts
# (-kvu, one unified cache; -slot, a cache per slot), alternating the servers
# REPS times in one run, at
# concurrency 1 and 8, on two workloads:
#
#   repeat  a passage and then its first sentence again, so the answer can
#           continue by repeating its input (16 prompts: a story starter,
#           the model's own greedy continuation of it, a blank line, the
#           starter again);
#   random  random words (bench's random dataset), which the answer does
#           not repeat.
#
# Each request asks for OUTPUT tokens with ignore_eos at temperature 0.
# One line per run; the JSON reports go to $OUT. See docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

BIN=${BIN:-bin/llmserve}
LLAMA_SERVER=${LLAMA_SERVER:?LLAMA_SERVER must name llama.cpp\'s llama-server binary}
MODEL=${MODEL:-../shared/models/stories260K-f32.gguf}
PORT=${PORT:-18095}
OUT=${OUT:-bench-results/spec}
REPS=${REPS:-3}
K=${K:-5}                 # draft tokens per step (both servers)
LOOKUP=${LOOKUP:-"--prompt-lookup-min 2 --prompt-lookup-max 4"}  # llmserve's n-gram range
OUTPUT=${OUTPUT:-128}
SERVERS=${SERVERS:-llmserve llmserve-ngram llmserve-ngram-b4 llmserve-draft llama-server llama-server-draft llama-server-slot llama-server-draft-slot}
mkdir -p "$OUT"

server=
stop() { stop_next_port 1; }
trap stop EXIT

start() { # start SERVER
  case "$1" in
    llmserve) "$BIN" serve --model "stories260K=$MODEL" --http-port "$PORT" --grpc-port 0 --log-level warn & ;;
    llmserve-ngram) "$BIN" serve --model "stories260K=$MODEL" --http-port "$PORT" --grpc-port 0 --log-level warn \
      --speculative ngram --num-speculative-tokens "$K" $LOOKUP & ;;
    llmserve-ngram-b4) "$BIN" serve --model "stories260K=$MODEL" --http-port "$PORT" --grpc-port 0 --log-level warn \
      --speculative ngram --num-speculative-tokens "$K" $LOOKUP --speculative-disable-by-batch-size 4 & ;;
    llmserve-draft) "$BIN" serve --model "stories260K=$MODEL" --http-port "$PORT" --grpc-port 0 --log-level warn \
      --speculative-model "$MODEL" --num-speculative-tokens "$K" & ;;
    llama-server-slot) "$LLAMA_SERVER" -m "$MODEL" -a stories260K --port "$PORT" -np 16 -t 2 -c 8192 --log-disable & ;;
    llama-server-draft-slot) "$LLAMA_SERVER" -m "$MODEL" -a stories260K --port "$PORT" -np 16 -t 2 -c 8192 --log-disable \
      -md "$MODEL" --draft-max "$K" --draft-min 0 -td 2 & ;;
    llama-server) "$LLAMA_SERVER" -m "$MODEL" -a stories260K --port "$PORT" -np 16 -kvu -t 2 -c 8192 --log-disable & ;;
    llama-server-draft) "$LLAMA_SERVER" -m "$MODEL" -a stories260K --port "$PORT" -np 16 -kvu -t 2 -c 8192 --log-disable \
      -md "$MODEL" --draft-max "$K" --draft-min 0 -td 2 & ;;
  esac
  server=$!
  up_or_exit "bench-spec: $1" "" 300 "http://127.0.0.1:$PORT/v1/models" "http://127.0.0.1:$PORT/health"
}

# The repeat workload, written once with llmserve's greedy answers.
repeat="$OUT/repeat.jsonl"
if [ ! -s "$repeat" ]; then
  start llmserve
  while IFS= read -r s; do
    p=$(jq -n --arg s "$s" '{model:"stories260K",prompt:$s,max_tokens:100,temperature:0}' |
      curl -sf "http://127.0.0.1:$PORT/v1/completions" -H 'content-type: application/json' -d @- | jq -r '.choices[0].text')
    jq -cn --arg p "$s$p"$'\n\n'"$s" '{prompt:$p}'
  done > "$repeat" <<'EOF'
Once upon a time, there was a little girl named Lily.
One day, a boy named Tom went to the park.
There was a big dog who liked to play.
Sue had a red ball and a small cat.
The sun was hot and the sky was blue.
Ben wanted to build a tall tower.
A little bird lived in a tree near the river.
Mia and her mom went to the store.
Tim found a shiny rock in the garden.
The old man had a big boat.
Anna liked to draw pictures of flowers.
Max was a happy dog with a long tail.
One morning, Sam woke up and saw the snow.
Lucy had a new toy car.
The little fish swam in the big sea.
Jack and Jill went up the hill.
EOF
  stop
fi

printf '%-4s %-19s %-7s %2s %9s %9s %9s %7s\n' rep server load c 'tok/s' 'TPOT ms' 'p99 ITL' failed
for rep in $(seq "$REPS"); do
  for srv in $SERVERS; do
    start "$srv"
    for load in repeat random; do
      for c in ${CONCURRENCY:-1 8}; do
        n=$((c == 1 ? 8 : 32))
        data=(--dataset-name custom --dataset-path "$repeat" --custom-output-len "$OUTPUT")
        [ "$load" = random ] && data=(--dataset-name random --random-input-len 64 --random-output-len "$OUTPUT")
        f="$OUT/$srv-$load-c$c-rep$rep.json"
        "$BIN" bench --base-url "http://127.0.0.1:$PORT/v1" --model stories260K "${data[@]}" \
          --num-prompts "$n" --max-concurrency "$c" --warmup 2 --seed "$rep" --temperature 0 --ignore-eos \
          -q --json --label "$srv:$load:c$c:rep$rep" > "$f"
        jq -r --arg r "$rep" --arg s "$srv" --arg l "$load" \
          '"\($r)    \($s)  \($l)  \(.max_concurrency)  \(.output_throughput|floor)  \(.mean_tpot_ms*100|round/100)  \(.p99_itl_ms*100|round/100)  \(.failed)"' "$f"
      done
    done
    stop
  done
done
