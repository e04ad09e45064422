#!/usr/bin/env bash
# Soaks the embedded model (stories260K) with mixed traffic for SOAK seconds
# and checks that the process's resident memory stays within its caps.
#
# Traffic, all at once: `llmserve bench` rounds (streamed completions) that
# cycle through concurrency 1, 4, 16 and 64 and alternate random prompts
# (fresh words every round, so the prefix cache keeps filling) with
# prefix-sharing prompts (--dataset-name prefix_repetition, and random
# prompts behind a common --shared-prefix-len); beside them NONSTREAM
# loops of non-streamed completions (curl, a shared prefix and random
# words). Every SAMPLE seconds it records VmRSS (/proc/PID/status) and, from
# /metrics, llmserve_prefix_cache_bytes, go_memstats_heap_inuse_bytes,
# go_memstats_sys_bytes, the collector's cycles (go_gc_duration_seconds_count)
# and the process's CPU seconds into OUT/samples.csv.
#
# It fails when any request failed, or when the peak RSS exceeds
# RSS_FACTOR (1.15) × the caps: weights + KV cache + prefix cache, as the
# server's "memory caps" start-up line states them (LIMIT_BYTES overrides
# the bound, for a server that does not log that line).
#
#   [SOAK=480] [SAMPLE=5] [PREFIX_CACHE=1GiB] [SERVE_ARGS=...] [NONSTREAM=2] \
#     [OUT=bench-results/soak] [BIN=bin/llmserve] scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/server.sh

BIN=${BIN:-bin/llmserve}
SOAK=${SOAK:-480}
SAMPLE=${SAMPLE:-5}
PREFIX_CACHE=${PREFIX_CACHE:-1GiB}
SERVE_ARGS=${SERVE_ARGS:-}
NONSTREAM=${NONSTREAM:-2}
RSS_FACTOR=${RSS_FACTOR:-1.15}
LIMIT_BYTES=${LIMIT_BYTES:-}
OUT=${OUT:-bench-results/soak}
PORT=${PORT:-18095}
BASE="http://127.0.0.1:$PORT"
mkdir -p "$OUT"
rm -f "$OUT"/round-*.json "$OUT"/nonstream-*.txt

server=""
pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "$server" ] || return 0
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}
trap stop EXIT

# shellcheck disable=SC2086
"$BIN" serve --http-port "$PORT" --grpc-port 0 --log-format json \
  --prefix-cache-memory "$PREFIX_CACHE" $SERVE_ARGS >"$OUT/llmserve.log" 2>&1 &
server=$!
up_or_exit llmserve "$OUT/llmserve.log" 300 "$BASE/health"

if [ -z "$LIMIT_BYTES" ]; then
  caps=$(jq -c 'select(.msg == "memory caps")' "$OUT/llmserve.log" | head -1)
  [ -n "$caps" ] || { echo "no \"memory caps\" line in $OUT/llmserve.log; set LIMIT_BYTES" >&2; exit 1; }
  echo "caps: $caps"
  LIMIT_BYTES=$(jq -n --argjson c "$caps" --argjson f "$RSS_FACTOR" '$c.total_bytes * $f | floor')
fi
MODEL=$(curl -sf "$BASE/v1/models" | jq -r '.data[0].id')
echo "RSS limit: $LIMIT_BYTES bytes; soaking $MODEL for $SOAK s"

metric() { # metrics-text name: the first sample of name
  awk -v n="$2" '$1 == n || index($1, n"{") == 1 { printf "%.0f", $2; exit }' <<<"$1"
}

sampler() {
  local start=$SECONDS m rss
  echo "t_s,rss_bytes,prefix_cache_bytes,go_heap_inuse_bytes,go_sys_bytes,gc_cycles,cpu_s" >"$OUT/samples.csv"
  while kill -0 "$server" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$server/status")
    m=$(curl -sf "$BASE/metrics" || true)
    echo "$((SECONDS - start)),$rss,$(metric "$m" llmserve_prefix_cache_bytes),$(metric "$m" go_memstats_heap_inuse_bytes),$(metric "$m" go_memstats_sys_bytes),$(metric "$m" go_gc_duration_seconds_count),$(metric "$m" process_cpu_seconds_total)" >>"$OUT/samples.csv"
    sleep "$SAMPLE"
  done
}

deadline=$((SECONDS + SOAK))

streamed() {
  local round=0 c n
  while [ "$SECONDS" -lt "$deadline" ]; do
    for c in 4 16 64 1; do
      [ "$SECONDS" -lt "$deadline" ] || return 0
      round=$((round + 1))
      n=$((c * 2 < 16 ? 16 : c * 2))
      # ~2.7 stories260K tokens per word: prompts stay below its 512
      # positions with their answers.
      case $((round % 3)) in
      0) set -- --dataset-name prefix_repetition --prefix-repetition-num-prefixes 8 \
        --prefix-repetition-prefix-len 96 --prefix-repetition-suffix-len 48 --prefix-repetition-output-len 16 ;;
      1) set -- --random-input-len 130 --random-range-ratio 0.15 --random-output-len 16 ;;
      2) set -- --shared-prefix-len 64 --random-input-len 64 --random-range-ratio 0.3 --random-output-len 16 ;;
      esac
      "$BIN" bench --base-url "$BASE/v1" --max-concurrency "$c" --num-prompts "$n" --seed "$round" \
        --label "round$round-c$c" --output-file "$OUT/round-$round.json" -q "$@" >/dev/null ||
        echo "bench round $round failed" >&2
    done
  done
}

words=(once upon a time there was a little girl named lily she liked to play with her toys
  in the park one day saw big red ball and wanted it mom said no but tom dog cat tree
  happy sad sun rain boat fish bird friend jump run smile cake home garden flower blue)

nonstream() { # id
  local ok=0 failed=0 i prompt code
  while [ "$SECONDS" -lt "$deadline" ]; do
    prompt="Once upon a time, in a small town by the sea, there lived a kind old man who"
    for i in $(seq $((40 + RANDOM % 60))); do prompt+=" ${words[RANDOM % ${#words[@]}]}"; done
    code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"model\": \"$MODEL\", \"prompt\": \"$prompt\", \"max_tokens\": $((8 + RANDOM % 24)), \"stream\": false}" || true)
    if [ "$code" = 200 ]; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
  done
  echo "$ok $failed" >"$OUT/nonstream-$1.txt"
}

sampler &
sampler_pid=$!
streamed &
pids+=($!)
for i in $(seq "$NONSTREAM"); do
  nonstream "$i" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
pids=()
sleep "$SAMPLE"
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true

read -r bench_ok bench_failed < <(jq -s '[(map(.completed) | add // 0), (map(.failed) | add // 0)] | @tsv' -r "$OUT"/round-*.json)
read -r ns_ok ns_failed < <(cat "$OUT"/nonstream-*.txt | awk '{ o += $1; f += $2 } END { print o + 0, f + 0 }')
peak=$(tail -n +2 "$OUT/samples.csv" | cut -d, -f2 | sort -n | tail -1)
cache=$(tail -n +2 "$OUT/samples.csv" | cut -d, -f3 | sort -n | tail -1)
heap=$(tail -n +2 "$OUT/samples.csv" | cut -d, -f4 | sort -n | tail -1)
last=$(tail -1 "$OUT/samples.csv")
mib() { echo "$(($1 / 1048576)) MiB"; }
{
  echo "requests: $((bench_ok + ns_ok)) completed ($bench_ok streamed, $ns_ok not), $((bench_failed + ns_failed)) failed"
  echo "peak RSS $(mib "$peak"), limit $(mib "$LIMIT_BYTES"); peak prefix cache $(mib "$cache"); peak Go heap in use $(mib "$heap")"
  echo "at the end: GC cycles $(cut -d, -f6 <<<"$last"), server CPU $(cut -d, -f7 <<<"$last") s"
} | tee "$OUT/summary.txt"
fail=0
if [ $((bench_failed + ns_failed)) -gt 0 ]; then
  echo "FAIL: requests failed" >&2
  fail=1
fi
if [ "$peak" -gt "$LIMIT_BYTES" ]; then
  echo "FAIL: peak RSS $(mib "$peak") exceeds $RSS_FACTOR × the caps ($(mib "$LIMIT_BYTES"))" >&2
  fail=1
fi
exit $fail
