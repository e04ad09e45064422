#!/usr/bin/env bash
# Benchmarks exporter-shaped ONNX models (scripts/onnx-corpus: the CNN on
# 1x28x28 inputs and the 50-tree gradient-boosted classifier) over V2 REST
# with binary tensor data at concurrency 1, 8 and 32 (one row per request)
# and one client sending requests of BIG_ROWS rows, llmserve with its
# default flags (SERVE_ARGS adds more) against ONNX Runtime behind Node's
# http module (scripts/onnx-corpus/ort-server.cjs), alternating the two
# servers REPS times in one run. With grpc in PROTOCOLS, llmserve is
# driven over V2 gRPC too (ModelInfer with raw_input_contents, `bench
# --backend v2-grpc`) while the same server runs; ONNX Runtime's side is
# REST only (its server has no gRPC). One line per run; the JSON reports go
# to $OUT. See docs/BENCHMARKS.md.
#
# Needs /usr/bin/python3 with Debian's python3-onnx (make python-deps) and
# onnxruntime-node (make node-clients; NODE_PATH names its node_modules).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

BIN=${BIN:-bin/llmserve}
PORT=${PORT:-18090}
OUT=${OUT:-bench-results/onnx}
REPS=${REPS:-3}
REQUESTS=${REQUESTS:-2000}         # measured requests per run
MODELS=${MODELS:-cnn gbt_multiclass}
SERVE_ARGS=${SERVE_ARGS:-}
BIG_ROWS=${BIG_ROWS:-256}           # rows per request of the c=1 large-request run (0: none)
BIG_REQUESTS=${BIG_REQUESTS:-200}
PROTOCOLS=${PROTOCOLS:-rest grpc}  # llmserve's; ORT is served over REST only
: "${NODE_PATH:?NODE_PATH must name the node_modules holding onnxruntime-node (make node-clients)}"
export NODE_PATH
mkdir -p "$OUT"

corpus="$OUT/corpus"
if [ ! -d "$corpus/repo" ]; then
  /usr/bin/python3 scripts/onnx-corpus/corpus.py "$corpus" >/dev/null
fi
# ONNX Runtime's repository: the same files, with a ZipMap replaced by an
# Identity where corpus.py wrote one (onnxruntime-node cannot return maps).
ortrepo="$OUT/ort-repo"
for m in $MODELS; do
  mkdir -p "$ortrepo/$m/1"
  src="$corpus/repo/$m/1/model.onnx"
  [ -f "$corpus/ort/$m.onnx" ] && src="$corpus/ort/$m.onnx"
  cp "$src" "$ortrepo/$m/1/model.onnx"
done

server=
stop() { stop_next_port 2; } # the server and its gRPC port
trap stop EXIT

start() { # start SERVER: llmserve or ort
  # A server already on the port (another user's) would answer the checks
  # below in this one's place.
  if (: <"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || (: <"/dev/tcp/127.0.0.1/$((PORT + 1))") 2>/dev/null; then
    echo "bench-onnx: port $PORT or $((PORT + 1)) is taken; set PORT" >&2
    exit 1
  fi
  if [ "$1" = llmserve ]; then
    local args=()
    for m in $MODELS; do args+=(--model "$m=$corpus/repo/$m/1/model.onnx"); done
    # shellcheck disable=SC2086
    "$BIN" serve "${args[@]}" --http-port "$PORT" --grpc-port "$((PORT + 1))" --log-level warn $SERVE_ARGS &
  else
    node scripts/onnx-corpus/ort-server.cjs "$ortrepo" "$PORT" &
  fi
  server=$!
  wait_up 200 "http://127.0.0.1:$PORT/v2/health/ready" && return
  echo "bench-onnx: $1 did not get ready" >&2
  exit 1
}

printf '%-4s %-14s %-15s %5s %9s %9s %9s %7s\n' rep server model c 'req/s' 'p50 ms' 'p99 ms' failed
for rep in $(seq "$REPS"); do
  for srv in llmserve ort; do
    start "$srv"
    protocols=rest
    [ "$srv" = llmserve ] && protocols=$PROTOCOLS
    for proto in $protocols; do
      name=$srv
      [ "$proto" = grpc ] && name=$srv-grpc
      backend=(--backend v2-infer --base-url "http://127.0.0.1:$PORT")
      [ "$proto" = grpc ] && backend=(--backend v2-grpc --base-url "127.0.0.1:$((PORT + 1))")
      for m in $MODELS; do
        runs=()
        for c in ${CONCURRENCY:-1 8 32}; do runs+=("c$c $c 1 $REQUESTS 100"); done
        [ "$BIG_ROWS" -gt 0 ] && runs+=("r$BIG_ROWS 1 $BIG_ROWS $BIG_REQUESTS 10")
        for run in "${runs[@]}"; do
          read -r tag c rows n warm <<<"$run"
          f="$OUT/$name-$m-$tag-rep$rep.json"
          "$BIN" bench "${backend[@]}" --model "$m" --binary --rows "$rows" \
            --num-prompts "$n" --max-concurrency "$c" --warmup "$warm" --seed 1 -q --json \
            --label "$name:$m:$tag:rep$rep" > "$f"
          jq -r --arg r "$rep" --arg s "$name" --arg m "$m" --arg t "$tag" \
            '"\($r)    \($s)  \($m)  \($t)  \(.request_throughput|floor)  \(.median_e2el_ms*1000|round/1000)  \(.p99_e2el_ms*1000|round/1000)  \(.failed)"' "$f"
        done
      done
    done
    stop
  done
done
echo
# Medians over the reps, and llmserve over ONNX Runtime (the reports in $OUT).
/usr/bin/python3 scripts/onnx-corpus/bench-summary.py "$OUT"
