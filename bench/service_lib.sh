# shellcheck shell=bash
# Shared by bench/service_compare.sh and bench/service_scale.sh: the data service's
# processes (docs/service.md), each started under /usr/bin/time -v (its peak RSS and CPU
# seconds), and stopped. Needs DE (the dataecho binary). After `svc_start NAME ...`,
# SVC_PID[NAME] is the process's pid (for /proc) and SVC_TIME[NAME] /usr/bin/time's;
# DIR/NAME.out, .log and .time are its standard output, standard error and time's report.

declare -gA SVC_PID=() SVC_TIME=()

# svc_child PID: the pid of PID's first child (the command /usr/bin/time runs), once it
# exists.
svc_child() {
  local c
  for _ in $(seq 200); do
    c=$(cat "/proc/$1/task/$1/children" 2>/dev/null || true)
    c=${c%% *}
    [[ -n $c ]] && { echo "$c"; return 0; }
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# svc_await FILE REGEX PID: the first line of FILE matching REGEX, waiting up to 30 s while
# PID lives.
svc_await() {
  for _ in $(seq 300); do
    grep -m1 -E "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

# svc_start NAME DIR NS ARGS...: `dataecho ARGS...` in namespace NS ("" for this one), in
# the background. Not in a subshell: the caller's shell waits for it in svc_stop.
svc_start() {
  local name=$1 dir=$2 ns=$3
  shift 3
  local run=()
  [[ -n $ns ]] && run=(ip netns exec "$ns")
  # ip netns exec execs its command: $! is /usr/bin/time's pid
  "${run[@]}" /usr/bin/time -v -o "$dir/$name.time" "$DE" "$@" >"$dir/$name.out" 2>"$dir/$name.log" &
  SVC_TIME[$name]=$!
  SVC_PID[$name]=$(svc_child "$!") || { echo "$name did not start:" >&2; cat "$dir/$name.log" >&2; return 1; }
}

# svc_dispatcher DIR NS HOST: a dispatcher on any free port; sets SVC_DISPATCHER (HOST:PORT).
svc_dispatcher() {
  local line
  svc_start dispatcher "$1" "$2" dispatcher --port 0 || return 1
  line=$(svc_await "$1/dispatcher.out" '^listening on ' "${SVC_TIME[dispatcher]}") ||
    { echo "the dispatcher did not start:" >&2; cat "$1/dispatcher.log" >&2; return 1; }
  SVC_DISPATCHER=$3:${line##*:}
}

# svc_worker NAME DIR NS THREADS: a worker of SVC_DISPATCHER, once it serves.
svc_worker() {
  svc_start "$1" "$2" "$3" worker --dispatcher "$SVC_DISPATCHER" --threads "$4" || return 1
  svc_await "$2/$1.out" ' serving on ' "${SVC_TIME[$1]}" >/dev/null ||
    { echo "worker $1 did not start:" >&2; cat "$2/$1.log" >&2; return 1; }
}

# svc_stop NAME...: SIGTERM (a worker leaves, the dispatcher stops), a second SIGTERM after
# 5 s (a worker stops at once), SIGKILL after 5 s more; each reaped, so its .time is written.
svc_stop() {
  local name pid i
  for name in "$@"; do
    pid=${SVC_PID[$name]:-}
    [[ -n $pid ]] || continue
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 100); do
      kill -0 "${SVC_TIME[$name]}" 2>/dev/null || break
      ((i == 50)) && kill -TERM "$pid" 2>/dev/null
      sleep 0.1
    done
    kill -0 "${SVC_TIME[$name]}" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "${SVC_TIME[$name]}" 2>/dev/null || true
    unset "SVC_PID[$name]" "SVC_TIME[$name]"
  done
}

# svc_git: the commit, with "+changes" when the tree differs from it.
svc_git() {
  local c
  c=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$ROOT" diff --quiet HEAD 2>/dev/null || c+="+changes"
  echo "$c"
}
