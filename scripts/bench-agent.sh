#!/usr/bin/env bash
# Agent sessions (issue 28) against llmserve and llama.cpp's llama-server on
# one model, with `llmserve bench agent`: a PREFIX_LEN-word system-plus-tools
# prefix, then TURNS turns that each re-send the transcript with a tool call,
# its result and a new user message; per-turn TTFT and cached tokens, in
# each API the server has (llmserve: Messages, Responses and chat;
# llama-server: those of LLAMA_APIS it answers, probed at start).
# Each server is started fresh for every rep (so no rep finds another's
# prefix in its cache), one at a time, the order alternating from rep to
# rep; rep r sends the transcripts of seed r to every server. Writes every
# run's JSON and text, the Markdown table of medians over the reps
# (table.md, `llmserve bench agent table`), the server command lines, the
# machine and its load (setup.txt, timing.txt) to OUT.
#
#   MODEL=/path/to/model.gguf LLAMA_SERVER=/path/to/llama-server \
#     [SERVERS="llmserve llama-kvu"] [RUNS=3] [PREFIX_LEN=20000] [TURNS=5] \
#     [TOOLS=16] [USER_LEN=40] [TOOL_RESULT_LEN=300] [OUTPUT_LEN=16] \
#     [LLMSERVE_ARGS=] [LLAMA_ARGS=] [LLAMA_APIS=messages,responses,chat] \
#     [LLMSERVE_APIS=messages,responses,chat] [FIRST_RUN=1] \
#     [OUT=bench-results/agent] scripts/bench-agent.sh
#
# FIRST_RUN continues a measurement: reps FIRST_RUN..RUNS, with the seeds
# and the alternation they would have had (say, fewer APIs for the later
# reps when a rep takes long: each session's first turn is a cold prefill).
#
# The model needs a context of at least the whole session (PREFIX_LEN, the
# tools' JSON, TURNS × (USER_LEN + TOOL_RESULT_LEN) and the template's
# tokens: about 23,000 with the defaults) and a chat template that renders
# tools; `llmserve synth --context 32768 --chat-template FILE` writes one.
#
# Both servers run with their defaults. llmserve: LLMSERVE_ARGS added.
# llama-server: llama-kvu is its default layout (-np auto: 4 slots sharing
# one unified KV cache of the model's context, -kvu); llama-slots is the
# per-slot layout with one slot of the model's whole context (-np 1: a
# session must fit one slot, and with more slots each would hold a fraction
# of the context). LLAMA_ARGS is added to both.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh
. scripts/lib/setup.sh

: "${MODEL:?set MODEL to a GGUF file}"
BIN=${BIN:-bin/llmserve}
SERVERS=${SERVERS:-llmserve llama-kvu}
RUNS=${RUNS:-3}
PREFIX_LEN=${PREFIX_LEN:-20000}
TURNS=${TURNS:-5}
TOOLS=${TOOLS:-16}
USER_LEN=${USER_LEN:-40}
TOOL_RESULT_LEN=${TOOL_RESULT_LEN:-300}
OUTPUT_LEN=${OUTPUT_LEN:-16}
LLMSERVE_ARGS=${LLMSERVE_ARGS:-}
LLAMA_ARGS=${LLAMA_ARGS:-}
LLAMA_APIS=${LLAMA_APIS:-messages,responses,chat}
LLMSERVE_APIS=${LLMSERVE_APIS:-messages,responses,chat}
FIRST_RUN=${FIRST_RUN:-1}
OUT=${OUT:-bench-results/agent}
BASE_PORT=${BASE_PORT:-18290}
TIMEOUT=${TIMEOUT:-30m}
case " $SERVERS " in *" llama-"*) : "${LLAMA_SERVER:?set LLAMA_SERVER to a llama-server binary}" ;; esac
mkdir -p "$OUT"
MODEL_ID=$(basename "$MODEL" .gguf)

# server_cmd NAME PORT: the command line that starts server NAME.
server_cmd() {
  local name=$1 port=$2
  case $name in
  llmserve) echo "$BIN serve --model $MODEL --http-port $port --grpc-port 0 --log-level warn $LLMSERVE_ARGS" ;;
  llama-kvu) echo "$LLAMA_SERVER -m $MODEL --host 127.0.0.1 --port $port $LLAMA_ARGS" ;;
  llama-slots) echo "$LLAMA_SERVER -m $MODEL --host 127.0.0.1 --port $port -np 1 $LLAMA_ARGS" ;;
  *) echo "unknown server $name: use llmserve, llama-kvu or llama-slots" >&2; return 1 ;;
  esac
}

PORT= server=
trap stop_port EXIT

# start NAME LOG: starts server NAME and sets PORT.
start() {
  PORT=$(server_port "$1")
  start_line "$2" "$(server_cmd "$1" "$PORT")"
  up_or_exit "$1" "$2" 3000 "http://127.0.0.1:$PORT/health"
}

# apis_of NAME: the APIs to run against the server on PORT. llmserve has
# all three (LLMSERVE_APIS); of LLAMA_APIS, llama-server gets those whose
# route exists (an empty POST answered 404 means it does not).
apis_of() {
  local name=$1 api path code list=""
  if [ "$name" = llmserve ]; then
    echo "$LLMSERVE_APIS"
    return
  fi
  for api in ${LLAMA_APIS//,/ }; do
    case $api in
    messages) path=/v1/messages ;;
    responses) path=/v1/responses ;;
    chat) path=/v1/chat/completions ;;
    *) echo "LLAMA_APIS: unknown API $api" >&2; exit 1 ;;
    esac
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' -d '{}' "http://127.0.0.1:$PORT$path")
    [ "$code" = 404 ] && continue
    list="$list${list:+,}$api"
  done
  echo "$list"
}

{
  describe_setup
  echo "workload: PREFIX_LEN=$PREFIX_LEN TOOLS=$TOOLS TURNS=$TURNS USER_LEN=$USER_LEN TOOL_RESULT_LEN=$TOOL_RESULT_LEN OUTPUT_LEN=$OUTPUT_LEN RUNS=$FIRST_RUN..$RUNS LLMSERVE_APIS=$LLMSERVE_APIS LLAMA_APIS=$LLAMA_APIS"
  for name in $SERVERS; do echo "$name: $(server_cmd "$name" PORT)"; done
} | tee -a "$OUT/setup.txt"

for run in $(seq "$FIRST_RUN" "$RUNS"); do
  # shellcheck disable=SC2086
  rotated "$run" $SERVERS
  for name in "${order[@]}"; do
    t0=$(date +%s)
    start "$name" "$OUT/$name-run$run.log"
    apis=$(apis_of "$name")
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    "$BIN" bench agent --base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL_ID" --api "$apis" \
      --prefix-len "$PREFIX_LEN" --tools "$TOOLS" --turns "$TURNS" --user-len "$USER_LEN" \
      --tool-result-len "$TOOL_RESULT_LEN" --output-len "$OUTPUT_LEN" --seed "$run" --timeout "$TIMEOUT" \
      --label "$name:run$run" --output-file "$OUT/$name-run$run.json" \
      >"$OUT/$name-run$run.txt" 2>"$OUT/$name-run$run.turns.log" || echo "$name run $run: bench agent failed, see $OUT/$name-run$run.txt" >&2
    stop_port
    t1=$(date +%s)
    printf '%s run %s: %s s, APIs %s, load before %s, after %s\n' "$name" "$run" $((t1 - t0)) "$apis" "$load" \
      "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/timing.txt"
  done
done

"$BIN" bench agent table "$OUT"/*-run*.json | tee "$OUT/table.md"
