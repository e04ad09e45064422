# shellcheck shell=bash
# Starting and stopping the server under test, for the bench and soak
# scripts, which source this file after they cd to the repository root.
# The functions use the scripts' globals: server (the background job's
# pid, "" when none), PORT and, for server_port, SERVERS and BASE_PORT.

# wait_up TRIES URL...: polls the URLs every 0.1 s, at most TRIES times,
# until every one answers 2xx in the same try; fails if they never did, or
# as soon as $server (when set) has exited.
wait_up() {
  local tries=$1 _ url up
  shift
  for _ in $(seq "$tries"); do
    up=1
    for url in "$@"; do
      curl -sf "$url" >/dev/null 2>&1 || { up=; break; }
    done
    [ -n "$up" ] && return 0
    [ -n "${server:-}" ] && ! kill -0 "$server" 2>/dev/null && return 1
    sleep 0.1
  done
  return 1
}

# up_or_exit NAME LOG TRIES URL...: waits (wait_up TRIES URL...) for the
# server just started as $server; if it never answers, says that NAME did
# not start (pointing at LOG, when not "") and exits the script.
up_or_exit() {
  local name=$1 log=$2 tries=$3
  shift 3
  wait_up "$tries" "$@" && return 0
  echo "$name did not start${log:+; see $log}" >&2
  exit 1
}

# start_line LOG LINE: starts the command line LINE (split at spaces, as
# the server_cmd functions of the scripts write it) in the background,
# its output to LOG, and sets server.
start_line() {
  # shellcheck disable=SC2086
  $2 >"$1" 2>&1 &
  server=$!
}

# server_port NAME: BASE_PORT plus NAME's place in SERVERS. Each server
# takes a port of its own: llama-server's closed connections linger in the
# kernel and keep its port from being bound for a minute.
server_port() {
  local i=0 s
  for s in $SERVERS; do
    [ "$s" = "$1" ] && break
    i=$((i + 1))
  done
  echo $((BASE_PORT + i))
}

# rotated RUN ITEM...: sets the array order to the items rotated left by
# RUN-1, so that in every len(items) reps each goes first once.
rotated() {
  local run=$1 k
  shift
  k=$(((run - 1) % $#))
  order=("${@:k+1}" "${@:1:k}")
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

# stop_port ends the server as stop_listener does and forgets its port (the
# next server sets one).
stop_port() {
  stop_listener
  PORT=""
}

# stop_next_port STEP ends $server and moves PORT on by STEP: each server
# takes ports of its own, since a port just given up can stay taken for a
# while after its server exits.
stop_next_port() {
  [ -n "$server" ] && { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }
  server=
  PORT=$((PORT + $1))
}
