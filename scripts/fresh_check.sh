#!/usr/bin/env bash
# The README's two commands as a new user meets them: a minimal Debian 12 root
# (debootstrap --variant=minbase bookworm, nothing else installed), the committed tree
# (git archive HEAD) copied into it, then scripts/demo.sh and scripts/test.sh run there
# as root with a clean environment. Before them, while the root has nothing else, the
# Python wheel as another machine gets it: a wheel built here from the same commit
# (python3 -m build --wheel --no-isolation, with this machine's packages), the Debian
# packages its metadata names as its runtime (setup.py's DEBIAN_RUNTIME) installed in
# the root and nothing more (no torch), then pip install into a venv, import from /, a
# numpy-mode pipeline (and the data service's gRPC plugin, found beside the extension,
# naming the library it lacks), then the data service's packages (DEBIAN_SERVICE) and a
# status call that reaches the network (to a port nothing listens on), pip uninstall.
# Prints PASS or FAIL for each and exits non-zero if any failed.
#
# Run it before changing scripts/bootstrap.sh or any install step: the development
# machines and CI have packages a fresh machine lacks, so a green CI can hide a missing
# install. It takes as long as CI's whole run plus the demo plus the debootstrap (an
# hour or more on 2 cores), so CI never runs it.
#
#   scripts/fresh_check.sh [--root DIR] [--keep] [--only demo|test|wheel] [--wheel FILE]
#                          [--base FILE] [--new-base]
#     --root DIR   where the root goes (default /var/tmp/dataecho-fresh); an old root
#                  there from an earlier check is removed first
#     --keep       leave the root in place afterwards (to look around with chroot)
#     --only X     run just one of the three checks (--only wheel --wheel FILE: about 4
#                  minutes; building the wheel first adds a build of the engine)
#     --wheel FILE check this wheel instead of building one from the commit
#     --base FILE  the minimal root's packages as a debootstrap tarball, made on the
#                  first run and unpacked anew each run (default
#                  /var/tmp/dataecho-fresh-bookworm-minbase.tgz)
#     --new-base   download them again (a new tarball)
# Logs: DIR.logs/{debootstrap,wheel-build,wheel,demo,test}.log (outside the root, so
# they survive it).
#
# Needs root. Installs debootstrap if it is missing. /proc, /sys and /dev are
# bind-mounted into the root (the sanitizers and nginx need them) and unmounted on every
# exit path; the root is never removed while anything is still mounted under it.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROOT=/var/tmp/dataecho-fresh
BASE=/var/tmp/dataecho-fresh-bookworm-minbase.tgz
NEW_BASE=0
KEEP=0
ONLY=""
WHEEL=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --root) ROOT=$(realpath -m "$2"); shift 2 ;;
    --keep) KEEP=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    --wheel) WHEEL=$(realpath "$2"); shift 2 ;;
    --base) BASE=$(realpath -m "$2"); shift 2 ;;
    --new-base) NEW_BASE=1; shift ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
done
[[ -z "$ONLY" || "$ONLY" == demo || "$ONLY" == test || "$ONLY" == wheel ]] || { echo "fresh_check: --only takes demo, test or wheel" >&2; exit 2; }
[[ -z "$WHEEL" || -f "$WHEEL" ]] || { echo "fresh_check: no wheel $WHEEL" >&2; exit 2; }
[[ "$(id -u)" -eq 0 ]] || { echo "fresh_check: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
case $ROOT in
  /|/bin|/boot|/dev|/etc|/home|/lib*|/proc|/root|/run|/sbin|/sys|/tmp|/usr|/var|/var/tmp|/work)
    echo "fresh_check: refusing --root $ROOT" >&2; exit 2 ;;
esac
LOGS="$ROOT.logs"

# The Debian mirror this machine already uses (deb822 or one-line sources).
mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\{0,1\}$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
[[ -n "$mirror" ]] || mirror=$(sed -n 's/^deb  *\(http[^ ]*\/debian\)\/\{0,1\}  *bookworm .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}

mounted_under() {  # the mount points at or below $ROOT, deepest first
  findmnt -rn -o TARGET | awk -v r="$ROOT" '$0 == r || index($0, r "/") == 1' | sort -r
}
unmount_all() {
  local m
  for m in $(mounted_under); do
    umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}
remove_root() {  # never through a live bind mount: that would delete the host's /dev
  unmount_all
  if [[ -n "$(mounted_under)" ]]; then
    echo "fresh_check: still mounted under $ROOT, not removing it:" >&2
    mounted_under >&2
    return 1
  fi
  rm -rf --one-file-system "$ROOT"
}
cleanup() {
  local rc=$?
  # processes left running inside the root (nginx from a failed test) hold its mounts
  local p
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/root" 2>/dev/null)" == "$ROOT" ]] && kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
  unmount_all
  if [[ $KEEP -eq 0 && -d "$ROOT" ]]; then remove_root || rc=1; fi
  exit "$rc"
}
trap cleanup EXIT INT TERM

command -v debootstrap >/dev/null || {
  echo "== installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
}
if [[ -e "$ROOT" ]]; then
  echo "== removing the old root $ROOT"
  remove_root
fi
mkdir -p "$LOGS"
[[ $NEW_BASE -eq 0 ]] || rm -f "$BASE"
t0=$(date +%s)
COMMIT=$(git -C "$REPO" rev-parse --short HEAD)  # once: HEAD may move while the check runs
RUN_WHEEL=0
[[ -z "$ONLY" || "$ONLY" == wheel ]] && RUN_WHEEL=1
if [[ $RUN_WHEEL -eq 1 && -z "$WHEEL" ]]; then
  # Built on this machine (it has the build's packages), from the commit checked below.
  rm -rf "$LOGS/wheel-src" "$LOGS/wheel-dist"
  mkdir -p "$LOGS/wheel-src"
  git -C "$REPO" archive "$COMMIT" | tar -x -C "$LOGS/wheel-src"
  echo "== building the wheel of $COMMIT (log: $LOGS/wheel-build.log)"
  (cd "$LOGS/wheel-src" && /usr/bin/python3 -m build --wheel --no-isolation --outdir "$LOGS/wheel-dist" .) \
    >"$LOGS/wheel-build.log" 2>&1 || { tail -20 "$LOGS/wheel-build.log"; echo "fresh_check: the wheel did not build" >&2; exit 1; }
  WHEEL=$(ls "$LOGS"/wheel-dist/dataecho-*.whl)
  echo "   $(($(date +%s) - t0)) s: $WHEEL"
fi
# The minimal root's own packages, downloaded once into a tarball (debootstrap
# --make-tarball) and installed from it anew each run (--unpack-tarball): the root is
# as pristine as a downloaded one, without the download.
if [[ ! -s "$BASE" ]]; then
  echo "== debootstrap --make-tarball $BASE (the minimal root's packages, once; log: $LOGS/debootstrap-tarball.log)"
  rm -rf "$BASE.work"
  debootstrap --variant=minbase --make-tarball="$BASE.tmp" bookworm "$BASE.work" "$mirror" >"$LOGS/debootstrap-tarball.log" 2>&1 || {
    tail -20 "$LOGS/debootstrap-tarball.log"; rm -rf "$BASE.work" "$BASE.tmp"; echo "fresh_check: debootstrap --make-tarball failed" >&2; exit 1; }
  rm -rf "$BASE.work"
  mv "$BASE.tmp" "$BASE"
fi
echo "== debootstrap --variant=minbase --unpack-tarball $BASE bookworm $ROOT (log: $LOGS/debootstrap.log)"
debootstrap --variant=minbase --unpack-tarball="$BASE" bookworm "$ROOT" "$mirror" >"$LOGS/debootstrap.log" 2>&1 || {
  tail -20 "$LOGS/debootstrap.log"; echo "fresh_check: debootstrap failed" >&2; exit 1; }
echo "   $(($(date +%s) - t0)) s"

cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The network's own certificate authorities, as its resolver: a machine on this network
# trusts them (a TLS-inspecting proxy stands between it and the npm registry). They join
# the system's store when bootstrap installs ca-certificates.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
fi
# A chroot has no init: keep package scripts from starting daemons (nginx on port 80)
# that would outlive the check and hold its mounts. The tests start their own nginx.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod +x "$ROOT/usr/sbin/policy-rc.d"
mkdir -p "$ROOT/root/dataecho"
git -C "$REPO" archive "$COMMIT" | tar -x -C "$ROOT/root/dataecho"
echo "== copied $COMMIT into $ROOT/root/dataecho"

for d in proc sys dev; do
  mount --rbind "/$d" "$ROOT/$d"
  mount --make-rslave "$ROOT/$d"
done

run_in_root() {  # run_in_root NAME COMMAND: a login-like clean environment, as root
  local name=$1 cmd=$2 t rc=0
  t=$(date +%s)
  echo "== $name: $cmd (log: $LOGS/$name.log)"
  # In the background with `wait`: bash runs the EXIT/INT/TERM trap only once a
  # foreground child ends, and a stopped check must not wait for the test suite.
  chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/dataecho && $cmd" </dev/null >"$LOGS/$name.log" 2>&1 &
  wait $! || rc=$?
  tail -5 "$LOGS/$name.log" | sed 's/^/   | /'
  if [[ $rc -eq 0 ]]; then
    RESULTS+=("PASS  $cmd  ($(($(date +%s) - t)) s)")
  else
    RESULTS+=("FAIL  $cmd  (exit $rc after $(($(date +%s) - t)) s; $LOGS/$name.log)")
    FAILED=1
  fi
}
RESULTS=()
FAILED=0
if [[ $RUN_WHEEL -eq 1 ]]; then
  # The runtime packages the wheel's own metadata names, and nothing else; then the
  # data service's.
  wheel_packages() {  # wheel_packages WHAT: the line "Debian 12 WHAT packages: ..." of its metadata
    /usr/bin/python3 - "$WHEEL" "$1" <<'PY'
import re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
m = re.search(rf"Debian 12 {sys.argv[2]} packages: (.*)", z.read(meta).decode())
print(m.group(1).strip() if m else "")
PY
  }
  runtime=$(wheel_packages runtime)
  service=$(wheel_packages "data service")
  [[ -n "$runtime" && -n "$service" ]] || { echo "fresh_check: $WHEEL names no Debian 12 runtime or data service packages" >&2; exit 1; }
  mkdir -p "$ROOT/root/wheel"
  cp "$WHEEL" "$ROOT/root/wheel/"
  cat >"$ROOT/root/wheel/check.py" <<'PY'
import importlib.util, os, sys
import numpy as np
import dataecho as de
assert importlib.util.find_spec("torch") is None, "torch is installed: not the runtime-only root"
assert de.__file__.startswith(sys.prefix), de.__file__
rows = []
for b in de.range(12).echo(2).batch(4).build(seed=1, as_numpy=True):
    assert isinstance(b["value"], np.ndarray)
    rows += b["value"].tolist()
assert sorted(rows) == sorted(list(range(12)) * 2), rows
from dataecho import stats
assert stats.median_of([3, 1, 2]) == 2, "dataecho.stats"
# The data service's gRPC plugin beside _core: without the service's packages it names
# the library it lacks; with them (`check.py service`) the call reaches the network.
try:
    de.service_status("127.0.0.1:9", timeout_s=1)
    raise AssertionError("a dispatcher answered at 127.0.0.1:9")
except de.Error as e:
    lacks = "/dataecho/libdataecho_grpc.so (libgrpc++.so.1.51: cannot open shared object"
    assert ("at 127.0.0.1:9" if sys.argv[1:] == ["service"] else lacks) in str(e), e
    print("wheel: service_status:", e)
print("wheel: dataecho", de.__version__, "from", de.__file__, "ran", len(rows), "rows without torch")
PY
  run_in_root wheel "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $runtime >/dev/null \
    && python3 -m venv --system-site-packages /root/wheel/env \
    && /root/wheel/env/bin/pip install --no-index --disable-pip-version-check /root/wheel/$(basename "$WHEEL") \
    && (cd / && /root/wheel/env/bin/python /root/wheel/check.py) \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $service >/dev/null \
    && (cd / && /root/wheel/env/bin/python /root/wheel/check.py service) \
    && /root/wheel/env/bin/pip uninstall -y dataecho \
    && ! /root/wheel/env/bin/python -c 'import dataecho' 2>/dev/null"
fi
[[ -z "$ONLY" || "$ONLY" == demo ]] && run_in_root demo scripts/demo.sh
[[ -z "$ONLY" || "$ONLY" == test ]] && run_in_root test scripts/test.sh

echo
echo "== fresh_check: minimal Debian 12 root, commit $COMMIT, $(($(date +%s) - t0)) s in all"
printf '   %s\n' "${RESULTS[@]}"
exit "$FAILED"
