# shellcheck shell=bash
# Starting and stopping the server under test, for the bench and soak
# scripts, which source this file after they cd to the repository root.
# The functions use the scripts' globals: server (the background job's
# pid, "" when none) and PORT.

# wait_up TRIES URL...: polls the URLs every 0.1 s, at most TRIES times,
# until every one answers 2xx in the same try; fails if they never did.
wait_up() {
  local tries=$1 _ url up
  shift
  for _ in $(seq "$tries"); do
    up=1
    for url in "$@"; do
      curl -sf "$url" >/dev/null 2>&1 || { up=; break; }
    done
    [ -n "$up" ] && return 0
    sleep 0.1
  done
  return 1
}

# stop_listener ends the server: $server and whatever process listens on
# $PORT (the background job may be a wrapper around it), gracefully, then
# by force after 5 s; and waits until the port is free. It clears server.
stop_listener() {
  local pids i
  [ -z "$PORT" ] && return 0
  pids=$( { echo "$server"; ss -ltnpH "sport = :$PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2; } | grep . | sort -u | tr '\n' ' ')
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill $pids 2>/dev/null
  for i in $(seq 100); do
    ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q . || break
    # shellcheck disable=SC2086
    [ "$i" -eq 50 ] && kill -9 $pids 2>/dev/null
    sleep 0.1
  done
  [ -n "$server" ] && wait "$server" 2>/dev/null
  server=""
  return 0
}

# stop_next_port STEP ends $server and moves PORT on by STEP: each server
# takes ports of its own, since a port just given up can stay taken for a
# while after its server exits.
stop_next_port() {
  [ -n "$server" ] && { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }
  server=
  PORT=$((PORT + $1))
}
