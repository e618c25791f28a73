#!/usr/bin/env bash
# Two "hosts" that do not share a loopback, for the fault tests of scripts/netns_faults.sh:
# network namespaces A and B, each joined to a router namespace R by a veth pair.
#
#   A (10.231.1.2) --veth-- R (10.231.1.1 | 10.231.2.1) --veth-- B (10.231.2.2)
#
# netns_add_host NAME N adds another host, namespace NETNS_PREFIX-NAME at 10.231.N.2 on
# R's end r-NAME, whose packets meet what A's and B's do.
#
# What a packet meets between hosts, in R (this kernel has no netem qdisc):
#   - bandwidth: a tbf qdisc on both ends of every link (NETNS_RATE, default 100mbit);
#   - loss: nftables rules dropping NETNS_LOSS per mille (default 5) of the packets that
#     arrive at R from any link, and of those R sends on any link
#     (`numgen random mod 1000 < 5 drop`): each direction of each link;
#   - delay: every TCP connection that crosses R is redirected to tests/netns/relay.py,
#     which forwards each chunk 10 ms (+ 0-2 ms jitter) after it read it;
#   - link down (netns_link_down / netns_link_up [END], B's r-b by default): every packet
#     on that link dropped, with no reset: what a pulled cable looks like to both sides;
#   - relay faults (netns_relay_signal USR1 | USR2): stop forwarding and refuse new
#     connections (USR1 again: forward again), or reset every connection in flight.
# Segmentation offload is off on the veths (gso_max_segs 1), so loss and shaping act on
# packets of at most one MTU, as on a wire.
#
# Sourced: `. tests/netns/netns.sh; netns_setup; netns_a CMD...; netns_b CMD...`;
# netns_setup installs an EXIT trap that calls netns_cleanup (a caller with a trap of its
# own calls netns_cleanup from it). Called: `netns.sh check` (exit 0 when this machine can
# run it, 77 otherwise, with the reason), `netns.sh up` / `netns.sh down`.
# Everything is named with NETNS_PREFIX (default "dex"); netns_setup first removes what an
# earlier run that was killed left behind (namespaces, their processes, the relay).
# Needs root, iproute2, nftables and python3.

NETNS_PREFIX=${NETNS_PREFIX:-dex}
NETNS_RATE=${NETNS_RATE:-100mbit}
NETNS_LOSS=${NETNS_LOSS:-5}
NETNS_DELAY_MS=${NETNS_DELAY_MS:-10}
NETNS_JITTER_MS=${NETNS_JITTER_MS:-2}
NETNS_RELAY_PORT=7999
NETNS_A=$NETNS_PREFIX-a
NETNS_B=$NETNS_PREFIX-b
NETNS_R=$NETNS_PREFIX-r
NETNS_ADDR_A=10.231.1.2
NETNS_ADDR_B=10.231.2.2
NETNS_IF=$NETNS_PREFIX-eth  # the veth end in each host
NETNS_STATE=${NETNS_STATE:-/tmp/dataecho-netns-$NETNS_PREFIX}
NETNS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

netns_a() { ip netns exec "$NETNS_A" "$@"; }
netns_b() { ip netns exec "$NETNS_B" "$@"; }
netns_r() { ip netns exec "$NETNS_R" "$@"; }

# Why this machine cannot run the namespace tests, or nothing (and status 0) when it can.
netns_unavailable() {
  [ "$(id -u)" -eq 0 ] || { echo "not root"; return 1; }
  local tool
  for tool in ip tc nft python3; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed (scripts/bootstrap.sh)"; return 1; }
  done
  local probe=$NETNS_PREFIX-probe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cannot create a network namespace (ip netns add)"
    return 1
  fi
  local why=""
  ip netns exec "$probe" ip link add "$NETNS_PREFIX-p0" type veth peer name "$NETNS_PREFIX-p1" 2>/dev/null ||
    why="no veth pairs"
  [ -n "$why" ] || ip netns exec "$probe" tc qdisc add dev "$NETNS_PREFIX-p0" root tbf rate 1mbit \
    burst 16kb latency 50ms 2>/dev/null || why="no tbf qdisc"
  [ -n "$why" ] || ip netns exec "$probe" nft -f - 2>/dev/null <<EOF || why="no nftables numgen or redirect"
table ip probe {
  chain pre { type filter hook prerouting priority -300; numgen random mod 1000 < 5 drop; }
  chain nat { type nat hook prerouting priority -100; meta l4proto tcp redirect to :1; }
}
EOF
  ip netns del "$probe"
  [ -z "$why" ] || { echo "$why"; return 1; }
}

# Removes every namespace named NETNS_PREFIX-*, after killing the processes still in them
# (ranks, nginx, the relay: all started by these scripts), and the state folder.
netns_cleanup() {
  local ns pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NETNS_PREFIX-" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null || true
      sleep 0.3
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      # shellcheck disable=SC2086
      [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$NETNS_STATE"
}

# A veth pair from namespace R (end R_END) to namespace NS (end NETNS_IF, address ADDR/24,
# R's end .1 of the same /24), both ends shaped to NETNS_RATE.
netns_link() {  # netns_link NS R_END ADDR
  local ns=$1 rend=$2 addr=$3 gw=${3%.*}.1
  ip netns add "$ns"
  ip -n "$NETNS_R" link add "$rend" type veth peer name "$NETNS_IF" netns "$ns"
  ip -n "$NETNS_R" addr add "$gw/24" dev "$rend"
  ip -n "$ns" addr add "$addr/24" dev "$NETNS_IF"
  local where dev
  for where in "$NETNS_R:$rend" "$ns:$NETNS_IF"; do
    dev=${where#*:}
    ip -n "${where%%:*}" link set dev "$dev" gso_max_segs 1 up
    ip netns exec "${where%%:*}" tc qdisc replace dev "$dev" root tbf rate "$NETNS_RATE" \
      burst 32kb latency 100ms
  done
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$gw"
}

# Loss and the redirect to the relay, in R, on every link (r-*: hosts added later too).
netns_rules() {
  netns_r nft -f - <<EOF
table inet ${NETNS_PREFIX}_loss {
  chain arrive { type filter hook prerouting priority -300;
    iifname "r-*" numgen random mod 1000 < $NETNS_LOSS counter drop; }
  chain leave { type filter hook output priority -300;
    oifname "r-*" numgen random mod 1000 < $NETNS_LOSS counter drop; }
}
table ip ${NETNS_PREFIX}_relay {
  chain pre { type nat hook prerouting priority -100;
    iifname "r-*" meta l4proto tcp redirect to :$NETNS_RELAY_PORT; }
}
EOF
}

netns_start_relay() {
  mkdir -p "$NETNS_STATE"
  rm -f "$NETNS_STATE/relay.ready"
  # ip netns exec execs the command: $! is the relay's pid
  ip netns exec "$NETNS_R" python3 "$NETNS_HERE/relay.py" --port "$NETNS_RELAY_PORT" --delay-ms "$NETNS_DELAY_MS" \
    --jitter-ms "$NETNS_JITTER_MS" --ready "$NETNS_STATE/relay.ready" 2>"$NETNS_STATE/relay.log" &
  echo $! >"$NETNS_STATE/relay.pid"
  for _ in $(seq 100); do
    [ -s "$NETNS_STATE/relay.ready" ] && return 0
    kill -0 "$(cat "$NETNS_STATE/relay.pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "netns: the relay did not start:" >&2
  cat "$NETNS_STATE/relay.log" >&2
  return 1
}

# Makes A, B and R (removing leftovers first) and installs the EXIT trap.
netns_setup() {
  local why
  why=$(netns_unavailable) || { echo "netns: cannot run here: $why" >&2; return 77; }
  netns_cleanup
  trap netns_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  ip netns add "$NETNS_R"
  ip -n "$NETNS_R" link set lo up
  netns_r sysctl -qw net.ipv4.ip_forward=1
  netns_link "$NETNS_A" r-a "$NETNS_ADDR_A"
  netns_link "$NETNS_B" r-b "$NETNS_ADDR_B"
  netns_rules
  netns_start_relay
  netns_echo_check || { echo "netns: A cannot reach B through the relay" >&2; return 1; }
}

# A TCP round trip from A to a listener in B, through the relay (up to 3 tries: the
# link drops packets). Prints the round trip.
netns_echo_check() {
  local code='
import socket, sys, time
if sys.argv[1] == "serve":
    s = socket.create_server((sys.argv[2], 7000)); s.settimeout(20)
    for _ in range(3):
        c, _ = s.accept(); c.sendall(c.recv(64)); c.close()
else:
    for attempt in range(3):
        try:
            t = time.monotonic()
            c = socket.create_connection((sys.argv[2], 7000), timeout=5)
            c.sendall(b"ping"); assert c.recv(64) == b"ping"
            print("netns: A to B round trip %.1f ms" % ((time.monotonic() - t) * 1000)); break
        except (OSError, AssertionError):
            time.sleep(0.2)
    else:
        sys.exit(1)
'
  ip netns exec "$NETNS_B" timeout 25 python3 -c "$code" serve "$NETNS_ADDR_B" &
  local server=$! rc=0
  sleep 0.3
  netns_a timeout 20 python3 -c "$code" connect "$NETNS_ADDR_B" || rc=1
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  return "$rc"
}

# Waits up to 30 s until something listens on TCP PORT in namespace NS. The relay
# completes a client's handshake before it connects onward, so a connection to a port
# where nothing listens yet reaches the client as a reset, not as the refusal that
# clients retry: start a client in the other namespace once its server listens.
netns_wait_listen() {  # netns_wait_listen NS PORT
  for _ in $(seq 300); do
    [ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2")" ] && return 0
    sleep 0.1
  done
  echo "netns: nothing listens on port $2 in $1" >&2
  return 1
}

# A link (R's end, r-b: B's by default): every packet between R and its host dropped (no
# reset), and back.
netns_link_down() {  # netns_link_down [END]
  local end=${1:-r-b}
  netns_r nft -f - <<EOF
table inet ${NETNS_PREFIX}_down_${end//-/_} {
  chain arrive { type filter hook prerouting priority -400; iifname "$end" drop; }
  chain leave { type filter hook output priority -400; oifname "$end" drop; }
  chain pass { type filter hook forward priority -400; oifname "$end" drop; }
}
EOF
}
netns_link_up() {  # netns_link_up [END]
  local end=${1:-r-b}
  netns_r nft delete table inet "${NETNS_PREFIX}_down_${end//-/_}"
}

# Another host: namespace NETNS_PREFIX-NAME at 10.231.N.2, joined to R by its end r-NAME
# (shaped, lossy and relayed as A and B; N other than 1 and 2, NAME one letter or word).
netns_add_host() {  # netns_add_host NAME N
  netns_link "$NETNS_PREFIX-$1" "r-$1" "10.231.$2.2"
}

# USR1: the relay stops forwarding and refuses new connections (again: forwards again);
# USR2: it resets every connection in flight.
netns_relay_signal() { kill -"$1" "$(cat "$NETNS_STATE/relay.pid")"; }

# The relay's counters and messages so far (it prints its counters when it exits).
netns_relay_log() { cat "$NETNS_STATE/relay.log" 2>/dev/null || true; }

# netns_nginx DIR HOST_NS ADDR ROOT ACCESS_LOG CLIENT_NS: nginx in namespace HOST_NS serving
# the folder ROOT on ADDR:8080 (its files, temp folders and logs under DIR/nginx;
# ACCESS_LOG: a path, or "off"), started in the background (its pid in NETNS_NGINX_PID);
# returns once CLIENT_NS can connect, or prints "nginx did not start:" and nginx's logs
# and returns 1 after 5 s.
netns_nginx() {
  local p=$1/nginx
  mkdir -p "$p"
  cat >"$p/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $p/nginx.pid;
error_log $p/error.log warn;
events { worker_connections 1024; }
http {
  default_type application/octet-stream;
  sendfile on;
  keepalive_timeout 120s;
  access_log $5;
  client_body_temp_path $p/client_body_temp;
  proxy_temp_path $p/proxy_temp;
  fastcgi_temp_path $p/fastcgi_temp;
  uwsgi_temp_path $p/uwsgi_temp;
  scgi_temp_path $p/scgi_temp;
  server { listen $3:8080; root $4; }
}
EOF
  ip netns exec "$2" nginx -p "$p" -c "$p/nginx.conf" 2>"$p/stderr.log" &
  # shellcheck disable=SC2034 # read by the scripts that source this file
  NETNS_NGINX_PID=$!
  for _ in $(seq 50); do
    ip netns exec "$6" bash -c "exec 3<>/dev/tcp/$3/8080" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nginx did not start:"
  cat "$p/error.log" "$p/stderr.log"
  return 1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    check)
      why=$(netns_unavailable) || { echo "netns: cannot run here: $why"; exit 77; }
      echo "netns: this machine can run the namespace tests"
      ;;
    up)
      netns_setup
      trap - EXIT
      echo "netns: $NETNS_A ($NETNS_ADDR_A), $NETNS_B ($NETNS_ADDR_B), router $NETNS_R; $0 down removes them"
      ;;
    down) netns_cleanup ;;
    *)
      echo "usage: $0 check | up | down" >&2
      exit 2
      ;;
  esac
fi
