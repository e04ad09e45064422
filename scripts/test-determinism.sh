#!/usr/bin/env bash
# Runs the determinism tests (tests/determinism_test.go) RUNS times (20 by
# default) while two busy loops keep both cores of a small machine loaded,
# as CI machines are. Every run must pass; the script prints the tally.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-20}
BIN=$(mktemp -d)/tests.test
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$(dirname "$BIN")"' EXIT

go test -c -o "$BIN" ./tests/
for _ in 1 2; do
  ( while :; do :; done ) &
done

passed=0
for i in $(seq "$RUNS"); do
  if (cd tests && "$BIN" -test.run '^TestDeterminism' -test.count=1 >"$BIN.log" 2>&1); then
    passed=$((passed + 1))
    echo "run $i: ok"
  else
    echo "run $i: FAILED"
    grep -v ' WARN ' "$BIN.log" | tail -40
  fi
done
echo "determinism: $passed of $RUNS runs passed under load"
[ "$passed" -eq "$RUNS" ]
