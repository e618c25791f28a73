#!/usr/bin/env bash
# Faults between hosts that do not share a loopback (docs/distributed.md, docs/http.md,
# docs/service.md): the data-parallel trainer, the HTTP reader and the data service across
# network namespaces joined by a router that shapes, drops and delays
# (tests/netns/netns.sh). Run it for every change to src/train/distributed.cc,
# src/cli/train/, the elastic code (src/ops/elastic_*, src/spec/elastic_build.*), the HTTP
# code (src/io/http_*) or the service (src/service/, src/cli/service_command.cc).
# Why this file is long: five cases, each with its hosts, its fault and its checks in
# functions of its own, share one entry point, one cleanup and one report of the checks.
#
#   scripts/netns_faults.sh [ddp|link-down|elastic|http|service|all]   (default: all; as root)
#
#   ddp        3 ranks of `dataecho-train train`, ranks 0 and 1 in A and rank 2 in B over
#              A's MASTER_ADDR: the checkpoint ends bitwise equal to the same run on loopback
#   link-down  B's link taken down mid-run (every packet dropped, no reset): ranks 0 and 1
#              exit naming rank 2 as lost within the timeout (10 s) and 5 s, the checkpoint
#              is whole, and --resume with the link back ends bitwise equal to the
#              uninterrupted run
#   elastic    3 ranks with --sharding elastic (ranks 0 and 1 in A, rank 2 in B); rank 2
#              killed (SIGKILL) once the checkpoint is at step 30: ranks 0 and 1 exit naming
#              it as lost, and --resume on 2 ranks in A from the merged checkpoint ends with
#              the uninterrupted run's counts, examples and losses: nothing lost, nothing twice
#   http       `dataecho pipe` in A reads 8 TFRecord shards from nginx in B at 16 Mbit/s,
#              through loss and delay, the link down twice for 3 s and connections reset:
#              every record exactly once (count, ids, SHA-256 of each)
#   service    the data service: the dispatcher and `dataecho pipe` over a service source
#              (sharding "dynamic", 6 lanes) in A, a worker in B and one in a third host C;
#              6,000 records in 8 TFRecord shards, the workers' map sleeping 4 ms a record
#              (about 12 s an epoch). Three checks, each an epoch with one fault once a
#              quarter of it is read: service-worker-link-down (C's link at 2 Mbit/s with
#              2% more loss, then down: every packet dropped, no reset; the consumer must
#              name C's worker and read on from B's), service-worker-killed (B's worker
#              SIGKILLed; the consumer must name it), service-dispatcher-link-down (A's
#              link, the dispatcher's and the consumer's, down for 8 s and back). Each
#              time the epoch ends and its records are the shards', each once (count, ids,
#              SHA-256 of each); each check says the epoch's seconds, the fault's time and
#              what the consumer printed about the worker it lost, with its delay
#
# Environment: BUILD (default build: bin/dataecho, bin/dataecho-train and the service's
# gRPC plugin libdataecho_grpc.so, which DATAECHO_GRPC_PLUGIN may name instead), OUT (default
# out/netns_faults: every log and output). Prints one line per check and ends with
# "N passed, M failed"; exit status 0 when all pass, 77 when this machine cannot make
# namespaces (not root, no iproute2 or nftables), 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build}
OUT=${OUT:-$ROOT/out/netns_faults}
CASES=${1:-all}
[ "$CASES" = all ] && CASES="ddp link-down elastic http service"
for c in $CASES; do
  case $c in ddp | link-down | elastic | http | service) ;; *)
    echo "usage: $0 [ddp|link-down|elastic|http|service|all]" >&2
    exit 2
    ;;
  esac
done

# shellcheck source=tests/netns/netns.sh
. tests/netns/netns.sh
why=$(netns_unavailable) || { echo "netns_faults: skipped: $why"; exit 77; }
binaries=dataecho
case " $CASES " in *" ddp "* | *" link-down "* | *" elastic "*) binaries+=" dataecho-train" ;; esac
for b in $binaries; do
  [ -x "$BUILD/bin/$b" ] || { echo "netns_faults: $BUILD/bin/$b is not built" >&2; exit 1; }
done
# the service's gRPC plugin, from the build's folder (a copy of bin/ keeps it beside)
[ -f "$BUILD/libdataecho_grpc.so" ] && export DATAECHO_GRPC_PLUGIN=${DATAECHO_GRPC_PLUGIN:-$BUILD/libdataecho_grpc.so}
case $OUT in / | "") echo "netns_faults: OUT=$OUT?" >&2; exit 2 ;; esac
rm -rf "$OUT"
mkdir -p "$OUT"
FASHION=/usr/share/datasets/fashion-mnist
TIMEOUT=10  # --dist-timeout of the training runs
PORT=29611
passed=0
failed=0
START=$SECONDS

# check NAME COMMAND...: PASS or FAIL, with the line the command wrote to OUT/NAME.summary
# if any, then what the command printed (also in OUT/NAME.log). The command runs where
# `set -e` does not apply: each step of a case returns on failure.
check() {
  local name=$1 rc=0 summary=""
  shift
  "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  [ ! -s "$OUT/$name.summary" ] || summary=": $(cat "$OUT/$name.summary")"
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASS $name$summary"
  else
    failed=$((failed + 1))
    echo "FAIL $name$summary"
  fi
  sed 's/^/    /' "$OUT/$name.log"
}

# The training run every case compares: 3 ranks, a BatchNorm CNN, echo and two
# shuffles over the first 6,000 Fashion-MNIST images, 100 steps, a checkpoint every 10.
train_args() {
  cat >"$OUT/train.json" <<EOF
{"seed": 3,
 "source": {"kind": "idx", "images": "$FASHION/train-images-idx3-ubyte.gz",
            "labels": "$FASHION/train-labels-idx1-ubyte.gz", "limit": 6000},
 "stages": [{"op": "repeat", "count": -1}, {"op": "shuffle", "buffer": 500},
            {"op": "echo", "factor": 2}, {"op": "shuffle", "buffer": 100},
            {"op": "batch", "size": 32, "drop_remainder": true}, {"op": "prefetch", "buffer": 2}]}
EOF
  echo "train --progress off --eval-every 0 --train-spec $OUT/train.json --model cnn --lr 0.05" \
    "--seed 5 --decay-steps 100 --max-steps 100 --checkpoint-every 10 --dist-timeout $TIMEOUT"
}

# Starts rank R of WORLD in namespace NS (its output in LOG); adds its pid to RANK_PIDS.
start_rank() {  # start_rank NS R WORLD LOG ARGS...
  local ns=$1 r=$2 world=$3 log=$4
  shift 4
  ip netns exec "$ns" env RANK="$r" WORLD_SIZE="$world" LOCAL_RANK="$r" MASTER_ADDR="$NETNS_ADDR_A" \
    MASTER_PORT="$PORT" GLOO_SOCKET_IFNAME="$NETNS_IF" "$BUILD/bin/dataecho-train" "$@" \
    >"$log" 2>&1 &
  RANK_PIDS+=($!)
}

# One rank per namespace of the list, rank 0 (in A) first; a rank outside A starts once
# rank 0's store listens (netns.sh says why). Sets RANK_PIDS. Logs: DIR/rank-R.log.
start_ranks() {  # start_ranks DIR "NS0 NS1 ..." ARGS...
  local dir=$1 r=0 ns
  local -a where
  read -ra where <<<"$2"
  shift 2
  mkdir -p "$dir"
  PORT=$((PORT + 1))
  RANK_PIDS=()
  for ns in "${where[@]}"; do
    if [ "$ns" != "$NETNS_A" ]; then netns_wait_listen "$NETNS_A" "$PORT" || return 1; fi
    start_rank "$ns" "$r" "${#where[@]}" "$dir/rank-$r.log" "$@"
    r=$((r + 1))
  done
}

# Ranks 0 and 1 in A, rank 2 in B.
start_job() {  # start_job DIR ARGS...
  local dir=$1
  shift
  start_ranks "$dir" "$NETNS_A $NETNS_A $NETNS_B" "$@"
}

stop_job() {  # kills the ranks of RANK_PIDS still running
  local pid
  for pid in "${RANK_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${RANK_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}

# Waits for every rank of RANK_PIDS; fails naming the ranks that did not exit 0.
wait_job() {  # wait_job DIR
  local r bad=""
  for r in "${!RANK_PIDS[@]}"; do
    wait "${RANK_PIDS[$r]}" || bad+=" $r"
  done
  [ -z "$bad" ] || { echo "ranks$bad failed:"; tail -n 5 "$1"/rank-*.log; return 1; }
}

loopback_run() {  # the reference: the same job with --nproc 3 on loopback, once
  [ -f "$OUT/loopback/checkpoint/state.json" ] && return 0
  local t0=$SECONDS
  # shellcheck disable=SC2046
  "$BUILD/bin/dataecho-train" $(train_args) --nproc 3 --out "$OUT/loopback" >"$OUT/loopback.log" 2>&1 ||
    { echo "the loopback run failed:"; tail -n 5 "$OUT/loopback.log"; return 1; }
  echo "loopback run: $((SECONDS - t0)) s"
}

case_ddp() {
  loopback_run || return 1
  local t0=$SECONDS
  # shellcheck disable=SC2046
  start_job "$OUT/ddp" $(train_args) --out "$OUT/ddp/out" || { stop_job; return 1; }
  wait_job "$OUT/ddp" || return 1
  echo "across the namespaces: $((SECONDS - t0)) s"
  python3 tests/netns/check.py same "$OUT/loopback" "$OUT/ddp/out"
}

# Waits until the job's checkpoint is at step >= STEP (the ranks train across the link).
wait_for_step() {  # wait_for_step DIR STEP
  local step
  for _ in $(seq 1200); do
    step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' \
      "$1/checkpoint/state.json" 2>/dev/null || echo 0)
    [ "$step" -ge "$2" ] && return 0
    kill -0 "${RANK_PIDS[0]}" 2>/dev/null || { echo "rank 0 ended before step $2"; return 1; }
    sleep 0.1
  done
  echo "no checkpoint at step $2 within 120 s"
  return 1
}

# Waits up to SECONDS for rank R of RANK_PIDS to exit; sets EXITED[R] to the seconds since
# T0 and STATUS[R] to its exit status, or kills it and returns 1.
await_rank() {  # await_rank R SECONDS T0
  local r=$1 limit=$2 t0=$3 pid=${RANK_PIDS[$1]} now
  while kill -0 "$pid" 2>/dev/null; do
    now=$EPOCHREALTIME
    if awk -v a="$now" -v b="$t0" -v l="$limit" 'BEGIN { exit !(a - b > l) }'; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      EXITED[r]=killed
      return 1
    fi
    sleep 0.05
  done
  local rc=0
  wait "$pid" || rc=$?
  STATUS[r]=$rc
  EXITED[r]=$(awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
}

# Ranks 0 and 1 must exit, not with 0, naming rank 2 as lost, within the collective's
# timeout and 5 s of T0: the timeout, then at most the 3 s after which a silent rank is
# lost (src/train/distributed.cc), a margin. Rank 2 is waited for too (whatever it does).
# Sets EXITED (seconds after T0) and STATUS; says what failed and returns 1.
survivors_name_rank_2() {  # survivors_name_rank_2 DIR T0 WHAT
  local dir=$1 t0=$2 what=$3 r ok=0 limit=$((TIMEOUT + 5))
  EXITED=() STATUS=()
  for r in 0 1; do
    await_rank "$r" "$limit" "$t0" || { echo "rank $r still ran $limit s after $what"; ok=1; }
  done
  await_rank 2 $((limit + TIMEOUT)) "$t0" 2>/dev/null || true
  for r in 0 1; do
    grep -q "rank 2 of 3 is lost" "$dir/rank-$r.log" ||
      { echo "rank $r does not name rank 2 as lost:"; tail -n 3 "$dir/rank-$r.log"; ok=1; }
    [ "${STATUS[$r]:-0}" -ne 0 ] || { echo "rank $r exited 0"; ok=1; }
  done
  return "$ok"
}

checkpoint_step() {  # checkpoint_step OUT: the step of OUT's checkpoint
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$1/checkpoint/state.json"
}

rank_messages() {  # rank_messages DIR RANK...: each rank's first error line
  local dir=$1 r
  shift
  for r in "$@"; do echo "rank $r: $(grep -m1 -o 'distributed.*\|train --nproc.*\|error.*' "$dir/rank-$r.log" | cut -c1-300)"; done
}

case_link_down() {
  loopback_run || return 1
  local dir=$OUT/link-down out=$OUT/link-down/out
  # shellcheck disable=SC2046
  start_job "$dir" $(train_args) --out "$out" || { stop_job; return 1; }
  wait_for_step "$out" 30 || { stop_job; return 1; }
  local t0=$EPOCHREALTIME ok=0
  netns_link_down
  survivors_name_rank_2 "$dir" "$t0" "the link went down" || ok=1
  echo "link down at step $(checkpoint_step "$out") of the checkpoint; exits after it: rank 0 ${EXITED[0]} s," \
    "rank 1 ${EXITED[1]} s, rank 2 ${EXITED[2]} s (timeout $TIMEOUT s)"
  rank_messages "$dir" 0 1 2
  python3 tests/netns/check.py whole "$out" || ok=1
  netns_link_up
  [ "$ok" -eq 0 ] || return 1
  local t1=$SECONDS
  # shellcheck disable=SC2046
  start_job "$dir/resume" $(train_args) --resume --out "$out" || { stop_job; return 1; }
  wait_job "$dir/resume" || return 1
  echo "resumed with the link back: $((SECONDS - t1)) s"
  python3 tests/netns/check.py same "$OUT/loopback" "$out"
}

# The elastic case's job: an MLP on the first 1,920 Fashion-MNIST images, echoed twice
# before a shuffle and an augmentation, as elastic_train_test.cc's; 6 lanes (3 and 2 ranks
# divide them) of 320 images each, so a global batch of 48 makes 80 steps, one epoch to
# the end of the data; a checkpoint every 10 steps.
elastic_args() {
  cat >"$OUT/elastic.json" <<EOF
{"seed": 3,
 "source": {"kind": "idx", "images": "$FASHION/train-images-idx3-ubyte.gz",
            "labels": "$FASHION/train-labels-idx1-ubyte.gz", "limit": 1920},
 "stages": [{"op": "echo", "factor": 2}, {"op": "shuffle", "buffer": 200},
            {"op": "map", "fn": "augment", "args": {"pad_crop": 2, "flip": true}},
            {"op": "batch", "size": 48, "drop_remainder": false}]}
EOF
  echo "train --progress off --eval-every 0 --train-spec $OUT/elastic.json --sharding elastic" \
    "--lanes 6 --model mlp --lr 0.05 --seed 7 --decay-steps 100 --checkpoint-every 10" \
    "--dist-timeout $TIMEOUT"
}

case_elastic() {
  local ref=$OUT/elastic-loopback t0=$SECONDS
  # shellcheck disable=SC2046
  "$BUILD/bin/dataecho-train" $(elastic_args) --nproc 3 --out "$ref" >"$ref.log" 2>&1 ||
    { echo "the uninterrupted run on loopback failed:"; tail -n 5 "$ref.log"; return 1; }
  echo "uninterrupted run, 3 ranks on loopback: $((SECONDS - t0)) s"
  local dir=$OUT/elastic out=$OUT/elastic/out ok=0
  # shellcheck disable=SC2046
  start_job "$dir" $(elastic_args) --out "$out" || { stop_job; return 1; }
  wait_for_step "$out" 30 || { stop_job; return 1; }
  local t1=$EPOCHREALTIME
  { kill -KILL "${RANK_PIDS[2]}" && wait "${RANK_PIDS[2]}"; } 2>/dev/null || true
  survivors_name_rank_2 "$dir" "$t1" "rank 2 was killed" || ok=1
  echo "rank 2 killed at step $(checkpoint_step "$out") of the checkpoint; exits after it:" \
    "rank 0 ${EXITED[0]} s, rank 1 ${EXITED[1]} s (timeout $TIMEOUT s)"
  rank_messages "$dir" 0 1
  python3 tests/netns/check.py whole "$out" || ok=1
  [ "$ok" -eq 0 ] || return 1
  local t2=$SECONDS
  # shellcheck disable=SC2046
  start_ranks "$dir/resume" "$NETNS_A $NETNS_A" $(elastic_args) --resume --out "$out" ||
    { stop_job; return 1; }
  wait_job "$dir/resume" || return 1
  echo "resumed on 2 ranks in A: $((SECONDS - t2)) s"
  python3 tests/netns/check.py elastic "$ref" "$out"
}

# 4,000 text records of 0.5-8 KB (random hex, each starting with its number) as 8
# TFRecord shards: about 17 MB, 8-9 s at 16 Mbit/s.
make_shards() {  # make_shards DIR
  python3 - "$1/records.txt" <<'PY'
import random, sys
rng = random.Random(43)
with open(sys.argv[1], "w") as f:
    for i in range(4000):
        f.write("record-%05d " % i + rng.randbytes(rng.randint(256, 4096)).hex() + "\n")
PY
  "$BUILD/bin/dataecho" convert --text "$1/records.txt" --shards 8 --out "$1/shards" >/dev/null
}

start_nginx() {  # start_nginx DIR: nginx in B serving DIR/shards on B's address, port 8080
  netns_nginx "$1" "$NETNS_B" "$NETNS_ADDR_B" "$1/shards" "$1/nginx/access.log" "$NETNS_B" || return 1
  NGINX_PID=$NETNS_NGINX_PID
}

# The faults, at seconds after the read began: the link down for 3 s (packets dropped),
# the relay resetting every connection, then the relay down for 3 s (nothing forwarded,
# new connections refused) and every connection reset as it comes back.
since() { awk -v a="$EPOCHREALTIME" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }

http_faults() {  # http_faults LOG
  local t0=$EPOCHREALTIME
  {
    sleep 2
    echo "$(since "$t0") s: link down"
    netns_link_down
    sleep 3
    netns_link_up
    echo "$(since "$t0") s: link up"
    sleep 1.5
    netns_relay_signal USR2
    echo "$(since "$t0") s: connections reset"
    sleep 0.5
    netns_relay_signal USR1
    echo "$(since "$t0") s: relay down"
    sleep 3
    netns_relay_signal USR2
    netns_relay_signal USR1
    echo "$(since "$t0") s: relay up, connections reset"
  } >"$1" 2>&1
}

case_http() {
  local dir=$OUT/http
  mkdir -p "$dir"
  tc_rate 16mbit
  make_shards "$dir" || return 1
  start_nginx "$dir" || return 1
  local uris="http://$NETNS_ADDR_B:8080/data-{00000..00007}-of-00008.tfrecord"
  cat >"$dir/spec.json" <<EOF
{"source": {"kind": "tfrecord", "raw": true, "buffer_bytes": 262144, "uri": ["$uris"]},
 "stages": [{"op": "interleave", "cycle": 4}]}
EOF
  local t0=$SECONDS rc=0
  http_faults "$dir/faults.log" &
  local faults=$!
  netns_a "$BUILD/bin/dataecho" pipe --values --stats-json "$dir/stats.json" "$dir/spec.json" \
    >"$dir/records.jsonl" 2>"$dir/pipe.log" || rc=$?
  local took=$((SECONDS - t0))
  local ended_first=0
  kill -0 "$faults" 2>/dev/null && ended_first=1
  wait "$faults" || true
  kill "$NGINX_PID" 2>/dev/null || true
  wait "$NGINX_PID" 2>/dev/null || true
  tc_rate "$NETNS_RATE"
  [ "$rc" -eq 0 ] || { echo "dataecho pipe failed ($rc):"; tail -n 5 "$dir/pipe.log"; return 1; }
  sed 's/^/  /' "$dir/faults.log"
  netns_relay_log | sed 's/^/  /'
  [ "$ended_first" -eq 0 ] || { echo "the read ended (${took} s) before the last fault"; return 1; }
  echo "read in $took s; $(http_counters "$dir/stats.json")"
  python3 tests/netns/check.py records "$dir"/shards/data-0000{0..7}-of-00008.tfrecord -- \
    "$dir/records.jsonl"
}

http_counters() {  # the source's HTTP counters from pipe --stats-json
  python3 - "$1" <<'PY'
import json, sys
def find(o):
    if isinstance(o, dict):
        if "http_retries" in o:
            return o
        o = list(o.values())
    if isinstance(o, list):
        for v in o:
            r = find(v)
            if r:
                return r
s = find(json.load(open(sys.argv[1]))) or {}
print(", ".join(f"{k} {s.get(k)}" for k in
                ("http_requests", "http_retries", "http_resumed", "http_connections", "http_bytes")))
PY
}

tc_rate() {  # the bandwidth of both links, both ends
  local where
  for where in "$NETNS_R:r-a" "$NETNS_R:r-b" "$NETNS_A:$NETNS_IF" "$NETNS_B:$NETNS_IF"; do
    ip netns exec "${where%%:*}" tc qdisc replace dev "${where#*:}" root tbf rate "$1" \
      burst 32kb latency 100ms
  done
}

# The service case: the data service (docs/service.md) across three hosts: the dispatcher
# and the consumer (`dataecho pipe --values` over a service source, sharding "dynamic", 6
# lanes) in A, a worker in B and one in C, a third host (10.231.3.2). The upstream: 6,000
# text records (each its number and 32-256 random bytes as hex) as 8 TFRecord shards in
# OUT/service/shards, which every namespace reads (they share the filesystem), through a
# map that sleeps 4 ms a record (no CPU): about 12 s an epoch on two workers. Each check
# is an epoch of its own (a new dispatcher and workers) with one fault once the consumer
# has printed a quarter of the records.
SVC_RECORDS=6000
SVC_SHARDS=$OUT/service/shards
NETNS_C=$NETNS_PREFIX-c
declare -A SVC_PIDS SVC_WORKER

svc_shards() {  # the shards, once
  [ -f "$SVC_SHARDS/data-00007-of-00008.tfrecord" ] && return 0
  mkdir -p "$OUT/service"
  python3 - "$OUT/service/records.txt" "$SVC_RECORDS" <<'PY'
import random, sys
rng = random.Random(47)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write("record-%05d " % i + rng.randbytes(rng.randint(32, 256)).hex() + "\n")
PY
  "$BUILD/bin/dataecho" convert --text "$OUT/service/records.txt" --shards 8 --out "$SVC_SHARDS" >/dev/null
}

svc_host_c() {  # host C, once
  ip netns list | awk '{print $1}' | grep -qx "$NETNS_C" || netns_add_host c 3
}

# Waits up to 30 s for a line of FILE that matches REGEX (printed), while PID runs.
await_line() {  # await_line FILE REGEX PID
  for _ in $(seq 300); do
    grep -m1 -E "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

# The dispatcher in A, then a worker in B and one in C, logs in DIR; sets SVC_DISPATCHER
# (HOST:PORT), SVC_PIDS[dispatcher|b|c] and SVC_WORKER[b|c] (the workers' names, wN).
svc_start() {  # svc_start DIR
  local dir=$1 line h
  mkdir -p "$dir"
  SVC_PIDS=() SVC_WORKER=()
  ip netns exec "$NETNS_A" "$BUILD/bin/dataecho" dispatcher --port 0 >"$dir/dispatcher.out" \
    2>"$dir/dispatcher.log" &
  SVC_PIDS[dispatcher]=$!
  line=$(await_line "$dir/dispatcher.out" '^listening on ' $!) ||
    { echo "the dispatcher did not start:"; cat "$dir/dispatcher.log"; return 1; }
  SVC_DISPATCHER=$NETNS_ADDR_A:${line##*:}
  netns_wait_listen "$NETNS_A" "${line##*:}" || return 1
  for h in b c; do
    ip netns exec "$NETNS_PREFIX-$h" "$BUILD/bin/dataecho" worker --dispatcher "$SVC_DISPATCHER" \
      >"$dir/worker-$h.out" 2>"$dir/worker-$h.log" &
    SVC_PIDS[$h]=$!
    line=$(await_line "$dir/worker-$h.out" ' serving on ' $!) ||
      { echo "the worker in ${h^^} did not start:"; cat "$dir/worker-$h.log"; return 1; }
    SVC_WORKER[$h]=$(awk '{print $2}' <<<"$line")
  done
  echo "dispatcher at $SVC_DISPATCHER; B's worker ${SVC_WORKER[b]}, C's ${SVC_WORKER[c]}"
  cat >"$dir/spec.json" <<EOF
{"source": {"kind": "service", "dispatcher": "$SVC_DISPATCHER", "job": "records",
            "sharding": "dynamic", "lanes": 6, "connect_timeout_s": 30,
            "pipeline": {"source": {"kind": "tfrecord", "raw": true,
                                    "uri": ["$SVC_SHARDS/data-{00000..00007}-of-00008.tfrecord"]},
                         "stages": [{"op": "map", "fn": "sleep", "args": {"ms": 4}}]}}}
EOF
}

svc_stop() {  # kills the dispatcher and the workers still running
  local pid
  for pid in "${SVC_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${SVC_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  SVC_PIDS=()
}

stamp() {  # each line of standard input, after the seconds since T0
  while IFS= read -r l; do printf '%s s: %s\n' "$(since "$1")" "$l"; done
}

lines_of() { wc -l <"$1" 2>/dev/null || echo 0; }

# The consumer in A: its lines in DIR/records.jsonl, its standard error in DIR/pipe.log,
# each line stamped with the seconds since SVC_T0, when it started; how many lines it has
# printed, every 0.2 s, in DIR/progress.txt ("SECONDS LINES"). Sets SVC_PIPE and
# SVC_PROGRESS (the pids).
svc_consume() {  # svc_consume DIR
  local dir=$1
  SVC_T0=$EPOCHREALTIME
  {
    netns_a timeout 150 "$BUILD/bin/dataecho" pipe --values "$dir/spec.json" 2>&1 \
      >"$dir/records.jsonl" | stamp "$SVC_T0" >"$dir/pipe.log"
  } &
  SVC_PIPE=$!
  while kill -0 "$SVC_PIPE" 2>/dev/null; do
    echo "$(since "$SVC_T0") $(lines_of "$dir/records.jsonl")"
    sleep 0.2
  done >"$dir/progress.txt" &
  SVC_PROGRESS=$!
}

# The longest time after the fault (at AT s) in which the consumer printed nothing.
svc_pause() {  # svc_pause DIR AT
  awk -v at="$2" '$1 + 0 < at { since = $1; last = $2; next }
    $2 != last { last = $2; since = $1; next }
    $1 - since > max { max = $1 - since; from = since }
    END { printf "its longest pause in printing after the fault: %.1f s (from %.1f s)\n", max, from }' \
    "$1/progress.txt"
}

# Waits until the consumer has printed N lines; fails if it ended first or took 120 s.
svc_await_lines() {  # svc_await_lines DIR N
  local n=0
  for _ in $(seq 1200); do
    n=$(lines_of "$1/records.jsonl")
    [ "$n" -ge "$2" ] && return 0
    kill -0 "$SVC_PIPE" 2>/dev/null || { echo "the consumer ended after $n lines:"; cat "$1/pipe.log"; return 1; }
    sleep 0.1
  done
  echo "the consumer printed $n lines in 120 s"
  return 1
}

# What the consumer said of workers (its "service: worker wN (...): ...: stream cut" lines),
# each with the seconds since the fault (at AT s); NAME (wN): it must name that worker.
# Sets SVC_SAID: the first (the check's line says it), or that it said nothing; prints
# the others.
svc_said() {  # svc_said DIR AT [NAME]
  local said
  said=$(grep -E '^[0-9.]+ s: service: worker w' "$1/pipe.log" | cut -c1-400 || true)
  if [ -z "$said" ]; then
    SVC_SAID="the consumer printed nothing about a worker"
    [ -z "${3:-}" ] || { echo "$SVC_SAID (it should have named ${3})"; return 1; }
    return 0
  fi
  said=$(awk -v at="$2" '{ printf "the consumer %.1f s after the fault (at %s s): \"%s\"\n", $1 - at, $1, substr($0, index($0, ": ") + 2) }' <<<"$said")
  SVC_SAID=$(head -n 1 <<<"$said")
  tail -n +2 <<<"$said"
  [ -z "${3:-}" ] || grep -q "service: worker $3 (" <<<"$said" || { echo "$SVC_SAID (it does not name $3)"; return 1; }
}

svc_status() {  # the dispatcher's workers after the epoch, one line
  netns_a "$BUILD/bin/dataecho" service status "$SVC_DISPATCHER" --json --timeout 5 >"$1/status.json" \
    2>/dev/null || { echo "status: none"; return 0; }
  python3 - "$1/status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("status: " + "; ".join(
    f"w{w['worker']} {w['address']} {w['state']}, {w['elements']} elements sent, {w['pieces']} pieces"
    for w in s["workers"]))
PY
}

# One epoch with a fault: the hosts' processes started, FAULT DIR run once the consumer has
# printed a quarter of the records (it says what it did, and may set SVC_MUST_NAME, the
# worker the consumer must name), the epoch awaited, the status taken, UNDO run; then the
# check's line (OUT/service-NAME.summary): the epoch's seconds, the fault's, what the
# consumer said of workers and its longest pause; and the records: the shards', each once.
svc_epoch() {  # svc_epoch NAME FAULT UNDO
  local dir=$OUT/service/$1 rc=0 at n
  SVC_MUST_NAME=""
  svc_shards && svc_host_c || return 1
  svc_start "$dir" || { svc_stop; return 1; }
  svc_consume "$dir"
  if svc_await_lines "$dir" $((SVC_RECORDS / 4)); then
    at=$(since "$SVC_T0") n=$(lines_of "$dir/records.jsonl")
    echo "at $at s, after $n of $SVC_RECORDS records:"
    "$2" "$dir" || rc=1
  else
    rc=1 at=0
  fi
  local pipe_rc=0 took pause
  wait "$SVC_PIPE" || pipe_rc=$?
  took=$(since "$SVC_T0")
  wait "$SVC_PROGRESS" || true
  [ "$rc" -eq 0 ] || { "$3"; svc_stop; return 1; }
  svc_status "$dir"
  "$3"
  svc_said "$dir" "$at" "$SVC_MUST_NAME" || rc=1
  pause=$(svc_pause "$dir" "$at")
  svc_stop
  echo "the epoch $took s, the fault at $at s; $SVC_SAID; ${pause#its }" >"$OUT/service-$1.summary"
  [ "$pipe_rc" -eq 0 ] || { echo "dataecho pipe failed ($pipe_rc) after $took s:"; tail -n 5 "$dir/pipe.log"; return 1; }
  python3 tests/netns/check.py records "$SVC_SHARDS"/data-0000{0..7}-of-00008.tfrecord -- \
    "$dir/records.jsonl" || rc=1
  return "$rc"
}

# C's link at 2 Mbit/s both ends and 2% of its packets dropped each way, besides the
# 0.5% of every link; and back.
svc_shape_c() {
  local where
  for where in "$NETNS_R:r-c" "$NETNS_C:$NETNS_IF"; do
    ip netns exec "${where%%:*}" tc qdisc replace dev "${where#*:}" root tbf rate 2mbit \
      burst 32kb latency 100ms
  done
  netns_r nft -f - <<EOF
table inet ${NETNS_PREFIX}_shape_c {
  chain arrive { type filter hook prerouting priority -350; iifname "r-c" numgen random mod 1000 < 20 counter drop; }
  chain leave { type filter hook output priority -350; oifname "r-c" numgen random mod 1000 < 20 counter drop; }
}
EOF
}
svc_unshape_c() {
  local where
  for where in "$NETNS_R:r-c" "$NETNS_C:$NETNS_IF"; do
    ip netns exec "${where%%:*}" tc qdisc replace dev "${where#*:}" root tbf rate "$NETNS_RATE" \
      burst 32kb latency 100ms
  done
  local n
  n=$(netns_r nft list table inet "${NETNS_PREFIX}_shape_c" 2>/dev/null | grep -o 'packets [0-9]*' |
    awk '{print $2}' | paste -sd' ') || return 0  # undone already
  echo "C's link's 2% more loss dropped packets: ${n% *} from C, ${n#* } to it"
  netns_r nft delete table inet "${NETNS_PREFIX}_shape_c"
}

# (1) C's worker's link shaped from the start, then down mid-epoch (no reset); the
# consumer must cut its stream and read on from B's worker.
svc_c_down() {
  netns_link_down r-c
  SVC_MUST_NAME=${SVC_WORKER[c]}
  echo "  C's link (2 Mbit/s, 2% more loss so far) down: every packet dropped, no reset; ${SVC_WORKER[c]} cut off"
}
svc_c_up() {
  netns_link_up r-c 2>/dev/null || true
  svc_unshape_c
}
case_service_worker_link_down() {
  svc_host_c || return 1
  svc_shape_c
  svc_epoch worker-link-down svc_c_down svc_c_up && return 0
  svc_c_up >/dev/null  # where the epoch failed before its undo
  return 1
}

# (2) B's worker SIGKILLed mid-epoch in its namespace.
svc_kill_b() {
  { netns_b kill -KILL "${SVC_PIDS[b]}" && wait "${SVC_PIDS[b]}"; } 2>/dev/null || true
  SVC_MUST_NAME=${SVC_WORKER[b]}
  echo "  B's worker ${SVC_WORKER[b]} SIGKILLed"
}
nothing() { :; }
case_service_worker_killed() { svc_epoch worker-killed svc_kill_b nothing; }

# (3) A's link, the dispatcher's (and the consumer's), down for 8 s mid-epoch and back:
# the workers cannot reach the dispatcher nor the consumer them; the streams the
# transport cuts (its TCP user timeout, 5 s) are reopened once the link is back.
svc_a_blip() {
  local t0=$EPOCHREALTIME
  netns_link_down r-a
  sleep 8
  netns_link_up r-a
  echo "  A's link down for $(since "$t0") s (every packet dropped, no reset), then up"
}
svc_beats() {  # what the workers said of the dispatcher
  local h n
  for h in b c; do
    n=$(grep -c 'beat failed' "$OUT/service/dispatcher-link-down/worker-$h.log" || true)
    echo "${SVC_WORKER[$h]} (in ${h^^}): $n failed beats$( [ "$n" -eq 0 ] || echo ", the first: $(grep -m1 'beat failed' "$OUT/service/dispatcher-link-down/worker-$h.log" | cut -c1-300)")"
  done
}
case_service_dispatcher_link_down() { svc_epoch dispatcher-link-down svc_a_blip svc_beats; }

echo "netns_faults: $CASES; outputs in $OUT"
netns_setup
echo "namespaces: $NETNS_A, $NETNS_B, router $NETNS_R: $NETNS_RATE, loss $NETNS_LOSS per mille" \
  "each way, delay $NETNS_DELAY_MS ms + 0-$NETNS_JITTER_MS ms (relay)"
for c in $CASES; do
  t=$SECONDS
  if [ "$c" = service ]; then  # three checks, each an epoch with its fault
    for f in worker-link-down worker-killed dispatcher-link-down; do
      check "service-$f" "case_service_${f//-/_}"
    done
  else
    check "$c" "case_${c//-/_}"
  fi
  echo "     ($c: $((SECONDS - t)) s)"
done
echo "dropped by the loss rules: $(netns_r nft list table inet "${NETNS_PREFIX}_loss" | grep -o 'packets [0-9]*' | paste -sd' ')"
echo "whole run: $((SECONDS - START)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
