#!/usr/bin/env bash
# Serves a folder of shards with nginx on 127.0.0.1, throttled per connection: the
# emulated slow link of the experiments and the demo. A thin wrapper over
# `dataecho serve` (one nginx config generator: src/io/nginx_config.cc) for scripts:
#
#   scripts/serve.sh start DIR [--port P] [--rate 2m] [--connections k] [--pidfile F]
#       starts it in the background, waits until it answers, prints the base URL;
#       the pid goes to F (default DIR/.serve.pid)
#   scripts/serve.sh stop [--pidfile F | DIR]
#       stops it and waits for it to exit
#   scripts/serve.sh run DIR [options]
#       the same as `dataecho serve` in the foreground (Ctrl-C stops)
#
# The dataecho binary: $DATAECHO_BIN, else the newest build*/bin/dataecho of this checkout.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

find_bin() {
  if [[ -n "${DATAECHO_BIN:-}" ]]; then echo "$DATAECHO_BIN"; return; fi
  local b
  b="$(ls -t "$here"/build*/bin/dataecho 2>/dev/null | head -1 || true)"
  [[ -x "$b" ]] || { echo "serve.sh: no dataecho binary; build it or set DATAECHO_BIN" >&2; exit 1; }
  echo "$b"
}

usage() { sed -n '2,15p' "$0" >&2; exit 2; }

cmd="${1:-}"; shift || true
case "$cmd" in
  run)
    exec "$(find_bin)" serve "$@" ;;
  start)
    [[ $# -ge 1 ]] || usage
    dir="$1"; shift
    pidfile="$dir/.serve.pid"; args=()
    while [[ $# -gt 0 ]]; do
      case "$1" in
        --pidfile) pidfile="$2"; shift 2 ;;
        *) args+=("$1"); shift ;;
      esac
    done
    log="$(mktemp)"
    "$(find_bin)" serve "$dir" "${args[@]}" >"$log" 2>&1 &
    pid=$!
    echo "$pid" >"$pidfile"
    # Bounded wait (10 s) for the base URL line.
    for _ in $(seq 100); do
      url="$(grep -m1 '^http://' "$log" || true)"
      if [[ -n "$url" ]]; then rm -f "$log"; echo "$url"; exit 0; fi
      if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; rm -f "$log" "$pidfile"; exit 1; fi
      sleep 0.1
    done
    cat "$log" >&2; rm -f "$log"; kill "$pid" 2>/dev/null || true; exit 1 ;;
  stop)
    pidfile=""
    if [[ "${1:-}" == "--pidfile" ]]; then pidfile="$2"; elif [[ -n "${1:-}" ]]; then pidfile="$1/.serve.pid"; fi
    [[ -f "$pidfile" ]] || { echo "serve.sh: no pid file $pidfile" >&2; exit 1; }
    pid="$(cat "$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$pidfile" ;;
  *) usage ;;
esac
