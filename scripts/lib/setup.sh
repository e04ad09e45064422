# shellcheck shell=bash
# What the bench scripts record of a run's setup, for the scripts that
# source this file after they cd to the repository root.

# describe_setup: the lines that open a setup.txt: the date, the machine,
# its load average, llmserve's version and commit, llama-server's version
# (when LLAMA_SERVER is set) and the model. Uses BIN, LLAMA_SERVER and MODEL.
describe_setup() {
  echo "date: $(date -u +%FT%TZ)"
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "llmserve: $("$BIN" version 2>&1 | head -1), git $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
  [ -n "${LLAMA_SERVER:-}" ] && echo "llama-server: $("$LLAMA_SERVER" --version 2>&1 | grep -m1 -i version)"
  echo "model: $MODEL ($(stat -c %s "$MODEL") bytes)"
}
